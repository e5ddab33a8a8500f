"""Spectral methods for a multi-index link (k > 1) with a scalar preprocessing (docs/theory.md §6, "Multi-index
links").

M_n = (1/n) sum_i T(y_i) x_i x_i^T with y = h(z), z = P^T x in R^k.  The bulk is the single-index one: it depends on
the law of Z = T(Y) only, through psi_delta(lam) = lam (1/delta + E[Z/(lam - Z)]) and its minimiser lam_bar.  The
spike is now a k x k matrix.  Outliers sit where psi(lam) is an eigenvalue of Phi(lam) = lam E[Z zz^T/(lam - Z)];
equivalently, where the matrix margin

    Mg(lam) = delta E[Z (zz^T - I)/(lam - Z)] - I

has a zero eigenvalue (k = 1: the scalar margin of :mod:`theorykit.spectra.classic`).  So:

* every eigenvalue mu_j of Mg(lam_bar) that is > 0 gives one outlier, at the root lam*_j > lam_bar of the j-th
  eigenvalue of Mg(lam) (it tends to -1 as lam -> infinity);
* its eigenvalue is psi(lam*_j); its eigenvector's latent part points along u_j, the j-th eigenvector of
  Mg(lam*_j), with squared norm psi'(lam*_j) / (psi'(lam*_j) - u_j^T Phi'(lam*_j) u_j), where
  Phi'(lam) = -E[Z^2 zz^T/(lam - Z)^2] (Hellmann-Feynman; k = 1: the classic overlap);
* the threshold of direction j is the smallest delta at which mu_j(Mg(lam_bar(delta); delta)) > 0.

The law of (Z, z) comes from the deterministic tensor quadrature of
:func:`theorykit.symbolic.links.quadrature_nodes` (k <= 3); errors are the change under the rule with half the
panels.  A matrix-valued preprocessing is :mod:`theorykit.spectra.matrix_preprocessing`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy import optimize

from ..errors import TheorykitError
from ..symbolic.ingredients import link as make_link, preprocessing as make_preprocessing
from .classic import SpectralLaw, bulk_edge, check_delta, negative_step

__all__ = ["MultiSpectralLaw", "MultiSpectralPrediction", "multi_spectral_law", "multi_outliers",
           "multi_spectral_prediction", "multi_spectral_thresholds"]


@dataclass(frozen=True, eq=False)
class MultiSpectralLaw:
    """The weighted law of (Z, z): ``bulk`` (a :class:`SpectralLaw` of Z, for psi and lam_bar), ``weights`` (N,),
    ``Z`` (N,), ``zz`` (N, k, k) = z z^T at the nodes; ``k``; ``method``."""

    bulk: SpectralLaw
    weights: np.ndarray
    Z: np.ndarray
    zz: np.ndarray
    k: int
    method: str

    def _r(self, lam: float) -> np.ndarray:
        gap = lam - self.Z
        if np.any(gap <= 0):  # lam at tau with a node there (the boundary case): step off the pole
            gap = np.maximum(gap, 1e-12 * max(1.0, abs(lam)))
        return 1.0 / gap

    def margin_matrix(self, lam: float, delta: float) -> np.ndarray:
        """Mg(lam) = delta E[Z (zz^T - I)/(lam - Z)] - I (k x k)."""
        c = self.weights * self.Z * self._r(lam)
        return delta * (np.einsum("n,nij->ij", c, self.zz) - c.sum() * np.eye(self.k)) - np.eye(self.k)

    def dphi_matrix(self, lam: float) -> np.ndarray:
        """Phi'(lam) = -E[Z^2 zz^T/(lam - Z)^2]."""
        r = self._r(lam)
        return -np.einsum("n,nij->ij", self.weights * self.Z ** 2 * r * r, self.zz)


def multi_spectral_law(link, T, delta, level: int = 0) -> MultiSpectralLaw:
    """The law of (T(Y, delta), z z^T) by tensor Gauss-Legendre quadrature of z (k <= 3; noiseless or noisy); tau,
    the sup of T over the support of y, by :func:`theorykit.symbolic.admissible.check_preprocessing` (which refuses
    an inadmissible T in one line)."""
    from ..symbolic.admissible import check_preprocessing
    from ..symbolic.links import quadrature_nodes

    L = make_link(link)
    if L.k > 3:
        raise TheorykitError(f"multi-index spectral theory: k = {L.k} > 3 latent directions is not handled (the "
                             f"quadrature is k <= 3)")
    delta = check_delta(delta)
    Tp = make_preprocessing(T)
    tau = check_preprocessing(L, Tp, delta)
    pts, w, desc = quadrature_nodes(L, level)
    z = pts[:, :L.k]
    y = L.response(z, pts[:, L.k] if L.noisy else None)
    Z = Tp(y, delta)
    keep = w > 1e-300
    w, Z, z = w[keep] / w[keep].sum(), Z[keep], z[keep]
    tau = max(float(Z.max()), float(tau))
    bulk = SpectralLaw.from_arrays(w, Z, np.ones_like(Z), tau, f"quadrature: {desc}")
    return MultiSpectralLaw(bulk, w, Z, np.einsum("ni,nj->nij", z, z), L.k,
                            f"tensor quadrature of z ({desc}); tau = sup T over the support of y")


@dataclass(frozen=True)
class MultiSpectralPrediction:
    """The top of the spectrum of M_n for a k-index link: ``eigenvalues`` (the outliers, descending), ``overlap2``
    (per outlier: the squared norm of its eigenvector's latent part), ``directions`` (per outlier: the unit k-vector
    u_j its latent part points along, in the latent coordinates), ``subspace_overlap2`` (mean of overlap2: the
    squared Frobenius overlap of the outliers' eigenvectors with the latent subspace, per outlier; 0 without one),
    ``margins`` (the k eigenvalues of Mg(lam_bar), descending: > 0 means an outlier), ``bulk_edge``, ``lam_bar``,
    ``edge_case``, ``tau``, ``delta``, ``method``."""

    eigenvalues: tuple
    overlap2: tuple
    directions: tuple
    subspace_overlap2: float
    margins: tuple
    bulk_edge: float
    lam_bar: float
    edge_case: str
    tau: float
    delta: float
    method: str
    notes: tuple = field(default_factory=tuple)

    @property
    def outliers(self) -> int:
        return len(self.eigenvalues)

    def as_dict(self) -> dict:
        return {"eigenvalues": list(self.eigenvalues), "overlap2": list(self.overlap2),
                "directions": [list(u) for u in self.directions], "subspace_overlap2": self.subspace_overlap2,
                "outliers": self.outliers, "margins": list(self.margins), "bulk_edge": self.bulk_edge,
                "lam_bar": self.lam_bar, "edge_case": self.edge_case, "tau": self.tau, "delta": self.delta,
                "method": self.method, "notes": list(self.notes)}


def _eig_desc(A: np.ndarray):
    vals, vecs = np.linalg.eigh((A + A.T) / 2)
    return vals[::-1], vecs[:, ::-1]


def multi_outliers(law: MultiSpectralLaw, delta: float) -> MultiSpectralPrediction:
    """Outliers, their latent directions and overlaps, and the bulk edge (module docstring)."""
    delta = check_delta(delta)
    lam_bar, edge_case = bulk_edge(law.bulk, delta)
    edge = law.bulk.psi(lam_bar, delta)
    mu0, _ = _eig_desc(law.margin_matrix(lam_bar, delta))
    scale = max(lam_bar, abs(law.bulk.tau), 1e-300)
    eigs, ovs, dirs = [], [], []
    for j in range(law.k):
        if not mu0[j] > 0:
            break

        def f(lam, j=j):
            return _eig_desc(law.margin_matrix(lam, delta))[0][j]
        step = negative_step(f, lam_bar, scale, "multi-index spectral: could not bracket an outlier")
        lam_star = float(optimize.brentq(f, lam_bar, lam_bar + step, xtol=1e-14 * scale,
                                         rtol=4 * np.finfo(float).eps, maxiter=500))
        u = _eig_desc(law.margin_matrix(lam_star, delta))[1][:, j]
        dps = law.bulk.dpsi(lam_star, delta)
        ov = dps / (dps - float(u @ law.dphi_matrix(lam_star) @ u))
        eigs.append(float(law.bulk.psi(lam_star, delta)))
        ovs.append(float(ov))
        dirs.append(tuple(float(v) for v in (u if u[np.argmax(np.abs(u))] > 0 else -u)))
    sub = float(np.mean(ovs)) if ovs else 0.0
    return MultiSpectralPrediction(tuple(eigs), tuple(ovs), tuple(dirs), sub, tuple(float(m) for m in mu0),
                                   float(edge), float(lam_bar), edge_case, law.bulk.tau, delta, law.method)


def multi_spectral_prediction(link, T, delta, level: int = 0) -> MultiSpectralPrediction:
    """:func:`multi_outliers` of :func:`multi_spectral_law`."""
    return multi_outliers(multi_spectral_law(link, T, delta, level), delta)


def _margins(link, T, delta, level) -> Optional[np.ndarray]:
    try:
        law = multi_spectral_law(link, T, delta, level)
        lam_bar, _ = bulk_edge(law.bulk, delta)
        return _eig_desc(law.margin_matrix(lam_bar, delta))[0]
    except TheorykitError:
        return None


def multi_spectral_thresholds(link, T, delta_range=(1e-2, 1e2), points: int = 25, xtol: float = 1e-9,
                              level: int = 1) -> list:
    """Per direction j = 1..k, the smallest delta with an outlier in direction j: the first sign change of the j-th
    margin eigenvalue on a log grid of ``delta_range``, then brentq.  Returns [{direction, delta_u, error, bracket,
    note}] with delta_u None when the margin does not turn positive in the range; error = xtol plus the change of
    the root under the finer quadrature (``level`` - 1)."""
    k = make_link(link).k
    return margin_roots(lambda dl, lv: _margins(link, T, dl, lv), delta_range, points, k, level,
                        (max(level - 1, 0), level), xtol, "direction", lambda j: "in this direction")


def margin_roots(margins_at, delta_range, points: int, count: int, scan_level: int, levels: tuple, xtol: float,
                 key: str, label, stop_at_missing: bool = False) -> list:
    """The thresholds of a family of margins: for j < count, the smallest delta in ``delta_range`` where
    margins_at(delta, level)[j] turns positive (the first sign change on a log grid of ``points`` at
    ``scan_level``, then brentq at levels[0], the reported root, and at levels[1], its check).  margins_at returns a
    sequence, or None where it is undefined.  Returns [{key: j + 1, delta_u, error, bracket, note}] (error = xtol
    plus the change of the root between the two levels; label(j) names the margin in the notes); with
    ``stop_at_missing`` the list ends at the first margin that does not turn positive in the range."""
    lo, hi = (float(v) for v in delta_range)
    if not (0 < lo < hi and math.isfinite(hi)):
        raise TheorykitError(f"delta_range must satisfy 0 < lo < hi, got {delta_range!r}")
    grid = np.geomspace(lo, hi, int(points))
    M = [margins_at(float(dl), scan_level) for dl in grid]
    out = []
    for j in range(count):
        row: dict = {key: j + 1, "delta_u": None, "error": None, "bracket": None, "note": ""}
        vals = [float(m[j]) if m is not None and j < len(m) else math.nan for m in M]
        hit = next((i for i in range(1, len(grid)) if vals[i] > 0 and vals[i - 1] <= 0), None)
        if vals[0] > 0:
            row["note"] = f"an outlier {label(j)} already at delta = {lo:g}: delta_u < {lo:g}"
        elif hit is None:
            row["note"] = f"no outlier {label(j)} for delta in [{lo:g}, {hi:g}]"
        else:
            a, b = float(grid[hit - 1]), float(grid[hit])

            def g(dl, lv, j=j):
                m = margins_at(dl, lv)
                return float(m[j]) if m is not None else math.nan
            roots = [float(optimize.brentq(g, a, b, args=(lv,), xtol=xtol)) for lv in levels]
            row.update(delta_u=roots[0], error=xtol + abs(roots[0] - roots[1]), bracket=[a, b])
        out.append(row)
        if stop_at_missing and row["delta_u"] is None and not vals[0] > 0:
            break
    return out
