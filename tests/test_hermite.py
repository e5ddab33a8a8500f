"""Hermite coefficients: required exact values, and every coefficient against mpmath quadrature to 1e-10."""
import mpmath
import pytest
import sympy as sp

import theorykit as tk
from theorykit import conventions as cv

x = cv.X
sqpi = sp.sqrt(sp.pi)


def mp_mu(act, k):
    f = sp.lambdify(x, act.expr * cv.hermite_he(k), modules=[tk.symbolic.functions.MPMATH_MODULE, "mpmath"])
    with mpmath.workdps(30):
        return float(mpmath.quad(lambda t: f(t) * mpmath.exp(-t * t / 2) / mpmath.sqrt(2 * mpmath.pi),
                                 [-mpmath.inf, 0, 0.5, mpmath.inf]))  # kinks of the test cases


@pytest.mark.parametrize("name,expected", [
    ("quad", [1, 0, 2, 0, 0]),
    ("gelu", [1 / (2 * sqpi), sp.Rational(1, 2), 3 / (4 * sqpi)]),
    ("relu", [1 / sp.sqrt(2 * sp.pi), sp.Rational(1, 2), 1 / sp.sqrt(2 * sp.pi)]),
    ("he3", [0, 0, 0, 6, 0]),
    ("linear", [0, 1, 0, 0]),
])
def test_required_exact_values(name, expected):
    h = tk.hermite_coefficients(name, len(expected) - 1)
    for c, e in zip(h.coefficients, expected):
        assert c.tier == "exact"
        assert sp.simplify(c.exact - e) == 0, (name, c.k, c.exact, e)


@pytest.mark.parametrize("name", ["gelu", "relu", "tanh", "erf", "x*erf(x)", "Abs(x)", "sigmoid(x)",
                                  "Max(0, x - 1/2)**2"])
def test_against_mpmath_quadrature(name):
    h = tk.hermite_coefficients(name, 5, time_limit=1.0)
    for c in h.coefficients:
        assert abs(c.value - mp_mu(h.activation, c.k)) < 1e-10, (name, c.k)
        assert c.tier in ("exact", "quadrature")
        if c.tier == "quadrature":
            assert c.exact is None and c.error < 1e-10


def test_series_reconstructs_polynomial():
    h = tk.hermite_coefficients("x**3 + 2*x**2 - 1", 4)
    assert sp.expand(h.series() - (x ** 3 + 2 * x ** 2 - 1)) == 0


def test_mu_k_equals_expected_derivative():
    """Stein: mu_k = E[sigma^(k)(G)] (smooth case)."""
    for k in range(4):
        a = tk.hermite_coefficients("gelu", k)[k].exact
        b = tk.symbolic.expectation(sp.diff(tk.activation("gelu").expr, x, k), [x]).exact
        assert sp.simplify(a - b) == 0


def test_expectation_of_q():
    g = sp.diff(tk.activation("gelu").expr, x) ** 2
    e = tk.symbolic.expectation(g, variance="q")  # symbolic variance q
    assert e.tier == "exact" and e.exact.free_symbols == {cv.Q}
    assert abs(float(e.exact.subs(cv.Q, 1)) - tk.symbolic.expectation(g, [x]).value) < 1e-12
    assert tk.symbolic.expectation("x**2", variance=3).exact == 3
    with pytest.raises(tk.TheorykitError, match="variance"):
        tk.symbolic.expectation("x**2", variance=-1)


def test_bad_degree():
    with pytest.raises(tk.TheorykitError, match="degree"):
        tk.hermite_coefficients("gelu", -1)
