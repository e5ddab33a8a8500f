"""The DMFT's t -> infinity state, from stationary equations (docs/theory.md §3.4 "The stationary state").

When GD converges (d -> infinity first), every kernel becomes time-translation invariant and the sums over the past
become integrated responses.  For width m the state is three symmetric m x m matrices and the easy overlaps:

    omega = M^T z + Q^(1/2) g,   g ~ N(0, I_m) independent of (z, eps)         (the Gaussian part w^t -> w^infinity)
    r     = omega - C F(r, y)                                                  (the memory term -> -C u)
    u = F(r, y),   D = D(r, y),   chi_u = E[D (I + C D)^{-1}]                  (integrated R_u: E[du/domega])

    C     = (ridge I + chi_u)^{-1} / delta                                     (integrated -R_theta)
    Q     = delta C E[u u^T] C                                                 (C_theta(infinity, infinity))
    0     = ridge M + E[z u^T]                                                 (the overlap's fixed point)

(the parameter side's theta = -(ridge I + chi_u)^{-1} g / delta with E[g g^T] = delta E[u u^T], once P_t -> 0).  At
m = 1, C = c, Q = q and chi_u are scalars.  The per-sample equation r + C F(r, y) = omega is the stationarity condition
of phi(r) = (r - omega)^T C^{-1} (r - omega) / 2 + l(y, f(r)): r is a proximal point of the per-sample loss.  Where
phi is not convex (square loss on a non-linear sigma: D not positive semi-definite) it can have several local minima;
the one taken is the branch the dynamics follows: the memory grows from 0 along the run, so r is continued from
r = omega (C = 0) along a geometric ladder up to C, by safeguarded Newton descent on phi at each rung (a branch that
ends at a fold descends to the next minimum).  The rungs follow the DMFT's early memory, which is isotropic
(R_theta(t + 1, t) = -(eta / delta) I): C_j = s_j ((1 - s_j) (tr C / m) I + s_j C), s_j geometric up to 1 -- at m = 1
simply s_j c.  Each path's I + C D is then positive definite (a local
minimum), which keeps chi_u finite.  Two exchangeable neurons (equal second-layer weights and biases) are
exchangeable at every t of the DMFT, so the root is sought among exchange-symmetric states, with a quadrature that
keeps the symmetry exactly (below).

Below the interpolation threshold (zero training loss reachable) C -> infinity, Q depends on the initialisation,
and the equations have no solution: the state reports status "init-dependent" and the long-time DMFT is the
fall-back.  The integrals are tensor Gauss-Hermite (Gauss-Legendre between a link's breakpoints) over (z, eps)
times composite Gauss-Legendre in each coordinate of g (the branch can jump in g; at m = 2 in the sum and difference
coordinates, so that the diagonal g1 = g2, where two exchangeable neurons' branch jumps, is a panel boundary); every
output carries the difference against a coarser rule as its error.  Without easy directions the state sees the
latent only through y, and latent nodes with equal y are merged while solving.

The integrated response is taken in Stein's form, chi_u = E[u g^T] Q^(-1/2) (= E[du/domega], integrating by parts in
g): it keeps the jumps of the proximal branch in omega and the Dirac terms of kinks, which the smooth part
E[D (I + C D)^{-1}] misses (GeLU on phase retrieval, delta 10: 0.169 against 0.258; with the smooth part the
solution moved by 10% between quadrature rules, with Stein's form by < 1e-3).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .._checks import check_int
from ..errors import TheorykitError
from ..rules import gauss_legendre_normal, latent_rule, sym_eigvals

__all__ = ["StationaryState", "stationary_state"]

#: nodes per axis of the latent rule (z, eps) and of the Gaussian part g
STATIONARY_ORDER = 48
#: composite Gauss-Legendre nodes per coordinate of g by width m: (the solve's, the error check's) -- the proximal
#: branch can jump in g, where Gauss-Hermite converges slowly; at m = 2 the rule is the tensor square
G_NODES = {1: (256, 256), 2: (128, 96)}
#: the g rule's range [-G_WIDTH, G_WIDTH]
G_WIDTH = 8.0
#: rungs of the geometric ladder in c along which each path's proximal point is continued from r = omega
LADDER = 8
#: the Newton stop (relative step) on the rungs before the last; the last rung stops at 1e-9
RUNG_TOL = 1e-4
#: c beyond this (relative to 1 / (delta E[D] at the start)) means the equations have no finite solution
C_MAX = 1e8
#: the root search stops as a runaway after this many consecutive evaluations with C > C_MAX c_ref
RUNAWAY_EVALS = 5
#: ... or after this many with C > C_INIT c_ref (below the interpolation threshold the search stalls there; searches
#: that converged left that range within a few evaluations: tables/stationary_bench_notes.md)
STALL_EVALS = 10
#: quasi-Newton steps from a nearby solve's Jacobian before the search falls back to hybr
BROYDEN_ITERS = 20
#: ... and its stop: the largest relative residual (a state is "ok" below 1e-6; hybr's xtol ends near 1e-15)
BROYDEN_TOL = 1e-10
#: ... and its largest step in the unknowns (log C, log Q: a factor e^2)
BROYDEN_STEP = 2.0
#: an unconverged search that ended with C beyond this (relative to c_ref) is read as "init-dependent" (the integrated
#: response runs to infinity); neither the fixed-point retry nor a restart from the default start is tried then
C_INIT = 1e3
#: a static law with more paths than this is handed to the Hessian theory with the latent nodes of equal y merged
#: (:meth:`StationaryState.law_samples`; width 2: 10^5 - 10^6 paths otherwise)
LAW_MERGE_ABOVE = 2 ** 17


@dataclass(frozen=True, eq=False)
class StationaryState:
    """The t -> infinity state of the DMFT (module docstring), width m <= 2.

    status: "ok" | "init-dependent" (C runs to infinity: below the interpolation threshold the limit depends on the
    initialisation) | "no-solution" (the solver did not converge); message: one line.  c: the integrated response
    -sum_s R_theta(infinity, s); chi_u: sum_s R_u(infinity, s) = E[du/domega]; q: C_theta(infinity, infinity) -- each
    a float at m = 1 and an (m, m) array at m = 2; M (k, m): the latent overlap (hard rows 0); gram (m, m) = M^T M + q;
    train_loss, test_loss; residual: the largest relative residual of the equations; error: {key: the largest
    |value - the same state on the coarser rule|}; method: the quadrature, in words; weights (N,), r (N, m), y (N,),
    z (N, k), D (N, m, m): the static law of one sample at t = infinity (what the Hessian theory integrates against:
    :func:`theorykit.thresholds.stationary.stationary_law`); nonconvex: the weight of paths whose D is not positive
    semi-definite somewhere on the continuation (the root selection mattered only there); chi_u_smooth:
    E[D (I + C D)^{-1}], the integrated response without the branch's jumps (equal to chi_u where phi is convex);
    select: the root selection ("continuation" or "global")."""

    problem: object
    status: str
    message: str
    c: Any  # float (m = 1) or (m, m) array
    chi_u: Any
    q: Any
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
    chi_u_smooth: Any = math.nan
    select: str = "continuation"
    omega: Optional[np.ndarray] = field(default=None, repr=False)  # (N, m) the Gaussian part M^T z + q^(1/2) g
    c_ref: float = math.nan  # the scale the continuation ladder starts from
    layout: tuple = ()  # (L, N_g): path i is latent node i // N_g times g node i % N_g
    easy_free: bool = False  # no easy direction: omega does not involve z, and the state sees the latent through y
    search_jacobian: Optional[np.ndarray] = field(default=None, repr=False)  # the root search's, for a nearby start

    def as_dict(self) -> dict:
        """JSON-ready summary (the law's arrays left out)."""
        def plain(v):
            return v.tolist() if isinstance(v, np.ndarray) else v

        return {"status": self.status, "message": self.message, "c": plain(self.c), "chi_u": plain(self.chi_u),
                "q": plain(self.q), "M": self.M.tolist(), "gram": self.gram.tolist(), "train_loss": self.train_loss,
                "test_loss": self.test_loss, "residual": self.residual, "error": dict(self.error),
                "method": self.method, "nonconvex": self.nonconvex, "chi_u_smooth": plain(self.chi_u_smooth),
                "select": self.select,
                "problem": self.problem.as_dict() if self.problem is not None else None}

    def lam_min_pushed(self, factor: float) -> np.ndarray:
        """(N,) the smallest eigenvalue of D at every path with its latent pushed outward, z -> factor z (y =
        h(factor z) with the noise at 0), and its proximal point solved again at the same omega and C: the support of
        the static law, for the tail verdict (:func:`theorykit.spectra.hessian.support_tail`).  Unlike the DMFT's law
        at a finite t, r is not held fixed: at t = infinity it follows y."""
        lk = self.problem.link_obj
        if factor == 1.0 and not lk.noisy and len(self.D):  # the latent in place: the law's own proximal points
            return _lam_min(self.D)
        C = np.atleast_2d(self.c)
        if not (self.easy_free and self.layout):
            y = lk.response(factor * self.z)
            return _lam_min(_Prox(self.problem.network, y).solve(self.omega, C, self.c_ref, self.select)[2])
        # omega is the same g grid under every latent node: solve once per distinct pushed y and map back; with
        # exchangeable neurons only the first half of the g block (its second half holds their mirror images, whose D
        # is D with the neurons swapped: the same eigenvalues), as the solve itself does
        L, Ng = self.layout
        y_lat = lk.response(factor * self.z[::Ng])
        y_s, inv = np.unique(y_lat, return_inverse=True)
        net = self.problem.network
        P, _ = _exchange(self.problem.m, 0, net)
        half = Ng // 2 if P.shape[1] < P.shape[0] else Ng
        _, _, D, _ = _Prox(net, np.repeat(y_s, half)).solve(np.tile(self.omega[:half], (len(y_s), 1)), C,
                                                            self.c_ref, self.select)
        lm = _lam_min(D).reshape(len(y_s), half)
        if half < Ng:
            lm = np.concatenate([lm, lm], axis=1)
        return lm[inv].ravel()

    def without_law(self) -> "StationaryState":
        """The same state without its static law's arrays (what a start at a nearby delta needs: c, q, M)."""
        from dataclasses import replace

        m, k = self.problem.m, self.problem.k
        return replace(self, weights=np.zeros(0), r=np.zeros((0, m)), y=np.zeros(0), z=np.zeros((0, k)),
                       D=np.zeros((0, m, m)), omega=None, layout=())

    def law_samples(self) -> tuple:
        """(weights (N',), D (N', m, m), zeta (N', kH), radius (N',)): the static law as the Hessian theory reads it.
        Without easy directions and above LAW_MERGE_ABOVE paths, the latent nodes with equal y are one node (D is the
        same on them), carrying E[zeta zeta^T | y] by kH weighted vectors (the columns of its square root, times
        sqrt(kH)) and the root mean square of |z| as the radius: the hard block E[(zeta zeta^T) (x) g(D, S)] of the
        Hessian theory is linear in zeta zeta^T, so this is exact there; otherwise the paths as they are."""
        hb = np.asarray(self.problem.analysis.hard_basis, float).reshape(self.problem.k, -1)
        zeta = self.z @ hb
        radius = np.linalg.norm(self.z, axis=1)
        if not (self.easy_free and self.layout) or len(self.weights) <= LAW_MERGE_ABOVE:
            return self.weights, self.D, zeta, radius
        L, Ng = self.layout
        kH = zeta.shape[1]
        wl = self.weights.reshape(L, Ng).sum(axis=1)  # the latent weights (times the g rule's total mass)
        y_s, first, inv = np.unique(self.y[::Ng], return_index=True, return_inverse=True)
        wu = np.bincount(inv, weights=wl)
        zl = zeta[::Ng]
        Z = np.zeros((len(y_s), kH, kH))
        np.add.at(Z, inv, wl[:, None, None] * zl[:, :, None] * zl[:, None, :])
        Z /= np.maximum(wu, 1e-300)[:, None, None]
        lam, V = np.linalg.eigh(Z)
        roots = V * np.sqrt(np.maximum(lam, 0.0))[:, None, :] * math.sqrt(kH)  # (U, kH, kH): columns sum to Z kH
        rad = np.sqrt(np.bincount(inv, weights=wl * radius[::Ng] ** 2) / np.maximum(wu, 1e-300))
        gw = self.weights[:Ng] / wl[0]  # the g rule's weights (every latent node carries the same g rule)
        rows = (first[:, None] * Ng + np.arange(Ng)[None, :]).ravel()  # (U Ng,) one latent node of each y
        U = len(y_s)
        w = (np.outer(wu, gw).ravel()[:, None] * np.full((1, kH), 1.0 / kH)).ravel()
        D = np.repeat(self.D[rows], kH, axis=0)
        zt = np.repeat(np.transpose(roots, (0, 2, 1)), Ng, axis=0).reshape(U * Ng * kH, kH)
        return w, D, zt, np.repeat(np.repeat(rad, Ng), kH)


def _rule(problem, order: int, g_nodes: int):
    """The two factors of the tensor rule over (z, eps) x g: the latent rule of the link (z (L, k), y (L,), weights
    (L,)) and composite Gauss-Legendre in each of the m coordinates of g (nodes (N_g, m), weights (N_g,)), and the
    method in words."""
    from ..symbolic.links import link_cuts

    lk = problem.link_obj
    m = problem.m
    lat = latent_rule(lk.k, lk.noisy, order, link_cuts(lk))
    g = gauss_legendre_normal(g_nodes, G_WIDTH)
    grids = np.meshgrid(*([g.nodes[:, 0]] * m), indexing="ij")
    gn = np.stack([a.ravel() for a in grids], axis=1)
    gw = np.ones(1)
    for _ in range(m):
        gw = np.outer(gw, g.weights).ravel()
    if m == 2:
        # the tensor rule in the sum and difference coordinates ((g1 + g2, g1 - g2) / sqrt 2, the law is rotation
        # invariant): the exchange of the neurons is the mirror g1 - g2 -> -(g1 - g2), under which the rule is
        # symmetric to the last bit, and no node lies on the diagonal g1 = g2, where the per-sample problem of two
        # exchangeable neurons is symmetric and its proximal branch jumps (the diagonal is a panel boundary).  Order:
        # the nodes with g1 > g2, then their mirror images in the same order (what _state's mirror relies on)
        gn = gn @ (np.array([[1.0, 1.0], [1.0, -1.0]]) / math.sqrt(2.0))
        upper = gn[:, 0] > gn[:, 1]
        gn = np.concatenate([gn[upper], gn[upper][:, ::-1]])
        gw = np.concatenate([gw[upper], gw[upper]])
    z = lat.nodes[:, :lk.k]
    y = lk.response(z, lat.nodes[:, lk.k] if lk.noisy else None)
    tensor = "" if m == 1 else " (tensor product in the sum and difference coordinates of g)"
    return z, y, lat.weights, gn, gw, f"{lat.method} in the latent, times {g.method} in g{tensor}"


# ---- small symmetric matrices (m <= 2 explicit): the state's C, Q and chi are m x m, the per-sample Hessians too
def _sym(v: np.ndarray, m: int) -> np.ndarray:
    """The symmetric m x m matrix with upper triangle v (row by row)."""
    S = np.zeros((m, m))
    S[np.triu_indices(m)] = v
    return S + np.triu(S, 1).T


def _triu(A: np.ndarray) -> np.ndarray:
    return A[np.triu_indices(A.shape[-1])]


def _spd_fun(A: np.ndarray, fun) -> np.ndarray:
    """fun applied to the eigenvalues of a symmetric matrix (exp, log, sqrt)."""
    lam, V = np.linalg.eigh((A + A.T) / 2)
    return (V * fun(lam)) @ V.T


def _lam_min(A: np.ndarray) -> np.ndarray:
    """(N,) smallest eigenvalue of (N, m, m) symmetric matrices."""
    return sym_eigvals(A)[:, 0]


def _solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, m): A^{-1} b for (N, m, m) A and (N, m) b."""
    m = A.shape[-1]
    if m == 1:
        return b / A[:, 0]
    if m == 2:
        a, c, e, d = A[:, 0, 0], A[:, 0, 1], A[:, 1, 0], A[:, 1, 1]
        det = a * d - c * e
        with np.errstate(divide="ignore", invalid="ignore"):  # a singular A gives inf / NaN, as at m = 1 (b / 0)
            return np.stack([(d * b[:, 0] - c * b[:, 1]) / det, (a * b[:, 1] - e * b[:, 0]) / det], axis=1)
    return np.linalg.solve(A, b[..., None])[..., 0]


def _quad(v: np.ndarray, A: np.ndarray) -> np.ndarray:
    """(N,) v^T A v / 2 for (N, m) v and a symmetric m x m A."""
    if A.shape == (1, 1):
        return 0.5 * float(A[0, 0]) * v[:, 0] ** 2
    return 0.5 * np.sum((v @ A) * v, axis=1)


class _Prox:
    """The per-sample proximal points r(omega, C) continued from C = 0 (module docstring); r, omega (N, m)."""

    def __init__(self, net, y):
        self.net, self.y = net, y

    def _eval(self, r, idx=None):
        y = self.y if idx is None else self.y[idx]
        der = self.net.evaluate(r, y)
        return der.loss, der.F, der.D

    def solve(self, omega: np.ndarray, C: np.ndarray, c0: float, select: str = "continuation"):
        """(r, F, D, nonconvex): the proximal point of every path at the memory matrix C, continued along the ladder
        C_j = (c_j / c) C with c the largest eigenvalue of C and c_j geometric from min(c0, c) 1e-3 to c."""
        r = omega.copy()
        nonconvex = np.zeros(len(r), bool)
        c = float(np.linalg.eigvalsh(C)[-1])
        cs = np.geomspace(min(c0, c) * 1e-3, c, LADDER) if c > 0 else np.array([])
        with np.errstate(all="ignore"):
            at = self._eval(r)  # (loss, F, D) at r, carried from rung to rung (the network does not depend on C)
            iso = np.trace(C) / len(C) * np.eye(len(C))
            for j, ck in enumerate(cs):
                s = float(ck) / c
                # the rungs before the last only keep each path on its branch: a looser stop suffices there
                r, at = self._descend(r, omega, s * ((1.0 - s) * iso + s * C),
                                      tol=1e-9 if j == len(cs) - 1 else RUNG_TOL, at=at)
                nonconvex |= _lam_min(at[2]) < 0
            if select == "global":
                r = self._global(r, omega, C)
                at = self._eval(r)
        return r, at[1], at[2], nonconvex

    def _phi(self, r, omega, Ci, idx=None):
        dr = r - omega
        return _quad(dr, Ci) + self._eval(r, idx)[0]

    def _global(self, r, omega, C, points: int = 96):
        """Width 1: the lowest local minimum of phi among descents from the continued point and from the best of a
        grid spanning omega, the continued point and omega - c F(omega), widened by 3 on both sides."""
        c = float(C[0, 0])
        r, omega = r[:, 0], omega[:, 0]
        _, F0, _ = self._eval(omega[:, None])
        F0 = F0[:, 0]
        lo = np.minimum(np.minimum(omega, r), omega - c * F0) - 3.0
        hi = np.maximum(np.maximum(omega, r), omega - c * F0) + 3.0
        Ci = np.array([[1.0 / c]])
        best, best_phi = r, self._phi(r[:, None], omega[:, None], Ci)
        grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, points)[None, :]
        vals = np.stack([self._phi(grid[:, j, None], omega[:, None], Ci) for j in range(points)], axis=1)
        start = grid[np.arange(len(r)), np.argmin(np.where(np.isfinite(vals), vals, np.inf), axis=1)]
        cand, _ = self._descend(start[:, None], omega[:, None], C)
        pc = self._phi(cand, omega[:, None], Ci)
        better = pc < best_phi - 1e-12 * (1.0 + np.abs(best_phi))
        return np.where(better[:, None], cand, best[:, None])

    def _descend(self, r, omega, C, iters: int = 100, tol: float = 1e-9, at: Optional[tuple] = None):
        """Safeguarded Newton on phi(r) = (r - omega)^T C^{-1} (r - omega) / 2 + l(y, f(r)) from r, path by path: a
        Newton step where phi's Hessian C^{-1} + D is positive definite, a gradient step C grad elsewhere, halved
        until phi does not increase.  A path is done when its Newton step is below tol (1 + |omega|) (max norms;
        taken without a line search: quadratic convergence puts it at rounding) or when no halving decreases phi.
        ``at``: (loss, F, D) at r if known.  Returns the end points and (loss, F, D) there."""
        from ._prox import step_arrays as newton_step_arrays  # numba: loaded on first use

        r = r.copy()
        Ci = np.linalg.inv(C)
        idx = np.arange(len(r))
        loss, F, D = self._eval(r) if at is None else at
        for _ in range(iters):
            whole = len(idx) == len(r)
            ri, oi = (r, omega) if whole else (r[idx], omega[idx])
            # the step, its safeguard and phi in one compiled pass over the paths (m <= 2: the state's widths)
            step, convex, small, phi = newton_step_arrays(ri, oi, loss, F, D, Ci, C, tol)
            fin = small & convex  # done (not live): r is written there only, and ri is read below only where live
            r[idx[fin]] = ri[fin] - step[fin]
            live = ~small
            if not np.any(live):
                break
            if not np.all(live):
                idx, ri, oi, step, phi = idx[live], ri[live], oi[live], step[live], phi[live]
            t = np.ones(len(ri))
            # the full step first, on every live path (no gathers); then backtracking on those whose phi would increase
            rn = ri - step
            new_loss, new_F, new_D = self._eval(rn, None if len(idx) == len(r) else idx)
            ok = _quad(rn - oi, Ci) + new_loss <= phi + 1e-14 * np.abs(phi)
            sub = np.flatnonzero(~ok)
            if len(sub):  # written below (the network's outputs can be read-only broadcasts)
                new_loss, new_F, new_D = np.array(new_loss), np.array(new_F), np.array(new_D)
            for _ in range(49):
                if not len(sub):
                    break
                t[sub] *= 0.5
                rn = ri[sub] - t[sub, None] * step[sub]
                ln, Fn, Dn = self._eval(rn, idx[sub])
                dn = rn - oi[sub]
                ok = _quad(dn, Ci) + ln <= phi[sub] + 1e-14 * np.abs(phi[sub])
                good = sub[ok]
                new_loss[good], new_F[good], new_D[good] = ln[ok], Fn[ok], Dn[ok]
                sub = sub[~ok]
            stuck = np.zeros(len(idx), bool)
            if len(sub):  # no decrease found: the path stays (it is at a minimum to rounding) and is done
                stuck[sub] = True
                t[sub] = 0.0
            r[idx] = ri - t[:, None] * step
            if len(sub):
                keep = ~stuck
                idx, loss, F, D = idx[keep], new_loss[keep], new_F[keep], new_D[keep]
            else:
                loss, F, D = new_loss, new_F, new_D
            if not len(idx):
                break
        return r, self._eval(r)


def _state(problem, order: int, g_nodes: int, x0=None, select: str = "continuation", jac0=None, guess=None):
    """Solve the stationary equations on one rule: a dict of the state (C, Q, mE, the paths' r, F, D, ...) and the
    largest residual; the caller judges whether it converged.  ``jac0``: the search's Jacobian from a nearby solve
    (the state's ``jac``): a quasi-Newton search starts from it at ``guess`` (default x0), and hybr from x0 follows
    only if that search does not converge.  The unknowns are the upper triangles of log C and
    log Q (matrix logarithms: C, Q stay positive definite) and the easy overlaps mE (k_E, m)."""
    from scipy.optimize import root

    p = problem
    net = p.network
    m = p.m
    npar = m * (m + 1) // 2
    z_lat, y_lat, w_lat, gn, gw, method = _rule(p, order, g_nodes)
    E = np.asarray(p.analysis.easy_basis, float).reshape(p.k, -1)
    kE = E.shape[1]
    Ng = len(gw)
    if kE == 0:
        # no easy direction: omega = Q^(1/2) g does not involve z, so the state sees the latent only through y, and
        # latent nodes with equal y are one node (a sign link: two; an even link: the mirrored nodes)
        y_s, inv = np.unique(y_lat, return_inverse=True)
        w_s = np.bincount(inv, weights=w_lat)
        zE = np.zeros((len(y_s) * Ng, 0))
    else:
        y_s, inv, w_s = y_lat, np.arange(len(y_lat)), w_lat
        zE = np.repeat(z_lat @ E, Ng, axis=0)
    y = np.repeat(y_s, Ng)
    G = np.tile(gn, (len(y_s), 1))
    w = np.outer(w_s, gw).ravel()
    delta, lam = float(p.delta), float(p.ridge)
    eye = np.eye(m)
    prox = _Prox(net, y)
    P, rows = _exchange(m, kE, net)
    # exchangeable neurons on a symmetric state: the paths with g1 < g2 are the mirror images of those with g1 > g2
    # (r, F swapped, D permuted), so only the first half of every latent node's g block is solved
    Nh = Ng // 2
    mirror = P.shape[1] < P.shape[0]
    half = (np.arange(len(y)) % Ng) < Nh
    prox_half = _Prox(net, y[half])

    def unfold(a, flip):
        a = a.reshape((len(y_s), Nh) + a.shape[1:])
        return np.concatenate([a, flip(a)], axis=1).reshape((len(y_s) * Ng,) + a.shape[2:])
    with np.errstate(all="ignore"):
        _, _, D0 = prox._eval(G)
    D0m = np.einsum("n,nij->ij", w, D0)
    c_ref = 1.0 / (delta * max(float(np.max(np.abs(np.linalg.eigvalsh(D0m)))) + lam, 1e-3))

    def unpack(x):
        C = _spd_fun(_sym(x[:npar], m), np.exp)
        Q = _spd_fun(_sym(x[npar:2 * npar], m), np.exp)
        return C, Q, np.asarray(x[2 * npar:], float).reshape(kE, m)

    last: dict = {}  # the latest evaluation: the final state is read at the root the search just evaluated

    def evaluate(x):
        key = np.asarray(x, float).tobytes()
        if last.get("key") == key:
            return last["state"]
        C, Q, mE = unpack(x)
        # the symmetric square root: the point set {Q^(1/2) g} of the tensor rule is invariant under an exchange of
        # the neurons whenever Q is (a Cholesky factor is not), so the quadrature keeps the problem's symmetry
        L = _spd_fun(Q, np.sqrt)
        omega = zE @ mE + G @ L
        if mirror:
            rh, Fh, Dh, nch = prox_half.solve(omega[half], C, c_ref, select)
            r, F = unfold(rh, lambda a: a[..., ::-1]), unfold(Fh, lambda a: a[..., ::-1])
            D, nc = unfold(Dh, lambda a: a[..., ::-1, ::-1]), unfold(nch, lambda a: a)
        else:
            r, F, D, nc = prox.solve(omega, C, c_ref, select)
        wF = w[:, None] * F
        # Stein: E[du/domega] = E[u g^T] L^{-1} (omega = M^T z + L g), which keeps the jumps of the proximal branch and
        # the kinks' Dirac terms that E[D (I + C D)^{-1}] (the smooth part) misses; symmetric in the limit
        chi = np.linalg.solve(L, (wF.T @ G).T).T
        chi = (chi + chi.T) / 2
        # D (I + C D)^{-1} = [(I + D C)^{-1} D]^T per path
        if m > 1:  # (I + D C)^{-1} D column by column (closed-form 2 x 2 solves)
            A = eye[None] + np.einsum("nij,jk->nik", D, C)
            chi_smooth = np.einsum("n,nji->ij", w, np.stack([_solve(A, D[:, :, j]) for j in range(m)], axis=2))
        else:
            chi_smooth = np.einsum("n,nji->ij", w, D / (1.0 + C[0, 0] * D))
        Eu2 = wF.T @ F
        Ezu = zE.T @ wF
        last.update(key=key, state=dict(C=C, Q=Q, L=L, mE=mE, omega=omega, r=r, F=F, D=D, chi=chi,
                                        chi_smooth=chi_smooth, Eu2=Eu2, Ezu=Ezu, nc=nc))
        return last["state"]

    def residual(x):
        try:
            s = evaluate(x)
        except np.linalg.LinAlgError:  # a trial point with a singular C or Q (log entries run far): not a root
            return np.full(2 * npar + kE * m, 1e6)
        C = s["C"]
        Ch = _spd_fun(C, np.sqrt)
        R1 = delta * Ch @ (lam * eye + s["chi"]) @ Ch - eye
        # relative to tr(Q) / m, not Q itself: a direction of Q may vanish (a linear width-2 model forgets the
        # neurons' difference), where Q^{-1/2} (...) Q^{-1/2} - I would stay at -1
        R2 = (delta * C @ s["Eu2"] @ C - s["Q"]) / (np.trace(s["Q"]) / m)
        R3 = (lam * s["mE"] + s["Ezu"]) / np.sqrt(np.maximum(np.diag(s["Eu2"]), 1e-300))[None, :]
        out = np.concatenate([_triu((R1 + R1.T) / 2), _triu((R2 + R2.T) / 2), R3.ravel()])
        return np.where(np.isfinite(out), out, 1e6)

    if x0 is None:
        x0 = np.concatenate([_triu(math.log(c_ref) * eye), np.zeros(npar), np.zeros(kE * m)])
    v0 = np.linalg.lstsq(P, x0, rcond=None)[0]
    x0 = P @ v0  # the start projected on the symmetric states
    log_cap, log_init = math.log(C_MAX * c_ref), math.log(C_INIT * c_ref)
    beyond = [0, 0]  # consecutive evaluations with C past the cap, and past C_INIT c_ref

    def guarded(v):
        x = P @ v
        # C runs away: no finite state, stop searching -- after RUNAWAY_EVALS evaluations in a row past the cap (the
        # search's trial steps can leave and come back: sigma = x^2 on y = z^2 - 1 does), or STALL_EVALS in a row
        # past C_INIT c_ref (below the interpolation threshold the search stalls there: no root to find)
        top = np.linalg.eigvalsh(_sym(x[:npar], m))[-1]
        beyond[0] = beyond[0] + 1 if top > log_cap else 0
        beyond[1] = beyond[1] + 1 if top > log_init else 0
        if beyond[0] >= RUNAWAY_EVALS or beyond[1] >= STALL_EVALS:
            raise _Runaway(x)
        return residual(x)[rows]

    runaway, jac = False, None
    try:
        v = None
        if jac0 is not None and np.shape(jac0) == (len(rows), P.shape[1]):
            # a Jacobian from a nearby solve (the previous delta, or the finer rule): quasi-Newton from it saves the
            # finite differences hybr starts with; where it stalls, hybr from x0 as without it
            g0 = v0 if guess is None else np.linalg.lstsq(P, guess, rcond=None)[0]
            try:
                vb, ok, J = _broyden(guarded, g0, np.asarray(jac0, float))
                if ok:
                    v, jac = vb, J
            except _Runaway:  # not a verdict: hybr from x0 decides, as without the Jacobian
                pass
            beyond[:] = [0, 0]
        if v is None:
            sol = root(guarded, v0, method="hybr", options={"xtol": 1e-11, "maxfev": 100 * P.shape[1]})
            v, n = sol.x, len(sol.x)
            R = np.zeros((n, n))
            R[np.triu_indices(n)] = sol.r
            jac = sol.fjac.T @ R  # hybr's final (Broyden-updated) Jacobian, J = Q R
        x = P @ v
    except _Runaway as stop:
        x, runaway = stop.args[0], True
    res = residual(x)
    C, Q, _ = unpack(x)
    cmax = float(np.linalg.eigvalsh(C)[-1])
    if not runaway and cmax <= C_INIT * c_ref and (not (np.max(np.abs(res)) < 1e-7) or not np.all(np.isfinite(Q))):
        # retry by damped fixed-point iteration from the same start (hybr can stall where a branch switches); keep
        # the better of the two
        xf, resf = _fixed_point(evaluate, residual, x0, delta, lam, m)
        if np.max(np.abs(resf)) < np.max(np.abs(res)):
            x, res = xf, resf
    s = dict(evaluate(x))
    # the paths of the whole tensor rule (the static law keeps z: the Hessian theory integrates over the hard part)
    full = (inv[:, None] * Ng + np.arange(Ng)[None, :]).ravel()
    for key in ("omega", "r", "F", "D", "nc"):
        s[key] = s[key][full]
    s.update(z=np.repeat(z_lat, Ng, axis=0), y=np.repeat(y_lat, Ng), G=np.tile(gn, (len(y_lat), 1)),
             w=np.outer(w_lat, gw).ravel(), method=method, E=E, residual=float(np.max(np.abs(res))), x=x,
             c_ref=c_ref, layout=(len(y_lat), Ng), jac=jac)
    return s


def _broyden(fun, v, J, iters: int = BROYDEN_ITERS, tol: float = BROYDEN_TOL) -> tuple:
    """Quasi-Newton (Broyden's good update) for fun(v) = 0 from v with the Jacobian estimate J: (the best v reached,
    converged, the updated J).  Steps are capped at BROYDEN_STEP in every unknown; a trial that does not lower the
    largest residual is rejected but still updates J, and the next trial is the updated J's step within half the
    rejected one's reach (the search gives up after three rejections in a row), or when three accepted steps lowered
    the residual by less than a factor 4; converged when the largest residual is below ``tol`` or the step below
    1e-11 of |v| (hybr's xtol)."""
    f = fun(v)
    r = float(np.max(np.abs(f)))
    seen = [r]
    reach = BROYDEN_STEP
    for _ in range(iters):
        if r < tol:
            return v, True, J
        if len(seen) > 3 and r > seen[-4] / 4:  # stalled: less than a factor 4 over the last three steps
            return v, False, J
        for _trial in range(3):
            try:
                dv = -np.linalg.solve(J, f)
            except np.linalg.LinAlgError:
                return v, False, J
            if not np.all(np.isfinite(dv)):
                return v, False, J
            dv *= min(1.0, reach / max(float(np.max(np.abs(dv))), 1e-300))  # a trust region in the log unknowns
            f1 = fun(v + dv)
            J = J + np.outer(f1 - f - J @ dv, dv) / max(float(dv @ dv), 1e-300)
            r1 = float(np.max(np.abs(f1)))
            if r1 < r:
                reach = BROYDEN_STEP
                break
            reach = float(np.max(np.abs(dv))) / 2
        else:
            return v, False, J
        small = float(np.linalg.norm(dv)) <= 1e-11 * (1.0 + float(np.linalg.norm(v)))
        v, f, r = v + dv, f1, r1
        seen.append(r)
        if small:
            return v, True, J
    return v, r < tol, J


class _Runaway(Exception):
    """The root search reached C > C_MAX c_ref (args: the unknowns there)."""


def _exchange(m: int, kE: int, net) -> tuple:
    """(P, rows): the unknowns x = P v of the states invariant under an exchange of the neurons, and the rows of the
    residual that are independent there.  Neurons with equal second-layer weights and biases (m = 2: a_1 = a_2,
    b_1 = b_2) are exchangeable at every t of the DMFT (their initial law is), so its limit is an exchange-symmetric
    state: 4 unknowns instead of 6 (plus the easy overlaps).  Otherwise P = I."""
    npar = m * (m + 1) // 2
    n = 2 * npar + kE * m
    a, b = np.asarray(net.a, float), np.asarray(net.b, float)
    if m != 2 or a[0] != a[1] or b[0] != b[1]:
        return np.eye(n), np.arange(n)
    # x = [log C: 11, 12, 22 | log Q: 11, 12, 22 | mE (kE, 2) row by row]; symmetric: 22 = 11, the columns of mE equal
    P = np.zeros((n, 4 + kE))
    for base, col in ((0, 0), (3, 2)):
        P[base, col] = P[base + 2, col] = 1.0
        P[base + 1, col + 1] = 1.0
    for i in range(kE):
        P[6 + 2 * i, 4 + i] = P[6 + 2 * i + 1, 4 + i] = 1.0
    rows = np.array([0, 1, 3, 4] + [6 + 2 * i for i in range(kE)])
    return P, rows


def _fixed_point(evaluate, residual, x0, delta, lam, m: int, iters: int = 60):
    x = np.asarray(x0, float).copy()
    npar = m * (m + 1) // 2
    eye = np.eye(m)
    for _ in range(iters):
        s = evaluate(x)
        C_new = np.linalg.inv(lam * eye + s["chi"]) / delta
        Q_new = delta * s["C"] @ s["Eu2"] @ s["C"]
        if not (np.all(np.isfinite(C_new)) and np.all(np.isfinite(Q_new)) and np.linalg.eigvalsh(C_new)[0] > 0
                and np.linalg.eigvalsh((Q_new + Q_new.T) / 2)[0] > 0):
            break
        xn = x.copy()
        xn[:npar] = 0.5 * x[:npar] + 0.5 * _triu(_spd_fun(C_new, np.log))
        xn[npar:2 * npar] = 0.5 * x[npar:2 * npar] + 0.5 * _triu(_spd_fun(Q_new, np.log))
        if len(x) > 2 * npar:  # M: a gradient step on the overlap's fixed point (E[z u^T] is the risk's gradient in M)
            xn[2 * npar:] = (s["mE"] - 0.5 * delta * (lam * s["mE"] + s["Ezu"]) @ s["C"]).ravel()
        if np.max(np.abs(xn - x)) < 1e-12:
            x = xn
            break
        x = xn
        # C or Q runs away: no finite state
        if (np.linalg.eigvalsh(_sym(x[:npar], m))[-1] > math.log(C_MAX) + 50
                or np.linalg.eigvalsh(_sym(x[npar:2 * npar], m))[-1] > math.log(1e12)):
            break
    return x, residual(x)


def stationary_state(problem, *, order: int = STATIONARY_ORDER, check_order: Optional[int] = None,
                     select: str = "continuation", start: Optional[StationaryState] = None,
                     g_nodes: Optional[int] = None) -> StationaryState:
    """The t -> infinity state of GD's DMFT for a :class:`theorykit.Problem` of width m <= 2 (module docstring;
    docs/theory.md §3.4).  ``order``: latent nodes per axis; ``g_nodes``: composite Gauss-Legendre nodes per
    coordinate of g (default G_NODES[m][0]); the error of every output is its difference against the same solve with
    ``check_order`` latent nodes (default 3/4 of ``order``) and G_NODES[m][1] nodes in g.  Step sizes, steps and the
    initial law do not enter (the state forgets them once GD has converged).  ``select``: "continuation" (the branch
    followed from C = 0, the default: it matches converged GD, tables/stationary_state.md) or, for width 1, "global"
    (the lowest local minimum of each sample's phi).  ``check_order=0`` skips the coarser solve (``error`` is then
    empty).  ``start``: a solved state (e.g. at a nearby delta) whose (C, Q, M) start the root finder, and whose
    search Jacobian starts a quasi-Newton search; or a sequence of solved states at other deltas: where two of them
    bracket this delta, the start is their (log C, log Q, M) interpolated linearly in log delta (the nearest state's
    Jacobian), otherwise the nearest state's."""
    from ..problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"stationary_state takes a theorykit.Problem, got {type(problem).__name__}")
    m = problem.m
    if m not in G_NODES:
        raise TheorykitError(f"the stationary state is solved for width m <= {max(G_NODES)} (got m = {m}); use the "
                             "long-time DMFT")
    order = check_int("order", order, 8, 400)
    check_order = check_int("check_order", check_order if check_order is not None else max(8, (3 * order) // 4), 0,
                            400)
    g_nodes = check_int("g_nodes", g_nodes if g_nodes is not None else G_NODES[m][0], 8, 4096)
    if g_nodes % 16:  # an even number of panels of 8: g = 0 (the diagonal at m = 2) on a panel boundary
        raise TheorykitError(f"g_nodes must be a multiple of 16 (composite Gauss-Legendre panels of 8 nodes, an even "
                             f"number of them), got {g_nodes}")
    if select not in ("continuation", "global"):
        raise TheorykitError(f"select must be 'continuation' or 'global', got {select!r}")
    if select == "global" and m != 1:
        raise TheorykitError(f"select='global' is defined for width 1 (got m = {m}); use 'continuation'")
    E = np.asarray(problem.analysis.easy_basis, float).reshape(problem.k, -1)
    x0, guess, jac0 = _start_point(start, problem, E)
    nan = math.nan
    k = problem.k
    mat = nan if m == 1 else np.full((m, m), nan)

    def failed(status: str, msg: str, residual: float, method: str = "") -> StationaryState:
        return StationaryState(problem, status, msg, mat, mat, mat, np.full((k, m), nan), np.full((m, m), nan), nan,
                               nan, residual, {}, method, np.zeros(0), np.zeros((0, m)), np.zeros(0), np.zeros((0, k)),
                               np.zeros((0, m, m)))
    try:
        s = _state(problem, order, g_nodes, select=select, x0=x0, jac0=jac0, guess=guess)
        # the nearby state was not near enough: from the default start -- unless the search ran toward C = infinity
        # from there (no finite state below the interpolation threshold: a restart finds none either)
        if x0 is not None and s["residual"] > 1e-6 and float(np.linalg.eigvalsh(s["C"])[-1]) <= C_INIT * s["c_ref"]:
            s2 = _state(problem, order, g_nodes, select=select)
            ran_away = float(np.linalg.eigvalsh(s2["C"])[-1]) > C_MAX * s2["c_ref"]  # no finite state: say so
            s = s2 if ran_away or s2["residual"] < s["residual"] else s
    except np.linalg.LinAlgError as exc:  # the search ended on a singular C or Q: no state found, say so
        return failed("no-solution", f"the stationary equations met a singular system ({exc}); use the long-time "
                      "DMFT", nan)
    cmax = float(np.linalg.eigvalsh(s["C"])[-1])
    if s["residual"] > 1e-6 or cmax > C_MAX * s["c_ref"]:
        D_mean = float(np.max(np.abs(np.linalg.eigvalsh(np.einsum("n,nij->ij", s["w"], s["D"])))))
        init = cmax > C_INIT * s["c_ref"] or float(np.max(np.abs(s["chi"]))) < 1e-6 * max(D_mean, 1e-300)
        status = "init-dependent" if init else "no-solution"
        msg = ("no stationary state: the integrated response runs to infinity (c = {:.3g}): below the "
               "interpolation threshold the limit depends on the initialisation (or the weights grow without bound, "
               "as for a separable logistic fit); use the long-time DMFT"
               .format(cmax) if init else
               f"the stationary equations did not converge (residual {s['residual']:.2g}); use the long-time DMFT")
        return failed(status, msg, s["residual"], s["method"])
    out = _summary(problem, s)
    err = {}
    if check_order:
        keys = ("c", "chi_u", "q", "M", "train_loss", "test_loss")
        try:
            coarse = _summary(problem, _state(problem, check_order, G_NODES[m][1] if g_nodes == G_NODES[m][0] else
                                              g_nodes, x0=s["x"], select=select, jac0=s["jac"]))
            err = {key: float(np.max(np.abs(np.asarray(out[key]) - np.asarray(coarse[key])))) for key in keys}
        except np.linalg.LinAlgError:  # the coarser rule's search met a singular system: its error is unknown
            err = {key: math.inf for key in keys}
    return StationaryState(problem, "ok", f"stationary state solved (residual {s['residual']:.1e})", out["c"],
                           out["chi_u"], out["q"], out["M"], out["gram"], out["train_loss"], out["test_loss"],
                           s["residual"], err, s["method"], s["w"], s["r"], s["y"], s["z"], s["D"],
                           nonconvex=float(s["w"] @ s["nc"]), chi_u_smooth=_scalar(s["chi_smooth"]),
                           select=select, omega=s["omega"], c_ref=s["c_ref"], layout=s["layout"],
                           easy_free=s["E"].shape[1] == 0, search_jacobian=s["jac"])


def _start_point(start, problem, E: np.ndarray) -> tuple:
    """(x0, guess, jac0) of the root search from ``start`` (:func:`stationary_state`), or Nones: x0, the unknowns
    (log C, log Q, easy overlaps) of the nearest solved state, where hybr starts; guess, where the quasi-Newton search
    starts: those of the two nearest states that bracket the delta, interpolated linearly in log delta, or
    extrapolated from the two nearest on one side when the delta is no farther from the nearest than the second is;
    else x0; jac0: the nearest state's search Jacobian."""
    starts = [start] if isinstance(start, StationaryState) else list(start or ())
    ok = [s for s in starts if isinstance(s, StationaryState) and s.status == "ok" and s.problem.m == problem.m]
    if not ok:
        return None, None, None
    dl = float(problem.delta)

    def x_of(s):
        return np.concatenate([_triu(_spd_fun(np.atleast_2d(s.c), np.log)), _triu(_spd_fun(np.atleast_2d(s.q), np.log)),
                               (E.T @ s.M).ravel()])

    def gap(s):
        return math.log(float(s.problem.delta) / dl)
    near = min(ok, key=lambda s: abs(gap(s)))
    below = sorted([s for s in ok if gap(s) < 0], key=gap, reverse=True)  # nearest first
    above = sorted([s for s in ok if gap(s) > 0], key=gap)
    pair = (below[0], above[0]) if below and above else None
    for side in (below, above):
        if pair is None and len(side) >= 2 and abs(gap(side[0])) <= abs(gap(side[1]) - gap(side[0])):
            pair = (side[0], side[1])
    x0 = x_of(near)
    if pair is None:
        return x0, x0, near.search_jacobian
    a, b = pair
    t = -gap(a) / (gap(b) - gap(a))
    return x0, (1.0 - t) * x_of(a) + t * x_of(b), near.search_jacobian


def _scalar(A: np.ndarray):
    """A 1 x 1 matrix as a float (width 1), a larger one as it is."""
    return float(A[0, 0]) if A.shape == (1, 1) else A


def _summary(problem, s) -> dict:
    net = problem.network
    w = s["w"]
    M = s["E"] @ s["mE"]
    with np.errstate(all="ignore"):
        train = float(w @ net.evaluate(s["r"], s["y"]).loss)
        test = float(w @ net.evaluate(s["omega"], s["y"]).loss)
    gram = M.T @ M + s["Q"]
    return {"c": _scalar(s["C"]), "chi_u": _scalar(s["chi"]), "q": _scalar(s["Q"]), "M": M, "gram": gram,
            "train_loss": train, "test_loss": test}
