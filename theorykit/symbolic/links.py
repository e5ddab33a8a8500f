"""Link analysis (docs/theory.md §2): exponents, easy and hard subspaces, and the spectral threshold delta_alg.

Single index, y = h(z, eps):
  information exponent  = min{k >= 1 : E[y He_k(z)] != 0};
  generative exponent   = min{k >= 1 : E[He_k(z) | y] is not identically 0}, tested through E[g(y) He_k(z)] for the
                          test functions g(y) = y^p (exact for polynomial links) or through binned conditional
                          expectations (other links);
  delta_alg             = 1 / E_y[(E[z^2|y] - 1)^2] when E[z|y] = 0, and 0 when E[z|y] is not identically 0
                          (weak recovery at any delta > 0).
Multi-index: the easy subspace is the closure of the rule "v is learnable when E[v^T z p(y, U^T z)] != 0 for some
test function p, U the span learned so far", with p running over the monomials of degree <= max_degree in
(y, U^T z); exact by Gaussian moments for polynomial links.  With no easy direction,
  delta_alg = 1 / sup_{M >= 0, ||M||_F = 1} ||E_y[G(y) M G(y)]||_F,  G(y) = E[z z^T | y] - I_k
(Troiani et al. 2024); the map M -> E[G M G] preserves the PSD cone, so the sup is its spectral radius on
symmetric matrices (Krein-Rutman), computed from E[G (x) G].
"""
from __future__ import annotations

import functools
import itertools
import math
import time
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
import sympy as sp

from .. import conventions as cv
from ..errors import TheorykitError
from ..rules import (conditional_means, gauss_legendre_normal, half_gauss_hermite, monte_carlo_normal, quantile_bins,
                     quantile_bins_many, round_significant, tensor)
from .gaussian import (expectation, truncate, breakpoints, NotClosed, interior_point, nonzero_at_points, in_child,
                       start_in_child)
from .ingredients import Link, link as make_link
from .lambdify import lambdify_safe


@dataclass(frozen=True)
class DeltaAlg:
    """delta_alg: exact (SymPy or None), value (float or None when infinite), error (absolute), method."""

    exact: Optional[sp.Expr]
    value: Optional[float]
    error: float
    method: str

    @property
    def infinite(self) -> bool:
        """delta_alg = +infinity: E[zz^T|y] = I, so no spectral method recovers any direction at any delta."""
        return self.value is None

    def as_dict(self):
        """JSON: value null with "infinite": true and a "reason" when delta_alg is infinite (never inf or "inf");
        error null there too."""
        out = {"exact": None if self.exact is None else str(self.exact), "value": self.value,
               "error": (self.error if self.value is not None else None), "infinite": self.infinite,
               "method": self.method}
        if self.infinite:
            out["reason"] = ("E[zz^T|y] = I (within the error of the method): no spectral weak recovery at any delta, "
                             "so the threshold delta_alg does not exist (it is +infinity)")
        return out


@dataclass(frozen=True)
class LinkAnalysis:
    """Result of :func:`analyse_link`.  easy_basis / hard_basis: (k, dim) arrays with orthonormal columns."""

    link: Link
    k: int
    information_exponent: Optional[int]
    generative_exponent: Optional[int]
    easy_basis: np.ndarray
    hard_basis: np.ndarray
    delta_alg: DeltaAlg
    method: str
    notes: tuple = field(default_factory=tuple)
    #: delta_alg of the hard subspace given the easy coordinates (:func:`delta_alg_hard`); None when the link lacks
    #: easy or hard directions (then it is delta_alg itself, or there is nothing left to learn) or when it was not
    #: computed (``hard_reason`` says why)
    delta_alg_hard: Optional[DeltaAlg] = None
    hard_reason: str = ""

    @property
    def easy_dim(self) -> int:
        return self.easy_basis.shape[1]

    @property
    def hard_dim(self) -> int:
        return self.hard_basis.shape[1]

    def exponent_reasons(self) -> dict:
        """Why an exponent is None: {"information_exponent": reason, "generative_exponent": reason} (only the None
        ones)."""
        out = {}
        for key, value, top in (("information_exponent", self.information_exponent, 8),
                                ("generative_exponent", self.generative_exponent, 6)):
            if value is not None:
                continue
            if self.k != 1:
                out[key] = (f"defined here for single-index links only (this link has k = {self.k} latent "
                            "directions; see easy_dim, hard_dim and delta_alg)")
            else:
                out[key] = f"none found up to degree {top}: the exponent is > {top} (or infinite)"
        return out

    def as_dict(self) -> dict:
        """JSON: an exponent that is null comes with "<name>_reason" saying why; "reindexed" maps the user's latent
        names to the ones used when unused indices were dropped ({"z5": "z"} for y = z5^2; {} when none were)."""
        reasons = {f"{k}_reason": v for k, v in self.exponent_reasons().items()}
        return {"link": str(self.link.expr), "name": self.link.name, "k": self.k,
                "information_exponent": self.information_exponent,
                "generative_exponent": self.generative_exponent, **reasons, "easy_dim": self.easy_dim,
                "hard_dim": self.hard_dim, "easy_basis": self.easy_basis.tolist(),
                "hard_basis": self.hard_basis.tolist(), "delta_alg": self.delta_alg.as_dict(),
                "delta_alg_hard": self.delta_alg_hard.as_dict() if self.delta_alg_hard is not None else None,
                **({"delta_alg_hard_reason": self.hard_reason} if self.delta_alg_hard is None else {}),
                "method": self.method, "notes": list(self.notes), "reindexed": dict(self.link.reindexed)}


def _is_polynomial(link: Link) -> bool:
    return link.expr.is_polynomial(*link.variables)


def _nonzero(e) -> bool:
    """Whether an :class:`Expectation` is non-zero (exactly, or beyond 20 error estimates and 1e-9)."""
    if e.exact is not None and not e.exact.free_symbols:
        return bool(sp.simplify(e.exact) != 0)
    return abs(e.value) > max(20 * e.error, 1e-9)


def _E(expr, link: Link):
    return expectation(expr, link.variables, time_limit=2.0, allow_sympy=False)


# ------------------------------------------------------------------------------ numerical conditional moments
#: composite Gauss-Legendre panels (of GL_ORDER nodes) per axis of :func:`quadrature_nodes` at level 0, by the number
#: of Gaussian variables: 200000 nodes in 1-D, 1200 per axis in 2-D, 128 in 3-D.  Even counts, so that 0 is a panel
#: edge: links and preprocessings kink or jump on the coordinate planes (|z1 z2 z3|, sign(z1)), and a kink inside a
#: panel costs the rule its order (15 panels in 3-D put the top eigenvalue of a 3-index spectral method 3% off)
GL_PANELS = {1: 25_000, 2: 150, 3: 16}
#: nodes per panel of the composite Gauss-Legendre rules
GL_ORDER = 8


def quadrature_nodes(link: Link, level: int = 0):
    """Quadrature nodes and weights for the law of (z, eps) (eps only for noisy links; docs/theory.md §2).

    Returns (points (N, k [+1]), weights (N,) summing to 1 up to 1e-22, description).  One to three Gaussian
    variables: tensor composite Gauss-Legendre (mirror-symmetric) on [-10, 10] per axis with weights times the density
    (:func:`theorykit.rules.gauss_legendre_normal`), GL_PANELS panels of GL_ORDER = 8 nodes per axis at level 0
    (200000 nodes in 1-D, 1200 per axis in 2-D, 128 in 3-D); ``level`` halves the number of panels ``level`` times,
    rounding down, with at least one panel (so 2-D level 2 has 37 panels, 296 nodes per axis; the description says
    the count).  More variables: 2e6 seeded samples.
    """
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or level < 0:
        raise TheorykitError(f"level must be an integer >= 0, got {level!r}")
    dims = len(link.variables)
    panels = GL_PANELS.get(dims)
    if panels is None:
        mc = monte_carlo_normal(2_000_000, dims, 12345 + level)
        return mc.nodes, mc.weights, "Monte Carlo (2e6 samples)"
    per_axis = GL_ORDER * max(1, panels >> min(int(level), 64))
    nodes, weights = _gl_grid(per_axis, dims)
    return nodes, weights, f"Gauss-Legendre tensor grid, {per_axis} nodes per axis on [-10, 10]"


@functools.lru_cache(maxsize=8)
def _gl_grid(per_axis: int, dims: int) -> tuple:
    """The tensor grid of :func:`quadrature_nodes`, built once per size (read-only arrays; the 3-D grid holds 67 MB):
    the hard threshold's average asks for the same 1-D grid at every node."""
    rule = tensor(gauss_legendre_normal(per_axis, 10.0, GL_ORDER), dims)
    nodes, weights = rule.nodes, rule.weights
    nodes.setflags(write=False)
    weights.setflags(write=False)
    return nodes, weights


def _binned_projection(y, w, feats, bins):
    """Conditional expectations of feats (N, p) given y, by grouping: discrete y by value, else quantile bins
    (:func:`theorykit.rules.quantile_bins` and :func:`theorykit.rules.conditional_means`).

    Returns (probabilities (G,), conditional means (G, p)) over the non-empty groups.
    """
    return _grouped(quantile_bins(y, w, bins), feats, w)


def _grouped(index, feats, w):
    P, means = conditional_means(index, feats, w)
    keep = P > 0
    return P[keep], means[keep]


def _numeric_G_operator(link: Link, bins: tuple, level: int = 0, response=None):
    """E[G (x) G] restricted to symmetric k x k matrices (as k^2 x k^2 arrays), G(y) = E[zz^T|y] - I: one per number
    of quantile bins in ``bins``, from one evaluation of the nodes and the response (``response(z, eps)`` in place of
    link.response when given)."""
    pts, w, method = quadrature_nodes(link, level)
    k = link.k
    z = pts[:, :k]
    eps = pts[:, k] if link.noisy else None
    y = (response or link.response)(z, eps)
    feats = np.stack([z[:, i] * z[:, j] for i in range(k) for j in range(k)], axis=1)
    ops = []
    for index in quantile_bins_many(y, w, bins):  # one sort of y for every number of bins
        P, means = _grouped(index, feats, w)
        Gs = means.reshape(-1, k, k) - np.eye(k)
        Gs = (Gs + Gs.transpose(0, 2, 1)) / 2
        ops.append(np.einsum("g,gij,gkl->ikjl", P / P.sum(), Gs, Gs).reshape(k * k, k * k))
    return ops, method


def _spectral_radius_sym(op: np.ndarray, k: int) -> float:
    """Largest eigenvalue of M -> E[G M G] on symmetric matrices (op acts on vec(M), row-major)."""
    S = _symmetriser(k)
    A = S @ ((op + op.T) / 2) @ S
    return float(np.linalg.eigvalsh(A).max())


def _delta_alg_from_rho(rho: float, err: float, method: str) -> DeltaAlg:
    if rho <= 5 * err:
        return DeltaAlg(None, None, float("inf"),
                        f"E[zz^T|y] = I within error ({method}): no spectral weak recovery (delta_alg infinite)")
    return DeltaAlg(None, float(1.0 / rho), float(err / rho ** 2), method)


def delta_alg_grid(link: Link, level: int = 0, response=None) -> DeltaAlg:
    """Noiseless single index: fine 1-D grid in z, quantile bins in y, Richardson in the number of bins; its error
    the bins' change plus the change to the grid with half the panels.  ``level``: the grid's (as
    :func:`quadrature_nodes`), the coarse one at level + 1 (the hard threshold's averages use level 1: half the
    cost per node).  ``response(z, eps)``: y in place of link.response (the hard threshold's nodes share one
    lambdification of the link given symbolic easy coordinates)."""
    ops, method = _numeric_G_operator(link, (1000, 2000, 4000), level, response)
    vals = [_spectral_radius_sym(op, link.k) for op in ops]
    rho = vals[2] + (vals[2] - vals[1]) / 3
    coarse = _spectral_radius_sym(_numeric_G_operator(link, (4000,), level + 1, response)[0][0], link.k)
    err = abs(vals[2] - vals[1]) + abs(vals[2] - coarse) + 1e-12  # bins, plus the grid (halved)
    return _delta_alg_from_rho(rho, err, f"quadrature: binned E[z^2|y] (1000-4000 quantile bins, Richardson), "
                                         f"{method}")


def _additive_noise_scale(link: Link):
    """s if y = h(z) + s*eps with constant s != 0 and k <= 3 latent variables (the reach of
    :func:`delta_alg_additive`), else None."""
    if not link.noisy or link.k > max(ADDITIVE_Z_NODES):
        return None
    s = sp.diff(link.expr, cv.EPS)
    if s.free_symbols or s == 0:
        return None
    return float(s)


#: nodes per axis of delta_alg_additive's tensor rule in z (coarse, fine), by the number k of latent variables
ADDITIVE_Z_NODES = {1: (2000, 4000), 2: (400, 800), 3: (96, 144)}
#: width of a panel of delta_alg_additive's y rule, in units of the noise scale |s| (fine rule; the coarse one has
#: panels twice as wide), GL_ORDER nodes each
ADDITIVE_Y_PANEL = 1.0
#: the kernel phi_s(y - h) is dropped where |y - h| > ADDITIVE_CUT |s| (relative size exp(-ADDITIVE_CUT^2 / 2))
ADDITIVE_CUT = 9.0
#: z nodes whose weight is below this fraction of the largest are dropped
ADDITIVE_NODE_CUT = 1e-20


def _noiseless_part_on_rule(link: Link, nz: int):
    """(z (N, k), weights (N,), h(z) (N,)), h(z) the link's y at eps = 0, on the tensor rule of ``nz`` composite
    Gauss-Legendre nodes per axis times the normal density, nodes below ADDITIVE_NODE_CUT of the largest weight
    dropped; None where h is not finite."""
    k = link.k
    rz = tensor(gauss_legendre_normal(nz, 10.0, GL_ORDER), k)
    z, w = rz.nodes, rz.weights
    keep = w > ADDITIVE_NODE_CUT * w.max()
    z, w = z[keep], w[keep]
    with np.errstate(all="ignore"):
        hz = np.broadcast_to(np.asarray(link.numpy(*[z[:, i] for i in range(k)], np.zeros(len(w))), dtype=float),
                             w.shape)
    if not np.all(np.isfinite(hz)):
        return None
    return z, w, hz


def _additive_operator(link: Link, s: float, nz: int, panel: float) -> Optional[np.ndarray]:
    """E[G (x) G] (as in :func:`_numeric_G_operator`) for y = h(z) + s eps: the conditional moments
    E[z z^T | y] = E_z[z z^T phi_s(y - h(z))] / E_z[phi_s(y - h(z))] by the tensor rule of ``nz`` composite
    Gauss-Legendre nodes per axis in z (:func:`theorykit.rules.gauss_legendre_normal`), then E_y by composite
    Gauss-Legendre in y on panels of width ``panel`` |s| that lie within ADDITIVE_CUT |s| of some h(z).  The z nodes
    are sorted by h, so each block of y nodes meets only the nodes within the kernel's cut.  None where h is not
    finite at a node of non-negligible weight."""
    k = link.k
    got = _noiseless_part_on_rule(link, nz)
    if got is None:
        return None
    z, w, hz = got
    order = np.argsort(hz, kind="stable")
    z, w, hz = z[order], w[order], hz[order]
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    feats = np.stack([z[:, i] * z[:, j] for i, j in pairs], axis=1)
    a = abs(s)
    width = panel * a
    lo = hz[0] - ADDITIVE_CUT * a
    # the panels of the y rule: those within the cut of a panel that holds some h(z)
    held = np.unique(np.floor((hz - lo) / width).astype(np.int64))
    reach = int(math.ceil(ADDITIVE_CUT / panel)) + 1
    panels = np.unique((held[:, None] + np.arange(-reach, reach + 1)[None, :]).ravel())
    u, wu = np.polynomial.legendre.leggauss(GL_ORDER)
    ty = (lo + (panels[:, None] + 0.5 + 0.5 * u[None, :]) * width).ravel()
    wy = np.broadcast_to(0.5 * width * wu[None, :], (len(panels), GL_ORDER)).ravel()
    op = np.zeros((k, k, k, k))
    norm = 1.0 / (a * math.sqrt(2 * math.pi))
    for block in np.array_split(np.arange(len(ty)), max(1, len(ty) // 64)):
        i0 = int(np.searchsorted(hz, ty[block[0]] - ADDITIVE_CUT * a))
        i1 = int(np.searchsorted(hz, ty[block[-1]] + ADDITIVE_CUT * a, side="right"))
        if i1 <= i0:
            continue
        K = np.exp(-0.5 * ((ty[block, None] - hz[None, i0:i1]) / a) ** 2) * (norm * w[i0:i1])
        p = K.sum(axis=1)
        M = K @ feats[i0:i1]
        safe = np.where(p > 0, p, 1.0)
        G = np.zeros((len(block), k, k))
        for q, (i, j) in enumerate(pairs):
            G[:, i, j] = G[:, j, i] = np.where(p > 0, M[:, q] / safe, 0.0)
        G -= np.eye(k)
        op += np.einsum("g,gij,gkl->ikjl", wy[block] * p, G, G)
    return op.reshape(k * k, k * k)


def _additive_levels(link: Link):
    """(inner link u = h(z) + s eps, s, [(lo, hi, value)] intervals of u) when y = g(u) with g piecewise constant of
    finitely many values (sign, Heaviside, floor, ... of one additive-noise argument), else None."""
    if not link.noisy or link.k > max(ADDITIVE_Z_NODES):
        return None
    jumps = [a for a in link.expr.atoms(sp.sign, sp.Heaviside, sp.floor, sp.ceiling) if a.args[0].has(cv.EPS)]
    t = sp.Symbol("t", real=True)
    for atom in jumps:
        u = atom.args[0]
        s = sp.diff(u, cv.EPS)
        if s.free_symbols or s == 0:
            continue
        g = sp.simplify(link.expr.subs(cv.EPS, (t - u.subs(cv.EPS, 0)) / s))
        if g.free_symbols != {t}:
            continue
        try:
            cuts = [float(sp.N(c)) for c in breakpoints(g, t)]
        except NotClosed:
            continue
        if not cuts or len(cuts) > 64:
            continue
        gf = sp.lambdify(t, g, modules=["numpy"])
        edges = [-math.inf] + cuts + [math.inf]
        pieces: list[tuple[float, float, float]] = []
        constant = True
        for lo, hi in zip(edges[:-1], edges[1:]):
            a, b = (hi - 1.0 if lo == -math.inf else lo), (lo + 1.0 if hi == math.inf else hi)
            probe = np.asarray(gf(np.linspace(a, b, 7)[1:-1]), dtype=float)
            if not np.all(np.isfinite(probe)) or np.ptp(probe) > 1e-12 * max(1.0, float(np.abs(probe).max())):
                constant = False
                break
            pieces.append((lo, hi, float(probe[0])))
        if constant and pieces:
            inner = Link(link.name, u, link.k, link.latent)
            return inner, float(s), pieces
    return None


def _level_operator(link: Link, s: float, pieces, nz: int) -> Optional[np.ndarray]:
    """E[G (x) G] for y = g(h(z) + s eps) with g constant on the intervals ``pieces``: for each value v,
    P(y = v) = E_z[sum over its intervals (Phi((hi - h) / s) - Phi((lo - h) / s))] and E[zz^T 1{y = v}] alike, on the
    tensor rule of ``nz`` nodes per axis; None where h is not finite there."""
    from scipy.special import ndtr

    k = link.k
    got = _noiseless_part_on_rule(link, nz)
    if got is None:
        return None
    z, w, hz = got
    a = abs(s)
    zz = np.einsum("ni,nj->nij", z, z)
    op = np.zeros((k, k, k, k))
    for v in sorted({val for _, _, val in pieces}):
        mass = np.zeros_like(w)
        for lo, hi, val in pieces:
            if val == v:
                # P(lo < h + s eps < hi | z); s < 0 mirrors eps, which has the same law
                mass += ndtr((hi - hz) / a) - ndtr((lo - hz) / a)
        P = float(w @ mass)
        if P <= 0:
            continue
        G = np.einsum("n,nij->ij", w * mass, zz) / P - np.eye(k)
        op += P * np.einsum("ij,kl->ikjl", G, G)
    return op.reshape(k * k, k * k)


def delta_alg_levels(link: Link) -> Optional[DeltaAlg]:
    """y = g(h(z) + s eps), g piecewise constant with finitely many values, k <= 3 (docs/theory.md §2, "Additive
    Gaussian noise"): y is discrete, and its probabilities and E[zz^T 1{y = v}] are smooth integrals over z of normal
    CDFs (:func:`_level_operator`).  Error: the change against the coarser rule of ADDITIVE_Z_NODES.  None for other
    links."""
    got = _additive_levels(link)
    if got is None:
        return None
    inner, s, pieces = got
    k = link.k

    nc, nf = ADDITIVE_Z_NODES[k]
    coarse, fine = _level_operator(inner, s, pieces, nc), _level_operator(inner, s, pieces, nf)
    if coarse is None or fine is None:
        return None
    rc, rf = _spectral_radius_sym(coarse, k), _spectral_radius_sym(fine, k)
    cuts = sorted({lo for lo, _, _ in pieces if math.isfinite(lo)})
    return _delta_alg_from_rho(rf, abs(rf - rc) + 1e-12 * max(1.0, abs(rf)),
                               f"quadrature: y a piecewise-constant function of u = {inner.expr} (jumps at u = "
                               f"{', '.join(f'{c:g}' for c in cuts)}; {len({v for _, _, v in pieces})} values), "
                               f"P(y = v) and E[zz^T 1(y = v)] as normal CDFs integrated on a tensor Gauss-Legendre "
                               f"rule in z ({nf} nodes per axis); error: against {nc} nodes per axis")


def delta_alg_additive(link: Link, s: float) -> Optional[DeltaAlg]:
    """y = h(z) + s eps with k <= 3 latent variables (docs/theory.md §2, "Additive Gaussian noise"): the noise makes
    the law of y smooth on the scale |s|, so E[z z^T | y] is a ratio of two smooth integrals over z, computed on a
    tensor Gauss-Legendre rule, and E_y[G (x) G] by Gauss-Legendre in y (:func:`_additive_operator`).  Error: the
    change against the coarser rule of ADDITIVE_Z_NODES and y panels twice as wide.  None where h is not finite
    on the rule."""
    k = link.k
    (nc, nf) = ADDITIVE_Z_NODES[k]
    got = additive_operators(link, s, (nc, nf))
    if got is None:
        return None
    rc, rf = _spectral_radius_sym(got[0], k), _spectral_radius_sym(got[1], k)
    return _delta_alg_from_rho(rf, abs(rf - rc) + 1e-12 * max(1.0, abs(rf)),
                               f"quadrature: additive Gaussian noise (s = {s:g}), E[zz^T|y] by a tensor "
                               f"Gauss-Legendre rule in z ({nf} nodes per axis) and E_y by Gauss-Legendre in y "
                               f"(panels of width {ADDITIVE_Y_PANEL:g} s); error: against {nc} nodes per axis "
                               "and panels twice as wide")


def additive_operators(link: Link, s: float, nodes: tuple) -> Optional[tuple]:
    """(coarse, fine) E_y[G (x) G] of y = h(z) + s eps (:func:`_additive_operator`): ``nodes`` = (coarse, fine) per
    axis in z, the coarse rule with y panels twice as wide; None where h is not finite on a rule."""
    coarse = _additive_operator(link, s, nodes[0], 2 * ADDITIVE_Y_PANEL)
    fine = _additive_operator(link, s, nodes[1], ADDITIVE_Y_PANEL)
    return None if coarse is None or fine is None else (coarse, fine)


def _strip_monotone(link: Link) -> tuple:
    """(inner link, what was removed): y = g(u) with g strictly monotone on the reals (a non-zero factor, an added
    constant, tanh, erf, atan, exp, ...), peeled repeatedly; conditioning on y is conditioning on u."""
    from sympy.calculus.singularities import is_strictly_decreasing, is_strictly_increasing

    e, t = link.expr, sp.Symbol("t", real=True)
    peeled: list[str] = []
    for _ in range(8):
        if e.is_Add and any(a.is_number for a in e.args):
            e, peeled = sp.Add(*[a for a in e.args if not a.is_number]), peeled + ["an added constant"]
        elif e.is_Mul and any(a.is_number for a in e.args):
            e, peeled = sp.Mul(*[a for a in e.args if not a.is_number]), peeled + ["a constant factor"]
        elif isinstance(e, sp.Function) and len(e.args) == 1 and e.args[0].free_symbols:
            g = e.func(t)
            try:
                mono = bool(is_strictly_increasing(g, sp.S.Reals, t) or is_strictly_decreasing(g, sp.S.Reals, t))
            except Exception:
                mono = False
            if not mono:
                break
            e, peeled = e.args[0], peeled + [e.func.__name__]
        else:
            break
    if not peeled:
        return link, peeled
    return Link(link.name, e, link.k, link.latent), peeled


def delta_alg_sphere(link: Link) -> Optional[DeltaAlg]:
    """k = 2 or 3, noiseless, y homogeneous in z (or depending on z / |z| only, with finitely many values): the
    operator by deterministic quadrature on the sphere (:mod:`theorykit.symbolic.sphere`), its error the change
    against the rule with half the nodes; None for other links."""
    from .sphere import sphere_operator

    inner, peeled = _strip_monotone(link)
    got = sphere_operator(inner)
    if got is None:
        return None
    coarse, fine, how = got
    if peeled:
        how = (f"y is a strictly monotone function of u = {inner.expr} ({', '.join(peeled)}), so E[zz^T | y] = "
               f"E[zz^T | u]: " + how)
    rc, rf = _spectral_radius_sym(coarse, link.k), _spectral_radius_sym(fine, link.k)
    return _delta_alg_from_rho(rf, abs(rf - rc) + 1e-12 * max(1.0, abs(rf)), how)


def _mesh_response(link: Link, allow_jumps: bool):
    """y as a function of points (N, k [+ 1]) -- the k latent coordinates, then eps for a noisy link -- for the mesh
    rules (triangles, slices); None for a link with a jump (sign, Heaviside, floor, ceiling, frac, a Piecewise) unless
    ``allow_jumps``: the interpolant would smear it over one cell."""
    if not allow_jumps and link.expr.has(sp.sign, sp.Heaviside, sp.floor, sp.ceiling, sp.frac, sp.Piecewise):
        return None
    k = link.k

    def response(p):
        return link.response(p[:, :k], p[:, k] if link.noisy else None)

    return response


def _jumps_in_one_variable(link: Link) -> Optional[tuple]:
    """(index, values) when every jump of y (sign, Heaviside) has an argument depending on one and the same variable
    (latent or eps): its index in link.variables and the values in [-8.5, 8.5] where an argument changes sign (a grid
    of step 0.001, refined by Brent); None otherwise (jumps across a curve of several variables, floor, Piecewise)."""
    from scipy.optimize import brentq

    if link.expr.has(sp.floor, sp.ceiling, sp.frac, sp.Piecewise):
        return None
    args = [f.args[0] for f in link.expr.atoms(sp.sign, sp.Heaviside)]
    own = set().union(*(a.free_symbols & set(link.variables) for a in args)) if args else set()
    if len(own) != 1:
        return None
    (v,) = own
    xs = np.linspace(-8.5, 8.5, 17001)
    roots: set = set()
    for a in args:
        g = sp.lambdify([v], a, modules="numpy")
        with np.errstate(all="ignore"):
            vals = np.broadcast_to(np.asarray(g(xs), dtype=float), xs.shape)
        if not np.all(np.isfinite(vals)):
            return None
        roots.update(float(x) for x in xs[vals == 0])
        for i in np.flatnonzero(vals[:-1] * vals[1:] < 0):
            roots.add(float(brentq(lambda x: float(g(x)), xs[i], xs[i + 1], xtol=1e-14)))
    return list(link.variables).index(v), tuple(sorted(roots))


def delta_alg_simplex(link: Link, allow_jumps: bool = False, rule: Optional[tuple] = None) -> Optional[DeltaAlg]:
    """Two Gaussian variables (k = 2 noiseless, k = 1 with eps), y continuous in them: the operator from the exact
    law of y's piecewise-linear interpolant on a triangulated mesh (:mod:`theorykit.symbolic.simplex`), its error
    twice the change against the rule with half the cells and levels; None for other links.  A jump (sign, Heaviside,
    floor, ceiling, a Piecewise) is smeared by the interpolant over one cell, an error the two meshes do not measure
    (tables/delta_alg_two_variables.md), so such links are declined; ``allow_jumps`` runs the rule anyway, for that
    comparison.  ``rule``: (cells per axis, levels) of the fine mesh (default theorykit.symbolic.simplex.RULE)."""
    from .simplex import simplex_operator

    response = _mesh_response(link, allow_jumps)
    if response is None:
        return None
    k = link.k
    got = simplex_operator(response, len(link.variables), k, rule)
    if got is None:
        return None
    coarse, fine, how = got
    rc, rf = _spectral_radius_sym(coarse, k), _spectral_radius_sym(fine, k)
    return _delta_alg_from_rho(rf, 2 * abs(rf - rc) + 1e-12 * max(1.0, abs(rf)), how)


def delta_alg_slices(link: Link, allow_jumps: bool = False, rule: Optional[tuple] = None) -> Optional[DeltaAlg]:
    """Three Gaussian variables (k = 3 noiseless, k = 2 with eps): the operator from Gauss-Legendre slices in one
    variable (the first, or the one every jump of y lies across), graded toward the slices where y is constant, and in
    each slice the exact law of y's piecewise-linear interpolant (:mod:`theorykit.symbolic.slices`); its error twice
    the sum of the changes with half the nodes per panel, half the cells, half the bins.  Atoms of y are counted
    apart.  Jumps whose arguments all depend on one variable get panel edges where they jump, so no triangle
    straddles one; other jumps are declined (as :func:`delta_alg_simplex`) unless ``allow_jumps``.  None for other
    links.  ``rule``: (Gauss-Legendre nodes per panel, cells per axis, bins) of the fine rule (default
    theorykit.symbolic.slices.RULE)."""
    from .slices import slice_operator

    if len(link.variables) != 3:
        return None
    outer, breaks = 0, ()
    if _mesh_response(link, False) is None:  # jumps: exact when they all lie across one variable, sliced along it
        jumps = _jumps_in_one_variable(link)
        if jumps is None and not allow_jumps:
            return None
        outer, breaks = jumps or (0, ())
    response = _mesh_response(link, True)
    k = link.k
    got = slice_operator(response, len(link.variables), k, rule, outer=outer, breaks=breaks)
    if got is None:
        return None
    fine, variants, how = got
    rf = _spectral_radius_sym(fine, k)
    err = 2 * sum(abs(rf - _spectral_radius_sym(v, k)) for v in variants)
    return _delta_alg_from_rho(rf, err + 1e-12 * max(1.0, abs(rf)), how)


def _top_eigvec_sym(op: np.ndarray, k: int) -> np.ndarray:
    """The top eigenvector (as vec of a symmetric matrix) of M -> E[G M G] (op as in :func:`_spectral_radius_sym`)."""
    S = _symmetriser(k)
    return np.linalg.eigh(S @ ((op + op.T) / 2) @ S)[1][:, -1]


def _symmetriser(k: int) -> np.ndarray:
    S = np.zeros((k * k, k * k))
    for i in range(k):
        for j in range(k):
            S[i * k + j, i * k + j] += 0.5
            S[i * k + j, j * k + i] += 0.5
    return S


def delta_alg_monte_carlo(link: Link, n: int = 2_000_000, replicas: int = 8, seed: int = 2024) -> DeltaAlg:
    """General case: E[G (x) G] by cross-fitted binned conditional means (two independent halves per bin, so the
    within-bin sampling noise adds no bias), quantile bins in y.  The largest eigenvalue of a noisy operator is biased
    upwards (most where the top eigenvalue is repeated, as for symmetric multi-index links), so it is not taken
    directly: the replicas are paired, and each pair's estimate is the mean of the two Rayleigh quotients of one
    replica's operator at the other's top eigenvector (independent noise: no selection bias; the remaining bias is
    of second order and downwards; k = 1 has nothing to select: one estimate per replica).  Standard error over the
    pairs."""
    rng = np.random.default_rng(seed)
    k = link.k
    replicas = max(2, 2 * (int(replicas) // 2)) if k > 1 else max(2, int(replicas))
    ops: dict[int, list] = {500: [], 1000: []}
    for _ in range(replicas):
        z, y = link.sample(n, rng)
        feats = np.stack([z[:, i] * z[:, j] for i in range(k) for j in range(k)], axis=1)
        half = n // 2
        # a discrete y (<= 64 values) is binned by its values; a subsample with more than 64 already rules that out
        # (the full np.unique sorts all n)
        vals = np.unique(round_significant(y[:4096], 12))
        discrete = len(vals) <= 64
        if discrete:
            vals = np.unique(round_significant(y, 12))
            discrete = len(vals) <= 64
        if discrete:
            fine = np.searchsorted((vals[1:] + vals[:-1]) / 2, y)
            coarse = {bins: (fine, len(vals)) for bins in ops}
        else:
            # the 500-bin edges (levels j/500) are the odd-indexed 1000-bin edges (levels 2j/1000), so that one
            # quantile call and one search give both binnings: idx_500 = idx_1000 // 2 exactly
            fine = np.searchsorted(np.quantile(y, np.linspace(0, 1, 1001)[1:-1]), y)
            coarse = {1000: (fine, 1000), 500: (fine // 2, 500)}
        for bins in ops:
            idx, G = coarse[bins]
            means = [conditional_means(idx[part], feats[part], groups=G)[1].reshape(G, k, k) - np.eye(k)
                     for part in (slice(0, half), slice(half, n))]
            P = np.bincount(idx, minlength=G) / n
            op = np.einsum("g,gij,gkl->ikjl", P, means[0], means[1]).reshape(k * k, k * k)
            ops[bins].append(_symmetriser(k) @ ((op + op.T) / 2) @ _symmetriser(k))
    rhos: dict[int, np.ndarray] = {}
    for bins, lst in ops.items():
        if k == 1:  # a 1 x 1 operator: nothing is selected, every replica is its own estimate
            rhos[bins] = np.array([float(a[0, 0]) for a in lst])
            continue
        est = []
        for a, b in zip(lst[0::2], lst[1::2]):
            va, vb = _top_eigvec_sym(a, k), _top_eigvec_sym(b, k)
            est.append(0.5 * (va @ b @ va + vb @ a @ vb))
        rhos[bins] = np.array(est)
    r1, r2 = rhos[500], rhos[1000]
    extrap = r2 + (r2 - r1) / 3  # binning bias ~ bins^-2, Richardson per pair
    pairs = len(extrap)
    rho = float(extrap.mean())
    se = float(extrap.std(ddof=1) / np.sqrt(pairs))
    from scipy.stats import t as student_t

    tq = float(student_t.ppf(0.9985, pairs - 1))  # two-sided 99.7% with pairs - 1 degrees of freedom
    return _delta_alg_from_rho(rho, tq * se + abs(float((r2 - r1).mean())) / 3,
                               f"Monte Carlo: cross-fitted conditional moments in 500 and 1000 quantile bins of y "
                               f"(Richardson), {replicas} x {n} samples, seed {seed}; the top eigenvalue by "
                               f"cross-replica Rayleigh quotients (no selection bias) "
                               f"(error: Student-t 99.7% interval over {pairs} "
                               f"{'pairs' if k > 1 else 'replicas'} + remaining bin bias)")


def _delta_alg_exact_single(link: Link) -> Optional[DeltaAlg]:
    """Closed forms for noiseless single-index links: even and monotone on z > 0, or piecewise constant."""
    z, h = cv.Z, link.expr
    if link.noisy:
        return None
    from sympy.calculus.singularities import is_strictly_increasing, is_strictly_decreasing

    pos = sp.Interval.open(0, sp.oo)
    try:
        odd_part = h.subs(z, -z) - h
        if not nonzero_at_points(odd_part, h) and sp.simplify(odd_part) == 0 and (is_strictly_increasing(h, pos, z)
                                                     or is_strictly_decreasing(h, pos, z)):
            # y determines |z|: E[z^2|y] = z^2, E[(z^2 - 1)^2] = 2
            return DeltaAlg(sp.Rational(1, 2), 0.5, 0.0,
                            "exact: h even and strictly monotone in |z|, so E[z^2|y] = z^2 and "
                            "delta_alg = 1/E[(z^2-1)^2] = 1/2")
    except Exception:
        pass
    # piecewise-constant h: intervals between breakpoints, each with a constant value
    try:
        dh = sp.diff(h, z).replace(sp.DiracDelta, lambda *a: sp.Integer(0))
        if nonzero_at_points(dh, h) or sp.simplify(dh) != 0:
            return None
        pts = breakpoints(h, z)
    except (NotClosed, Exception):
        return None
    edges = [-sp.oo] + pts + [sp.oo]
    groups: dict = {}
    for lo, hi in zip(edges[:-1], edges[1:]):
        t = interior_point(lo, hi)
        c = sp.nsimplify(h.subs(z, t))
        p_, m_ = groups.get(c, (0, 0))
        groups[c] = (p_ + truncate(0, lo, hi), m_ + truncate(2, lo, hi))
    total = sum(m2 ** 2 / p - 2 * m2 + p for p, m2 in groups.values())  # sum_c P_c (E[z^2|c] - 1)^2
    total = sp.simplify(total)
    if total == 0:
        return DeltaAlg(None, None, 0.0, "exact: E[z^2|y] = 1, no spectral weak recovery")
    ex = sp.simplify(1 / total)
    return DeltaAlg(ex, float(sp.N(ex, 20)), 0.0,
                    "exact: h piecewise constant; E[z^2|y=c] from truncated Gaussian moments")


# ------------------------------------------------------------------------------------------ subspaces (exact)
def _monomials(nvars: int, degree: int):
    for total in range(0, degree + 1):
        for combo in itertools.combinations_with_replacement(range(nvars), total):
            yield combo


def _easy_subspace(link: Link, max_degree: int):
    """Iterative rule; returns (basis as SymPy Matrix k x e or None, method string).  The moments' tensor grids
    share their factors' values (:func:`theorykit.symbolic.gaussian.shared_grid_values`)."""
    from .gaussian import shared_grid_values

    with shared_grid_values():
        return _easy_subspace_moments(link, max_degree)


def _easy_subspace_moments(link: Link, max_degree: int):
    k, zs = link.k, sp.Matrix(link.latent)
    U = sp.zeros(k, 0)
    tiers = set()
    while U.shape[1] < k:
        P = sp.eye(k) if U.shape[1] == 0 else sp.eye(k) - U * (U.T * U).inv() * U.T
        feats = [link.expr] + [(U[:, j].T * zs)[0] for j in range(U.shape[1])]
        new = []
        for combo in _monomials(len(feats), max_degree):
            p = sp.Mul(*[feats[i] for i in combo])
            vec = []
            for i in range(k):
                e = _E(zs[i] * p, link)
                tiers.add(e.tier)
                if e.exact is not None:
                    vec.append(sp.nsimplify(e.exact) if not e.exact.free_symbols else e.exact)
                else:
                    vec.append(sp.Float(e.value, 12) if _nonzero(e) else sp.Integer(0))
            v = P * sp.Matrix(vec)
            if any(_nonzero_scalar(c) for c in v):
                new.append(v)
        if not new:
            break
        cand = U.row_join(sp.Matrix.hstack(*new))
        basis = _column_basis(cand)
        if basis.shape[1] == U.shape[1]:
            break
        U = basis
    return U, tiers


def _nonzero_scalar(c) -> bool:
    return abs(float(sp.N(c))) > 1e-9


def _column_basis(A: sp.Matrix) -> sp.Matrix:
    if all(x.is_Rational or x.is_Integer for x in A):
        _, piv = A.rref()
        return A[:, list(piv)]
    An = np.array(A.evalf(), dtype=float)
    q, r, = np.linalg.qr(An)
    rank = int(np.sum(np.abs(np.diag(r)) > 1e-8)) if r.size else 0
    return sp.Matrix(q[:, :rank])


def _orthonormal(U: sp.Matrix, k: int):
    if U.shape[1] == 0:
        return np.zeros((k, 0)), np.eye(k)
    E = np.array(U.evalf(), dtype=float)
    q, _ = np.linalg.qr(E, mode="complete")
    e = U.shape[1]
    return q[:, :e], q[:, e:]


# ------------------------------------------------------------------------------------------------ front door
@functools.lru_cache(maxsize=128)
def _breakpoints_cached(lk: Link) -> tuple:
    from .gaussian import NotClosed, breakpoints

    if lk.k != 1:
        return ()
    try:
        return tuple(float(sp.N(p)) for p in breakpoints(lk.expr, lk.latent[0]))
    except (NotClosed, TypeError, ValueError):
        return ()


def link_breakpoints(lk: Link) -> list:
    """Where a single-index link's response jumps or kinks in z (floats, sorted; [] when smooth, multi-index, or when
    the breakpoints depend on the noise or have no closed form) -- the cuts of :func:`theorykit.rules.latent_rule`."""
    return list(_breakpoints_cached(lk))


@functools.lru_cache(maxsize=128)
def _axis_breakpoints_cached(lk: Link) -> tuple:
    from .gaussian import NotClosed, breakpoints

    out = []
    for v in lk.latent:
        try:
            out.append(tuple(float(sp.N(p)) for p in breakpoints(lk.expr, v)))
        except (NotClosed, TypeError, ValueError):
            return ()  # a switch that moves with another coordinate (or the noise): not on lines z_i = c
    return tuple(out) if any(out) else ()


def link_cuts(lk: Link):
    """The cuts of :func:`theorykit.rules.latent_rule` for a link: a single-index link's breakpoints
    (:func:`link_breakpoints`, a list of numbers); for k >= 2, one tuple of breakpoints per latent axis when the
    link jumps or kinks only on lines z_i = c (sign(z1 z2): ((0,), (0,)); relu(z1) z2^2: ((0,), ())), so that a
    product rule cut there integrates it exactly; () when smooth or when a switch moves with another coordinate
    (sign(z1 - z2)) or with the noise."""
    if lk.k == 1:
        return link_breakpoints(lk)
    return _axis_breakpoints_cached(lk)


def format_cuts(cuts) -> str:
    """Cuts as :func:`link_cuts` gives them, in words: "0, 1.5" or "z1 at 0; z2 at 0"."""
    cuts = list(cuts)
    if cuts and all(np.ndim(c) == 0 for c in cuts):
        return ", ".join(f"{float(c):.6g}" for c in cuts)
    return "; ".join(f"z{i + 1} at {', '.join(f'{float(c):.6g}' for c in ax)}" for i, ax in enumerate(cuts) if ax)


def analyse_link(spec, max_degree: int = 4) -> LinkAnalysis:
    """Exponents (single index), easy/hard subspaces and delta_alg of a link (preset, expression or Link).

    Computes everything of docs/theory.md §2: the easy and hard subspaces, the information and generative exponents
    (k = 1), and the weak-recovery threshold of the best spectral method, delta_alg = 1 / E_y[(E[z^2 | y] - 1)^2] for
    a single index (0 when E[z | y] is not identically zero), and delta_alg = 1 / sup_{M >= 0, ||M||_F = 1}
    ||E_y[G(y) M G(y)]||_F with G(y) = E[z z^T | y] - I_k for a multi-index link with no easy direction.

    Memoised on the link's expression (the symbolic delta_alg of a Piecewise link takes seconds, and the simulator and
    the DMFT ask for every seed and every solve); each call gets its own copies of the bases.

    Parameters
    ----------
    spec : str or Link
        The link: a preset name, an expression, or a Link (as for :func:`theorykit.link`).
    max_degree : int
        Highest degree of the test monomials in (y, U^T z) used to find the easy directions (default 4).

    Returns
    -------
    LinkAnalysis
        ``information_exponent`` and ``generative_exponent`` (int, or None beyond the search range), ``easy_basis``
        and ``hard_basis`` ((k, dim) arrays with orthonormal columns), ``easy_dim``, ``hard_dim``, ``delta_alg`` (a
        ``DeltaAlg``: ``exact``, ``value``, ``error``, ``method``), ``method`` and ``notes``.

    Raises
    ------
    TheorykitError
        When the link cannot be built (see :func:`theorykit.link`).

    Examples
    --------
    >>> import theorykit as tk
    >>> a = tk.analyse_link("phase-retrieval")
    >>> a.information_exponent, a.generative_exponent, a.delta_alg.exact
    (2, 2, 1/2)
    >>> a.hard_basis.shape, a.easy_dim
    ((1, 1), 0)
    """
    a = _analyse_cached(make_link(spec), max_degree)
    return replace(a, easy_basis=a.easy_basis.copy(), hard_basis=a.hard_basis.copy())


def clear_analysis_cache() -> None:
    """Forget the memoised analyses of :func:`analyse_link` (e.g. after replacing an estimator such as
    :func:`delta_alg_monte_carlo` by a cheaper one)."""
    _analyse_cached.cache_clear()
    _subspaces_cached.cache_clear()


def link_subspaces(spec, max_degree: int = 4) -> tuple:
    """(easy_basis, hard_basis) of a link ((k, dim) arrays with orthonormal columns; copies), as
    :func:`analyse_link` gives them, without its exponents and thresholds: what the DMFT and the simulator need."""
    easy, hard = _subspaces_cached(make_link(spec), max_degree)[:2]
    return easy.copy(), hard.copy()


@functools.lru_cache(maxsize=64)
def _subspaces_cached(lk: Link, max_degree: int) -> tuple:
    """(easy, hard, tiers of the moments used) of :func:`_easy_subspace`, memoised on the link."""
    U, tiers = _easy_subspace(lk, max_degree)
    easy, hard = _orthonormal(U, lk.k)
    return easy, hard, tiers


@functools.lru_cache(maxsize=64)
def _analyse_cached(lk: Link, max_degree: int) -> LinkAnalysis:
    notes = [lk.note] if lk.note else []
    info = gen = None
    if lk.k == 1:
        z = cv.Z
        for kk in range(1, 9):
            if _nonzero(_E(lk.expr * cv.hermite_he(kk, z), lk)):
                info = kk
                break
        if info is None:
            notes.append("information exponent > 8")
        gen = _generative_exponent(lk, max_degree)
        if gen is None:
            notes.append("generative exponent > 6")
    easy, hard, tiers = _subspaces_cached(lk, max_degree)
    method = "exact Gaussian moments" if tiers <= {"exact"} else "quadrature/Monte-Carlo moments"
    da: Optional[DeltaAlg]
    if easy.shape[1] > 0:
        da = DeltaAlg(sp.Integer(0), 0.0, 0.0, "trivial (easy) directions exist: weak recovery at any delta > 0")
        if hard.shape[1] > 0:
            notes.append("delta_alg refers to the easy directions; the hard ones are learned after them: "
                         "delta_alg_hard is their threshold given the easy coordinates")
    else:
        da = (_delta_alg_exact_single(lk) if lk.k == 1 else None)
        if da is None:
            # y = g(h(z) + s eps) with g strictly monotone: conditioning on y is conditioning on h(z) + s eps
            inner, peeled = _strip_monotone(lk)
            s = _additive_noise_scale(inner)
            da = delta_alg_additive(inner, s) if s is not None else None
            if da is not None and peeled:
                da = replace(da, method=f"y is a strictly monotone function of u = {inner.expr} ({', '.join(peeled)}),"
                                        f" so E[zz^T | y] = E[zz^T | u]: " + da.method)
        if da is None and lk.noisy:
            da = delta_alg_levels(lk)
        if da is None:
            if lk.k == 1 and not lk.noisy:
                da = delta_alg_grid(lk)
            else:
                da = (delta_alg_sphere(lk) or delta_alg_simplex(lk) or delta_alg_slices(lk)
                      or delta_alg_monte_carlo(lk))
    if easy.shape[1] == 0:
        hard_da, why = None, ("no easy direction: the hard directions' threshold is delta_alg itself" if hard.shape[1]
                              else "no hard direction")
    elif hard.shape[1] == 0:
        hard_da, why = None, "no hard direction: every direction is easy"
    else:
        hard_da, why = delta_alg_hard(lk, easy, hard)
    return LinkAnalysis(lk, lk.k, info, gen, easy, hard, da, method, tuple(notes), hard_da, why)


#: Gauss-Hermite nodes per easy coordinate of :func:`delta_alg_hard`'s average over two easy coordinates (and of its
#: companion, half of them)
HARD_GH_NODES = 16
#: ... and nodes per half-line of its average over one (:func:`theorykit.rules.half_gauss_hermite`)
HARD_HALF_ORDER = 12
#: ... its two-dimensional grid turned by this angle (radians): off the axes and the diagonals
HARD_GRID_TURN = 0.3
#: ... and the closed form tried at this many nodes first; the rest only while it held at every node tried, and
#: within HARD_CLOSED_BUDGET seconds in all (SymPy can take seconds per node on numeric coefficients)
HARD_CLOSED_TRIES = 3
HARD_CLOSED_BUDGET = 2.0
#: seconds for the closed form with the easy coordinates as symbols (the numerical average runs beside it), and at
#: one node
HARD_SYMBOLIC_SECONDS = 5.0
HARD_NODE_SECONDS = 1.0
#: the grid level of each node's delta_alg in the average (:func:`delta_alg_grid`; its error is measured per node)
HARD_GRID_LEVEL = 1
#: nodes of the average with a smaller weight are skipped and their mass added to the error: a node's rho =
#: E[(E[z^2|y] - 1)^2] is at most E[(z^2 - 1)^2] = 2 (Jensen), so the bias is at most twice the mass skipped
HARD_WEIGHT_FLOOR = 1e-6


def _conditional_link(lk: Link, easy: np.ndarray, hard: np.ndarray, a) -> Link:
    """The link z_H -> h(E a + H z_H) of the hard coordinates given the easy coordinates a (numbers or symbols), E and
    H the orthonormal easy and hard bases: single-index in z (cv.Z) for one hard direction, else in z1, z2, ..."""
    kH = hard.shape[1]
    zh = tuple(cv.z_symbol(j + 1) for j in range(kH)) if kH > 1 else (cv.Z,)
    sub = {v: sum(_rational_basis(float(easy[i, e])) * a[e] for e in range(easy.shape[1]))
           + sum(_rational_basis(float(hard[i, j])) * zh[j] for j in range(kH)) for i, v in enumerate(lk.latent)}
    return Link("hard|easy", lk.expr.xreplace(sub), kH, zh)


@functools.lru_cache(maxsize=256)
def _rational_basis(v: float):
    """A basis entry as an exact number where it is one (0, rationals, with sqrt(2), sqrt(3)); the QR's rounding
    (entries of 1e-16 where the exact basis has 0) is dropped, not kept as a tiny rational that breaks the
    conditional link's symmetries.  Memoised: nsimplify's search (PSLQ) is slow on an entry it cannot name."""
    if abs(float(v)) < 1e-12:
        return sp.Integer(0)
    return sp.nsimplify(float(v), [sp.sqrt(2), sp.sqrt(3)], tolerance=1e-12)


def _scaled_shift(lk: Link, easy: np.ndarray, hard: np.ndarray) -> Optional[tuple]:
    """(c, Link of u) when y = b(z_E) + c(z_E) u(z_H) with c zero on a null set only (:func:`_nonzero_a_s`: a
    polynomial, sign(z1 + z2), exp(z1)), noiseless, any number of hard directions; else None.  Given z_E (c != 0), y
    is an affine image of u(z_H), so E[z_H z_H^T | y, z_E] is u's and delta_alg_hard is u's delta_alg."""
    if lk.noisy:
        return None
    kE = easy.shape[1]
    a = sp.symbols(f"a1:{kE + 1}", real=True)
    try:
        cond = _conditional_link(lk, easy, hard, a)
        zh, h = cond.latent, cond.expr
        g = sp.expand(h - h.xreplace({z_: 0 for z_ in zh}))
        c, u = sp.factor_terms(g).as_independent(*zh, as_Add=False)
        if c.free_symbols - set(a) or u.free_symbols - set(zh):  # no common factor in the sum's terms: a product
            # c(a) u(z) all the same? (by values: sympy's factor can take long on the basis's rationals)
            c, u = _rank_one_split(g, a, zh)
    except Exception:
        return None
    if c is None:
        return None
    if u.free_symbols != set(zh) or not c.free_symbols or not c.free_symbols <= set(a) or not _nonzero_a_s(c):
        return None
    return c, Link("hard part", u, len(zh), zh)


#: easy and hard points of :func:`_rank_one_split`'s numerical test
RANK_ONE_POINTS = 8
#: simple values tried for the fixed point (a0 or z0) of the split, so that u and c stay exact
_SIMPLE = (1, 2, -1, sp.Rational(1, 2), 3, -2)


def _rank_one_split(g: sp.Expr, a, zh) -> tuple:
    """(c(a), u(z)) with g = c(a) u(z) when g's matrix of values on random points (a_i, z_j) has rank one (to 1e-10
    of its norm: a numerical identity test, as :func:`easy_direction`'s): u = g(a0, .) and c = g(., z0) / u(z0) at
    simple points a0, z0 where they are non-zero (the scale of u does not move its delta_alg).  (None, None)
    otherwise."""
    syms = list(a) + list(zh)
    f = sp.lambdify(syms, g, modules="numpy")
    rng = np.random.default_rng(20261207)
    A = rng.standard_normal((RANK_ONE_POINTS, len(a)))
    Z = rng.standard_normal((RANK_ONE_POINTS, len(zh)))
    with np.errstate(all="ignore"):
        M = np.array([[float(f(*ai, *zj)) for zj in Z] for ai in A])
    if not np.all(np.isfinite(M)):
        return None, None
    sv = np.linalg.svd(M, compute_uv=False)
    if sv[0] <= 1e-12 or sv[1] > 1e-10 * sv[0]:
        return None, None
    for v in _SIMPLE:
        a0 = {s_: sp.Integer(v) if isinstance(v, int) else v for s_ in a}
        u = sp.expand(g.xreplace(a0))
        if u == 0 or u.free_symbols != set(zh):
            continue
        for w in _SIMPLE:
            z0 = {s_: sp.Integer(w) if isinstance(w, int) else w for s_ in zh}
            uz = u.xreplace(z0)
            if uz.is_number and uz != 0:
                return g.xreplace(z0) / uz, u
    return None, None


_NOT_ANALYTIC = (sp.Piecewise, sp.Max, sp.Min, sp.Heaviside, sp.floor, sp.ceiling, sp.frac, sp.sign, sp.Abs)


def _nonzero_a_s(c: sp.Expr) -> bool:
    """True when c(z_E) vanishes on a null set only: each factor (or the base of a power) is real-analytic -- built
    without Piecewise, Max, Min, jumps, sign or Abs, those two allowed around it -- and non-zero at a random point; a
    real-analytic function that is not identically zero vanishes on a null set.  False otherwise (relu(z1): zero on
    a half-line), or when it cannot tell."""
    for f in sp.Mul.make_args(c):
        base = f.base if f.is_Pow and f.exp.is_number else f
        if isinstance(base, (sp.sign, sp.Abs)):
            base = base.args[0]
        if base.has(*_NOT_ANALYTIC) or not (base.is_number or nonzero_at_points(base)):
            return False
    return c != 0


def _shift_separable(lk: Link, easy: np.ndarray, hard: np.ndarray) -> Optional[Link]:
    """The link u(z_H [, eps]) of the hard coordinates (and the noise) when y = g(z_E) + u(z_H, eps) (u(0, 0) = 0),
    else None: given z_E, y is a shift of u, a noisy link when the noise enters it (y = z1 + z2^2 + 0.5 eps)."""
    a = sp.symbols(f"a1:{easy.shape[1] + 1}", real=True)
    try:
        cond = _conditional_link(lk, easy, hard, a)
        zh, e = cond.latent, sp.expand(cond.expr)
        other = zh + ((cv.EPS,) if lk.noisy else ())  # what z_E must not interact with
        u = sp.expand(e - e.xreplace({a_: 0 for a_ in a}))  # the part that moves with z_E
        rest = u - u.xreplace({v: 0 for v in other})  # ... must not involve z_H or eps
        if nonzero_at_points(rest, e) or sp.simplify(rest) != 0:
            return None
        hard_part = sp.expand(e.xreplace({a_: 0 for a_ in a}) - e.xreplace({a_: 0 for a_ in a} | {v: 0 for v in other}))
    except Exception:
        return None
    if hard_part == 0 or hard_part.free_symbols - set(other) or not hard_part.free_symbols & set(zh):
        return None
    return Link("hard part", hard_part, len(zh), zh)


def delta_alg_hard(lk: Link, easy: np.ndarray, hard: np.ndarray) -> tuple:
    """(DeltaAlg or None, reason): the weak-recovery threshold of the hard subspace once the easy coordinates z_E
    are known (a staircase is learned stage by stage): 1 / rho_H with rho_H the spectral radius of
    M -> E[G_H M G_H], G_H(y, z_E) = E[z_H z_H^T | y, z_E] - I (docs/theory.md §2).  The hard coordinates are
    independent of z_E, so the operator is the average over z_E of the link z_H -> h(E a + H z_H)'s at a = z_E; for
    one hard direction rho_H = E_{z_E}[rho(z_E)].

    Tiers: a shift or a scaled shift of a link u of the hard coordinates (u's delta_alg); for one hard direction
    the single-index closed form for symbolic a when it does not depend on a (y = z1 + z2^2: 1/2), else an average
    over z_E of each node's single-index delta_alg (error against half the nodes plus the nodes' own): a Gauss rule
    on each half-line (HARD_HALF_ORDER nodes each) of the one easy coordinate, or of the one combination of two that
    the hard part depends on (:func:`easy_direction`), else Gauss-Hermite over both (HARD_GH_NODES per coordinate);
    for two hard directions and one easy, :func:`hard_operator_average`.  A noisy link's nodes: the additive-noise
    quadrature where the noise's scale depends on the easy coordinates only, else (one hard direction) the simplex
    mesh of (z, eps).  Otherwise (None, why)."""
    kE, kH = easy.shape[1], hard.shape[1]
    sep = _shift_separable(lk, easy, hard)
    if sep is not None:  # y = g(z_E) + u(z_H): given z_E, the hard coordinates see the link u
        da = analyse_link(sep).delta_alg
        return replace(da, method=f"given the easy coordinates y is a shift of u(z_H) = {sep.expr}: its delta_alg "
                                  f"({da.method})"), ""
    scaled = _scaled_shift(lk, easy, hard)
    if scaled is not None:  # y = b(z_E) + c(z_E) u(z_H): given z_E (c != 0 almost surely), the hard coordinates see u
        c, u = scaled
        da = analyse_link(u).delta_alg
        return replace(da, method=f"given the easy coordinates y is an affine image of u(z_H) = {u.expr} (scale "
                                  f"{c}: non-zero almost surely): its delta_alg ({da.method})"), ""
    # y = h(z) + c(z_E) eps (c constant included): each node's link has noise added at a constant scale; else (the
    # scale depends on the hard coordinates, or eps enters otherwise) each node is a link of (z_H, eps): one hard
    # direction by the simplex mesh, two by the node operator where it applies
    scale = _noise_scale_given_easy(lk, easy, hard) if lk.noisy else None
    if not ((kH == 1 and kE <= 2) or (kH == 2 and kE == 1)):
        return None, (f"not computed: conditioning is implemented for one hard direction and at most two easy ones, "
                      f"or two hard and one easy (this link: {kH} hard, {kE} easy{', noisy' if lk.noisy else ''})")
    if kH == 2:
        return hard_operator_average(lk, easy, hard)
    a = sp.symbols(f"a1:{kE + 1}", real=True)
    symbolic = None
    try:  # the closed form with the easy coordinates as symbols: SymPy's monotonicity test can run for minutes on
        # parameters (y = z1 + z2 + (z1 - z2) z3^2 + sin(z1 - z2) z3^4), so in a child, for HARD_SYMBOLIC_SECONDS,
        # while the numerical average below runs beside it and looks for its answer after every node
        cond = _conditional_link(lk, easy, hard, a)
        symbolic = start_in_child(_delta_alg_exact_single, (cond,)) if not lk.noisy else None
    except Exception:
        cond = None

    def poll_symbolic() -> None:
        nonlocal symbolic
        if symbolic is not None and symbolic.ready(0.0):
            ex = _exact_hard(symbolic.result(0.0))
            symbolic = None
            if ex is not None:
                raise _ClosedFormArrived(ex)
    closed = [0, 0, 0.0]  # per-node closed forms tried, found, seconds spent
    try:
        numeric = (lambdify_safe([cv.Z, cv.EPS] + list(a), cond.expr, "hard_given_easy")
                   if cond is not None and not lk.noisy else None)
    except Exception:
        numeric = None
    direction = easy_direction(cond, a) if kE == 2 and cond is not None else None
    one_dim = kE == 1 or direction is not None
    order = HARD_HALF_ORDER if one_dim else HARD_GH_NODES

    def at(node) -> Link:
        if cond is None:
            return _conditional_link(lk, easy, hard, [sp.Float(float(c), 17) for c in node])
        return Link("hard|easy", cond.expr.xreplace({s_: sp.Float(float(c), 17) for s_, c in zip(a, node)}), 1,
                    (cv.Z,))

    def rule(n):
        if one_dim:  # a Gauss rule on each half-line: exact where the node's rho is a polynomial on each side of a
            # kink at 0 (y = z1 + relu(z1) z2^2), where Gauss-Hermite converges slowly
            r = half_gauss_hermite(n)
            return r.nodes[:, :1] * (np.ones(1) if direction is None else direction)[None, :], r.weights
        x, w = np.polynomial.hermite_e.hermegauss(n)
        w = w / w.sum()
        nodes = np.array(np.meshgrid(*([x] * kE), indexing="ij")).reshape(kE, -1).T
        # turned off the axes and diagonals (a rotation keeps the Gaussian rule): a tensor grid lies on them, where a
        # conditional link can degenerate on a null set (y = (a1 + a2) z^2: constant on a1 = -a2)
        c_, s_ = math.cos(HARD_GRID_TURN), math.sin(HARD_GRID_TURN)
        nodes = nodes @ np.array([[c_, s_], [-s_, c_]])
        return nodes, np.prod(np.array(np.meshgrid(*([w] * kE), indexing="ij")).reshape(kE, -1), axis=0)

    def average(n):
        nodes, ws = rule(n)
        keep = ws >= HARD_WEIGHT_FLOOR  # the rest counted as rho = 0: a bias of at most 2 x their mass (rho <= 2)
        rho, err = 0.0, 2.0 * float(ws[~keep].sum())
        for node, wt in zip(nodes[keep], ws[keep]):
            poll_symbolic()
            d = None
            if lk.noisy:  # a noisy single-index link at each node: the additive-noise quadrature at its scale, or
                # (a scale that depends on the hard coordinate) the simplex mesh of (z, eps)
                cl = at(node)
                if scale is not None:
                    s_node = _additive_noise_scale(cl)
                    d = delta_alg_additive(cl, s_node) if s_node is not None else None
                else:
                    d = delta_alg_simplex(cl, rule=HARD_SIMPLEX_RULE)
                if d is None:
                    raise TheorykitError(f"the link given the easy coordinates {np.round(node, 4).tolist()} is not "
                                         + ("finite on the additive-noise rule" if scale is not None else
                                            "continuous in (z, eps) (the simplex mesh declines a jump)"))
            elif closed[2] < HARD_CLOSED_BUDGET and (closed[0] < HARD_CLOSED_TRIES or closed[1] == closed[0]):
                # a node's closed form, while every one tried was found, within a budget of seconds (SymPy takes
                # seconds for one on numeric coefficients, and hangs on some quartics: 0.3 + c z^2 + sin(c) z^4)
                t0 = time.perf_counter()
                d = in_child(_delta_alg_exact_single, (at(node),), HARD_NODE_SECONDS)
                closed[0] += 1
                closed[1] += d is not None
                closed[2] += time.perf_counter() - t0
            if d is None:  # noiseless: the binned grid, on one lambdification for all nodes (SymPy's substitution
                # of the node and a lambdify per node cost more than the grid itself)
                d = (delta_alg_grid(cond, HARD_GRID_LEVEL, _node_response(numeric, node)) if numeric is not None
                     else delta_alg_grid(at(node), HARD_GRID_LEVEL))
            if d.value is None:  # no recovery at this node: it contributes rho = 0
                continue
            rho += wt / d.value
            err += wt * d.error / d.value ** 2
        return rho, err

    try:
        rho, err = average(order)
        rho2, _ = average(order // 2)
    except _ClosedFormArrived as found:
        return found.args[0], ""
    except TheorykitError as e:
        rho = None
        why = f"not computed: {str(e).splitlines()[0]}"
    ex = _exact_hard(symbolic.result(HARD_SYMBOLIC_SECONDS, since_start=True)) if symbolic is not None else None
    if ex is not None:  # the closed form arrived while the average ran
        return ex, ""
    if rho is None:
        return None, why
    if one_dim:
        over = ("the easy coordinate" if direction is None else
                f"w.z_E, w = ({direction[0]:.6g}, {direction[1]:.6g}), the one combination of the easy coordinates "
                f"the hard part depends on (checked at {DIRECTION_POINTS} random points)")
        how = f"a Gauss rule on each half-line of {over} ({order} nodes each"
    else:
        how = f"Gauss-Hermite over the easy coordinates ({order} nodes per coordinate"
    per_node = (f"each by the additive-noise quadrature at its own scale s = {scale}" if scale is not None else
                f"each by the simplex mesh of (z, eps) ({HARD_SIMPLEX_RULE[0]} cells per axis, "
                f"{HARD_SIMPLEX_RULE[1]} levels): the noise scale depends on the hard coordinate" if lk.noisy else
                f"{closed[1]} node{'s' if closed[1] != 1 else ''} by the closed form, SymPy within "
                f"{HARD_NODE_SECONDS:g} s each, which depends on the machine's speed; the rest by the binned grid")
    return _delta_alg_from_rho(rho, err + abs(rho - rho2) + 1e-12,
                               f"quadrature: {how}, nodes of weight < {HARD_WEIGHT_FLOOR:g} skipped and counted in "
                               f"the error; error against {order // 2}) of the single-index delta_alg of the hard "
                               f"coordinate given them ({per_node}) (docs/theory.md §2)"), ""


class _ClosedFormArrived(Exception):
    """The symbolic closed form of :func:`delta_alg_hard` answered during the numerical average (args[0])."""


def _node_response(numeric, node):
    """y(z) of the link given the easy coordinates ``node``, from its lambdification over (z, eps, a)."""
    vals = [float(c) for c in node]

    def response(z, eps=None):
        z = np.asarray(z, dtype=float).reshape(-1)
        with np.errstate(all="ignore"):
            y = np.broadcast_to(np.asarray(numeric(z, np.zeros_like(z), *vals), dtype=float), z.shape)
        if not np.all(np.isfinite(y)):
            raise TheorykitError(f"the link given the easy coordinates {np.round(vals, 4).tolist()} is not finite at "
                                 f"some samples")
        return np.array(y)

    return response


def _exact_hard(ex) -> Optional[DeltaAlg]:
    """The hard threshold from the closed form of the link given symbolic easy coordinates, when it is a number."""
    if ex is not None and ex.value is not None and ex.exact is not None and not ex.exact.free_symbols:
        return DeltaAlg(ex.exact, ex.value, 0.0, f"exact: given the easy coordinates, {ex.method.split(': ', 1)[-1]}")
    return None


#: random points at which :func:`easy_direction` checks that the hard part depends on one combination w.z_E only
DIRECTION_POINTS = 64


def easy_direction(cond: Link, a) -> Optional[np.ndarray]:
    """w (unit, one entry per easy coordinate) when g(a, z) = h(E a + H z) - h(E a) depends on a only through w.a
    (y = z1 + z2 + (z1 - z2) z3^2 + sin(z1 - z2) z3^4: w = (1, -1) / sqrt 2): then dg/da_i = w_i G', so
    w_2 dg/da_1 - w_1 dg/da_2 vanishes, checked to 1e-9 of the gradient's size at DIRECTION_POINTS random points (a
    numerical identity test: an analytic function that is not identically zero is not that small at all of them).
    The shift h(E a) is known given a and does not change E[z^2 | y, a].  None otherwise, or when it cannot tell."""
    zs = cond.latent
    try:
        g = cond.expr - cond.expr.xreplace({z_: 0 for z_ in zs})
        grads = [sp.diff(g, s_) for s_ in a]
        if any(gr.has(sp.DiracDelta, sp.Derivative, sp.Subs) for gr in grads):
            return None
        f = sp.lambdify(list(a) + list(zs), grads, modules="numpy")
        pts = np.random.default_rng(20261207).standard_normal((DIRECTION_POINTS, len(a) + len(zs)))
        with np.errstate(all="ignore"):
            G = np.array([np.broadcast_to(np.asarray(v, dtype=float), (DIRECTION_POINTS,)) for v in f(*pts.T)]).T
    except Exception:
        return None
    if not np.all(np.isfinite(G)):
        return None
    norms = np.linalg.norm(G, axis=1)
    if norms.max() <= 1e-12:
        return None
    w = G[int(np.argmax(norms))] / norms.max()
    w = w if w[int(np.argmax(np.abs(w)))] > 0 else -w
    if np.max(np.abs(G[:, 0] * w[1] - G[:, 1] * w[0])) > 1e-9 * max(1.0, float(norms.max())):
        return None
    return w


#: the two-variable mesh rule (cells per axis, levels) of each node of :func:`hard_operator_average` when y given
#: the easy coordinate is not homogeneous in the hard ones (theorykit.symbolic.simplex; its default is 1200, 2400)
HARD_SIMPLEX_RULE = (300, 600)
#: nodes per half-line of :func:`hard_operator_average`'s average over the easy coordinate (half of them for its
#: error): the operator is often only piecewise smooth in z_E, with its kink at 0 (y = z1 + z2^2 + z1 z3^2 changes
#: type there), where Gauss-Hermite over the whole line converges slowly
HARD_OPERATOR_ORDER = 12


#: nodes per axis (coarse, fine) of the additive-noise rule at each node of :func:`hard_operator_average`
HARD_NOISY_Z_NODES = (200, 400)


def _node_operator(cl: Link) -> Optional[tuple]:
    """(coarse, fine, error factor, rule) of E_y[G (x) G] for a link of two hard variables: with noise added at a
    constant scale, by the additive-noise quadrature (HARD_NOISY_Z_NODES per axis, factor 1); noiseless, on the
    sphere when y is a strictly monotone function of a homogeneous u (factor 1, as :func:`delta_alg_sphere`), else by
    the simplex mesh (factor 2, as :func:`delta_alg_simplex`, continuous links only); None when none applies."""
    from .simplex import simplex_operator
    from .sphere import sphere_operator

    if cl.noisy:
        s = _additive_noise_scale(cl)
        if s is None:
            return None
        pair = additive_operators(cl, s, HARD_NOISY_Z_NODES)
        if pair is None:
            return None
        return (*pair, 1.0, f"by the additive-noise quadrature at the node's noise scale ({HARD_NOISY_Z_NODES[1]} "
                            f"nodes per axis)")

    inner, _ = _strip_monotone(cl)
    got = sphere_operator(inner)
    if got is not None:
        return got[0], got[1], 1.0, "on the sphere"
    response = _mesh_response(cl, False)
    got = simplex_operator(response, 2, 2, HARD_SIMPLEX_RULE) if response is not None else None
    if got is not None:
        return got[0], got[1], 2.0, f"by the simplex mesh ({HARD_SIMPLEX_RULE[0]} cells per axis)"
    return None


def _noise_scale_given_easy(lk: Link, easy: np.ndarray, hard: np.ndarray):
    """c(a) (SymPy, in the easy coordinates a1, a2, ...) when y = h(z) + c(z_E) eps: noise added at a scale that
    depends on the easy coordinates only, so that each node's link of the hard coordinates has noise at a constant
    scale; else None."""
    a = sp.symbols(f"a1:{easy.shape[1] + 1}", real=True)
    cond = _conditional_link(lk, easy, hard, a)
    c = sp.diff(cond.expr, cv.EPS)
    if c == 0 or c.free_symbols & (set(cond.latent) | {cv.EPS}):
        return None
    return c


def hard_operator_average(lk: Link, easy: np.ndarray, hard: np.ndarray) -> tuple:
    """Two hard directions given one easy coordinate: rho_H is the top eigenvalue of the average over z_E ~ N(0, 1)
    of each node's operator M -> E_y[G M G | z_E] on symmetric 2 x 2 matrices (not the average of the nodes' top
    eigenvalues: the operators need not share an eigenvector), by a Gauss rule on each half-line
    (:func:`theorykit.rules.half_gauss_hermite`, HARD_OPERATOR_ORDER nodes each), each node's operator on the sphere
    or by the simplex mesh.  Error: the change against half the nodes, plus the rule's (fine against coarse, times
    its factor)."""
    def average(order):  # the two rules share no node (Gauss rules are not nested)
        rule = half_gauss_hermite(order)
        coarse, fine, factor, rules = np.zeros((4, 4)), np.zeros((4, 4)), 0.0, set()
        for a, wt in zip(rule.nodes[:, 0], rule.weights):
            got = _node_operator(_conditional_link(lk, easy, hard, [sp.Float(float(a), 17)]))
            if got is None:
                raise TheorykitError(f"the link given the easy coordinate {a:.3g} is neither homogeneous nor "
                                     f"continuous in the hard ones (a jump), nor noisy at a constant scale")
            coarse += wt * got[0]
            fine += wt * got[1]
            factor = max(factor, got[2])
            rules.add(got[3])
        rc, rf = _spectral_radius_sym(coarse, 2), _spectral_radius_sym(fine, 2)
        return rf, factor * abs(rf - rc), rules

    try:
        rho, err, rules = average(HARD_OPERATOR_ORDER)
        rho2, _, _ = average(HARD_OPERATOR_ORDER // 2)
    except TheorykitError as e:
        return None, f"not computed: {str(e).splitlines()[0]}"
    return _delta_alg_from_rho(rho, err + abs(rho - rho2) + 1e-12,
                               f"quadrature: a Gauss rule on each half-line of the easy coordinate "
                               f"({HARD_OPERATOR_ORDER} nodes each; error against {HARD_OPERATOR_ORDER // 2}) of the "
                               f"operator M -> E[G M G | z_E] of the two hard coordinates given it "
                               f"({', '.join(sorted(rules))}), then its top eigenvalue (docs/theory.md §2)"), ""


def _generative_exponent(lk: Link, max_degree: int) -> Optional[int]:
    z = cv.Z
    if _is_polynomial(lk):
        for kk in range(1, 7):
            for p in range(0, max_degree + 1):
                if _nonzero(_E(lk.expr ** p * cv.hermite_he(kk, z), lk)):
                    return kk
        return None
    pts, w, _ = quadrature_nodes(lk)
    zz = pts[:, 0]
    y = lk.response(zz, pts[:, 1] if lk.noisy else None)
    feats = np.stack([np.polynomial.hermite_e.hermeval(zz, [0] * kk + [1]) for kk in range(1, 7)], axis=1)
    P, means = _binned_projection(y, w, feats, 1000)
    norms = (P[:, None] * means ** 2).sum(axis=0)
    for kk in range(1, 7):
        if norms[kk - 1] > 1e-8 * math.factorial(kk):
            return kk
    return None
