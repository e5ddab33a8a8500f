"""SymPy functions theorykit adds, with numerically safe NumPy and mpmath implementations.

``softplus(u) = log(1 + exp(u))`` and ``sigmoid(u) = 1/(1 + exp(-u))`` keep the logistic loss and its derivatives
finite for any argument (NumPy's ``logaddexp`` and SciPy's ``expit``) where the naive closed forms overflow.
A user's ``log(1 + exp(u))`` is rewritten to ``softplus(u)`` automatically (:func:`stabilise`).
"""
import numpy as np
import sympy as sp
import mpmath
from scipy import special


class sigmoid(sp.Function):
    """Logistic function 1/(1 + exp(-u))."""

    nargs = 1

    def fdiff(self, argindex=1):
        s = sigmoid(self.args[0])
        return s * (1 - s)

    @classmethod
    def eval(cls, u):
        if u.is_zero:
            return sp.Rational(1, 2)

    def _eval_rewrite_as_exp(self, u, **kwargs):
        return 1 / (1 + sp.exp(-u))

    def _eval_evalf(self, prec):
        return self.rewrite(sp.exp)._eval_evalf(prec)

    def _eval_is_real(self):
        return self.args[0].is_real


class softplus(sp.Function):
    """log(1 + exp(u)), evaluated stably."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])

    @classmethod
    def eval(cls, u):
        if u.is_zero:
            return sp.log(2)

    def _eval_rewrite_as_log(self, u, **kwargs):
        return sp.log(1 + sp.exp(u))

    def _eval_evalf(self, prec):
        return self.rewrite(sp.log)._eval_evalf(prec)

    def _eval_is_real(self):
        return self.args[0].is_real


def _np_softplus(u):
    return np.logaddexp(0.0, u)


def _np_heaviside(u, h0=0.5):
    return np.heaviside(u, h0)


#: Extra names for ``lambdify`` with the NumPy/SciPy backend.
NUMPY_MODULE = {"softplus": _np_softplus, "sigmoid": special.expit, "Heaviside": _np_heaviside,
                "erfinv": special.erfinv}

#: Extra names for ``lambdify`` with the mpmath backend (quadrature tier).
MPMATH_MODULE = {
    "softplus": lambda u: mpmath.log1p(mpmath.exp(u)) if u < 30 else u + mpmath.log1p(mpmath.exp(-u)),
    "sigmoid": lambda u: 1 / (1 + mpmath.exp(-u)),
    "Heaviside": lambda u, h0=0.5: mpmath.mpf(1) if u > 0 else (mpmath.mpf(0) if u < 0 else mpmath.mpf(h0)),
    "sign": mpmath.sign,
    "erfinv": mpmath.erfinv,
    "DiracDelta": lambda u: mpmath.mpf(0),
}


def stabilise(expr: sp.Expr) -> sp.Expr:
    """Rewrite overflow-prone patterns: log(1 + exp(u)) -> softplus(u), 1/(1 + exp(-u)) -> sigmoid(u)."""
    u = sp.Wild("u")
    expr = expr.replace(sp.log(1 + sp.exp(u)), softplus(u))
    expr = expr.replace(1 / (1 + sp.exp(-u)), sigmoid(u))
    return expr


def Phi(u):
    """Standard normal CDF as a SymPy expression: (1 + erf(u/sqrt 2))/2."""
    return (1 + sp.erf(u / sp.sqrt(2))) / 2


def phi(u):
    """Standard normal density as a SymPy expression."""
    return sp.exp(-u ** 2 / 2) / sp.sqrt(2 * sp.pi)


def relu(u):
    return sp.Max(0, u)
