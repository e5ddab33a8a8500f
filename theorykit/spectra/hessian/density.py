"""The bulk density and its counting function (docs/theory.md §4).

    rho(lambda) = (1/(m pi)) lim_{eta -> 0} Im tr S(lambda + i eta),

S the solution of the matrix equation (:mod:`.solver`) on the Herglotz branch, by Newton on the m(m+1)/2 entries of
the symmetric S.  The density is polished by continuation in eta from a coarse eta down to eta = 1e-7 (relative to
the law's scale), never a fixed smoothing; :func:`eigenvalue_counting` integrates it from the edge (substitution
lambda = edge + s^2 for the square-root edge).  The kernel of H (an atom at lambda = ridge) is kept out of rho and
added to the counting function.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..._checks import check_int
from ...errors import TheorykitError
from .law import HessianLaw, check_law, is_psd, kernel_mass, rank_ratio
from .prediction import hessian_prediction, top_edge
from .solver import Core, batched_inv

__all__ = ["ETA_FINAL", "eigenvalue_counting", "hessian_density"]

#: eta at the end of the density polish, relative to the law's scale
ETA_FINAL = 1e-7


def _stieltjes(core: Core, lams: np.ndarray, S0: np.ndarray, eta_final: float):
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
            scale = np.maximum(1.0, np.abs(core.vec(batched_inv(S))).max(axis=-1))
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
    law = check_law(law)
    core = Core(law)
    sc = law.scale
    atom = kernel_mass(law)
    if lambdas is None:
        points = check_int("points", points, 2)
        lo = hessian_prediction(law, solver="continuation" if law.m > 1 or law.kH != 1 else "auto").edge
        hi = top_edge(law, n=law.truncation_n)
        s = np.linspace(0.0, 1.0, points)
        if is_psd(law) and rank_ratio(law) <= 1.0 + 1e-9:
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
    law = check_law(law)
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
