"""Hard outliers in every gap between single-sample spikes, m = 1 (docs/theory.md §4).

For m = 1 the real curve below the bulk is explicit in s = S > 0:

    lambda(s) = E[D / (1 + D s/delta)] - 1/s,       Phi(s) = E[zeta zeta^T D / (1 + D s/delta)]      (kH x kH).

A law with a few atoms far below the rest (a truncated law's expected lowest samples, weight 1/n each) has a pole at
each atom's s_a = -delta/D_a.  Between consecutive poles lambda runs from +inf down to -inf, and each stretch where
dlambda/ds > 0 is a gap of the spectrum: the first below every spike, then the gaps between spikes, the last one
ending at the bulk's own fold (its left edge).  On such a stretch Phi - lambda I decreases (dPhi/ds <= 0), so each of
its eigenvalues crosses 0 at most once, bracketed by the stretch's ends; every crossing is a hard outlier, with
overlap^2 1/(1 - a^T Phi'(lambda) a), Phi' = (dPhi/ds) / (dlambda/ds).  The m x m continuation (:mod:`.curve`)
stops at the first fold, the one the deepest spike makes, and so sees the first gap only.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from ...errors import TheorykitError
from .law import HessianLaw

__all__ = ["gap_outliers"]

#: grid points per interval between poles (Chebyshev-clustered towards both poles) before the stretches are refined
GAP_GRID = 160
_CHUNK = 32


class _Explicit:
    """lambda(s), dlambda/ds, Phi(s) and dPhi/ds of an m = 1 law, vectorised over s (G,)."""

    def __init__(self, law: HessianLaw):
        self.w = law.weights
        self.D = law.D[:, 0, 0]
        self.delta = law.delta
        kH = law.kH
        self.kH = kH
        self.wzz = self.w[:, None] * np.einsum("na,nb->nab", law.zeta, law.zeta).reshape(len(self.w), kH * kH)

    def eval(self, s):
        s = np.atleast_1d(np.asarray(s, dtype=float))
        lam, dlam = np.empty(len(s)), np.empty(len(s))
        Phi, dPhi = np.empty((len(s), self.kH, self.kH)), np.empty((len(s), self.kH, self.kH))
        for i in range(0, len(s), _CHUNK):
            sc = s[i:i + _CHUNK]
            q = 1.0 + self.D[None, :] * sc[:, None] / self.delta
            g = self.D[None, :] / q
            dg = -(g * g) / self.delta
            lam[i:i + _CHUNK] = g @ self.w - 1.0 / sc
            dlam[i:i + _CHUNK] = dg @ self.w + 1.0 / (sc * sc)
            Phi[i:i + _CHUNK] = (g @ self.wzz).reshape(-1, self.kH, self.kH)
            dPhi[i:i + _CHUNK] = (dg @ self.wzz).reshape(-1, self.kH, self.kH)
        return lam, dlam, Phi, dPhi

    def dlam(self, s: float) -> float:
        return float(self.eval(s)[1][0])

    def mu(self, s: float) -> np.ndarray:
        lam, _, Phi, _ = self.eval(s)
        return np.linalg.eigvalsh(Phi[0] - lam[0] * np.eye(self.kH))


def _grid(a: float, b: float) -> np.ndarray:
    """Points inside (a, b), clustered towards both ends (b may be inf; a = 0 clusters geometrically towards 0)."""
    if not math.isfinite(b):
        return a + (a if a > 0 else 1.0) * np.geomspace(1e-9, 1e9, 2 * GAP_GRID)
    u = 0.5 - 0.5 * np.cos(np.pi * (np.arange(1, GAP_GRID + 1) - 0.5) / GAP_GRID)
    if a == 0.0:
        u = np.unique(np.concatenate([np.geomspace(1e-9, u[0], 40), u]))
    return a + (b - a) * u


def _stretches(ex: _Explicit, a: float, b: float):
    """The stretches of (a, b) where dlambda/ds > 0, as (lo, hi) pairs."""
    s = _grid(a, b)
    f = ex.eval(s)[1]
    pos = f > 0
    if not pos.any():  # a short stretch between grid points: refine the largest value
        j = int(np.argmax(f))
        lo, hi = s[max(j - 1, 0)], s[min(j + 1, len(s) - 1)]
        if hi <= lo:
            return []
        r = optimize.minimize_scalar(lambda x: -ex.dlam(x), bounds=(lo, hi), method="bounded",
                                     options={"xatol": 1e-12 * hi})
        if -r.fun <= 0:
            return []
        s = np.sort(np.concatenate([s, [r.x]]))
        f = ex.eval(s)[1]
        pos = f > 0
    out = []
    j = 0
    while j < len(s):
        if not pos[j]:
            j += 1
            continue
        k = j
        while k + 1 < len(s) and pos[k + 1]:
            k += 1
        lo = s[j] if j == 0 else optimize.brentq(ex.dlam, s[j - 1], s[j], xtol=1e-15 * s[j], rtol=1e-15)
        hi = s[k] if k == len(s) - 1 else optimize.brentq(ex.dlam, s[k], s[k + 1], xtol=1e-15 * s[k], rtol=1e-15)
        # stop just inside the stretch: at its ends dlambda/ds = 0 and Phi' is singular
        lo, hi = lo + 1e-12 * (hi - lo), hi - 1e-12 * (hi - lo)
        out.append((lo, hi))
        j = k + 1
    return out


def gap_outliers(law: HessianLaw, poles: np.ndarray, end: float):
    """Hard outliers of an m = 1 law in every gap below its bulk, and the bulk's left edge (the top of the last gap).

    ``poles``: the s = -delta/D_a of the atoms whose spikes lie below the bulk (crossed); ``end``: where the curve's
    domain ends (the pole of the lowest D that is not crossed, or inf).  Returns (outliers: [(lam, overlap^2, unit
    direction a)], lowest first; edge).  The ridge is not added."""
    if law.m != 1:
        raise TheorykitError("gap_outliers: m = 1 only (the m x m continuation stops at the first fold)")
    ex = _Explicit(law)
    kH = law.kH
    bounds = [0.0] + [float(p) for p in np.sort(poles)] + [float(end)]
    outs, top = [], None
    for a, b in zip(bounds[:-1], bounds[1:]):
        for lo, hi in _stretches(ex, a, b):
            top = hi
            if not kH:
                continue
            mu_lo, mu_hi = ex.mu(lo), ex.mu(hi)
            for j in range(kH):
                if not (mu_lo[j] > 0 > mu_hi[j]):
                    continue
                sj = optimize.brentq(lambda x: ex.mu(x)[j], lo, hi, xtol=1e-15 * hi, rtol=1e-15, maxiter=200)
                lam, dlam, Phi, dPhi = ex.eval(sj)
                ev, U = np.linalg.eigh(Phi[0] - lam[0] * np.eye(kH))
                v = U[:, j]
                v = v * (1.0 if v[np.argmax(np.abs(v))] > 0 else -1.0)
                ov = 1.0 / (1.0 - float(v @ dPhi[0] @ v) / float(dlam[0]))
                outs.append((float(lam[0]), ov, tuple(float(x) for x in v)))
    if top is None:
        raise TheorykitError("gap_outliers: no stretch of the real curve below the bulk")
    outs.sort(key=lambda o: o[0])
    return outs, float(ex.eval(top)[0][0])
