"""Named activations, links and losses.  Each value is a function of keyword parameters returning a SymPy expression.

Parameters are given after a colon: ``noisy-phase-retrieval:s=0.3``, ``huber:c=2``.
"""
import sympy as sp

from .. import conventions as cv
from . import functions as fn

x, z, eps, y, yhat = cv.X, cv.Z, cv.EPS, cv.Y, cv.YHAT
z1, z2 = cv.z_symbol(1), cv.z_symbol(2)

#: median of |G| for G ~ N(0,1): Phi^{-1}(3/4) = sqrt(2) erfinv(1/2)
MEDIAN_ABS_GAUSSIAN = sp.sqrt(2) * sp.erfinv(sp.Rational(1, 2))

ACTIVATIONS = {
    "quad": lambda: x ** 2,
    "gelu": lambda: x * fn.Phi(x),
    "relu": lambda: sp.Max(0, x),
    "tanh": lambda: sp.tanh(x),
    "erf": lambda: sp.erf(x),
    "linear": lambda: x,
    "he2": lambda: sp.hermite_prob(2, x),
    "he3": lambda: sp.hermite_prob(3, x),
}

LINKS = {
    "phase-retrieval": lambda: z ** 2,
    "noisy-phase-retrieval": lambda s=sp.Rational(1, 2): z ** 2 + s * eps,
    "relu": lambda: sp.Max(0, z),
    "abs": lambda: sp.Abs(z),
    "sign-symmetric": lambda: sp.sign(sp.Abs(z) - MEDIAN_ABS_GAUSSIAN),
    "linear": lambda: z,
    "easy-quadratic": lambda: z + z ** 2 / 2,
    "product": lambda: z1 * z2,
    "staircase": lambda: z1 + z2 ** 2,
}

LOSSES = {
    "square": lambda: (y - yhat) ** 2 / 2,
    "logistic": lambda: fn.softplus(-y * yhat),
    "huber": lambda c=sp.Integer(1): sp.Piecewise(((y - yhat) ** 2 / 2, sp.Abs(y - yhat) <= c),
                                                   (c * sp.Abs(y - yhat) - c ** 2 / 2, True)),
}

DESCRIPTIONS = {
    "quad": "x^2", "gelu": "x Phi(x)", "relu": "max(0, x)", "tanh": "tanh(x)", "erf": "erf(x)", "linear": "x",
    "he2": "He_2(x) = x^2 - 1", "he3": "He_3(x) = x^3 - 3x",
    "phase-retrieval": "z^2", "noisy-phase-retrieval": "z^2 + s eps (s = 1/2)", "abs": "|z|",
    "sign-symmetric": "sign(|z| - median|z|)", "easy-quadratic": "z + z^2/2", "product": "z1 z2",
    "staircase": "z1 + z2^2", "square": "(y - yhat)^2 / 2", "logistic": "log(1 + exp(-y yhat))",
    "huber": "Huber with threshold c = 1",
}
