"""Integration rules, weighted quantiles and binned conditional means: the one place where theorykit builds a
quadrature or sampling rule (docs/theory.md §3, numerics; the population loss of §1 and the link analysis of §2 use
the same rules).

A :class:`Rule` is a set of nodes (N, dim) and weights (N,) with a ``method`` line, and it can say how far off it is:
``rule.integrate(f)`` returns (value, error), where

* deterministic rules (Gauss-Hermite, Gauss-Legendre) compare with a coarser companion rule, ``rule.reference``
  (error = |Q(f) - Q_reference(f)|: the error of the coarser rule, so conservative for the finer one);
* Monte Carlo reports the standard error std(f) / sqrt(N);
* scrambled Sobol with ``replicas`` >= 2 reports the spread of the independently scrambled replicas' means
  (randomised QMC); with one replica it reports the i.i.d. standard error, which a scrambled net usually beats but
  is not guaranteed to.

Builders (every one validates its arguments with a one-line :class:`theorykit.errors.TheorykitError`):

* :func:`gauss_hermite` (order, dim): tensor Gauss-Hermite for N(0, I_dim), probabilists' He_n
  (``numpy.polynomial.hermite_e.hermegauss``), one-dimensional weights divided by sqrt(2 pi) -- the one
  normalisation (they sum to 1 up to a rounding of the last bit).  Exact for polynomials of degree <= 2 order - 1 in
  each variable.  Companion: ``lower_order(order)`` nodes per axis.
* :func:`gauss_legendre` (n, a, b): n-node Gauss-Legendre on [a, b], weights summing to b - a, exact for
  polynomials of degree <= 2n - 1.
* :func:`composite_gauss_legendre` (n, a, b, order): exactly n nodes, n / order panels of ``order`` nodes each,
  mirror-symmetric about (a + b) / 2 to the last bit (an odd integrand integrates to zero up to the rounding of the
  sum); exact on each panel to degree 2 order - 1.  n must be a multiple of the order: the rule never silently
  changes the count.
* :func:`gauss_legendre_normal` (n, width, order): the composite rule on [-width, width] times the N(0, 1) density
  (the deterministic rule for integrands that jump or kink, where Gauss-Hermite puts the jump in the wrong place).
* :func:`tensor` (rule, dim): the tensor product of a one-dimensional rule.
* :func:`sobol_normal` (n, dim, rng): scrambled Sobol points mapped to N(0, I_dim) by the inverse normal CDF.
* :func:`monte_carlo_normal` (n, dim, rng): i.i.d. N(0, I_dim) draws, weights 1 / n.

Helpers: :func:`weighted_quantiles` (inverted-CDF quantiles of a weighted sample), :func:`below_quantile` (the
items of a weighted sample below its 1/n quantile: what a sample of n points does not hold), :func:`quantile_bins` and
:func:`conditional_means` (binned E[feature | y], docs/theory.md §2).
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Optional, Sequence

import numpy as np

from ._checks import check_number
from .errors import TheorykitError

__all__ = ["crossing", "crossing_index", "first_passage", "interpolation_error", "secant_root", "Root", "Rule",
           "gauss_hermite",
           "gauss_legendre", "composite_gauss_legendre", "gauss_legendre_normal", "tensor",
           "sobol_normal", "monte_carlo_normal", "lower_order", "weighted_quantiles", "below_quantile", "TailCut",
           "quantile_bins",
           "conditional_means", "sym_eigvals", "HERMITE_MAX_ORDER", "MAX_NODES", "SOBOL_MAX_DIM"]

#: largest Gauss-Hermite order whose numpy weights are usable (numpy 2.x: at 371 nodes hermegauss's weights are all
#: 0, from 372 on they are NaN)
HERMITE_MAX_ORDER = 370
#: largest number of nodes a builder makes (a tensor rule grows like order^dim)
MAX_NODES = 50_000_000
#: scipy's Sobol' direction numbers cover this many dimensions
SOBOL_MAX_DIM = 21201


# ------------------------------------------------------------------------------------------------- the result
@dataclass(frozen=True, eq=False)
class Rule:
    """A quadrature or sampling rule (module docstring).

    nodes: (N, dim); weights: (N,), summing to 1 for the rules of a probability law (Gauss-Hermite, Monte Carlo,
    Sobol; Gauss-Legendre times the normal density up to the mass outside [-width, width]) and to b - a for
    Gauss-Legendre on [a, b]; method: one line saying what the rule is; kind: "deterministic" | "monte-carlo" |
    "sobol"; degree: the rule integrates polynomials of degree <= degree in each variable exactly (None for the
    random rules); replicas: the number of independently randomised blocks of equal size (random rules).
    """

    nodes: np.ndarray
    weights: np.ndarray
    method: str
    kind: str = "deterministic"
    degree: Optional[int] = None
    replicas: int = 1
    _coarser: Optional[Callable[[], "Rule"]] = field(default=None, repr=False)

    @property
    def size(self) -> int:
        """The number of nodes N."""
        return len(self.weights)

    @property
    def dim(self) -> int:
        return self.nodes.shape[1]

    @cached_property
    def reference(self) -> Optional["Rule"]:
        """The coarser companion rule whose difference is the error estimate (deterministic rules; else None)."""
        return None if self._coarser is None else self._coarser()

    def _values(self, f, rule: "Rule") -> np.ndarray:
        with np.errstate(all="ignore"):
            v = np.broadcast_to(np.asarray(f(rule.nodes), dtype=float), (rule.size,))
        if not np.all(np.isfinite(v)):
            raise TheorykitError(f"the integrand is not finite at some nodes of the rule ({rule.method})")
        return v

    def integrate(self, f) -> tuple[float, float]:
        """(value, error) of E[f] (the weighted sum of f over the nodes).  f maps the nodes (N, dim) to (N,) values.

        Error: |value - the companion rule's value| (deterministic; inf for a one-node rule, which has no coarser
        companion), the standard error (Monte Carlo; Sobol with one replica), or the standard error of the replica
        means (Sobol with replicas >= 2)."""
        if not callable(f):
            raise TheorykitError(f"integrate needs a function of the nodes (N, dim), got {type(f).__name__}")
        v = self._values(f, self)
        if self.kind == "deterministic":
            value = float(np.sum(self.weights * v))
            ref = self.reference
            if ref is None:  # no coarser companion (one node): no estimate, except on R^0 (a constant, exact)
                return value, 0.0 if self.dim == 0 else math.inf
            return value, abs(value - float(np.sum(ref.weights * self._values(f, ref))))
        value = float(v.mean())
        if self.replicas >= 2:
            means = v.reshape(self.replicas, -1).mean(axis=1)
            return value, float(means.std(ddof=1) / math.sqrt(self.replicas))
        if self.size < 2:
            return value, math.inf
        return value, float(v.std(ddof=1) / math.sqrt(self.size))


# ------------------------------------------------------------------------------------------------- validation
def _int(name: str, v, lo: int, hi: Optional[int] = None) -> int:
    ok = isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
    if not ok or v < lo or (hi is not None and v > hi):
        span = f"in {lo}..{hi}" if hi is not None else f">= {lo}"
        raise TheorykitError(f"{name} must be an integer {span}, got {v!r}")
    return int(v)


def _interval(a, b) -> tuple[float, float]:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        raise TheorykitError(f"the interval [a, b] must have numeric ends, got [{a!r}, {b!r}]") from None
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise TheorykitError(f"the interval [a, b] must be finite with a < b, got [{a}, {b}]")
    return a, b


def _count(n: int, what: str):
    if n > MAX_NODES:
        raise TheorykitError(f"{what} would have {n} nodes, more than MAX_NODES = {MAX_NODES}")


def _generator(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise TheorykitError(f"rng must be a numpy Generator or a seed (integer >= 0), got {rng!r}")


# ------------------------------------------------------------------------------------------------- tensor rules
def tensor(rule: Rule, dim: int) -> Rule:
    """The tensor product of a one-dimensional rule: nodes (N^dim, dim) in C order (the last axis fastest), weights
    the product of the one-dimensional weights taken in axis order (((w_i w_j) w_k)...), so equal to the product
    computed any other sequential way to the last bit.  dim = 0 gives the single node of R^0 with weight 1."""
    if not isinstance(rule, Rule) or rule.dim != 1:
        raise TheorykitError("tensor needs a one-dimensional Rule")
    dim = _int("dim", dim, 0)
    if rule.kind != "deterministic":
        raise TheorykitError(f"tensor products are for deterministic rules, got a {rule.kind} rule")
    _count(rule.size ** dim, f"the tensor rule ({rule.size} nodes per axis, {dim} axes)")
    if dim == 0:
        return Rule(np.zeros((1, 0)), np.ones(1), "the single node of R^0", "deterministic", rule.degree)
    t, w = rule.nodes[:, 0], rule.weights
    grids = np.meshgrid(*([t] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    weights = np.ones(len(nodes))
    for wg in np.meshgrid(*([w] * dim), indexing="ij"):
        weights = weights * wg.ravel()
    coarser = None if rule._coarser is None else (lambda: tensor(rule.reference, dim))
    return Rule(nodes, weights, f"{rule.method}, tensor product over {dim} axes", "deterministic", rule.degree,
                _coarser=coarser)


def lower_order(order: int) -> int:
    """The coarser Gauss-Hermite order (2/3 of the nodes) whose difference is the error estimate of
    :func:`gauss_hermite`."""
    return max(1, (2 * order) // 3)


def gauss_hermite(order: int, dim: int = 1, reference: Optional[int] = None) -> Rule:
    """Tensor Gauss-Hermite rule for N(0, I_dim) with ``order`` nodes per axis (docs/theory.md §3, numerics).

    One dimension: the roots of the probabilists' Hermite polynomial He_order (numpy ``hermegauss``), weights
    divided by sqrt(2 pi) so that they sum to 1 (up to the last bit) -- theorykit's one Gauss-Hermite normalisation.
    Exact for polynomials of degree <= 2 order - 1 in each variable (E[G^4] = 3 from order 3, E[G^6] = 15 from 4).
    ``reference``: the order of the companion rule for the error estimate (default lower_order(order)).
    """
    order = _int("order", order, 1, HERMITE_MAX_ORDER)
    dim = _int("dim", dim, 0)
    ref = lower_order(order) if reference is None else _int("reference", reference, 1, HERMITE_MAX_ORDER)
    _count(order ** dim, f"tensor Gauss-Hermite with {order} nodes per axis over {dim} axes")
    t, w = np.polynomial.hermite_e.hermegauss(order)
    one = Rule(t[:, None], w / np.sqrt(2 * np.pi), f"Gauss-Hermite, {order} node{'s' if order != 1 else ''}",
               "deterministic", 2 * order - 1,
               _coarser=None if ref == order else (lambda: gauss_hermite(ref, 1, ref)))
    if dim == 1:
        return one
    out = tensor(one, dim)
    return Rule(out.nodes, out.weights, f"tensor Gauss-Hermite, {order} nodes per axis over {dim} axes",
                "deterministic", out.degree, _coarser=None if ref == order else (lambda: gauss_hermite(ref, dim, ref)))


def half_gauss_hermite(order: int) -> Rule:
    """The N(0, 1) law by a Gauss rule on each half-line: ``order`` nodes on (0, inf) for the weight exp(-z^2 / 2) /
    sqrt(2 pi) there (half-range Hermite), mirrored to (-inf, 0); weights sum to 1.  Exact for every integrand that
    is a polynomial of degree <= 2 order - 1 on each half-line (one with a kink or a jump at 0), where Gauss-Hermite
    converges like a power of 1 / order and Gauss-Legendre on [0, width] pays for the density's tail.  The
    recurrence coefficients come from Stieltjes' procedure on the discretised weight (composite Gauss-Legendre, 64
    panels of 16 nodes on [0, 16]: its moments are exact to rounding), the nodes and weights from the Jacobi matrix
    (Golub-Welsch).  Companion: lower_order(order) nodes per half-line."""
    order = _int("order", order, 1, 24)  # Stieltjes loses digits beyond (1e-9 in the moments at 28 nodes)
    t, w = _half_normal_gauss(order)
    lo = lower_order(order)
    return Rule(np.concatenate([-t[::-1], t])[:, None], np.concatenate([w[::-1], w]),
                f"half-range Gauss-Hermite, {order} nodes on each half-line", "deterministic", 2 * order - 1,
                _coarser=None if lo == order else (lambda: half_gauss_hermite(lo)))


@functools.lru_cache(maxsize=16)
def _half_normal_gauss(order: int) -> tuple:
    u, w0 = _composite_unit(64, 16)
    x = 8.0 * (u + 1.0)
    w = 8.0 * w0 * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
    alpha, beta = np.zeros(order), np.zeros(order)
    p_prev, p = np.zeros_like(x), np.ones_like(x)
    norm_prev = 1.0
    for k in range(order):
        norm = float(np.sum(w * p * p))
        alpha[k] = float(np.sum(w * x * p * p)) / norm
        beta[k] = norm / norm_prev if k else norm  # beta_0 = the total mass (1/2)
        p_prev, p = p, (x - alpha[k]) * p - (beta[k] if k else 0.0) * p_prev
        norm_prev = norm
    J = np.diag(alpha) + np.diag(np.sqrt(beta[1:]), 1) + np.diag(np.sqrt(beta[1:]), -1)
    nodes, vecs = np.linalg.eigh(J)
    return nodes, beta[0] * vecs[0] ** 2


# ------------------------------------------------------------------------------------------------- Gauss-Legendre
def _map(u: np.ndarray, w: np.ndarray, a: float, b: float):
    """[-1, 1] -> [a, b]: nodes (a + b)/2 + (b - a)/2 u, weights (b - a)/2 w."""
    return (a + b) / 2 + (b - a) / 2 * u, (b - a) / 2 * w


def gauss_legendre(n: int, a: float = -1.0, b: float = 1.0) -> Rule:
    """n-node Gauss-Legendre rule on [a, b] (numpy ``leggauss`` mapped affinely): weights sum to b - a, exact for
    polynomials of degree <= 2n - 1 (docs/theory.md §3, numerics).  Companion: lower_order(n) nodes."""
    n = _int("n", n, 1, 2000)  # one panel: numpy's eigenvalue construction costs O(n^3); use panels beyond
    a, b = _interval(a, b)
    u, w = np.polynomial.legendre.leggauss(n)
    t, w = _map(u, w, a, b)
    lo = lower_order(n)
    return Rule(t[:, None], w, f"Gauss-Legendre, {n} node{'s' if n != 1 else ''} on [{a:g}, {b:g}]",
                "deterministic", 2 * n - 1, _coarser=None if lo == n else (lambda: gauss_legendre(lo, a, b)))


def _composite_unit(panels: int, order: int):
    """Composite Gauss-Legendre on [-1, 1]: ``panels`` equal panels of ``order`` nodes (panels * order nodes),
    sorted and made mirror-symmetric to the last bit."""
    t0, w0 = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(-1, 1, panels + 1)
    half = (edges[1:] - edges[:-1]) / 2
    mid = (edges[1:] + edges[:-1]) / 2
    t, w = (mid[:, None] + half[:, None] * t0).ravel(), (half[:, None] * w0).ravel()
    perm = np.argsort(t)
    t, w = t[perm], w[perm]
    return (t - t[::-1]) / 2, (w + w[::-1]) / 2  # bit-exact mirror symmetry (odd moments vanish up to rounding)


def _composite_checked(n, order) -> tuple[int, int]:
    order = _int("order", order, 1, 1000)
    n = _int("n", n, 1, MAX_NODES)
    if n % order:
        near = f"{order * (n // order)} or " if n > order else ""
        raise TheorykitError(f"composite Gauss-Legendre: n = {n} nodes is not a multiple of the panel order {order} "
                             f"(take {near}{order * (n // order + 1)})")
    return n, order


def _composite_coarser(n: int, order: int) -> Optional[tuple[int, int]]:
    """(n, order) of the companion: half the panels (rounded down), or one panel of lower_order(order) nodes."""
    panels = n // order
    if panels >= 2:
        return (panels // 2) * order, order
    lo = lower_order(order)
    return None if lo == order else (lo, lo)


def composite_gauss_legendre(n: int, a: float = -1.0, b: float = 1.0, order: int = 8) -> Rule:
    """Composite Gauss-Legendre rule with exactly n nodes on [a, b]: n / order equal panels of ``order`` nodes,
    mirror-symmetric about (a + b) / 2 to the last bit (docs/theory.md §3, numerics).  n must be a positive multiple
    of ``order``.  Weights sum to b - a; exact on each panel for polynomials of degree <= 2 order - 1.  Companion
    (error estimate): half the panels."""
    n, order = _composite_checked(n, order)
    a, b = _interval(a, b)
    t, w = _map(*_composite_unit(n // order, order), a, b)
    c = _composite_coarser(n, order)
    return Rule(t[:, None], w, f"composite Gauss-Legendre, {n} nodes ({n // order} panels of {order}) on "
                               f"[{a:g}, {b:g}]", "deterministic", 2 * order - 1,
                _coarser=None if c is None else (lambda: composite_gauss_legendre(c[0], a, b, c[1])))


def gauss_legendre_normal(n: int, width: float = 10.0, order: int = 8) -> Rule:
    """The N(0, 1) law by composite Gauss-Legendre on [-width, width] (docs/theory.md §2 and §3): nodes width * u,
    weights width * w * exp(-(width^2 / 2) u^2) / sqrt(2 pi) with (u, w) the n-node composite rule on [-1, 1]
    (:func:`composite_gauss_legendre`; n a multiple of ``order``).  The weights sum to 1 - 2 Phi(-width)
    (1 - 1.5e-23 for width 10); mirror-symmetric to the last bit.  Suits integrands that jump or kink (the error is
    set by the panel width, not by smoothness).  Companion: half the panels."""
    n, order = _composite_checked(n, order)
    width = check_number("width", width, lambda v: v > 0, "a positive finite number")
    u, w = _composite_unit(n // order, order)
    t, w = width * u, width * w * np.exp(-(width * width / 2) * u * u) / np.sqrt(2 * np.pi)
    c = _composite_coarser(n, order)
    return Rule(t[:, None], w, f"composite Gauss-Legendre times the normal density, {n} nodes ({n // order} panels "
                               f"of {order}) on [-{width:g}, {width:g}]", "deterministic", None,
                _coarser=None if c is None else (lambda: gauss_legendre_normal(c[0], width, c[1])))


def gauss_legendre_normal_split(points, order: int, width: float = 10.0) -> Rule:
    """The N(0, 1) law by Gauss-Legendre on each piece of [-width, width] cut at ``points`` (the breakpoints of a
    piecewise integrand, e.g. a link's jumps): ``order`` nodes per piece, weights w * exp(-z^2 / 2) / sqrt(2 pi).  On
    each piece the integrand is smooth, so the rule converges exponentially in ``order`` where Gauss-Hermite, which
    straddles the jumps, converges like 1 / order.  Weights sum to 1 - 2 Phi(-width).  Companion: lower_order(order)
    nodes per piece."""
    order = _int("order", order, 1, 2000)
    width = check_number("width", width, lambda v: v > 0, "a positive finite number")
    cuts = sorted({float(p) for p in points if -width < float(p) < width})
    edges = [-width] + cuts + [width]
    u, w0 = np.polynomial.legendre.leggauss(order)
    t = np.concatenate([(a + b) / 2 + (b - a) / 2 * u for a, b in zip(edges[:-1], edges[1:])])
    w = (np.concatenate([(b - a) / 2 * w0 for a, b in zip(edges[:-1], edges[1:])])
         * np.exp(-t * t / 2) / np.sqrt(2 * np.pi))
    lo = lower_order(order)
    return Rule(t[:, None], w, f"Gauss-Legendre times the normal density, {order} nodes on each of {len(edges) - 1} "
                               f"pieces of [-{width:g}, {width:g}] cut at {', '.join(f'{c:.6g}' for c in cuts)}",
                "deterministic", None,
                _coarser=None if lo == order else (lambda: gauss_legendre_normal_split(cuts, lo, width)))


def latent_rule(k: int, noisy: bool, order: int, cuts=()) -> Rule:
    """The latent law of a link, (z, eps) ~ N(0, I_{k + noisy}), as one deterministic rule: the tensor Gauss-Hermite
    rule of ``order`` nodes per axis; or, for a link that jumps or kinks at known points, the product of one rule per
    axis, Gauss-Legendre on the pieces between the cuts (:func:`gauss_legendre_normal_split`, ``order`` nodes per
    piece) on an axis with cuts and Gauss-Hermite on the others, eps last.  ``cuts``: a single-index link's
    breakpoints in z (numbers, k = 1), or one sequence per latent axis z_1..z_k (a multi-index link that jumps or
    kinks only on lines z_i = c, e.g. sign(z1 z2) on both axes: :func:`theorykit.symbolic.links.link_cuts`).  What
    the population loss and the DMFT's latent integration both use."""
    axes = _axis_cuts(k, cuts)
    if axes is None:
        return gauss_hermite(order, k + int(bool(noisy)))
    rules = [gauss_legendre_normal_split(c, order) if c else gauss_hermite(order, 1) for c in axes]
    if k == 1:
        what = rules[0].method + (f" in z, times Gauss-Hermite with {order} nodes in eps" if noisy else "")
    else:
        what = "; ".join(f"z{i + 1}: {r.method}" for i, r in enumerate(rules)) + (
            f"; eps: Gauss-Hermite, {order} nodes" if noisy else "")
    if noisy:
        rules.append(gauss_hermite(order, 1))
    if len(rules) == 1:
        return rules[0]
    _count(int(np.prod([r.size for r in rules])), f"the product rule ({what})")
    grids = np.meshgrid(*[r.nodes[:, 0] for r in rules], indexing="ij")
    weights = np.ones(grids[0].size)
    for wg in np.meshgrid(*[r.weights for r in rules], indexing="ij"):
        weights = weights * wg.ravel()
    return Rule(np.stack([g.ravel() for g in grids], axis=1), weights, what, "deterministic", None)


def _axis_cuts(k: int, cuts) -> Optional[list]:
    """latent_rule's cuts as one sorted list per latent axis, or None when there is no cut (or flat cuts with k != 1,
    which name no axis)."""
    cuts = list(cuts)
    if not cuts:
        return None
    if all(np.ndim(c) == 0 for c in cuts):
        return [sorted(float(c) for c in cuts)] if k == 1 else None
    if len(cuts) != k:
        raise TheorykitError(f"latent_rule: cuts per axis need one sequence for each of the k = {k} latent axes, got "
                             f"{len(cuts)}")
    axes = [sorted(float(c) for c in ax) for ax in cuts]
    return axes if any(axes) else None


# ------------------------------------------------------------------------------------------------- random rules
def sobol_normal(n: int, dim: int, rng, replicas: int = 1) -> Rule:
    """Scrambled Sobol' points mapped to N(0, I_dim) (docs/theory.md §3, numerics): for each of ``replicas``
    independently scrambled nets (``scipy.stats.qmc.Sobol(dim, scramble=True, seed=rng)``) of n / replicas points,
    nodes ndtri(clip(u, 1e-16, 1 - 1e-16)); weights 1 / n.  The nets are balanced when n / replicas is a power of
    two; otherwise scipy's balance warning is silenced and the method line says "unbalanced".  rng: a numpy
    Generator (consumed by the scrambling) or a seed.  Error: the standard error of the replica means (replicas >= 2)
    or the i.i.d. standard error (one replica; usually pessimistic for smooth integrands, not guaranteed).  Weak spot:
    moments dominated by |G| >~ 3 (E[G^6]) have right-skewed replica means, and few replicas understate their error
    (more replicas of fewer points each understate it less)."""
    from scipy.special import ndtri
    from scipy.stats import qmc

    n = _int("n", n, 1, MAX_NODES)
    dim = _int("dim", dim, 1, SOBOL_MAX_DIM)
    replicas = _int("replicas", replicas, 1)
    if n % replicas:
        raise TheorykitError(f"sobol_normal: n = {n} points do not split into {replicas} equal replicas")
    _count(n * dim, f"scrambled Sobol' with {n} points in {dim} dimensions")
    rng = _generator(rng)
    per = n // replicas
    balanced = per & (per - 1) == 0
    blocks = []
    for _ in range(replicas):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The balance properties of Sobol' points", category=UserWarning)
            blocks.append(qmc.Sobol(dim, scramble=True, seed=rng).random(per))
    pts = blocks[0] if replicas == 1 else np.concatenate(blocks)
    nodes = ndtri(np.clip(pts, 1e-16, 1 - 1e-16))
    what = f"{replicas} x {per}" if replicas > 1 else f"{n}"
    return Rule(nodes, np.full(n, 1.0 / n), f"scrambled Sobol', {what} points in {dim} dimensions"
                                            f"{'' if balanced else ' (unbalanced: not a power of two)'}",
                "sobol", None, replicas)


def monte_carlo_normal(n: int, dim: int, rng) -> Rule:
    """n i.i.d. N(0, I_dim) draws, ``rng.standard_normal((n, dim))`` (row-major: the first n' of n draws are those of
    n'), weights 1 / n (docs/theory.md §3, numerics).  rng: a numpy Generator or a seed.  Error: the standard
    error."""
    n = _int("n", n, 1, MAX_NODES)
    dim = _int("dim", dim, 1)
    _count(n * dim, f"Monte Carlo with {n} draws in {dim} dimensions")
    rng = _generator(rng)
    return Rule(rng.standard_normal((n, dim)), np.full(n, 1.0 / n),
                f"Monte Carlo, {n} i.i.d. draws in {dim} dimensions", "monte-carlo", None)


# ------------------------------------------------------------------------------------------------- quantiles, bins
def weighted_quantiles(values, weights, qs, *, kind: str = "quicksort") -> list:
    """Quantiles of a weighted sample by the inverted CDF: for each q the smallest sorted value v_i whose cumulative
    weight share (w_1 + ... + w_i) / sum(w) is >= q (docs/theory.md §3, numerics).  With equal weights this is
    ``numpy.quantile(values, q, method="inverted_cdf")``.  values may hold infinities (they sort last); weights must be
    finite, >= 0, with a positive sum; qs in [0, 1].  kind: the sort ("quicksort", numpy's default, or "stable";
    only tied values can tell them apart).  Returns a list of floats."""
    v = np.asarray(values)
    w = np.asarray(weights, dtype=float)
    if v.ndim != 1 or w.shape != v.shape or not len(v):
        raise TheorykitError(f"weighted_quantiles: values and weights must be 1-D of the same positive length, got "
                             f"shapes {v.shape} and {w.shape}")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0)) or not w.sum() > 0:
        raise TheorykitError("weighted_quantiles: weights must be finite, >= 0, with a positive sum")
    q = np.asarray(qs, dtype=float).ravel()
    if not np.all((q >= 0) & (q <= 1)):
        raise TheorykitError(f"weighted_quantiles: levels must lie in [0, 1], got {qs!r}")
    if kind not in ("quicksort", "stable"):
        raise TheorykitError(f"weighted_quantiles: kind must be 'quicksort' or 'stable', got {kind!r}")
    if kind == "quicksort" and len(v) >= TAIL_PARTITION_MIN and (q.max() <= TAIL_LEVEL or q.min() >= 1 - TAIL_LEVEL):
        got = _tail_quantiles(v, w, q)
        if got is not None:
            return got
    order = np.argsort(v, kind=kind)
    v, cw = v[order], np.cumsum(w[order])
    cw /= cw[-1]
    return [float(x) for x in _inverted_cdf(v, cw, q)]


def _inverted_cdf(sorted_values: np.ndarray, share: np.ndarray, q: np.ndarray) -> np.ndarray:
    """For each level q the smallest sorted value whose cumulative weight share is >= q."""
    return sorted_values[np.minimum(np.searchsorted(share, q), len(sorted_values) - 1)]


#: weighted_quantiles at levels within TAIL_LEVEL of 0 or 1 sorts only the TAIL_FRACTION of the values on that side
#: (np.argpartition), when there are at least TAIL_PARTITION_MIN, and the full sort only if they do not reach the level
TAIL_LEVEL = 0.01
TAIL_FRACTION = 1 / 32
TAIL_PARTITION_MIN = 4096


def _tail_quantiles(v: np.ndarray, w: np.ndarray, q: np.ndarray) -> Optional[list]:
    """:func:`weighted_quantiles` at tail levels from the k = N TAIL_FRACTION values on that side, sorted: the same
    values as the full sort's (the k smallest are its first k, ties being equal), or None where their weight does
    not reach the level.  Upper levels: the cumulative share at the j-th of the k largest is
    1 - (weight after it) / W."""
    k = max(int(len(v) * TAIL_FRACTION), 1)
    total = float(w.sum())
    if q.max() <= TAIL_LEVEL:
        idx = np.argpartition(v, k - 1)[:k]
        idx = idx[np.argsort(v[idx])]
        cw = np.cumsum(w[idx]) / total
        if not cw[-1] >= q.max():
            return None
        return [float(x) for x in v[idx][np.searchsorted(cw, q)]]
    idx = np.argpartition(v, len(v) - k)[len(v) - k:]
    idx = idx[np.argsort(v[idx])]
    after = np.concatenate([np.cumsum(w[idx][::-1])[::-1][1:], [0.0]]) / total  # weight after each of them
    cw = 1.0 - after
    if not cw[0] < q.min():  # the level may be reached before the k largest: the full sort decides
        return None
    return [float(x) for x in v[idx][np.minimum(np.searchsorted(cw, q), k - 1)]]


@dataclass(frozen=True, eq=False)
class TailCut:
    """The items of a weighted sample below its 1/n quantile (:func:`below_quantile`): ``order`` sorts the values
    ascending (stable), ``cum`` is the cumulative weight along it, the first ``cut`` items of ``order`` lie below the
    quantile, whose value is ``quantile`` (the first item kept; the largest value when none is)."""

    order: np.ndarray
    cum: np.ndarray
    cut: int
    quantile: float
    n: int

    @property
    def mask(self) -> np.ndarray:
        """(N,) True for the items below the quantile."""
        out = np.zeros(len(self.order), bool)
        out[self.order[:self.cut]] = True
        return out

    @property
    def weight(self) -> float:
        """Their total weight (at most 1/n of a normalised sample)."""
        return float(self.cum[self.cut - 1]) if self.cut else 0.0


def below_quantile(values, weights, n: int, *, whole_ties: bool = False) -> TailCut:
    """The items of a weighted sample (weights summing to 1) below its 1/n quantile: those, in ascending order of
    ``values``, whose cumulative weight stays at or below 1/n -- what a sample of n points drawn from the law holds
    none of.  This is the one finite-n truncation: the Hessian law's at the 1/n quantile of lambda_min(D)
    (:meth:`theorykit.spectra.hessian.HessianLaw.truncated`) and the DMFT's of its latent tail when d is given
    (:func:`theorykit.dynamics.dmft`).  whole_ties: a group of tied values is never split (the cut moves back to the
    group's start), e.g. the paths of one quadrature node."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    if v.ndim != 1 or w.shape != v.shape or not len(v):
        raise TheorykitError(f"below_quantile: values and weights must be 1-D of the same positive length, got "
                             f"shapes {v.shape} and {w.shape}")
    n = int(n)
    if n < 1:
        raise TheorykitError(f"below_quantile: n must be >= 1, got {n}")
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    cut = int(np.searchsorted(cum, 1.0 / n, side="right"))  # items whose cumulative weight stays below 1/n
    if whole_ties and 0 < cut < len(order):
        cut = int(np.searchsorted(v[order], v[order[cut]], side="left"))
    q = float(v[order[cut]]) if cut < len(order) else float(v.max())
    return TailCut(order=order, cum=cum, cut=cut, quantile=q, n=n)


def quantile_bins(y, weights, bins: int, *, discrete_max: int = 64, digits: int = 12) -> np.ndarray:
    """Bin index (N,) of every sample of y for binned conditional expectations (docs/theory.md §2).  y is rounded to
    about ``digits`` significant digits (relative rounding, so that the bins do not change when y is replaced by a
    bijection of it such as exp(y): an absolute rounding merged every y below 1e-12 into one bin); if it then takes at
    most ``discrete_max`` values, each value is its own bin (a discrete y); otherwise the bins are bounded by the
    weighted quantiles j / bins, j = 1..bins-1 (:func:`weighted_quantiles`, stable sort), and equal y values always
    share a bin (keeps mirror-symmetric pairs of nodes together)."""
    return quantile_bins_many(y, weights, (bins,), discrete_max=discrete_max, digits=digits)[0]


def quantile_bins_many(y, weights, bins: Sequence[int], *, discrete_max: int = 64, digits: int = 12) -> list:
    """:func:`quantile_bins` for several numbers of bins at once, from one sort of y (the link analysis's grids ask
    for 1000, 2000 and 4000 bins of the same 10^5 values)."""
    y = np.asarray(y, dtype=float)
    counts = [_int("bins", b, 1) for b in bins]
    if y.ndim != 1 or not len(y):
        raise TheorykitError(f"quantile_bins: y must be a non-empty 1-D array, got shape {y.shape}")
    yr = round_significant(y, digits)
    order = np.argsort(yr, kind="stable")
    ys = yr[order]
    vals = ys[np.concatenate([[True], ys[1:] != ys[:-1]])]
    if len(vals) <= discrete_max:
        idx = np.searchsorted(vals, yr)
        return [idx for _ in counts]
    w = np.asarray(weights, dtype=float)
    if w.shape != y.shape or not (np.all(np.isfinite(w)) and np.all(w >= 0)) or not w.sum() > 0:
        raise TheorykitError("weighted_quantiles: weights must be finite, >= 0, with a positive sum, one per value")
    cw = np.cumsum(w[order])
    cw /= cw[-1]
    out = []
    for b in counts:  # as weighted_quantiles(yr, w, j / b, kind="stable"), on the one sort
        edges = _inverted_cdf(ys, cw, np.arange(1, b) / b)
        out.append(np.searchsorted(np.unique(edges), yr, side="right"))
    return out


def round_significant(y, digits: int = 12) -> np.ndarray:
    """y rounded to about ``digits`` significant decimal digits (in binary: the mantissa to ceil(digits log2 10)
    bits), exactly and without overflow at any magnitude; 0, inf and NaN are kept."""
    y = np.asarray(y, dtype=float)
    m, e = np.frexp(y)
    bits = int(math.ceil(_int("digits", digits, 1) * math.log2(10)))
    return np.ldexp(np.round(np.ldexp(m, bits)), e - bits) if bits < 53 else y.copy()


def conditional_means(index, values, weights=None, groups: Optional[int] = None):
    """Binned conditional means (docs/theory.md §2): for bin index (N,) and values (N, p), returns (mass (G,),
    means (G, p)) with mass the total weight of each bin (the count when ``weights`` is None) and means the weighted
    mean of the values in each bin (0 for an empty bin).  G = groups (default index.max() + 1)."""
    index = np.asarray(index)
    values = np.asarray(values, dtype=float)
    if index.ndim != 1 or values.ndim != 2 or len(values) != len(index) or not len(index):
        raise TheorykitError(f"conditional_means: index must be (N,) and values (N, p) with N > 0, got shapes "
                             f"{index.shape} and {values.shape}")
    G = int(index.max()) + 1 if groups is None else _int("groups", groups, int(index.max()) + 1)
    if weights is None:
        mass = np.bincount(index, minlength=G).astype(float)
        sums = np.stack([np.bincount(index, weights=values[:, j], minlength=G) for j in range(values.shape[1])], 1)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != index.shape:
            raise TheorykitError(f"conditional_means: weights must be (N,) = {index.shape}, got {w.shape}")
        mass = np.bincount(index, weights=w, minlength=G)
        sums = np.stack([np.bincount(index, weights=w * values[:, j], minlength=G) for j in range(values.shape[1])],
                        axis=1)
    means = np.divide(sums, mass[:, None], out=np.zeros_like(sums), where=mass[:, None] > 0)
    return mass, means


def crossing_index(y: Sequence[float], level: float = 0.5, *, upward: bool = False) -> Optional[int]:
    """The first i at which the pair (y_i, y_{i+1}) brackets ``level``: (y_i - level)(y_{i+1} - level) <= 0 with
    y_i != y_{i+1} (``upward``: y_i <= level <= y_{i+1}, a crossing from below only).  A pair that only touches the
    level with equal values is skipped; a pair with a NaN never brackets.  None when the level is not crossed."""
    for i in range(len(y) - 1):
        a, b = y[i] - level, y[i + 1] - level
        if y[i] != y[i + 1] and ((a <= 0 <= b) if upward else (a * b <= 0)):
            return i
    return None


def crossing(x: Sequence[float], y: Sequence[float], level: float = 0.5, *, upward: bool = False) -> Optional[float]:
    """The x at which y crosses ``level``, by linear interpolation in the first bracketing pair
    (:func:`crossing_index`; points in the order given, x ascending in practice; later crossings are ignored; drop
    NaN points first to interpolate across them).  The one crossing finder of the package: finite-d midpoints
    delta_1/2, simulated midpoints, delta_dyn (gamma crossing 0 upwards), overlap crossings.  None when the level is
    not crossed."""
    i = crossing_index(y, level, upward=upward)
    if i is None:
        return None
    return x[i] + (level - y[i]) * (x[i + 1] - x[i]) / (y[i + 1] - y[i])


def interpolation_error(value: float, lo: tuple, hi: tuple, tried) -> float:
    """|value - the quadratic interpolation's root|: the root of the parabola through the bracket's ends lo = (a,
    f(a)), hi = (b, f(b)) and the evaluated point of ``tried`` ((x, f(x)) pairs) nearest to the bracket outside it,
    against the linear interpolation ``value`` (the secant's error, of order f's curvature x (b - a)^2), for the root
    of any f found by :func:`crossing` (delta*'s margin, P(capture) - 1/2).  NaN without a third point or a parabola
    root in [a, b]."""
    (a, fa), (b, fb) = lo, hi
    others = [(x, f) for x, f in tried if math.isfinite(f) and not a <= x <= b]
    if not others:
        return math.nan
    c, fc = min(others, key=lambda p: min(abs(p[0] - a), abs(p[0] - b)))
    coef = np.polyfit([a, b, c], [fa, fb, fc], 2)
    roots = [float(x.real) for x in np.roots(coef) if abs(x.imag) < 1e-12 and a <= x.real <= b]
    if not roots:
        return math.nan
    return float(min(abs(x - value) for x in roots))


@dataclass(frozen=True)
class Root:
    """A bracketed root of f (:func:`secant_root`).  value: the linear interpolation of f in the last bracket (None
    without a bracket); bracket: ((a, f(a)), (b, f(b))) with a sign change, or None when f has one sign at both ends
    (``side``: that sign, +1 or -1; 0 with a bracket); tried: every (x, f(x)) evaluated, in order."""

    value: Optional[float]
    bracket: Optional[tuple]
    tried: tuple
    side: int = 0


def secant_root(f: Callable[[float], float], lo: float, hi: float, *, tol: float, max_evaluations: int,
                f_lo: Optional[float] = None, f_hi: Optional[float] = None) -> Root:
    """The root of f in [lo, hi] by a safeguarded secant (Illinois: an end kept twice has its f halved for the next
    step; every new point at least a tenth of the bracket inside it), until the bracket is narrower than ``tol`` or
    ``max_evaluations`` calls of f (the ends included, unless given as ``f_lo``, ``f_hi``).  The one bracketed root
    finder of the package for expensive, smooth f (finite-d midpoints).  A NaN value of f raises TheorykitError."""
    tried: list[tuple[float, float]] = []
    calls = 0

    def ev(x: float) -> float:
        nonlocal calls
        calls += 1
        y = float(f(x))
        if not math.isfinite(y):
            raise TheorykitError(f"the function whose root is sought is {y} at {x:.6g}")
        tried.append((x, y))
        return y

    a, b = float(lo), float(hi)
    fa = ev(a) if f_lo is None else float(f_lo)
    fb = ev(b) if f_hi is None else float(f_hi)
    if f_lo is not None:
        tried.append((a, fa))
    if f_hi is not None:
        tried.append((b, fb))
    if fa * fb > 0 or fa == fb:
        return Root(None, None, tuple(tried), side=1 if fa > 0 else -1)
    sa, sb = fa, fb  # the (Illinois-scaled) values the secant uses
    kept = 0  # +1: a was kept last step, -1: b was
    while b - a > tol and calls < max_evaluations and fa != 0 and fb != 0:
        c = a - sa * (b - a) / (sb - sa) if sb != sa else 0.5 * (a + b)
        w = b - a
        c = min(max(c, a + 0.1 * w), b - 0.1 * w)
        fc = ev(c)
        if fc * fa > 0:
            a, fa, sa = c, fc, fc
            if kept == -1:
                sb *= 0.5
            kept = -1
        else:
            b, fb, sb = c, fc, fc
            if kept == 1:
                sa *= 0.5
            kept = 1
    value = a - fa * (b - a) / (fb - fa) if fb != fa else 0.5 * (a + b)
    return Root(float(value), ((a, fa), (b, fb)), tuple(tried))


def first_passage(y: Sequence[float], level: float = 0.5) -> Optional[int]:
    """The first index at which y >= ``level`` (a first-passage time on an integer grid, e.g. the escape time t_1/2
    from P(capture by t)); None when y never reaches it."""
    idx = np.flatnonzero(np.asarray(y, dtype=float) >= level)
    return int(idx[0]) if idx.size else None


def sym_eigvals(D: np.ndarray) -> np.ndarray:
    """(N, m) eigenvalues of each of N symmetric m x m matrices D (N, m, m), ascending (closed form for m <= 2: numpy's
    batched eigvalsh costs as much as a whole m = 2 Hessian solve)."""
    if D.shape[1] == 1:
        return D[:, 0, :].copy()
    if D.shape[1] == 2:
        a, b, c = D[:, 0, 0], D[:, 0, 1], D[:, 1, 1]
        h = np.sqrt(0.25 * (a - c) ** 2 + b * b)
        return np.stack([0.5 * (a + c) - h, 0.5 * (a + c) + h], axis=1)
    return np.linalg.eigvalsh(D)
