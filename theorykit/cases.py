"""Named cases: the settings the validation tables, the figures and ``theorykit plot`` share, and the one map from a
case's name to a :class:`theorykit.Problem`."""
from __future__ import annotations

from .errors import TheorykitError
from .problem import Problem

__all__ = ["CASES", "problem"]

#: name -> (activation, link, loss, m, eta)
CASES = {
    "bounded": ("gelu", "sign-symmetric", "logistic", 1, 1.0),
    "pr-gelu": ("gelu", "phase-retrieval", "square", 1, 1.0),
    "pr-x2": ("quad", "phase-retrieval", "square", 1, 0.05),
    "pr-relu": ("relu", "phase-retrieval", "square", 1, 0.5),
    "pr-gelu-m2": ("gelu", "phase-retrieval", "square", 2, 1.0),
    "bounded-m2": ("gelu", "sign-symmetric", "logistic", 2, 1.0),
    "pr-x2-m2": ("quad", "phase-retrieval", "square", 2, 0.05),
    # x^2 at width 2 with twice the step (the finite-d validation's horizon T = 200 then spans eta T = 20)
    "pr-x2-m2-eta0.1": ("quad", "phase-retrieval", "square", 2, 0.1),
    # the centred phase-retrieval target y = z^2 - 1 (the convention that reproduces the paper's pair with GD,
    # tables/paper_comparison.md)
    "pr-gelu-centred": ("gelu", "z**2 - 1", "square", 1, 1.0),
    "pr-x2-centred": ("quad", "z**2 - 1", "square", 1, 0.05),
    # a custom activation with a non-zero second Hermite coefficient
    "pr-xtanh": ("x*tanh(x)", "phase-retrieval", "square", 1, 1.0),
    # two hard directions (k_H = 2): rotation-invariant and centred, a product, a bounded product's sign
    "k2-sum": ("gelu", "z1**2 + z2**2 - 2", "square", 1, 1.0),
    "k2-prod": ("gelu", "z1*z2", "square", 1, 1.0),
    "k2-sign": ("gelu", "sign(z1*z2)", "logistic", 1, 1.0),
}


def problem(name: str, delta: float, steps: int, *, link=None, **kw) -> Problem:
    """The :class:`Problem` of case ``name`` at sample ratio ``delta`` run for ``steps`` GD steps (``link``: another
    link for the same activation, loss and step; other keywords go to Problem, e.g. a=)."""
    if name not in CASES:
        raise TheorykitError(f"unknown case {name!r}: one of {', '.join(CASES)}")
    act, lk, loss, m, eta = CASES[name]
    return Problem(act, lk if link is None else link, loss, m, delta=delta, eta=eta, steps=steps, **kw)
