"""The law of (D, zeta) the Hessian theory reads, and what depends on the law alone (docs/theory.md §4).

H = (1/n) sum_i D_i (x) x_i x_i^T + ridge I, D_i (m x m) symmetric, zeta_i in R^{kH} the hard latent coordinates.  A
:class:`HessianLaw` is a weighted sample of (D, zeta) at ratio delta = n/d: the DMFT's paths at time t
(:meth:`HessianLaw.from_path_law`) or a finite-d simulation's own D_i and hard coordinates
(:meth:`HessianLaw.from_samples`).

Weights unbounded below (square loss with y = z^2) have no left edge as n -> infinity.  :func:`support_tail` decides
this from the support: D is evaluated at the law's paths with the latent pushed outward (z -> c z, c = 1, 2, 4, ...,
the other path variables kept), which no quadrature's reach limits; :func:`tail_diagnostics` is the fallback where
only the law's own paths are known (how min lambda_min(D) moves with the latent resolution).
:meth:`HessianLaw.truncated` gives the finite-n law (paths below the law's 1/n quantile of lambda_min(D) removed, its
expected lowest samples kept aside).

Kernel: H is a sum of n terms of rank rank(D_i), so the md eigenvalues of H - ridge I hold an atom at 0 of mass at
least max(0, 1 - delta E[rank D]/m) (:func:`kernel_mass`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from ..._checks import check_int, check_number
from ...errors import TheorykitError
from ...rules import below_quantile, sym_eigvals

__all__ = ["EXTREMES", "SUPPORT_FACTORS", "TAIL_LEVELS", "WEIGHT_FLOOR", "HessianLaw", "check_law", "is_psd",
           "kernel_mass", "rank_ratio", "support_tail", "tail_diagnostics"]

#: the tail diagnostic's resolution levels: latent tail mass p (paths with |z| beyond the (1 - p) quantile dropped)
TAIL_LEVELS = tuple(10.0 ** -k for k in range(2, 13))
#: the support check's outward factors c (the latent z -> c z at every path)
SUPPORT_FACTORS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
#: expected lowest samples a truncated law keeps as atoms of weight 1/n (HessianLaw.truncated)
EXTREMES = 10
#: paths below this weight are dropped from a law (their total is < N * 1e-15; tail diagnostics still see them)
WEIGHT_FLOOR = 1e-15


@dataclass(frozen=True, eq=False)
class HessianLaw:
    """A weighted law of (D, zeta) at sample ratio delta.

    weights (N,) >= 0 summing to 1; D (N, m, m) symmetric; zeta (N, kH) hard latent coordinates (kH may be 0);
    radius (N,) the latent norm |z| of each path (for the tail diagnostic; NaN when unknown); delta = n/d; ridge
    (added to every eigenvalue); source: where the law came from, in words; tail: the tail diagnostic (dict, see
    :func:`tail_diagnostics`) computed when the law was built (for a PathLaw: with the excluded paths kept);
    truncation_n: n when the law was truncated at its 1/n quantile (None otherwise); notes."""

    weights: np.ndarray
    D: np.ndarray
    zeta: np.ndarray
    radius: np.ndarray
    delta: float
    ridge: float
    source: str
    tail: Optional[dict] = None
    truncation_n: Optional[int] = None
    removed: Optional[dict] = None  # the paths a truncation removed: {"D", "weights", "zeta"}
    extremes: Optional[dict] = None  # a truncation's expected lowest samples: {"D" (K, m, m), "zeta" (K, kH), "n"}
    notes: tuple = field(default_factory=tuple)

    @property
    def m(self) -> int:
        return self.D.shape[1]

    @property
    def kH(self) -> int:
        return self.zeta.shape[1]

    @property
    def lam_min_D(self) -> np.ndarray:
        """(N,) the smallest eigenvalue of each D_i."""
        return _lam_min(self.D)

    @property
    def scale(self) -> float:
        """The law's scale sqrt(E ||D||_F^2 / m) (at least 1e-300)."""
        return max(math.sqrt(float(self.weights @ np.einsum("npq,npq->n", self.D, self.D)) / self.m), 1e-300)

    # ---- constructors
    @classmethod
    def from_samples(cls, D, zeta=None, delta=None, *, weights=None, ridge: float = 0.0, radius=None,
                     source: str = "empirical law of the samples' D_i", notes=()) -> "HessianLaw":
        """A law from per-sample D (N,), (N, 1, 1) or (N, m, m) and hard coordinates zeta (N,) or (N, kH)
        (default: none); equal weights unless given.  This is also the finite-d law of a simulation's D_i."""
        delta = check_number("delta", delta, lambda v: v > 0, "a positive finite number")
        ridge = check_number("ridge", ridge, lambda v: v >= 0, ">= 0")
        D = np.asarray(D, dtype=float)
        if D.ndim == 1:
            D = D[:, None, None]
        if D.ndim != 3 or D.shape[1] != D.shape[2] or D.shape[0] == 0:
            raise TheorykitError(f"hessian law: D must have shape (N,), (N, 1, 1) or (N, m, m), got {D.shape}")
        N, m = D.shape[0], D.shape[1]
        if m > 8:
            raise TheorykitError(f"hessian law: width m = {m} > 8 is not supported by the m x m solver")
        if not np.all(np.isfinite(D)):
            raise TheorykitError("hessian law: D contains non-finite values")
        D = 0.5 * (D + np.swapaxes(D, 1, 2))
        if zeta is None:
            zeta = np.zeros((N, 0))
        zeta = np.asarray(zeta, dtype=float)
        if zeta.ndim == 1:
            zeta = zeta[:, None]
        if zeta.ndim != 2 or zeta.shape[0] != N:
            raise TheorykitError(f"hessian law: zeta must have shape (N,) or (N, kH) with N = {N}, got {zeta.shape}")
        if not np.all(np.isfinite(zeta)):
            raise TheorykitError("hessian law: zeta contains non-finite values")
        w = np.full(N, 1.0 / N) if weights is None else np.asarray(weights, dtype=float).ravel()
        if w.shape != (N,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise TheorykitError("hessian law: weights must be N finite numbers >= 0 with a positive sum")
        w = w / w.sum()
        r = np.full(N, np.nan) if radius is None else np.asarray(radius, dtype=float).ravel()
        if r.shape != (N,):
            raise TheorykitError(f"hessian law: radius must have shape ({N},)")
        tail = tail_diagnostics(w, _lam_min(D), r)
        keep = w >= WEIGHT_FLOOR
        notes = list(notes)
        if np.any((w > 0) & ~keep):
            notes.append(f"{int(((w > 0) & ~keep).sum())} paths of weight < {WEIGHT_FLOOR:g} (total "
                         f"{float(w[~keep].sum()):.2g}) dropped: no sample of realistic size holds them, and they "
                         "would only move the discretised law's domain boundary")
        w = w[keep] / w[keep].sum()
        return cls(w, D[keep], zeta[keep], r[keep], float(delta), float(ridge), source, tail=tail, notes=tuple(notes))

    @classmethod
    def from_path_law(cls, path_law, delta=None, ridge: float = 0.0) -> "HessianLaw":
        """The DMFT's law at time t (a :class:`theorykit.PathLaw`): D as the finite-n Hessian sees it (no Dirac terms
        of kinks), zeta the hard coordinates, weights of the kept paths.  The tail diagnostic is computed with the
        excluded (single-path instability) paths kept, at their raw weights."""
        from ...dynamics.result import PathLaw

        if not isinstance(path_law, PathLaw):
            raise TheorykitError(f"from_path_law takes a theorykit.PathLaw, got {type(path_law).__name__}")
        delta = check_number("delta", delta, lambda v: v > 0, "a positive finite number")
        radius = np.linalg.norm(path_law.z, axis=1)
        lmin_all = _lam_min(path_law.D)
        tail = tail_diagnostics(path_law.raw_weights / path_law.raw_weights.sum(), lmin_all, radius)
        tail["excluded_paths"] = int(path_law.excluded.sum())
        keep = path_law.weights > 0
        if not np.any(keep):
            raise TheorykitError(f"the DMFT law at t = {path_law.t} has no kept paths")
        law = cls.from_samples(path_law.D[keep], path_law.zeta[keep], delta, weights=path_law.weights[keep],
                               ridge=ridge, radius=radius[keep],
                               source=f"DMFT path law at t = {path_law.t} ({int(keep.sum())} paths; latent: "
                                      f"{path_law.latent})")
        return replace(law, tail=tail)

    # ---- finite n
    def truncated(self, n, extremes: int = EXTREMES) -> "HessianLaw":
        """The finite-n law: paths whose lambda_min(D) lies below the law's 1/n quantile removed (the bulk a sample of
        n points sees; its lowest points are single samples, not bulk), the rest renormalised.  The removed paths are
        kept in ``removed``; ``extremes`` holds the ``extremes`` expected lowest samples of n draws (the paths at the
        quantiles (j - 1/2)/n of lambda_min(D)), which :func:`hessian_prediction` adds back as atoms of weight 1/n
        to predict the outliers they couple to, and turns into predicted single-sample spikes."""
        n = check_int("n", n, 1)
        extremes = check_int("extremes", extremes, 0, 10000)
        lmin = self.lam_min_D
        tc = below_quantile(lmin, self.weights, n)  # the one finite-n truncation (theorykit.rules)
        order, cum, cut = tc.order, tc.cum, tc.cut
        drop = order[:cut]
        keep = np.ones(len(lmin), bool)
        keep[drop] = False
        if not np.any(keep):
            raise TheorykitError(f"truncating at the 1/n quantile (n = {n}) removes the whole law")
        w = self.weights[keep]
        removed = {"D": self.D[drop], "weights": self.weights[drop], "zeta": self.zeta[drop]}
        q = tc.quantile
        ext = None
        if extremes:
            idx = np.array([order[min(int(np.searchsorted(cum, (j - 0.5) / n)), len(order) - 1)]
                            for j in range(1, extremes + 1)])
            cutK = int(np.searchsorted(cum, extremes / n, side="right"))
            above = np.ones(len(lmin), bool)
            above[order[:cutK]] = False
            ext = {"D": self.D[idx], "zeta": self.zeta[idx], "n": n, "keep": above[keep]}
        return HessianLaw(w / w.sum(), self.D[keep], self.zeta[keep], self.radius[keep], self.delta, self.ridge,
                          self.source + f"; truncated at its 1/n quantile of lambda_min(D) (n = {n}: "
                                        f"{int(cut)} paths of weight {float(cum[cut - 1]) if cut else 0.0:.3g} below "
                                        f"{q:.6g} removed)", tail=self.tail, truncation_n=n, removed=removed,
                          extremes=ext, notes=self.notes)

    def with_delta(self, delta) -> "HessianLaw":
        return replace(self, delta=check_number("delta", delta, lambda v: v > 0, "a positive finite number"))


def _lam_min(D: np.ndarray) -> np.ndarray:
    return sym_eigvals(D)[:, 0]


# ----------------------------------------------------------------------------------------------- tail diagnostic
def tail_diagnostics(weights, lam_min, radius, levels=TAIL_LEVELS) -> dict:
    """How the bottom of the law of lambda_min(D) moves with the latent resolution.

    For each tail mass p in ``levels`` that the law resolves (p >= its smallest weight), the paths with latent radius
    |z| beyond the law's (1 - p) quantile R_p are dropped (a coarser latent resolution) and m_p = min lambda_min(D)
    over the rest is recorded; also the 1e-2 ... 1e-5 quantiles of lambda_min(D).  The slopes s = -dm/dR between
    consecutive levels say whether the minimum saturates (bounded below: the slopes die out) or keeps falling
    (unbounded: D ~ -R or -R^2 keeps its slope).  Verdict "unbounded" when the last slope is > 0.7 x the first and
    the last segment moves m by more than 1e-3 of the interquartile range of lambda_min(D); None (undecided) with
    fewer than three levels or without radii."""
    w = np.asarray(weights, float)
    lm = np.asarray(lam_min, float)
    r = np.asarray(radius, float)
    w = w / w.sum()
    order = np.argsort(lm, kind="stable")
    cum = np.cumsum(w[order])

    def quant(p):
        i = int(np.searchsorted(cum, p, side="left"))
        return float(lm[order[min(i, len(order) - 1)]])

    out = {"min_D": float(lm.min()), "quantiles": {f"{p:g}": quant(p) for p in (1e-2, 1e-3, 1e-4, 1e-5)}}
    iqr = max(quant(0.75) - quant(0.25), 1e-12 * max(1.0, abs(quant(0.5))))
    if not np.all(np.isfinite(r)):
        out.update(levels=[], min_D_at_level=[], radius_at_level=[], slopes=[], unbounded=None,
                   how="no latent radii: quantiles only (undecided)")
        return out
    ro = np.argsort(r, kind="stable")
    tail_mass = 1.0 - np.cumsum(w[ro])  # mass strictly beyond each path's radius
    smallest = float(w[w > 0].min())
    lv, mins, radii = [], [], []
    for p in levels:
        if p < smallest:
            break
        i = int(np.searchsorted(-tail_mass, -p, side="left"))  # first path with tail mass <= p
        R = float(r[ro[min(i, len(ro) - 1)]])
        if radii and R <= radii[-1]:
            continue
        lv.append(float(p))
        radii.append(R)
        mins.append(float(lm[r <= R].min()))
    slopes, unbounded = _slope_verdict(mins, radii, iqr)
    out.update(levels=lv, min_D_at_level=mins, radius_at_level=radii, slopes=slopes, unbounded=unbounded,
               how="m_p = min lambda_min(D) over paths with latent |z| <= R_p, the (1 - p) quantile; unbounded if "
                   "the slope -dm/dR between the last two levels is > 0.7 x that between the first two")
    return out


def _slope_verdict(mins, radii, iqr) -> tuple:
    """(slopes, verdict) of the minima ``mins`` at growing ``radii``: the slopes s = -dm/dR between consecutive radii;
    unbounded (True) when the last slope is > 0 and > 0.7 x the first and the last segment moves m by more than
    1e-3 ``iqr``; False otherwise; None with fewer than three radii."""
    slopes = [float((mins[j] - mins[j + 1]) / (radii[j + 1] - radii[j])) for j in range(len(mins) - 1)]
    if len(slopes) < 2:
        return slopes, None
    moved = mins[-2] - mins[-1]
    return slopes, bool(slopes[-1] > 0.7 * max(slopes[0], 0.0) and moved > 1e-3 * iqr and slopes[-1] > 0)


def support_tail(lam_min_at, radius, weights, factors=SUPPORT_FACTORS) -> dict:
    """Whether lambda_min(D) is unbounded below on the law's support, judged by pushing the latent outward.

    ``lam_min_at(c)`` returns the (N,) smallest eigenvalue of D at the law's N paths with their latent z replaced by
    c z (the other path variables, e.g. the pre-activations, kept: they have a Gaussian component of full support,
    so the pushed points stay in the support).  m_c = min over the paths of positive weight, at radius R_c = c max|z|;
    the slopes -dm/dR between consecutive factors decide as in :func:`tail_diagnostics` (unbounded when the last
    slope keeps at least 0.7 of the first; bounded when they die out).  Unlike the law's own tail, the verdict does
    not depend on where a quadrature rule's outermost node sits.  Factors at which D is not finite end the sequence.
    Returns {"factors", "min_D_at_factor", "radius_at_factor", "slopes", "unbounded", "how"}."""
    w = np.asarray(weights, float)
    r = np.asarray(radius, float)
    live = w > 0
    R = float(np.max(r[live])) if np.any(live) else float("nan")
    cs, mins, radii = [], [], []
    for c in factors:
        with np.errstate(all="ignore"):
            lm = np.asarray(lam_min_at(float(c)), float)[live]
        if not np.all(np.isfinite(lm)) or not math.isfinite(R):
            break
        cs.append(float(c))
        mins.append(float(lm.min()))
        radii.append(float(c) * R)
        if c == factors[0]:
            q = np.quantile(lm, [0.25, 0.75])
            iqr = max(float(q[1] - q[0]), 1e-12 * max(1.0, abs(float(np.median(lm)))))
    slopes, unbounded = _slope_verdict(mins, radii, iqr) if cs else ([], None)
    return {"factors": cs, "min_D_at_factor": mins, "radius_at_factor": radii, "slopes": slopes,
            "unbounded": unbounded,
            "how": "support: m_c = min lambda_min(D) over the law's paths with the latent z pushed to c z (the other "
                   "path variables kept); unbounded if the slope -dm/dR between the last two factors is > 0.7 x that "
                   "between the first two"}


def check_law(law) -> HessianLaw:
    if not isinstance(law, HessianLaw):
        raise TheorykitError(f"expected a theorykit HessianLaw, got {type(law).__name__}")
    return law


def kernel_mass(law: HessianLaw) -> float:
    """The fraction of the md eigenvalues of H - ridge I that are exactly 0: H is a sum of n terms of rank
    rank(D_i), so its rank is at most n E[rank D] and the kernel has mass at least max(0, 1 - delta E[rank D]/m)
    (docs/theory.md §4).  ReLU's D = sigma'(u)^2 l'' is 0 on half of the samples, so at delta <= 2 (m = 1) its
    Hessian is singular; with invertible D this is the Marchenko-Pastur atom 1 - delta at delta < 1."""
    mass = 1.0 - rank_ratio(law)
    return float(mass) if mass > 1e-12 else 0.0


def rank_ratio(law: HessianLaw) -> float:
    """delta E[rank D] / m: at most 1 means rank(H - ridge I) < md (H singular) as n, d -> infinity."""
    law = check_law(law)
    rank = (np.abs(sym_eigvals(law.D)) > 1e-12 * law.scale).sum(axis=1)
    return law.delta * float(law.weights @ rank) / law.m


def is_psd(law: HessianLaw) -> bool:
    return bool(float(law.lam_min_D.min()) >= -1e-12 * law.scale)
