"""Spectral methods with a matrix-valued preprocessing for a multi-index link (docs/theory.md §6, "A matrix
preprocessing").

For y = h(z), z = P^T x in R^k, and T(y) a symmetric k x k matrix, the data matrix acts on R^{d x k}:

    M_n = (1/n) sum_i T(y_i) (x) x_i x_i^T,      (M_n V) = (1/n) sum_i x_i x_i^T V T(y_i)   (V in R^{d x k}).

A scalar T is the case T(y) = t(y) I_k (each outlier then k times; refused here, where the matrix law's
continuation is singular: the scalar method of :mod:`theorykit.spectra.multi` answers it).  This is the random matrix
of the Hessian theory (:mod:`theorykit.spectra.hessian`, docs/theory.md §4) with D_i = -T(y_i) and hard coordinates
zeta_i = z_i: the largest eigenvalues of M_n are minus the lowest of H = (1/n) sum_i D_i (x) x_i x_i^T, and an
outlier's eigenvector has latent part P A (A in R^{k x k}) with squared norm overlap2.  So the bulk edge, the
outliers, their overlaps and the threshold come from the same matrix Marchenko-Pastur law and spike equation,
with m = k and k_H = k.

* The law of (T(Y), z) is the deterministic tensor quadrature of :func:`theorykit.symbolic.links.quadrature_nodes`
  (k <= 3, :data:`LEVEL`); errors are the change under the rule with half the panels.
* T must be bounded above on the support of y (as for a scalar T: otherwise the top of M_n grows with n): lambda_max
  of T is evaluated at the latent pushed outward (z -> c z, c = 2 .. 32), and a T whose top still grows at the last
  doubling by at least half its growth at the one before (no levelling off: y, log(1 + y^2)) is refused.
* The threshold of the j-th outlier is the smallest delta at which the j-th margin (minus the j-th smallest eigenvalue
  of the spike matrix at the bulk edge, :class:`theorykit.spectra.hessian.HessianPrediction`'s margins) turns
  positive: a log grid, then brentq.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import TheorykitError
from ..symbolic.ingredients import link as make_link, matrix_preprocessing
from .classic import check_delta
from .multi import margin_roots

__all__ = ["MatrixSpectralPrediction", "matrix_spectral_law", "matrix_spectral_prediction",
           "matrix_spectral_thresholds"]

#: quadrature level of the law by k (halvings of links.GL_PANELS: 296 nodes per axis at k = 2, 64 at k = 3); the
#: error check uses one more
LEVEL = {1: 2, 2: 2, 3: 1}
#: the boundedness check's outward factors of the latent
PUSH = (2.0, 4.0, 8.0, 16.0, 32.0)


def _top_eig(T: np.ndarray) -> np.ndarray:
    return np.linalg.eigvalsh(T)[..., -1]


def matrix_spectral_law(link, T, delta, level: Optional[int] = None):
    """The Hessian law (D = -T(y), zeta = z) of the matrix preprocessing T for ``link`` at ratio delta, by tensor
    quadrature of the latent (k <= 3); refuses a T that is not bounded above on the support of y."""
    from ..symbolic.links import quadrature_nodes
    from .hessian import HessianLaw

    L = make_link(link)
    if L.k > 3:
        raise TheorykitError(f"matrix preprocessing: k = {L.k} > 3 latent directions is not handled (the quadrature "
                             f"is k <= 3)")
    delta = check_delta(delta)
    Tf = matrix_preprocessing(T, L.k)
    pts, w, desc = quadrature_nodes(L, LEVEL[L.k] if level is None else level)
    keep = w > 1e-300
    pts, w = pts[keep], w[keep] / w[keep].sum()
    z = pts[:, :L.k]
    eps = pts[:, L.k] if L.noisy else None
    Tv = Tf(L.response(z, eps), delta)
    top = float(_top_eig(Tv).max())
    pushed: list = []
    for c in PUSH:  # until T stops being finite out there (overflow of y itself): the check uses what it has
        try:
            with np.errstate(all="ignore"):
                pushed.append(float(_top_eig(Tf(L.response(c * z, eps), delta)).max()))
        except TheorykitError:
            break
    steps = np.diff([top] + pushed)
    if len(steps) >= 2 and steps[-1] > 1e-9 * max(1.0, abs(top)) and steps[-1] >= 0.5 * steps[-2]:  # still growing
        raise TheorykitError(f"T(y) is not bounded above on the support of y (its largest eigenvalue grows from "
                             f"{top:.4g} to {pushed[-1]:.4g} as the latent is pushed out): the top of M_n grows with "
                             f"n; use a bounded T, e.g. y/(1 + |y|)")
    if L.k > 1 and np.allclose(Tv, Tv[:, :1, :1] * np.eye(L.k), rtol=0.0, atol=1e-12 * max(1.0, abs(top))):
        raise TheorykitError("T(y) = t(y) I: the data matrix is k copies of the scalar method's, and the matrix law's "
                             "continuation is singular there; use the scalar preprocessing t(y) "
                             "(theorykit.spectra.multi_spectral_prediction)")
    law = HessianLaw.from_samples(-Tv, z, delta, weights=w, radius=np.linalg.norm(z, axis=1),
                                  source=f"matrix preprocessing: D = -T(y) at the tensor quadrature of z ({desc})")
    return law, max([top] + pushed)


@dataclass(frozen=True)
class MatrixSpectralPrediction:
    """The top of the spectrum of M_n = (1/n) sum_i T(y_i) (x) x_i x_i^T (module docstring).

    eigenvalues: the outliers, descending; overlap2: per outlier, the squared norm of its eigenvector's latent part
    P A; directions: per outlier, A (k x k, row-major, unit Frobenius norm: the null vector of the spike equation);
    margin (> 0 iff an outlier exists); margins (k^2, descending: the j-th > 0 iff there are at least j outliers);
    bulk_edge: the right edge of the bulk; edge_case: "fold" or "domain"
    (docs/theory.md §4); tau: the largest eigenvalue of T over the support; error: the change of the top eigenvalue
    (or of the edge without an outlier) and of the margin under the rule with half the panels; k, delta, method."""

    eigenvalues: tuple
    overlap2: tuple
    directions: tuple
    margin: float
    margins: tuple
    bulk_edge: float
    edge_case: str
    tau: float
    error: dict
    k: int
    delta: float
    method: str
    notes: tuple = field(default_factory=tuple)

    @property
    def outliers(self) -> int:
        return len(self.eigenvalues)

    def as_dict(self) -> dict:
        return {"eigenvalues": list(self.eigenvalues), "overlap2": list(self.overlap2),
                "directions": [list(a) for a in self.directions], "outliers": self.outliers, "margin": self.margin,
                "margins": list(self.margins),
                "bulk_edge": self.bulk_edge, "edge_case": self.edge_case, "tau": self.tau, "error": self.error,
                "k": self.k, "delta": self.delta, "method": self.method, "notes": list(self.notes)}


def _predict(link, T, delta, level):
    from .hessian import hessian_prediction

    law, tau = matrix_spectral_law(link, T, delta, level)
    return hessian_prediction(law, solver="continuation"), tau, law


def matrix_spectral_prediction(link, T, delta, level: Optional[int] = None) -> MatrixSpectralPrediction:
    """Bulk edge, outliers (eigenvalue, overlap^2, latent part) and margin of the matrix preprocessing T at ratio
    delta (module docstring), with the change under the coarser rule (``level`` + 1; default :data:`LEVEL`) as the
    error."""
    k = make_link(link).k
    level = LEVEL[k] if level is None else int(level)
    fine, tau, law = _predict(link, T, delta, level)
    coarse, _, _ = _predict(link, T, delta, level + 1)

    def top(p):
        return -p.outliers[0].lam if p.outliers else -p.edge
    error = {"top": abs(top(fine) - top(coarse)), "margin": abs(fine.margin - coarse.margin),
             "edge": abs(fine.edge - coarse.edge)}
    notes = list(fine.notes)
    if (fine.margin > 0) != (coarse.margin > 0):
        notes.append("the outlier's existence differs between the rule and the coarser one: delta is at the "
                     "threshold within the quadrature's error")
    return MatrixSpectralPrediction(
        tuple(-o.lam for o in fine.outliers), tuple(o.overlap2 for o in fine.outliers),
        tuple(tuple(float(v) for v in o.direction) for o in fine.outliers), float(fine.margin), tuple(fine.margins),
        float(-fine.edge),
        fine.edge_case, tau, error, k, float(delta), f"Hessian theory with m = k_H = {k}: {law.source}",
        tuple(notes))


def _margins(link, T, delta, level) -> Optional[tuple]:
    try:
        return tuple(_predict(link, T, delta, level)[0].margins)
    except TheorykitError:
        return None


def matrix_spectral_thresholds(link, T, delta_range=(0.1, 100.0), points: int = 13, xtol: float = 1e-6,
                               level: Optional[int] = None) -> list:
    """Per outlier j = 1, 2, ..: the smallest delta with at least j outliers, where the j-th margin turns positive:
    the first sign change on a log grid of ``delta_range``, then brentq, on the rule and on the coarser one
    (:func:`theorykit.spectra.multi.margin_roots`).  Returns [{outlier, delta_u, error, bracket, note}], one per
    margin up to the first that does not turn positive in the range (delta_u None there, with the note); error = xtol
    plus the change of the root under the coarser rule."""
    k = make_link(link).k
    level = LEVEL[k] if level is None else int(level)
    return margin_roots(lambda dl, lv: _margins(link, T, dl, lv), delta_range, points, k * k, level,
                        (level, level + 1), xtol, "outlier", lambda j: f"{j + 1}", stop_at_missing=True)
