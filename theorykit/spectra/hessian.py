"""The Hessian at time t: bulk, left edge, hard outliers and single-sample spikes from a law of (D, zeta)
(docs/theory.md §4).

H = (1/n) sum_i D_i (x) x_i x_i^T + ridge I  (md x md), n = delta d, D_i (m x m) symmetric.  The law of (D, zeta) is
a weighted sample (:class:`HessianLaw`): the DMFT's paths at time t (:meth:`HessianLaw.from_path_law`) or a finite-d
simulation's own D_i and hard coordinates (:meth:`HessianLaw.from_samples`).  The core never asks which.

Bulk (matrix generalised Marchenko-Pastur law).  For z in C^+ the m x m matrix S(z) solves

    F(S) = S^{-1} + z I - E[g(D, S)] = 0,     g(D, S) = (I + D S / delta)^{-1} D   (symmetric),
    rho(lambda) = (1/(m pi)) lim_{eta -> 0} Im tr S(lambda + i eta).

Newton on the m(m+1)/2 entries of the symmetric S, with dF[E] = -S^{-1} E S^{-1} + E[g E g]/delta.  The density is
polished by continuation in eta from a coarse eta down to eta = 1e-7 (relative to the law's scale), never a fixed
smoothing; :func:`eigenvalue_counting` integrates it from the edge (substitution lambda = edge + s^2 for the
square-root edge).

Left edge and outliers (real axis).  Below the bulk S(lambda) is real, positive definite and increasing; the curve
is parameterised by tau = tr S (regular through the fold where the bulk starts): (S, lambda) solves F = 0 and
tr S = tau (bordered Newton), inside the domain S > 0, I + S^{1/2} D S^{1/2}/delta > 0 for every D of the law.  The
edge is the maximum of lambda(tau) (the root of dlambda/dtau, from the bordered system), or the end of the domain.
Hard outliers: with zeta in R^{kH} the hard latent coordinates,

    Phi(S) = E[(zeta zeta^T) (x) g(D, S)]        (kH m x kH m),

an eigenvalue below the edge with eigenvector correlated with the hard subspace is a root of det(Phi - lambda I) = 0;
Phi - lambda I decreases along the curve, so each eigenvalue of it crosses zero at most once and the number of
outliers is the number of its negative eigenvalues at the edge.  Overlap^2 of the eigenvector with the hard subspace:
1/(1 - a^T Phi'(lambda) a), a the unit null vector, Phi' = (dPhi/dtau)/(dlambda/dtau).  margin = minus the smallest
eigenvalue of Phi - lambda I at the edge (> 0 iff a hard outlier exists).

m = 1 with one hard direction and min D < 0 goes through the classic spectral core (:func:`theorykit.spectra.classic.
outlier` with Z = -D, V = zeta^2: bottom of H = -top of that law), the same code as the classic spectral methods; the
continuation is the m x m extension and agrees with it for m = 1 (tests/test_hessian_theory.py).

Single-sample spikes.  A sample with D_i far below the rest adds, at finite n, an eigenvalue where
det(I + D_i S(lambda)/delta) = 0 on the curve of the law without it (below the edge), with the eigenvector localised
on x_i.  Weights unbounded below (square loss with y = z^2) have no left edge as n -> infinity: :func:`tail_diagnostics`
detects this, and :meth:`HessianLaw.truncated` gives the finite-n law (paths below the law's 1/n quantile of
lambda_min(D) removed), whose extreme paths are returned as predicted spikes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy import optimize

from .._checks import check_int, check_number
from ..errors import TheorykitError

__all__ = ["HessianLaw", "HessianPrediction", "Outlier", "hessian_prediction", "hessian_density",
           "eigenvalue_counting", "tail_diagnostics", "single_sample_spikes", "split_spikes", "expected_extremes",
           "kernel_mass"]

#: eta at the end of the density polish, relative to the law's scale
ETA_FINAL = 1e-7
#: the tail diagnostic's resolution levels: latent tail mass p (paths with |z| beyond the (1 - p) quantile dropped)
TAIL_LEVELS = tuple(10.0 ** -k for k in range(2, 13))
_NEWTON_TOL = 1e-12
#: expected lowest samples a truncated law keeps as atoms of weight 1/n (HessianLaw.truncated)
EXTREMES = 10
#: paths below this weight are dropped from a law (their total is < N * 1e-15; tail diagnostics still see them)
WEIGHT_FLOOR = 1e-15


# ------------------------------------------------------------------------------------------------------ the law
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
        from ..dynamics.result import PathLaw

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
        return _replace(law, tail=tail)

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
        order = np.argsort(lmin, kind="stable")
        cum = np.cumsum(self.weights[order])
        cut = int(np.searchsorted(cum, 1.0 / n, side="right"))  # paths whose cumulative weight stays below 1/n
        drop = order[:cut]
        keep = np.ones(len(lmin), bool)
        keep[drop] = False
        if not np.any(keep):
            raise TheorykitError(f"truncating at the 1/n quantile (n = {n}) removes the whole law")
        w = self.weights[keep]
        removed = {"D": self.D[drop], "weights": self.weights[drop], "zeta": self.zeta[drop]}
        q = float(lmin[order[cut]]) if cut < len(order) else float(lmin.max())
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
        return _replace(self, delta=check_number("delta", delta, lambda v: v > 0, "a positive finite number"))


def _replace(law: HessianLaw, **kw) -> HessianLaw:
    from dataclasses import replace

    return replace(law, **kw)


def _eigvals(D: np.ndarray) -> np.ndarray:
    """(N, m) eigenvalues of each D_i, ascending (closed form for m <= 2: numpy's batched eigvalsh costs as much as a
    whole m = 2 solve)."""
    if D.shape[1] == 1:
        return D[:, 0, :].copy()
    if D.shape[1] == 2:
        a, b, c = D[:, 0, 0], D[:, 0, 1], D[:, 1, 1]
        h = np.sqrt(0.25 * (a - c) ** 2 + b * b)
        return np.stack([0.5 * (a + c) - h, 0.5 * (a + c) + h], axis=1)
    return np.linalg.eigvalsh(D)


def _lam_min(D: np.ndarray) -> np.ndarray:
    return _eigvals(D)[:, 0]


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
    slopes = [float((mins[j] - mins[j + 1]) / (radii[j + 1] - radii[j])) for j in range(len(mins) - 1)]
    unbounded = None
    if len(slopes) >= 2:
        moved = mins[-2] - mins[-1]
        unbounded = bool(slopes[-1] > 0.7 * max(slopes[0], 0.0) and moved > 1e-3 * iqr and slopes[-1] > 0)
    out.update(levels=lv, min_D_at_level=mins, radius_at_level=radii, slopes=slopes, unbounded=unbounded,
               how="m_p = min lambda_min(D) over paths with latent |z| <= R_p, the (1 - p) quantile; unbounded if "
                   "the slope -dm/dR between the last two levels is > 0.7 x that between the first two")
    return out


# ------------------------------------------------------------------------------------- small-matrix arithmetic
def _inv(A: np.ndarray) -> np.ndarray:
    """Batched inverse of (..., m, m), explicit for m <= 2."""
    m = A.shape[-1]
    if m == 1:
        return 1.0 / A
    if m == 2:
        a, b, c, d = A[..., 0, 0], A[..., 0, 1], A[..., 1, 0], A[..., 1, 1]
        det = a * d - b * c
        out = np.empty_like(A)
        out[..., 0, 0] = d / det
        out[..., 0, 1] = -b / det
        out[..., 1, 0] = -c / det
        out[..., 1, 1] = a / det
        return out
    return np.linalg.inv(A)


def _mm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Batched product of (..., m, m) arrays (broadcasting), explicit for m <= 2."""
    m = A.shape[-1]
    if m == 1:
        return A * B
    if m == 2:
        A0, A1 = A[..., :, 0:1], A[..., :, 1:2]
        return A0 * B[..., 0:1, :] + A1 * B[..., 1:2, :]
    return np.matmul(A, B)


def _sym_basis(m: int):
    """The pairs (a, b), a <= b, and the basis E_ab = e_a e_b^T + e_b e_a^T (a < b) or e_a e_a^T."""
    pairs = [(a, b) for a in range(m) for b in range(a, m)]
    E = np.zeros((len(pairs), m, m))
    for j, (a, b) in enumerate(pairs):
        E[j, a, b] = 1.0
        E[j, b, a] = 1.0
    return pairs, E


class _Core:
    """F, its Jacobian, Phi and the domain test for one law, vectorised over a leading batch of S (L, m, m).

    g is built explicitly for m <= 2 (for m = 2, g = (D + det(D) adj(S)/delta) / det(I + D S/delta), adj being
    linear for 2 x 2 matrices), by batched inverses for m > 2; every expectation is a GEMM against the weights."""

    def __init__(self, law: HessianLaw):
        self.law = law
        self.w = law.weights
        self.D = law.D
        self.m = m = law.m
        self.delta = law.delta
        self.pairs, self.E = _sym_basis(m)
        self.iu = (np.array([a for a, _ in self.pairs]), np.array([b for _, b in self.pairs]))
        self.diag = np.array([a == b for a, b in self.pairs], dtype=float)
        if m == 2:
            self.d0, self.d1, self.d2 = law.D[:, 0, 0], law.D[:, 0, 1], law.D[:, 1, 1]
            self.detD = self.d0 * self.d2 - self.d1 * self.d1
            self._Q = np.stack([np.ones_like(self.d0), self.d0, self.d1, self.d2, self.detD])  # (5, N)
            self._Qc = self._Q.astype(complex)
        kH = law.kH
        self.wzz = self.w[:, None] * np.einsum("na,nb->nab", law.zeta, law.zeta).reshape(len(self.w), kH * kH)  # (N, kH^2)

    def g(self, S: np.ndarray) -> np.ndarray:
        """g = (I + D S/delta)^{-1} D in entries-major layout (L, m*m, N) (entry p*m + q of g_n at [:, p*m+q, n])."""
        dl, m = self.delta, self.m
        L = S.shape[0]
        if m == 1:
            s = S[:, 0, 0][:, None]
            d = self.D[None, :, 0, 0]
            return (d / (1.0 + d * s / dl))[:, None, :]
        if m == 2:
            s0, s1, s2 = S[:, 0, 0], S[:, 0, 1], S[:, 1, 1]
            one = np.ones_like(s0)
            # rows of Q: 1, d0, d1, d2, det D; columns: a, num00, num01, num11 for each S of the batch
            coef = np.zeros((L, 4, 5), dtype=S.dtype)
            coef[:, 0] = np.stack([one, s0 / dl, 2 * s1 / dl, s2 / dl, (s0 * s2 - s1 * s1) / (dl * dl)], -1)
            coef[:, 1, 1], coef[:, 1, 4] = one, s2 / dl
            coef[:, 2, 2], coef[:, 2, 4] = one, -s1 / dl
            coef[:, 3, 3], coef[:, 3, 4] = one, s0 / dl
            Q = self._Q if S.dtype == float else self._Qc
            V = np.matmul(coef, Q)  # (L, 4, N)
            inv_a = 1.0 / V[:, 0]
            G = np.empty((L, 4, V.shape[2]), dtype=V.dtype)
            np.multiply(V[:, 1], inv_a, out=G[:, 0])
            np.multiply(V[:, 2], inv_a, out=G[:, 1])
            G[:, 2] = G[:, 1]
            np.multiply(V[:, 3], inv_a, out=G[:, 3])
            return G
        A = np.eye(m) + np.matmul(self.D[None], S[:, None]) / dl
        g = np.matmul(np.linalg.inv(A), self.D[None])  # (L, N, m, m)
        return np.ascontiguousarray(np.moveaxis(g.reshape(L, -1, m * m), 1, 2))

    @staticmethod
    def blocks(G, m):
        """(L, m*m, N) -> (L, N, m, m) view."""
        L, _, N = G.shape
        return np.moveaxis(G.reshape(L, m, m, N), 3, 1)

    def Eg(self, g):
        L = g.shape[0]
        return (g @ self.w).reshape(L, self.m, self.m)

    def F(self, S, z, g):
        return _inv(S) + z[:, None, None] * np.eye(self.m) - self.Eg(g)

    def jac(self, S, g):
        """(L, p, p): column j = upper entries of dF[E_j] = -S^{-1} E_j S^{-1} + E[g E_j g]/delta."""
        Si = _inv(S)
        L, m, p = S.shape[0], self.m, len(self.pairs)
        G2 = np.matmul(g * self.w, np.swapaxes(g, 1, 2)).reshape(L, m, m, m, m)  # E[g_pr g_sq]
        J = np.empty((L, p, p), dtype=np.result_type(S, g))
        for j in range(p):
            Ej = self.E[j]
            col = -_mm(_mm(Si, Ej), Si) + np.einsum("lprsq,rs->lpq", G2, Ej) / self.delta
            J[:, :, j] = col[:, self.iu[0], self.iu[1]]
        return J

    def vec(self, M):
        return M[..., self.iu[0], self.iu[1]]

    def mat(self, v):
        M = np.zeros(v.shape[:-1] + (self.m, self.m), dtype=v.dtype)
        M[..., self.iu[0], self.iu[1]] = v
        M[..., self.iu[1], self.iu[0]] = v
        return M

    def Phi(self, g):
        """(L, kH m, kH m) = E[(zeta zeta^T) (x) g]."""
        L, m, kH = g.shape[0], self.m, self.law.kH
        P = np.matmul(g, self.wzz).reshape(L, m, m, kH, kH)  # [l, p, q, a, b]
        return P.transpose(0, 3, 1, 4, 2).reshape(L, kH * m, kH * m)

    def in_domain(self, S: np.ndarray) -> bool:
        """S > 0 and I + S^{1/2} D S^{1/2}/delta > 0 for every D (one real S (m, m))."""
        dl = self.delta
        if self.m == 1:
            s = S[0, 0]
            return bool(s > 0 and (1.0 + self.D[:, 0, 0] * s / dl).min() > 0)
        if self.m == 2:
            s0, s1, s2 = S[0, 0], S[0, 1], S[1, 1]
            det = s0 * s2 - s1 * s1
            if not (s0 > 0 and det > 0):
                return False
            # det(I + D S/delta) > 0 and tr(I + D S/delta) > 0, as one (2, 5) x (5, N) product over the rows of Q
            coef = np.array([[1.0, s0 / dl, 2 * s1 / dl, s2 / dl, det / (dl * dl)],
                             [2.0, s0 / dl, 2 * s1 / dl, s2 / dl, 0.0]])
            return bool((coef @ self._Q).min() > 0)
        ev, U = np.linalg.eigh(S)
        if ev[0] <= 0:
            return False
        R = (U * np.sqrt(ev)) @ U.T
        M = np.matmul(np.matmul(R[None], self.D), R[None]) / dl
        return bool(np.linalg.eigvalsh(M)[:, 0].min() > -1.0)


# ------------------------------------------------------------------------------------------- the real curve
class _Curve:
    """The real solution S(tau) below the bulk, tau = tr S, with (S, lambda, dS/dtau, dlambda/dtau) by bordered
    Newton (module docstring).  Points are cached and every solve warm-starts from the nearest one."""

    def __init__(self, core: _Core):
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
                lam = float(np.trace(self.c.Eg(self.c.g(S))[0] - _inv(S)[0])) / self.m
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


# --------------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Outlier:
    """One hard outlier: eigenvalue lam (ridge included), squared overlap of its eigenvector with the hard subspace,
    negative (lam < 0: negative curvature, GD moves along it), direction a (kH m,) the null vector of Phi - lam I."""

    lam: float
    overlap2: float
    negative: bool
    direction: tuple

    def as_dict(self) -> dict:
        return {"lambda": self.lam, "overlap2": self.overlap2, "negative": self.negative,
                "direction": list(self.direction)}


@dataclass(frozen=True)
class HessianPrediction:
    """The bottom of the Hessian's spectrum predicted from a :class:`HessianLaw`.

    edge: left edge of the bulk (ridge included); edge_case: "fold" (the real solution turns: square-root edge),
    "domain" (the curve ends where I + D S/delta becomes singular: the edge is set by the law's minimum) or "atom"
    (every D >= 0 and H has a kernel: the bottom of the spectrum is the atom at the ridge, of mass atom_mass);
    outliers:
    hard outliers below the edge, lowest first; margin: minus the smallest eigenvalue of Phi(lambda) - lambda I at the
    edge (> 0 iff a hard outlier exists); S_edge (m, m); unbounded: the law's tail verdict (True: no left edge as
    n -> infinity; None: undecided); truncation_n; D_tail: the tail diagnostic; method: which solver (classic scalar
    core or the m x m continuation) and the law's source; evaluations: residual evaluations used."""

    edge: float
    edge_case: str
    outliers: tuple
    margin: float
    S_edge: np.ndarray
    delta: float
    m: int
    kH: int
    unbounded: Optional[bool]
    truncation_n: Optional[int]
    D_tail: Optional[dict]
    method: str
    evaluations: int
    notes: tuple = field(default_factory=tuple)
    spikes: tuple = ()  # predicted single-sample eigenvalues of a truncated law's expected extremes (None: in the bulk)
    outliers_from: str = "law"  # "law", or "with extremes" (the truncated law plus its expected extremes as atoms)
    atom_mass: float = 0.0  # mass of the kernel of H - ridge I (kernel_mass): an atom of the spectrum at the ridge

    @property
    def has_outlier(self) -> bool:
        return len(self.outliers) > 0

    def as_dict(self) -> dict:
        return {"edge": self.edge, "edge_case": self.edge_case, "outliers": [o.as_dict() for o in self.outliers],
                "margin": self.margin, "S_edge": np.asarray(self.S_edge).tolist(), "delta": self.delta, "m": self.m,
                "kH": self.kH, "unbounded": self.unbounded, "truncation_n": self.truncation_n,
                "D_tail": self.D_tail, "method": self.method, "evaluations": self.evaluations,
                "notes": list(self.notes), "spikes": list(self.spikes), "outliers_from": self.outliers_from,
                "atom_mass": self.atom_mass}


def _check_law(law) -> HessianLaw:
    if not isinstance(law, HessianLaw):
        raise TheorykitError(f"expected a theorykit HessianLaw, got {type(law).__name__}")
    return law


def hessian_prediction(law: HessianLaw, solver: str = "auto") -> HessianPrediction:
    """Left edge, hard outliers (eigenvalue, overlap^2, sign) and margin for a :class:`HessianLaw` (module docstring,
    docs/theory.md §4).  solver: "auto" (the classic scalar core for m = 1, kH = 1, min D < 0; else the m x m
    continuation), "classic" or "continuation"."""
    law = _check_law(law)
    if solver not in ("auto", "classic", "continuation"):
        raise TheorykitError(f"solver must be 'auto', 'classic' or 'continuation', got {solver!r}")
    scalar_ok = law.m == 1 and law.kH == 1 and float(law.D.min()) < 0
    if solver == "classic" and not scalar_ok:
        raise TheorykitError("the classic scalar core needs m = 1, one hard direction and min D < 0")
    unb = None if law.tail is None else law.tail.get("unbounded")
    notes = list(law.notes)
    if unb and law.truncation_n is None:
        notes.append("D is unbounded below: the n -> infinity law has no left edge; this is the edge of the "
                     "discretised law (resolution-dependent) - truncate at the user's n (HessianLaw.truncated)")
    use_scalar = solver == "classic" or (solver == "auto" and scalar_ok)
    bulk = _scalar(law, unb, notes) if use_scalar else _continuation(law, unb, notes)
    ext = law.extremes
    if not ext or len(ext["D"]) == 0:
        return bulk
    # finite n: the expected lowest samples as atoms of weight 1/n; they are single-sample spikes, and they couple to
    # the hard outlier (their zeta is large when D is low through y): the outliers come from the law with them
    K, n = len(ext["D"]), ext["n"]
    spikes = tuple(single_sample_spikes(law, ext["D"]))
    kp = ext["keep"]  # the bulk above the law's K/n quantile: the K atoms stand for the mass below it
    wb = law.weights[kp]
    w = np.concatenate([wb / wb.sum() * (1.0 - K / n), np.full(K, 1.0 / n)])
    full = _replace(law, weights=w, D=np.concatenate([law.D[kp], ext["D"]]),
                    zeta=np.concatenate([law.zeta[kp], ext["zeta"]]),
                    radius=np.concatenate([law.radius[kp], np.full(K, np.nan)]), extremes=None)
    fp = _scalar(full, unb, []) if (use_scalar and float(full.D.min()) < 0) else _continuation(full, unb, [])
    from dataclasses import replace as dc_replace

    if fp.outliers:
        return dc_replace(bulk, outliers=fp.outliers, spikes=spikes, outliers_from="with extremes",
                          notes=bulk.notes + (f"outliers from the truncated law plus its {K} expected lowest samples "
                                              f"as atoms of weight 1/n (n = {n})",))
    return dc_replace(bulk, spikes=spikes)


def _scalar(law: HessianLaw, unb, notes) -> HessianPrediction:
    from .classic import hessian_law, outlier

    D = law.D[:, 0, 0]
    sl = hessian_law(law.weights, D, law.zeta[:, 0] ** 2, method=law.source)
    p = outlier(sl, law.delta)
    edge = -p.bulk_edge + law.ridge
    S_e = law.delta / p.lam_bar
    outs = ()
    if p.has_outlier:
        lam = -p.top_eigenvalue + law.ridge
        outs = (Outlier(float(lam), float(p.overlap2), bool(lam < 0), (1.0,)),)
    # margin on the same scale as the continuation's: lambda_edge - Phi(lambda_edge) = -(psi - phi) at lam_bar
    margin = (sl.phi(p.lam_bar) - sl.psi(p.lam_bar, law.delta))
    method = (f"classic scalar spectral core (theorykit.spectra.classic.outlier, Z = -D, V = zeta^2; edge "
              f"{p.edge_case}) on {law.source}")
    return HessianPrediction(float(edge), "fold" if p.edge_case == "interior" else "domain", outs, float(margin),
                             np.array([[S_e]]), law.delta, 1, 1, unb, law.truncation_n, law.tail, method, 0,
                             tuple(notes + list(p.notes)))


def kernel_mass(law: HessianLaw) -> float:
    """The fraction of the md eigenvalues of H - ridge I that are exactly 0: H is a sum of n terms of rank
    rank(D_i), so its rank is at most n E[rank D] and the kernel has mass at least max(0, 1 - delta E[rank D]/m)
    (docs/theory.md §4).  ReLU's D = sigma'(u)^2 l'' is 0 on half of the samples, so at delta <= 2 (m = 1) its
    Hessian is singular; with invertible D this is the Marchenko-Pastur atom 1 - delta at delta < 1."""
    mass = 1.0 - _rank_ratio(law)
    return float(mass) if mass > 1e-12 else 0.0


def _rank_ratio(law: HessianLaw) -> float:
    """delta E[rank D] / m: at most 1 means rank(H - ridge I) < md (H singular) as n, d -> infinity."""
    law = _check_law(law)
    rank = (np.abs(_eigvals(law.D)) > 1e-12 * law.scale).sum(axis=1)
    return law.delta * float(law.weights @ rank) / law.m


def _psd(law: HessianLaw) -> bool:
    return bool(float(law.lam_min_D.min()) >= -1e-12 * law.scale)


#: in the kernel case the march stops once tr S passes this multiple of m / scale (lambda is then 0 to ~1e-9)
ATOM_TAU = 1e9


def _edge(curve: _Curve, law: HessianLaw):
    """(tau_e, case, taus marched) for the curve of this law.  Case "atom": every D_i >= 0 and H has a kernel
    (:func:`kernel_mass`); lambda(tau) then rises to 0 without turning, and the bottom of the spectrum is the atom at
    0 (the ridge)."""
    sc = law.scale
    atom = _psd(law) and _rank_ratio(law) <= 1.0 + 1e-9
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


def _continuation(law: HessianLaw, unb, notes) -> HessianPrediction:
    core = _Core(law)
    curve = _Curve(core)
    tau_e, case, taus = _edge(curve, law)
    s_e, lam_e, ds_e, dl_e, S_e, g_e = curve.at(tau_e)
    kH, m = law.kH, law.m
    outs = []
    margin = -math.inf
    if kH:
        def mu(t):
            s, lam, _, _, _, g = curve.at(t)
            return np.linalg.eigvalsh(core.Phi(g)[0] - lam * np.eye(kH * m))

        mu_e = mu(tau_e)
        margin = float(-mu_e[0])
        count = int((mu_e < 0).sum())
        if case == "atom":  # H >= 0 with a kernel: nothing lies below the atom at 0
            margin, count = min(margin, 0.0), 0
        for j in range(count):
            lo = None
            for t in taus:
                if t < tau_e and mu(t)[j] > 0:
                    lo = t
            if lo is None:
                notes.append(f"outlier {j + 1}: no bracket on the marched curve")
                continue
            tj = optimize.brentq(lambda t: mu(t)[j], lo, tau_e, xtol=1e-14 * tau_e, rtol=1e-13, maxiter=200)
            s, lam, ds, dlam, S, g = curve.at(tj)
            P = core.Phi(g)[0] - lam * np.eye(kH * m)
            ev, U = np.linalg.eigh(P)
            a = U[:, j]
            dS = core.mat(ds)[None]
            gb = core.blocks(g, m)
            dgb = -_mm(_mm(gb, dS[:, None]), gb) / law.delta
            dg = np.ascontiguousarray(np.moveaxis(dgb, 1, 3)).reshape(1, m * m, -1)
            dPhi = core.Phi(dg)[0] / dlam
            ov = 1.0 / (1.0 - float(a @ dPhi @ a))
            lam_r = lam + law.ridge
            a = a * (1.0 if a[np.argmax(np.abs(a))] > 0 else -1.0)
            outs.append(Outlier(float(lam_r), float(ov), bool(lam_r < 0), tuple(float(v) for v in a)))
    outs.sort(key=lambda o: o.lam)
    if case == "domain":
        notes.append("the real curve ends where I + D S/delta becomes singular before it turns: the edge is set "
                     "by the law's lowest D")
    atom = kernel_mass(law)
    if case == "atom":
        lam_e = 0.0  # the limit of lambda(tau) as tau -> infinity (docs/theory.md §4)
        notes.append(f"every D_i >= 0 and delta E[rank D]/m = {_rank_ratio(law):.6g} <= 1: H has a kernel of "
                     f"mass {atom:.6g} (an atom at lambda = ridge), which is the bottom of the spectrum; no "
                     "eigenvalue lies below it")
    method = (f"m x m continuation of the real S below the bulk (tau = tr S, bordered Newton; edge: {case}) on "
              f"{law.source}")
    return HessianPrediction(float(lam_e + law.ridge), case, tuple(outs), margin, core.mat(s_e), law.delta, m, kH,
                             unb, law.truncation_n, law.tail, method, curve.evals, tuple(notes), atom_mass=atom)


# --------------------------------------------------------------------------------------------------- density
def _stieltjes(core: _Core, lams: np.ndarray, S0: np.ndarray, eta_final: float):
    """S(lambda + i eta_final) for every lambda (L,), by Newton with continuation in eta from S0 (L, m, m) at
    eta = 1 * scale downward; returns (S (L, m, m) complex, converged (L,) bool)."""
    sc = core.law.scale
    etas = np.geomspace(sc, eta_final, 2 + int(math.ceil(math.log10(sc / eta_final))))
    S = S0.astype(complex)
    ok = np.ones(len(lams), bool)
    for eta in etas:
        z = lams + 1j * eta
        for it in range(40):
            g = core.g(S)
            F = core.vec(core.F(S, z, g))
            scale = np.maximum(1.0, np.abs(core.vec(_inv(S))).max(axis=-1))
            res = np.abs(F).max(axis=-1) / scale
            if np.all(res < 1e-11):
                break
            J = core.jac(S, g)
            step = np.linalg.solve(J, -F[..., None])[..., 0]
            Snew = S + core.mat(step)
            # keep the Herglotz branch: Im tr S >= 0; halve steps that leave it
            bad = np.imag(np.trace(Snew, axis1=1, axis2=2)) < 0
            tries = 0
            while np.any(bad) and tries < 30:
                step[bad] *= 0.5
                Snew = S + core.mat(step)
                bad = np.imag(np.trace(Snew, axis1=1, axis2=2)) < 0
                tries += 1
            S = Snew
        else:
            ok &= res < 1e-8
    return S, ok


def hessian_density(law: HessianLaw, lambdas=None, points: int = 200, eta: float = ETA_FINAL, chunk: int = 16):
    """The bulk density rho(lambda) = (1/(m pi)) Im tr S(lambda + i eta) with eta = ``eta`` x the law's scale
    (default 1e-7: the polished limit, not a smoothing).  lambdas: where (ridge included); default ``points``
    points from the left edge to the right edge, denser near the left edge.  Returns (lambdas, rho) arrays.  The
    kernel of H (:func:`kernel_mass`, an atom at lambda = ridge) is not part of rho: its pole -mass/z is removed
    from S before taking the imaginary part (with a kernel, the default grid starts just above the atom)."""
    law = _check_law(law)
    core = _Core(law)
    sc = law.scale
    atom = kernel_mass(law)
    if lambdas is None:
        points = check_int("points", points, 2)
        lo = hessian_prediction(law, solver="continuation" if law.m > 1 or law.kH != 1 else "auto").edge
        hi = -hessian_prediction(_replace(law, D=-law.D, ridge=0.0, tail=None), solver="continuation").edge \
            + law.ridge
        s = np.linspace(0.0, 1.0, points)
        if _psd(law) and _rank_ratio(law) <= 1.0 + 1e-9:
            s = np.linspace(1.0 / points, 1.0, points)  # not on the atom itself
        lambdas = lo + (hi - lo) * s ** 2
    lam = np.asarray(lambdas, dtype=float).ravel()
    if not np.all(np.isfinite(lam)):
        raise TheorykitError("hessian density: lambdas must be finite")
    x = lam - law.ridge
    rho = np.empty_like(x)
    for i in range(0, len(x), chunk):
        xl = x[i:i + chunk]
        S0 = (-1.0 / (xl + 1j * sc))[:, None, None] * np.eye(law.m)
        S, ok = _stieltjes(core, xl, S0, eta * sc)
        if not np.all(ok):
            raise TheorykitError("hessian density: complex Newton did not converge at lambda = "
                                 f"{float(lam[i:i + chunk][~ok][0]):.6g}")
        im = np.imag(np.trace(S, axis1=1, axis2=2)) / law.m
        if atom > 0:  # (1/m) tr S(z) = int dmu(x)/(x - z): the atom contributes -atom/z
            im = im - atom * (eta * sc) / (xl * xl + (eta * sc) ** 2)
        rho[i:i + chunk] = im / math.pi
    return lam, np.maximum(rho, 0.0)


def eigenvalue_counting(law: HessianLaw, lambdas, edge: Optional[float] = None, nodes: int = 24) -> np.ndarray:
    """The bulk's counting function: the fraction of the md eigenvalues at or below each lambda (ridge included),
    integral of the density from the left edge (lambda = edge + s^2; Gauss-Legendre in s, ``nodes`` per interval
    between consecutive requested points).  Outliers and single-sample spikes are O(1) eigenvalues and not counted.
    The kernel of H (:func:`kernel_mass`, e.g. 1 - delta for delta < 1 and invertible D) is added as an atom at
    lambda = ridge."""
    law = _check_law(law)
    lam = np.asarray(lambdas, dtype=float).ravel()
    if edge is None:
        edge = hessian_prediction(law).edge
    order = np.argsort(lam)
    ls = lam[order]
    s_pts = np.sqrt(np.clip(ls - edge, 0.0, None))
    xg, wg = np.polynomial.legendre.leggauss(nodes)
    bounds = np.concatenate([[0.0], s_pts])
    nodes_s, nodes_w, owner = [], [], []
    for j in range(len(s_pts)):
        a, b = bounds[j], bounds[j + 1]
        if b > a:
            s = 0.5 * (b - a) * xg + 0.5 * (a + b)
            nodes_s.append(s)
            nodes_w.append(0.5 * (b - a) * wg * 2 * s)  # d lambda = 2 s ds
            owner.append(np.full(nodes, j))
    out = np.zeros(len(ls))
    if nodes_s:
        s = np.concatenate(nodes_s)
        _, rho = hessian_density(law, edge + s * s)
        contrib = np.concatenate(nodes_w) * rho
        per = np.bincount(np.concatenate(owner), weights=contrib, minlength=len(ls))
        out = np.cumsum(per)
    atom = kernel_mass(law)
    if atom > 0:
        out = out + np.where(ls >= law.ridge, atom, 0.0)
    res = np.empty_like(out)
    res[order] = out
    return res


# ------------------------------------------------------------------------------------------- single-sample spikes
def single_sample_spikes(law: HessianLaw, D_extreme, n: Optional[int] = None):
    """Predicted eigenvalues of the single-sample spikes of the given extreme D_i (K,), (K, 1, 1) or (K, m, m) on the
    bulk of ``law`` (the law without those samples): for each, lambda with det(I + D_i S(lambda)/delta) = 0 on the
    real curve below the edge (ridge included), or None when it falls inside the bulk.  Sorted lowest first."""
    law = _check_law(law)
    De = np.asarray(D_extreme, dtype=float)
    if De.ndim == 1:
        De = De[:, None, None]
    if De.ndim != 3 or De.shape[1:] != (law.m, law.m):
        raise TheorykitError(f"D_extreme must have shape (K, {law.m}, {law.m})")
    core = _Core(law)
    curve = _Curve(core)
    tau_e, case, taus = _edge(curve, law)

    def det_min(t, Di):
        S = core.mat(curve.at(t)[0])
        ev, U = np.linalg.eigh(S)
        R = (U * np.sqrt(ev)) @ U.T
        return float(np.linalg.eigvalsh(np.eye(law.m) + R @ Di @ R / law.delta)[0])

    out = []
    for Di in De:
        if det_min(tau_e, Di) > 0:
            out.append(None)
            continue
        lo = taus[0]
        if det_min(lo, Di) <= 0:
            out.append(None)
            continue
        t = optimize.brentq(det_min, lo, tau_e, args=(Di,), xtol=1e-14 * tau_e, rtol=1e-13, maxiter=200)
        out.append(float(curve.at(t)[1] + law.ridge))
    return out


def split_spikes(law: HessianLaw, max_spikes: int = 20):
    """Separate the single-sample spikes of a finite-n law (e.g. a simulation's own D_i, equal weights): repeatedly
    take the path with the lowest lambda_min(D); if, on the law without it, det(I + D S/delta) = 0 below the edge
    (:func:`single_sample_spikes`), it is a spike: remove it and continue; else stop.  Returns (bulk law, spike D
    (K, m, m), predicted spike eigenvalues (K,), lowest first)."""
    law = _check_law(law)
    max_spikes = check_int("max_spikes", max_spikes, 0, 10000)
    Ds, lams = [], []
    cur = law
    for _ in range(max_spikes):
        i = int(np.argmin(cur.lam_min_D))
        keep = np.ones(len(cur.weights), bool)
        keep[i] = False
        if keep.sum() < 2:
            break
        rest = _replace(cur, weights=cur.weights[keep] / cur.weights[keep].sum(), D=cur.D[keep], zeta=cur.zeta[keep],
                        radius=cur.radius[keep])
        lam = single_sample_spikes(rest, cur.D[i:i + 1])[0]
        if lam is None:
            break
        Ds.append(cur.D[i])
        lams.append(lam)
        cur = rest
    if Ds:
        cur = _replace(cur, notes=cur.notes + (f"{len(Ds)} single-sample spikes split off (split_spikes)",))
    return cur, np.array(Ds).reshape(-1, law.m, law.m), np.array(lams)


def expected_extremes(law: HessianLaw, n, count: int = 5) -> np.ndarray:
    """The D of the law's paths at the weighted quantiles (j - 1/2)/n, j = 1..count, of lambda_min(D): the expected
    lowest D_i of a sample of n points (their spikes: :func:`single_sample_spikes` on ``law.truncated(n)``)."""
    law = _check_law(law)
    n = check_int("n", n, 1)
    count = check_int("count", count, 1, 10000)
    lm = law.lam_min_D
    order = np.argsort(lm, kind="stable")
    cum = np.cumsum(law.weights[order])
    idx = [order[min(int(np.searchsorted(cum, (j - 0.5) / n)), len(order) - 1)] for j in range(1, count + 1)]
    return law.D[np.array(idx)]
