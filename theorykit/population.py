"""Population (fresh-sample, d -> infinity) test loss of a two-layer network (docs/theory.md §1 and §3).

For a network with weights Theta (d x m) and a target with latent frame Theta* (d x k, orthonormal), a fresh sample
x ~ N(0, I_d) has latent z = Theta*^T x ~ N(0, I_k) and pre-activations

    r = Theta^T x = M^T z + g,    M = Theta*^T Theta (k x m),    g ~ N(0, C) independent of z,
    C = Theta^T Theta - M^T M  (m x m, positive semidefinite: the covariance of the part of Theta outside Theta*).

So the test loss depends on Theta only through (M, C):

    population_loss = E[ l(y, f(M^T z + g)) ],   y = h(z, eps),  z ~ N(0, I_k),  eps ~ N(0, 1) (noisy links only).

This is exact at every d (not only d -> infinity) for weights independent of the test sample; the DMFT calls it with
C = C_theta(t, t).  The network's loss and output come from :meth:`theorykit.Network.loss_values` (one copy of the
derivatives and outputs, in theorykit.symbolic.network).

Method tiers (reported in the returned :class:`theorykit.Expectation`): the Gaussian variables are z (k), eps (if
the link is noisy) and the rank(C) directions of g (C = U diag(s) U^T, directions with s <= 1e-12 max(s_max,
||M||_2^2) dropped: they change the loss by O(s)).  With D of them:

* "exact": sigma, l and h all polynomials, so the integrand is a polynomial of degree P in the D variables; tensor
  Gauss-Hermite with o = floor(P/2) + 1 nodes per axis integrates it exactly (error 0, rounding aside), used while
  o^D <= EXACT_MAX_NODES and o <= theorykit.rules.HERMITE_MAX_ORDER.
* "quadrature": D <= 4: tensor Gauss-Hermite with ``order`` nodes per axis (default ORDER[D]); error = the difference
  from the rule with lower_order(order) nodes (conservative: the estimate is that of the coarser rule).  The rules
  are :func:`theorykit.rules.gauss_hermite` (docs/theory.md §3, numerics).
* "monte-carlo": otherwise, ``samples`` draws with ``seed`` (common random numbers: the same draws for every (M, C));
  error = the standard error.

:class:`PopulationLoss` caches the rules and the responses y on the nodes, so evaluating many (M, C) (a GD or DMFT
trajectory) costs one network evaluation on the nodes per (M, C).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import sympy as sp

from . import conventions as cv
from .errors import TheorykitError
from .rules import HERMITE_MAX_ORDER, gauss_hermite, lower_order
from .symbolic.gaussian import Expectation
from .symbolic.links import format_cuts

__all__ = ["population_loss", "PopulationLoss", "ORDER", "EXACT_MAX_NODES", "QUADRATURE_MAX_DIM", "lower_order"]

#: default Gauss-Hermite nodes per axis of the quadrature tier, by the number D of Gaussian variables
ORDER = {1: 80, 2: 40, 3: 24, 4: 14}
#: the quadrature tier is used up to this many Gaussian variables (Monte Carlo beyond)
QUADRATURE_MAX_DIM = 4
#: the exact (polynomial) tier is used while its tensor grid has at most this many nodes
EXACT_MAX_NODES = 10 ** 6
#: relative threshold below which an eigen-direction of C is dropped
NULL_RTOL = 1e-12
#: tolerance for the symmetry / positive semidefiniteness of C (relative to its scale)
PSD_RTOL = 1e-8


def _poly_degree(expr: sp.Expr, symbols) -> Optional[int]:
    """Total degree of expr as a polynomial in symbols, or None if it is not a polynomial."""
    try:
        if not expr.is_polynomial(*symbols):
            return None
        return int(sp.Poly(expr, *symbols).total_degree())
    except (sp.PolynomialError, sp.GeneratorsNeeded, TypeError, ValueError):
        return None


def integrand_degree(net, link) -> Optional[int]:
    """An upper bound on the degree of l(h(z, eps), f(M^T z + g)) in the Gaussian variables when sigma, l and h are
    all polynomials (else None): max over the monomials y^i yhat^j of l of i deg(h) + j deg(sigma)."""
    ds = _poly_degree(net.activation.expr, [cv.X])
    dh = _poly_degree(link.expr, list(link.variables))
    if ds is None or dh is None:
        return None
    try:
        if not net.loss.expr.is_polynomial(cv.Y, cv.YHAT):
            return None
        monoms = sp.Poly(net.loss.expr, cv.Y, cv.YHAT).monoms()
    except (sp.PolynomialError, sp.GeneratorsNeeded, TypeError, ValueError):
        return None
    return max((i * dh + j * ds for i, j in monoms), default=0)


class PopulationLoss:
    """E[l(y, f(M^T z + g))] for one network and link at many (M, C) (module docstring): rules, nodes and the
    responses y on the nodes are built once and cached.

    net: a :class:`theorykit.Network`; link: a :class:`theorykit.Link` or a spec for :func:`theorykit.link`.
    order: Gauss-Hermite nodes per axis of the quadrature tier (default ORDER[D]), or a dict {D: nodes} by the number
    D of Gaussian variables; samples, seed: the Monte Carlo tier.  Call it with (M, C) for an :class:`Expectation`.
    """

    def __init__(self, net, link, *, order: Optional[int | dict] = None, samples: int = 200_000, seed: int = 0):
        from .symbolic.ingredients import Link, link as make_link
        from .symbolic.network import Network

        if not isinstance(net, Network):
            raise TheorykitError(f"net must be a theorykit.Network, got {type(net).__name__}")
        self.net = net
        self.link = link if isinstance(link, Link) else make_link(link)

        def bad(o):
            return isinstance(o, bool) or not isinstance(o, (int, np.integer)) or not 1 <= o <= HERMITE_MAX_ORDER

        if isinstance(order, dict):
            if any(bad(o) for o in order.values()):
                raise TheorykitError(f"order values must be integers in 1..{HERMITE_MAX_ORDER}, got {order!r}")
            order = {int(D): int(o) for D, o in order.items()}
        elif order is not None:
            if bad(order):
                raise TheorykitError(f"order must be an integer in 1..{HERMITE_MAX_ORDER} (Gauss-Hermite nodes per "
                                     f"axis), got {order!r}")
            order = int(order)
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 2:
            raise TheorykitError(f"samples must be an integer >= 2, got {samples!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise TheorykitError(f"seed must be an integer >= 0, got {seed!r}")
        self.order = order
        self.samples, self.seed = int(samples), int(seed)
        self.k, self.m, self.noisy = self.link.k, net.m, self.link.noisy
        self.degree = integrand_degree(net, self.link)
        self._latent_rules: dict = {}  # order -> (nodes z (N, k), weights (N,), y (N,))
        self._xi_rules: dict = {}  # (q, order) -> (nodes (Nx, q), weights (Nx,), y repeated on the full grid)
        self._mc = None

    @property
    def latent_cuts(self):
        """The cuts of the latent rule (:func:`theorykit.symbolic.links.link_cuts`): where a single-index link's
        response jumps or kinks in z (numbers), or one tuple per axis for a multi-index link that jumps or kinks only
        on lines z_i = c; empty when smooth or when the breakpoints move with another coordinate or the noise."""
        if not hasattr(self, "_cuts"):
            from .symbolic.links import link_cuts

            self._cuts = link_cuts(self.link)
        return self._cuts

    # ----------------------------------------------------------------------------------------- inputs
    def directions(self, M, C) -> tuple[np.ndarray, np.ndarray]:
        """Validate (M, C); return M (k, m) and L (q, m) with g = xi @ L, xi ~ N(0, I_q), q = rank(C)."""
        k, m = self.k, self.m
        M = np.asarray(M, dtype=float)
        if M.shape == (m,) and k == 1:
            M = M[None, :]
        if M.shape != (k, m):
            raise TheorykitError(f"M must have shape (k, m) = ({k}, {m}) (M = Theta*^T Theta), got {M.shape}")
        C = np.asarray(C, dtype=float)
        if C.shape != (m, m):
            raise TheorykitError(f"C must have shape (m, m) = ({m}, {m}), got {C.shape}")
        if not (np.all(np.isfinite(M)) and np.all(np.isfinite(C))):
            raise TheorykitError("M and C must be finite")
        # scale of the rounding in C = gram - M^T M: both terms are O(max(|C|, ||M||^2))
        mscale = float(np.linalg.norm(M, 2) ** 2) if M.size else 0.0
        scale = max(float(np.abs(C).max(initial=0.0)), mscale, 1e-300)
        if np.abs(C - C.T).max(initial=0.0) > PSD_RTOL * scale:
            raise TheorykitError("C must be symmetric (the covariance Theta^T Theta - M^T M)")
        s, U = np.linalg.eigh((C + C.T) / 2)
        if s.min(initial=0.0) < -PSD_RTOL * scale:
            raise TheorykitError(f"C must be positive semidefinite, its smallest eigenvalue is {s.min():.3g}")
        keep = s > NULL_RTOL * max(s.max(initial=0.0), mscale, 1e-300)  # tiny negative (rounding) ones clamped too
        L = (U[:, keep] * np.sqrt(s[keep])).T  # (q, m): g = xi @ L has covariance L^T L = C (null part dropped)
        return M, L

    def dimension(self, q: int) -> int:
        """Number of Gaussian variables for rank(C) = q."""
        return self.k + int(self.noisy) + q

    def tier(self, q: int) -> str:
        """The tier used for rank(C) = q: "exact", "quadrature" or "monte-carlo"."""
        D = self.dimension(q)
        o = None if self.degree is None else self.degree // 2 + 1
        if o is not None and o <= HERMITE_MAX_ORDER and o ** D <= EXACT_MAX_NODES:
            return "exact"
        return "quadrature" if D <= QUADRATURE_MAX_DIM else "monte-carlo"

    # ----------------------------------------------------------------------------------------- rules
    def _latent(self, order: int):
        """Tensor rule over (z, eps) and the responses y on its nodes (cached by order).  A single-index link that
        jumps (a piecewise h, e.g. sign(|z| - median|z|)) is integrated in z by Gauss-Legendre on the pieces between
        its breakpoints (:func:`theorykit.rules.gauss_legendre_normal_split`): Gauss-Hermite across a jump converges
        only like 1 / order (GeLU, logistic loss, that link: 0.760 against the exact 0.741 at 64 nodes)."""
        if order not in self._latent_rules:
            from .rules import latent_rule

            rule = latent_rule(self.k, self.noisy, order, self.latent_cuts)
            nodes, w = rule.nodes, rule.weights
            z = nodes[:, :self.k]
            eps = nodes[:, self.k] if self.noisy else None
            self._latent_rules[order] = (z, w, self.link.response(z, eps))
        return self._latent_rules[order]

    def grid_value(self, M: np.ndarray, L: np.ndarray, order: int) -> float:
        """The loss integrated by the tensor rule with ``order`` nodes per axis, whatever the tier; (M, L) as
        returned by :meth:`directions`."""
        z, wz, y = self._latent(order)
        key = (L.shape[0], order)
        if key not in self._xi_rules:
            rule = gauss_hermite(order, L.shape[0])  # tensor Gauss-Hermite for N(0, I_q)
            xi, wx = rule.nodes, rule.weights
            self._xi_rules[key] = (xi, wx, np.repeat(y, len(wx)))
        xi, wx, yy = self._xi_rules[key]
        r = (z @ M)[:, None, :] + (xi @ L)[None, :, :]  # (Nz, Nx, m)
        with np.errstate(all="ignore"):
            vals = self.net.loss_values(r.reshape(-1, self.m), yy).reshape(len(wz), len(wx))
        if not np.all(np.isfinite(vals)):
            raise TheorykitError("population_loss: the loss is not finite at some quadrature nodes")
        return float(wz @ vals @ wx)

    def _monte_carlo(self, M: np.ndarray, L: np.ndarray) -> tuple[float, float]:
        if self._mc is None:  # common random numbers: one draw, in the order z, eps (noisy links), xi (S, m)
            rng = np.random.default_rng(self.seed)
            z = rng.standard_normal((self.samples, self.k))
            eps = rng.standard_normal(self.samples) if self.noisy else None
            xi = rng.standard_normal((self.samples, self.m))
            self._mc = (z, self.link.response(z, eps), xi)
        z, y, xi = self._mc
        r = z @ M + xi[:, :L.shape[0]] @ L
        with np.errstate(all="ignore"):
            vals = self.net.loss_values(r, y)
        if not np.all(np.isfinite(vals)):
            raise TheorykitError("population_loss: the loss is not finite at some Monte Carlo samples")
        return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(len(vals)))

    # ----------------------------------------------------------------------------------------- evaluation
    def __call__(self, M, C) -> Expectation:
        M, L = self.directions(M, C)
        q = L.shape[0]
        D = self.dimension(q)
        names = "z" + (f"1..z{self.k}" if self.k > 1 else "") + (", eps" if self.noisy else "") + \
                (f", {q} direction{'s' if q != 1 else ''} of g ~ N(0, C)" if q else "")
        tier = self.tier(q)
        plural = "s" if D != 1 else ""
        if tier == "exact":
            o = self.degree // 2 + 1
            val = self.grid_value(M, L, o)
            return Expectation(None, val, "exact", 0.0,
                               f"Gauss-Hermite, {o} node{'s' if o != 1 else ''} per axis over {D} Gaussian "
                               f"variable{plural} ({names}), exact for polynomials of degree <= {2 * o - 1} "
                               f"(integrand degree <= {self.degree})")
        if tier == "quadrature":
            o = self.order if isinstance(self.order, int) else (self.order or {}).get(D, ORDER[D])
            lo = lower_order(o)
            val = self.grid_value(M, L, o)
            err = abs(val - self.grid_value(M, L, lo)) + 1e-15 * max(1.0, abs(val))
            zrule = (f"z by Gauss-Legendre on the pieces between the link's breakpoints "
                     f"{format_cuts(self.latent_cuts)} ({o} nodes each), the rest by "
                     if self.latent_cuts else "")
            return Expectation(None, val, "quadrature", err,
                               f"{zrule}tensor Gauss-Hermite, {o} nodes per axis over {D} Gaussian variable{plural} "
                               f"({names}); error = difference from {lo} nodes per axis")
        val, err = self._monte_carlo(M, L)
        return Expectation(None, val, "monte-carlo", err,
                           f"Monte Carlo, {self.samples} samples, seed {self.seed}, over {D} Gaussian "
                           f"variable{plural} ({names}); error = standard error")

    def many(self, Ms, Cs) -> list:
        """[self(M_t, C_t) for t]: Ms (T, k, m), Cs (T, m, m)."""
        Ms, Cs = np.asarray(Ms, dtype=float), np.asarray(Cs, dtype=float)
        if Ms.ndim != 3 or Cs.ndim != 3 or len(Ms) != len(Cs):
            raise TheorykitError(f"Ms must be (T, k, m) and Cs (T, m, m) with the same T, got {Ms.shape}, {Cs.shape}")
        return [self(M, C) for M, C in zip(Ms, Cs)]


def population_loss(net, link, M, C, *, order: Optional[int] = None, samples: int = 200_000,
                    seed: int = 0) -> Expectation:
    """E[l(y, f(M^T z + g))] with z ~ N(0, I_k), y = link.response(z, eps), g ~ N(0, C) (module docstring).

    The population (fresh-sample) test loss of a network with Theta^T Theta = M^T M + C and Theta*^T Theta = M.
    net: :class:`theorykit.Network`; link: :class:`theorykit.Link` or a spec; M (k, m); C (m, m) symmetric positive
    semidefinite (possibly singular).  Returns an :class:`theorykit.Expectation` with value, tier ("exact" |
    "quadrature" | "monte-carlo"), error and method.  For many (M, C), use :class:`PopulationLoss` (cached rules).
    """
    return PopulationLoss(net, link, order=order, samples=samples, seed=seed)(M, C)
