"""SymPy expressions to NumPy functions, safely: :func:`lambdify_safe` (common subexpressions eliminated, Piecewise
branches evaluated without warnings, complex values refused as NaN, picklable) and :func:`drop_dirac` (the almost-sure
value of a derivative with kinks).  Every numeric function of the ingredients, the network and the kink finder is
made here."""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import functions as fn

__all__ = ["NUMPY", "Compiled", "lambdify_safe", "drop_dirac"]

NUMPY = [fn.NUMPY_MODULE, "scipy", "numpy"]


class Compiled:
    """A lambdified NumPy function (see :func:`lambdify_safe`).  It pickles as its SymPy expression and is compiled
    again on first use: the DMFT runs its replicas in worker processes, and lambdify's generated functions do not
    pickle."""

    def __init__(self, args, expr, name: str):
        self.args, self.expr, self.__name__ = tuple(args), expr, name
        self.multi = isinstance(expr, (tuple, list))
        self._f = None

    def __getstate__(self):
        return {**self.__dict__, "_f": None}

    def compile(self) -> "Compiled":
        if self._f is None:
            self._f = sp.lambdify(self.args, list(self.expr) if self.multi else [self.expr], modules=NUMPY, cse=True)
        return self

    def __call__(self, *vals):
        self.compile()
        vals = [np.asarray(v, dtype=float) for v in vals]
        with np.errstate(all="ignore"):
            outs = self._f(*vals)
        shape = np.broadcast(*vals).shape if len(vals) > 1 else (vals[0].shape if vals else ())
        outs = [np.broadcast_to(_real(o), shape) for o in outs]
        return tuple(outs) if self.multi else outs[0]


def _real(o) -> np.ndarray:
    """A float array: a complex value (an expression with I in it, e.g. exp(500*I) or (-8)**(1/3)) is NaN where its
    imaginary part is not round-off, so that callers' finiteness checks refuse it, never silently its real part."""
    a = np.asarray(o)
    if np.iscomplexobj(a):
        with np.errstate(invalid="ignore"):
            a = np.where(np.abs(a.imag) <= 1e-12 * np.maximum(1.0, np.abs(a.real)), a.real, np.nan)
    return np.asarray(a, dtype=float)


def lambdify_safe(args, expr, name: str) -> Compiled:
    """``lambdify`` to NumPy with common-subexpression elimination.

    ``expr`` is one expression (the function returns one array) or a tuple of expressions (it returns a tuple of
    arrays), each broadcast to the common shape of the inputs.  Piecewise expressions are lambdified to
    ``numpy.select`` (every branch is evaluated): floating-point warnings from discarded branches are silenced;
    callers check the results for NaN.  The result pickles (as its expression).
    """
    return Compiled(args, expr, name).compile()  # compiled now: lambdify's own errors surface at definition


def drop_dirac(expr: sp.Expr) -> tuple[sp.Expr, bool]:
    """Remove DiracDelta terms (a derivative of a kink): returns (expr without them, whether any were there)."""
    if not expr.has(sp.DiracDelta):
        return expr, False
    return sp.expand(expr).replace(sp.DiracDelta, lambda *a: sp.Integer(0)), True
