"""Hermite expansions and Gaussian expectations of an activation (probabilists' convention, see conventions.py).

    mu_k = E[sigma(G) He_k(G)] = E[sigma^(k)(G)],   sigma = sum_k mu_k He_k / k!,   G ~ N(0, 1).

mu_k is computed as E[sigma(G) He_k(G)] (valid for non-smooth sigma without distributional derivatives) by the
tiers of :mod:`theorykit.symbolic.gaussian`: closed form when it exists, otherwise quadrature with its error.
"""
from __future__ import annotations

from dataclasses import dataclass, asdict
from typing import Optional

import sympy as sp

from .. import conventions as cv
from ..errors import TheorykitError
from .gaussian import expectation
from .ingredients import Activation, activation as make_activation


@dataclass(frozen=True)
class HermiteCoefficient:
    """mu_k = E[sigma(G) He_k(G)]: exact (SymPy or None), value (float), tier ('exact'/'quadrature'), error."""

    k: int
    exact: Optional[sp.Expr]
    value: float
    tier: str
    error: float
    method: str

    def as_dict(self) -> dict:
        d = asdict(self)
        d["exact"] = None if self.exact is None else str(self.exact)
        return d


@dataclass(frozen=True)
class HermiteExpansion:
    """The first degree+1 Hermite coefficients of an activation."""

    activation: Activation
    coefficients: tuple

    def values(self):
        return [c.value for c in self.coefficients]

    def __getitem__(self, k) -> HermiteCoefficient:
        return self.coefficients[k]

    def series(self) -> sp.Expr:
        """sum_k mu_k He_k(x)/k! with exact coefficients where known (floats otherwise)."""
        return sum((c.exact if c.exact is not None else sp.Float(c.value)) * cv.hermite_he(c.k) / sp.factorial(c.k)
                   for c in self.coefficients)


def hermite_coefficients(act, degree: int = 4, time_limit: float = 3.0,
                         wall_limit: Optional[float] = None) -> HermiteExpansion:
    """mu_0..mu_degree of ``act`` (preset name, expression string or Activation).

    The coefficients mu_k = E[sigma(G) He_k(G)] = E[sigma^(k)(G)], G ~ N(0, 1), in the probabilists' convention of
    docs/theory.md §1, so that sigma = sum_k mu_k He_k / k!; computed as E[sigma(G) He_k(G)], they need no
    distributional derivatives (docs/theory.md §3.1).

    Parameters
    ----------
    act : str or Activation
        Preset name, expression string or Activation.
    degree : int
        The highest k, in 0..40 (default 4).
    time_limit : float
        Seconds for the symbolic tier of each expectation (default 3).
    wall_limit : float, optional
        Each coefficient under ``wall_limit`` seconds of wall-clock time (default:
        :func:`theorykit.symbolic.gaussian.default_wall_limit`).

    Returns
    -------
    HermiteExpansion
        ``activation`` and ``coefficients``, a tuple of degree + 1 ``HermiteCoefficient`` (``k``, ``exact`` or None,
        ``value``, ``tier``, ``error``, ``method``); ``series()`` is sum_k mu_k He_k(x)/k!.

    Raises
    ------
    TheorykitError
        A degree outside 0..40, or an activation that cannot be built; a computation past ``wall_limit`` raises its
        subclass TimeLimitError.

    Examples
    --------
    >>> import theorykit as tk
    >>> h = tk.hermite_coefficients("gelu", 2)
    >>> [c.exact for c in h.coefficients]
    [1/(2*sqrt(pi)), 1/2, 3/(4*sqrt(pi))]
    >>> h.coefficients[2].tier
    'exact'
    """
    act = make_activation(act)
    if not isinstance(degree, int) or degree < 0 or degree > 40:
        raise TheorykitError(f"degree must be an integer in 0..40, got {degree!r}")
    coeffs = []
    for k in range(degree + 1):
        e = expectation(act.expr * cv.hermite_he(k), [cv.X], time_limit=time_limit, wall_limit=wall_limit)
        # value is None only for an infinite or symbolic expectation, which float() refuses (as it always did)
        coeffs.append(HermiteCoefficient(k, e.exact, float(e.value), e.tier, e.error, e.method))  # type: ignore[arg-type]
    return HermiteExpansion(act, tuple(coeffs))
