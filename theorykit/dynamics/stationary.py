"""The DMFT's t -> infinity state, from stationary equations (docs/theory.md §3.4 "The stationary state").

When GD converges (d -> infinity first), every kernel becomes time-translation invariant and the sums over the past
become integrated responses.  For width m = 1 the state is three scalars and the easy overlaps:

    omega = M^T z + sqrt(q) g,   g ~ N(0, 1) independent of (z, eps)          (the Gaussian part w^t -> w^infinity)
    r     = omega - c F(r, y)                                                  (the memory term -> -c u)
    u = F(r, y),   D = D(r, y),   chi_u = E[D / (1 + c D)]                     (integrated R_u: E[du/domega])

    c     = 1 / (delta (ridge + chi_u))                                        (integrated -R_theta)
    q     = delta c^2 E[u^2]                                                   (C_theta(infinity, infinity))
    0     = ridge M + E[z u]                                                   (the overlap's fixed point)

(the parameter side's theta = -(ridge + chi_u)^{-1} g / delta with E[g^2] = delta E[u^2], once P_t -> 0).  The
per-sample equation r + c F(r, y) = omega is the stationarity condition of phi(r) = (r - omega)^2 / (2c) + l(y, f(r)):
r is a proximal point of the per-sample loss.  Where phi is not convex (square loss on a non-linear sigma: D < 0 is
possible) it can have several local minima; the one taken is the branch the dynamics follows: the memory coefficient
grows from 0 along the run, so r is continued from r = omega (c = 0) along a geometric ladder of c up to its
value, by safeguarded Newton descent on phi at each rung (a branch that ends at a fold descends to the next
minimum).  Each path's 1 + c D > 0 at the end (a local minimum), which keeps chi_u finite.

Below the interpolation threshold (zero training loss reachable) c -> infinity, q depends on the initialisation,
and the equations have no solution: the state reports status "init-dependent" and the long-time DMFT is the
fall-back.  The integrals are tensor Gauss-Hermite (Gauss-Legendre between a link's breakpoints) over (z, eps)
times composite Gauss-Legendre over g (the branch can jump in g); every output carries the difference against a
coarser latent rule as its error.

The integrated response is taken in Stein's form, chi_u = E[g u] / sqrt(q) (= E[du/domega], integrating by parts in
g): it keeps the jumps of the proximal branch in omega and the Dirac terms of kinks, which the smooth part
E[D / (1 + c D)] misses (GeLU on phase retrieval, delta 10: 0.169 against 0.258; with the smooth part the solution
moved by 10% between quadrature rules, with Stein's form by < 1e-3).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .._checks import check_int
from ..errors import TheorykitError
from ..rules import gauss_legendre_normal, latent_rule

__all__ = ["StationaryState", "stationary_state"]

#: nodes per axis of the latent rule (z, eps) and of the Gaussian part g
STATIONARY_ORDER = 48
#: nodes of the composite Gauss-Legendre rule in g (the proximal branch can jump in g: Gauss-Hermite converges slowly)
G_NODES = 256
#: the g rule's range [-G_WIDTH, G_WIDTH]
G_WIDTH = 8.0
#: rungs of the geometric ladder in c along which each path's proximal point is continued from r = omega
LADDER = 8
#: c beyond this (relative to 1 / (delta E[D] at the start)) means the equations have no finite solution
C_MAX = 1e8


@dataclass(frozen=True, eq=False)
class StationaryState:
    """The t -> infinity state of the DMFT (module docstring), m = 1.

    status: "ok" | "init-dependent" (c runs to infinity: below the interpolation threshold the limit depends on the
    initialisation) | "no-solution" (the solver did not converge); message: one line.  c: the integrated response
    -sum_s R_theta(infinity, s); chi_u: sum_s R_u(infinity, s) = E[D / (1 + c D)]; q: C_theta(infinity, infinity); M
    (k, 1): the latent overlap (hard rows 0); gram (1, 1) = M^T M + q; train_loss, test_loss; residual: the largest
    relative residual of the three equations; error: {key: |value - the same state on the coarser rule|}; method: the
    quadrature, in words; weights (N,), r (N, 1), y (N,), z (N, k), D (N, 1, 1): the static law of one sample at
    t = infinity (what the Hessian theory integrates against: :func:`theorykit.thresholds.stationary.stationary_law`);
    nonconvex: the weight of paths
    whose phi has D < 0 somewhere on the continuation (the root selection mattered only there); chi_u_smooth:
    E[D / (1 + c D)], the integrated response without the branch's jumps (equal to chi_u where phi is convex);
    select: the root selection ("continuation" or "global")."""

    problem: object
    status: str
    message: str
    c: float
    chi_u: float
    q: float
    M: np.ndarray
    gram: np.ndarray
    train_loss: float
    test_loss: float
    residual: float
    error: dict
    method: str
    weights: np.ndarray = field(repr=False)
    r: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    z: np.ndarray = field(repr=False)
    D: np.ndarray = field(repr=False)
    nonconvex: float = 0.0
    chi_u_smooth: float = math.nan
    select: str = "continuation"
    omega: Optional[np.ndarray] = field(default=None, repr=False)  # (N,) the Gaussian part M^T z + sqrt(q) g per path
    c_ref: float = math.nan  # the scale the continuation ladder starts from

    def as_dict(self) -> dict:
        """JSON-ready summary (the law's arrays left out)."""
        return {"status": self.status, "message": self.message, "c": self.c, "chi_u": self.chi_u, "q": self.q,
                "M": self.M.tolist(), "gram": self.gram.tolist(), "train_loss": self.train_loss,
                "test_loss": self.test_loss, "residual": self.residual, "error": dict(self.error),
                "method": self.method, "nonconvex": self.nonconvex, "chi_u_smooth": self.chi_u_smooth,
                "select": self.select,
                "problem": self.problem.as_dict() if self.problem is not None else None}

    def lam_min_pushed(self, factor: float) -> np.ndarray:
        """(N,) D at every path with its latent pushed outward, z -> factor z (y = h(factor z) with the noise at 0),
        and its proximal point solved again at the same omega and c: the support of the static law, for the tail
        verdict (:func:`theorykit.spectra.hessian.support_tail`).  Unlike the DMFT's law at a finite t, r is not
        held fixed: at t = infinity it follows y."""
        lk = self.problem.link_obj
        y = lk.response(factor * self.z)
        r, _, D, _ = _Prox(self.problem.network, y).solve(self.omega, self.c, self.c_ref, self.select)
        return D

    def path_law(self):
        """The static law as a :class:`theorykit.PathLaw` (t = -1 stands for t = infinity)."""
        from .result import PathLaw

        hb = np.asarray(self.problem.analysis.hard_basis, float).reshape(self.problem.k, -1)
        N = len(self.weights)
        return PathLaw(t=-1, weights=self.weights, raw_weights=self.weights, r=self.r, y=self.y, z=self.z,
                       zeta=self.z @ hb, D=self.D, excluded=np.zeros(N, bool), replica=np.zeros(N, int),
                       latent=self.method)


def _rule(problem, order: int, g_nodes: int):
    from ..symbolic.links import link_breakpoints

    lk = problem.link_obj
    cuts = link_breakpoints(lk) if lk.k == 1 else []
    lat = latent_rule(lk.k, lk.noisy, order, cuts)
    g = gauss_legendre_normal(g_nodes, G_WIDTH)
    nodes = np.repeat(lat.nodes, g.size, axis=0)
    G = np.tile(g.nodes[:, 0], lat.size)
    w = np.outer(lat.weights, g.weights).ravel()
    z = nodes[:, :lk.k]
    eps = nodes[:, lk.k] if lk.noisy else None
    y = lk.response(z, eps)
    return z, y, G, w, f"{lat.method} in the latent, times {g.method} in g"


class _Prox:
    """The per-sample proximal points r(omega, c) continued from c = 0 (module docstring)."""

    def __init__(self, net, y):
        self.net, self.y = net, y

    def _eval(self, r, idx=None):
        y = self.y if idx is None else self.y[idx]
        der = self.net.evaluate(r[:, None], y)
        return der.loss, der.F[:, 0], der.l2 * der.grad_f[:, 0] ** 2 + der.curv[:, 0]

    def solve(self, omega: np.ndarray, c: float, c0: float, select: str = "continuation"):
        r = omega.copy()
        nonconvex = np.zeros(len(r), bool)
        cs = np.geomspace(min(c0, c) * 1e-3, c, LADDER) if c > 0 else np.array([])
        with np.errstate(all="ignore"):
            for ck in cs:
                r, Dk = self._descend(r, omega, float(ck))
                nonconvex |= Dk < 0
            if select == "global":
                r = self._global(r, omega, c)
            loss, F, D = self._eval(r)
        return r, F, D, nonconvex

    def _phi(self, r, omega, c):
        return (r - omega) ** 2 / (2 * c) + self._eval(r)[0]

    def _global(self, r, omega, c, points: int = 96):
        """The lowest local minimum of phi among descents from the continued point and from the best of a grid
        spanning omega, the continued point and omega - c F(omega), widened by 3 on both sides."""
        _, F0, _ = self._eval(omega)
        lo = np.minimum(np.minimum(omega, r), omega - c * F0) - 3.0
        hi = np.maximum(np.maximum(omega, r), omega - c * F0) + 3.0
        best, best_phi = r, self._phi(r, omega, c)
        grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, points)[None, :]
        vals = np.stack([self._phi(grid[:, j], omega, c) for j in range(points)], axis=1)
        start = grid[np.arange(len(r)), np.argmin(np.where(np.isfinite(vals), vals, np.inf), axis=1)]
        cand, _ = self._descend(start, omega, c)
        pc = self._phi(cand, omega, c)
        better = pc < best_phi - 1e-12 * (1.0 + np.abs(best_phi))
        return np.where(better, cand, best)

    def _descend(self, r, omega, c, iters: int = 100):
        """Safeguarded Newton on phi(r) = (r - omega)^2 / (2c) + l(y, f(r)) from r, path by path: a Newton step where
        phi'' > 0, a gradient step of length c elsewhere, halved until phi does not increase.  A path is done when
        its Newton step is below 1e-9 (1 + |omega|) (taken without a line search: quadratic convergence puts it at
        rounding) or when no halving decreases phi."""
        r = r.copy()
        idx = np.arange(len(r))
        loss, F, D = self._eval(r)
        Dall = D.copy()
        for _ in range(iters):
            ri, oi = r[idx], omega[idx]
            grad = (ri - oi) / c + F
            hess = 1.0 / c + D
            convex = hess > 0
            step = np.where(convex, grad / np.where(convex, hess, 1.0), c * grad)
            small = np.abs(step) <= 1e-9 * (1.0 + np.abs(oi))
            fin = small & convex
            r[idx[fin]] = ri[fin] - step[fin]
            live = ~small
            if not np.any(live):
                break
            idx, ri, oi, step, loss = idx[live], ri[live], oi[live], step[live], loss[live]
            phi = (ri - oi) ** 2 / (2 * c) + loss
            t = np.ones_like(ri)
            sub = np.arange(len(idx))
            new_loss = np.empty_like(ri)
            new_F = np.empty_like(ri)
            new_D = np.empty_like(ri)
            for _ in range(50):  # backtracking on the paths whose phi would increase
                rn = ri[sub] - t[sub] * step[sub]
                ln, Fn, Dn = self._eval(rn, idx[sub])
                ok = (rn - oi[sub]) ** 2 / (2 * c) + ln <= phi[sub] + 1e-14 * np.abs(phi[sub])
                good = sub[ok]
                new_loss[good], new_F[good], new_D[good] = ln[ok], Fn[ok], Dn[ok]
                sub = sub[~ok]
                if not len(sub):
                    break
                t[sub] *= 0.5
            stuck = np.zeros(len(idx), bool)
            if len(sub):  # no decrease found: the path stays (it is at a minimum to rounding) and is done
                stuck[sub] = True
                t[sub] = 0.0
            r[idx] = ri - t * step
            keep = ~stuck
            idx, loss, F, D = idx[keep], new_loss[keep], new_F[keep], new_D[keep]
            Dall[idx] = D
            if not len(idx):
                break
        _, _, Dall = self._eval(r)
        return r, Dall


def _state(problem, order: int, g_nodes: int = G_NODES, x0=None, select: str = "continuation"):
    """Solve the stationary equations on one rule: a dict of the state (c, q, mE, the paths' r, F, D, ...) and the
    largest residual; the caller judges whether it converged."""
    from scipy.optimize import root

    p = problem
    net = p.network
    z, y, G, w, method = _rule(p, order, g_nodes)
    E = np.asarray(p.analysis.easy_basis, float).reshape(p.k, -1)
    kE = E.shape[1]
    zE = z @ E
    delta, lam = float(p.delta), float(p.ridge)
    prox = _Prox(net, y)
    with np.errstate(all="ignore"):
        _, _, D0 = prox._eval(np.sqrt(1.0) * G)
    D0m = float(w @ D0)
    c_ref = 1.0 / (delta * max(abs(D0m) + lam, 1e-3))

    def unpack(x):
        return math.exp(x[0]), math.exp(x[1]), np.asarray(x[2:], float)

    def evaluate(x):
        c, q, mE = unpack(x)
        omega = zE @ mE + math.sqrt(q) * G
        r, F, D, nc = prox.solve(omega, c, c_ref, select)
        # Stein: E[du/domega] = E[g u] / sqrt(q), which keeps the jumps of the proximal branch and the kinks' Dirac
        # terms that E[D / (1 + c D)] (the smooth part) misses
        chi = float(w @ (G * F)) / math.sqrt(q)
        chi_smooth = float(w @ (D / (1.0 + c * D)))
        Eu2 = float(w @ F ** 2)
        Ezu = (w * F) @ zE
        return dict(c=c, q=q, mE=mE, omega=omega, r=r, F=F, D=D, chi=chi, chi_smooth=chi_smooth, Eu2=Eu2, Ezu=Ezu,
                    nc=nc)

    def residual(x):
        s = evaluate(x)
        c, q = s["c"], s["q"]
        res = [delta * c * (lam + s["chi"]) - 1.0, delta * c * c * s["Eu2"] / q - 1.0]
        res += list((lam * s["mE"] + s["Ezu"]) / math.sqrt(max(s["Eu2"], 1e-300)))
        out = np.asarray(res, float)
        return np.where(np.isfinite(out), out, 1e6)

    if x0 is None:
        x0 = np.concatenate([[math.log(c_ref), 0.0], np.zeros(kE)])
    sol = root(residual, x0, method="hybr", options={"xtol": 1e-11, "maxfev": 100})
    x = sol.x
    res = residual(x)
    c, q, _ = unpack(x)
    if not (np.max(np.abs(res)) < 1e-7) or c > C_MAX * c_ref or not math.isfinite(q):
        # retry by damped fixed-point iteration from the same start (hybr can stall where a branch switches)
        x, res = _fixed_point(evaluate, residual, x0, delta, lam)
        c, q, _ = unpack(x)
    s = evaluate(x)
    s.update(z=z, y=y, G=G, w=w, method=method, E=E, residual=float(np.max(np.abs(res))), x=x, c_ref=c_ref)
    return s


def _fixed_point(evaluate, residual, x0, delta, lam, iters: int = 60):
    x = np.asarray(x0, float).copy()
    for _ in range(iters):
        s = evaluate(x)
        c_new = 1.0 / (delta * max(lam + s["chi"], 1e-300))
        q_new = delta * s["c"] ** 2 * s["Eu2"]
        if not (math.isfinite(c_new) and math.isfinite(q_new) and q_new > 0):
            break
        xn = x.copy()
        xn[0] = 0.5 * x[0] + 0.5 * math.log(c_new)
        xn[1] = 0.5 * x[1] + 0.5 * math.log(q_new)
        if len(x) > 2:  # M: a gradient step on the overlap's fixed point (E[z u] is the risk's gradient in M)
            xn[2:] = x[2:] - 0.5 * s["c"] * delta * (lam * s["mE"] + s["Ezu"])
        if np.max(np.abs(xn - x)) < 1e-12:
            x = xn
            break
        x = xn
        if x[0] > math.log(C_MAX) + 50 or x[1] > math.log(1e12):  # c or q runs away: no finite state
            break
    return x, residual(x)


def stationary_state(problem, *, order: int = STATIONARY_ORDER, check_order: Optional[int] = None,
                     select: str = "continuation", start: Optional[StationaryState] = None) -> StationaryState:
    """The t -> infinity state of GD's DMFT for a :class:`theorykit.Problem` of width 1 (module docstring;
    docs/theory.md §3.4).  ``order``: latent nodes per axis; the error of every output is its difference
    against the same solve with ``check_order`` nodes (default 3/4 of ``order``).  Step sizes, steps and the initial
    law do not enter (the state forgets them once GD has converged); a width other than 1 is refused.  ``select``:
    "continuation" (the branch followed from c = 0, the default: it matches converged GD, tables/stationary_state.md)
    or "global" (the lowest local minimum of each sample's phi).  ``check_order=0`` skips the coarser solve (``error``
    is then empty).  ``start``: a solved state (e.g. at a nearby delta) whose (c, q, M) start the root finder."""
    from ..problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"stationary_state takes a theorykit.Problem, got {type(problem).__name__}")
    if problem.m != 1:
        raise TheorykitError(f"the stationary state is solved for width m = 1 only (got m = {problem.m}); use the "
                             "long-time DMFT")
    order = check_int("order", order, 8, 400)
    check_order = check_int("check_order", check_order if check_order is not None else max(8, (3 * order) // 4), 0,
                            400)
    if select not in ("continuation", "global"):
        raise TheorykitError(f"select must be 'continuation' or 'global', got {select!r}")
    x0 = None
    if start is not None and getattr(start, "status", None) == "ok":
        E = np.asarray(problem.analysis.easy_basis, float).reshape(problem.k, -1)
        x0 = np.concatenate([[math.log(start.c), math.log(start.q)], E.T @ start.M[:, 0]])
    s = _state(problem, order, select=select, x0=x0)
    c = s["c"]
    if s["residual"] > 1e-6 or c > C_MAX * s["c_ref"]:
        init = c > 1e3 * s["c_ref"] or s["chi"] < 1e-6 * max(abs(float(s["w"] @ s["D"])), 1e-300)
        status = "init-dependent" if init else "no-solution"
        msg = ("no stationary state: the integrated response runs to infinity (c = {:.3g}): below the "
               "interpolation threshold the limit depends on the initialisation (or the weights grow without bound, "
               "as for a separable logistic fit); use the long-time DMFT"
               .format(c) if init else
               f"the stationary equations did not converge (residual {s['residual']:.2g}); use the long-time DMFT")
        nan = math.nan
        k = problem.k
        return StationaryState(problem, status, msg, nan, nan, nan, np.full((k, 1), nan), np.full((1, 1), nan), nan,
                               nan, s["residual"], {}, s["method"], np.zeros(0), np.zeros((0, 1)), np.zeros(0),
                               np.zeros((0, k)), np.zeros((0, 1, 1)))
    out = _summary(problem, s)
    err = {}
    if check_order:
        coarse = _summary(problem, _state(problem, check_order, x0=s["x"], select=select))
        err = {key: float(np.max(np.abs(np.asarray(out[key]) - np.asarray(coarse[key]))))
               for key in ("c", "chi_u", "q", "M", "train_loss", "test_loss")}
    return StationaryState(problem, "ok", f"stationary state solved (residual {s['residual']:.1e})", out["c"],
                           out["chi_u"], out["q"], out["M"], out["gram"], out["train_loss"], out["test_loss"],
                           s["residual"], err, s["method"], s["w"], s["r"][:, None], s["y"], s["z"],
                           s["D"][:, None, None], nonconvex=float(s["w"] @ s["nc"]), chi_u_smooth=s["chi_smooth"],
                           select=select, omega=s["omega"], c_ref=s["c_ref"])


def _summary(problem, s) -> dict:
    net = problem.network
    w = s["w"]
    M = (s["E"] @ s["mE"]).reshape(-1, 1)
    with np.errstate(all="ignore"):
        train = float(w @ net.evaluate(s["r"][:, None], s["y"]).loss)
        test = float(w @ net.evaluate(s["omega"][:, None], s["y"]).loss)
    gram = M.T @ M + s["q"]
    return {"c": s["c"], "chi_u": s["chi"], "q": s["q"], "M": M, "gram": gram, "train_loss": train,
            "test_loss": test}
