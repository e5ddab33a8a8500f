"""The real curve S(tau) below the bulk and the bulk's left edge (docs/theory.md §4).

Below the bulk S(lambda) is real, positive definite and increasing; the curve is parameterised by tau = tr S (regular
through the fold where the bulk starts): (S, lambda) solves F = 0 (:mod:`.solver`) and tr S = tau (bordered Newton),
inside the domain S > 0, I + S^{1/2} D S^{1/2}/delta > 0 for every D of the law.  The edge is the maximum of
lambda(tau) (the root of dlambda/dtau, from the bordered system), or the end of the domain; when every D >= 0 and H has
a kernel (:func:`~theorykit.spectra.hessian.law.kernel_mass`), lambda(tau) rises to 0 without turning and the bottom of
the spectrum is the atom at 0.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from ...errors import TheorykitError
from .law import HessianLaw, is_psd, rank_ratio
from .solver import Core, batched_inv

__all__ = ["ATOM_TAU", "Curve", "find_edge"]

_NEWTON_TOL = 1e-12


class Curve:
    """The real solution S(tau) below the bulk, tau = tr S, with (S, lambda, dS/dtau, dlambda/dtau) by bordered
    Newton (module docstring).  Points are cached and every solve warm-starts from the nearest one."""

    def __init__(self, core: Core):
        self.c = core
        self.m = core.m
        self.pts = {}  # tau -> (s vec, lam, ds vec, dlam)
        self.evals = 0

    def _residual(self, s, lam, tau):
        S = self.c.mat(s)[None]
        g = self.c.g(S)
        self.evals += 1
        F = self.c.vec(self.c.F(S, np.array([lam]), g))[0]
        return np.concatenate([F, [float(s @ self.c.diag) - tau]]), S, g

    def _bordered(self, S, g):
        p = len(self.c.pairs)
        B = np.zeros((p + 1, p + 1))
        B[:p, :p] = self.c.jac(S, g)[0]
        B[:p, p] = self.c.diag
        B[p, :p] = self.c.diag
        return B

    def at(self, tau: float):
        """:meth:`solve` at a tau inside the marched range (an edge, a root), never None: when the tangent predictor
        of the nearest solved point fails, in 8 geometric sub-steps from that point; else a one-line error."""
        res = self.solve(tau)
        if res is None and self.pts:
            near = min(self.pts, key=lambda t0: abs(math.log(t0 / tau)))
            for t in np.geomspace(near, tau, 9)[1:]:
                res = self.solve(float(t))
                if res is None:
                    break
        if res is None:
            raise TheorykitError(f"hessian: the real continuation of S failed at tr S = {tau:.6g} inside the marched "
                                 "range")
        return res

    def solve(self, tau: float, start=None):
        """(s, lam, ds, dlam, S, g) at tau, or None when Newton fails or leaves the domain."""
        if tau in self.pts:
            s, lam, ds, dlam = self.pts[tau]
            S = self.c.mat(s)[None]
            return s, lam, ds, dlam, S, self.c.g(S)
        if start is None:
            if self.pts:
                near = min(self.pts, key=lambda t0: abs(math.log(t0 / tau)))
                s0, lam0, ds0, dl0 = self.pts[near]
                s, lam = s0 + ds0 * (tau - near), lam0 + dl0 * (tau - near)  # tangent predictor
                if not self.c.in_domain(self.c.mat(s)):
                    s, lam = s0 * (tau / near), lam0
            else:
                s = self.c.diag * (tau / self.m)
                S = self.c.mat(s)[None]
                lam = float(np.trace(self.c.Eg(self.c.g(S))[0] - batched_inv(S)[0])) / self.m
        else:
            s, lam = start
        if not self.c.in_domain(self.c.mat(s)):
            return None
        for it in range(60):  # every accepted step below stays in the domain (damped), so s is in it here
            R, S, g = self._residual(s, lam, tau)
            if not np.all(np.isfinite(R)):
                return None
            scale = max(1.0, abs(lam), float(np.abs(s).max()) ** -1)
            if np.abs(R).max() <= _NEWTON_TOL * scale and it > 0:
                break
            B = self._bordered(S, g)
            try:
                step = np.linalg.solve(B, -R)
            except np.linalg.LinAlgError:
                return None
            t = 1.0  # damp to stay in the domain
            while t > 1e-6 and not self.c.in_domain(self.c.mat(s + t * step[:-1])):
                t *= 0.5
            if t <= 1e-6 and not self.c.in_domain(self.c.mat(s + t * step[:-1])):
                return None
            s, lam = s + t * step[:-1], lam + t * step[-1]
        else:
            return None
        R, S, g = self._residual(s, lam, tau)
        if np.abs(R).max() > 1e-8 * max(1.0, abs(lam), float(np.abs(s).max()) ** -1):
            return None
        B = self._bordered(S, g)
        try:
            tang = np.linalg.solve(B, np.concatenate([np.zeros(len(s)), [1.0]]))
        except np.linalg.LinAlgError:
            return None
        ds, dlam = tang[:-1], float(tang[-1])
        self.pts[tau] = (s, float(lam), ds, dlam)
        return s, float(lam), ds, dlam, S, g

    @staticmethod
    def _same_branch(tau, res, nxt, r2) -> bool:
        """Whether the solution at nxt continues the one at tau (for m >= 2, F = 0 with tr S fixed has several
        solutions, and a long step may land on another, skipping the fold: seen on a finite-d sample law, GeLU phase
        retrieval, m = 2, delta = 40, t = 50, where lambda fell from -0.0458 to -0.0492 with dlambda/dtau > 0 at both
        ends).  Rejects when lambda decreased although it was increasing at both ends, or when S lies farther from the
        tangent predictor than half its change."""
        s0, lam0, ds0, dl0 = res[0], res[1], res[2], res[3]
        s1, lam1, dl1 = r2[0], r2[1], r2[3]
        if dl0 > 0 and dl1 > 0 and lam1 < lam0:
            return False
        pred = s0 + ds0 * (nxt - tau)
        return bool(np.linalg.norm(s1 - pred) <= 0.5 * np.linalg.norm(s1 - s0) + 1e-12 * np.linalg.norm(s1))

    def march(self, tau0: float, ratio: float = 1.5, max_steps: int = 400, tau_max: float = math.inf):
        """From tau0 upward until dlambda/dtau < 0 (fold), the domain ends, or tau passes tau_max; returns (list of
        taus solved, status) with status "fold", "domain" or "atom" (tau_max passed: used when H has a kernel,
        :func:`kernel_mass`, and lambda(tau) rises to 0 as S grows without bound)."""
        taus = []
        tau, h = tau0, ratio
        res = self.solve(tau)
        if res is None:
            raise TheorykitError("hessian: could not start the real continuation of S below the bulk")
        taus.append(tau)
        prev = None
        for _ in range(max_steps):
            if res[3] < 0:
                return taus, "fold"
            if tau > tau_max:
                return taus, "atom"
            nxt = tau * h
            if prev is not None and prev[1] > res[3] > 0:  # dlambda/dtau falling: cap the step at twice the secant
                fold = tau + res[3] * (tau - prev[0]) / (prev[1] - res[3])  # estimate of the fold (fewer jumps)
                nxt = min(nxt, tau + 2.0 * (fold - tau))
            r2 = self.solve(nxt)
            if r2 is not None and not self._same_branch(tau, res, nxt, r2):
                self.pts.pop(nxt, None)  # Newton landed on another solution with tr S = nxt: a shorter step
                r2 = None
            if r2 is None:
                h = 1.0 + (h - 1.0) / 2
                if h - 1.0 < 1e-10:
                    return taus, "domain"
                continue
            prev = (tau, res[3])
            tau, res = nxt, r2
            taus.append(tau)
            h = 1.0 + min(ratio - 1.0, 2.0 * (h - 1.0))  # a failed solve halved the step: let it grow back
        raise TheorykitError("hessian: the real continuation did not reach the edge (law too heavy-tailed?)")


#: in the kernel case the march stops once tr S passes this multiple of m / scale (lambda is then 0 to ~1e-9)
ATOM_TAU = 1e9


def find_edge(curve: Curve, law: HessianLaw):
    """(tau_e, case, taus marched) for the curve of this law.  Case "atom": every D_i >= 0 and H has a kernel
    (:func:`kernel_mass`); lambda(tau) then rises to 0 without turning, and the bottom of the spectrum is the atom at
    0 (the ridge)."""
    sc = law.scale
    atom = is_psd(law) and rank_ratio(law) <= 1.0 + 1e-9
    taus, status = curve.march(law.m / (100.0 * sc + 1e-300),
                               tau_max=ATOM_TAU * law.m / sc if atom else math.inf)
    if status == "atom":
        return float(taus[-1]), "atom", taus
    if status == "fold":
        a, b = taus[-2] if len(taus) > 1 else taus[0] / 2, taus[-1]
        if curve.solve(a) is None or curve.solve(a)[3] <= 0:
            raise TheorykitError("hessian: lost the fold of the real continuation")
        tau_e = optimize.brentq(lambda t: curve.at(t)[3], a, b, xtol=1e-14 * b, rtol=1e-13, maxiter=200)
        return float(tau_e), "fold", taus
    return float(taus[-1]), "domain", taus
