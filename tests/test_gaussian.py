"""Closed-form Gaussian expectations against mpmath quadrature of the defining integral (to 1e-10)."""
import mpmath
import numpy as np
import pytest
import sympy as sp

from theorykit import conventions as cv
from theorykit.symbolic import functions as fn
from theorykit.symbolic.gaussian import (exact_expectation, expectation, quadrature_1d, quadrature_nd,
                                        shared_grid_values)

x = cv.X


def mp_expect(f, points=(0,)):
    with mpmath.workdps(30):
        g = sp.lambdify(x, f, modules=[fn.MPMATH_MODULE, "mpmath"])
        val = mpmath.quad(lambda t: g(t) * mpmath.exp(-t * t / 2) / mpmath.sqrt(2 * mpmath.pi),
                          [-mpmath.inf, *points, mpmath.inf])
    return float(val)


CASES = [
    x ** 6 - 3 * x ** 2,
    x * sp.erf(x) * x ** 2,
    sp.erf(x / 3) * sp.erf(2 * x) * x ** 4,
    sp.exp(-x ** 2 / 3) * x ** 4,
    sp.exp(1 - x ** 2) * sp.erf(x) * x ** 3,
    sp.Max(0, x) ** 3,
    sp.Abs(x - 1) * x,
    sp.Heaviside(x - sp.Rational(1, 3)) * x ** 5,
    sp.sign(sp.Abs(x) - 1) * x ** 2,
    sp.Min(x, 2 * x + 1) * x,
    (x * fn.Phi(x)) ** 2,
    sp.diff(x * fn.Phi(x), x) ** 2,
    sp.erfc(x) * x,
]


@pytest.mark.parametrize("f", CASES, ids=[str(c) for c in CASES])
def test_engine_matches_mpmath(f):
    ex = exact_expectation(f, [x])
    assert ex is not None, f"no closed form for {f}"
    pts = sorted({float(p) for p in (0, 1, -1, sp.Rational(1, 3), -2, -sp.Rational(1, 2))})
    assert abs(float(sp.N(ex, 30)) - mp_expect(f, pts)) < 1e-10


def test_variance_parameter_closed_form():
    """E[sigma'(sqrt(q) G)^2] for GeLU closes as a function of q (an arcsine appears)."""
    q = cv.Q
    g = sp.diff(x * fn.Phi(x), x).subs(x, sp.sqrt(q) * x) ** 2
    e = expectation(g, [x])
    assert e.tier == "exact" and e.exact.has(q) and e.exact.has(sp.asin)
    for qv in (0.25, 1.0, 3.7):
        num = mp_expect(g.subs(q, qv))
        assert abs(float(e.exact.subs(q, qv)) - num) < 1e-10


def test_tiers():
    e = expectation(sp.tanh(x) * x, [x])
    assert e.tier == "quadrature" and e.exact is None and e.error < 1e-10
    assert abs(e.value - mp_expect(sp.tanh(x) * x)) < 1e-10
    assert expectation(sp.tanh(x) ** 3, [x]).exact == 0  # odd: exact zero by symmetry
    z1, z2 = cv.z_symbol(1), cv.z_symbol(2)
    e2 = expectation(z1 ** 2 * z2 ** 2 * (z1 + z2) ** 2, [z1, z2])  # Wick: E = 3 + 3 = 6
    assert e2.tier == "exact" and e2.exact == 6
    e3 = expectation(sp.tanh(z1 * z2) * z1 * z2, [z1, z2])
    assert e3.tier == "quadrature" and e3.error < 1e-4  # tanh's complex poles slow Gauss-Hermite down
    rng = np.random.default_rng(1)
    g = rng.standard_normal((2, 2_000_000))
    mc = np.tanh(g[0] * g[1]) * g[0] * g[1]
    assert abs(e3.value - mc.mean()) < 4 * mc.std() / np.sqrt(mc.size) + e3.error


def test_quadrature_reports_breakpoints_accuracy():
    val, err = quadrature_1d(sp.Max(0, x) * sp.tanh(x), x)
    assert err < 1e-12 and abs(val - mp_expect(sp.Max(0, x) * sp.tanh(x))) < 1e-12


def test_quadrature_nd_sums_products_of_one_variable_factors_axis_by_axis():
    """A separable integrand (a sum of products of one-variable factors) is summed axis by axis: the same number as
    the tensor sum on the same nodes (brute force here), and E[e^z1 He_2(z1) z2^2 z3^2] = e^(1/2); a coupled one
    (tanh(z1 + z2) z3^2 + z1 z2 z3^2) keeps the tensor grid and agrees with its brute force too."""
    import math

    from theorykit.rules import gauss_hermite
    from theorykit.symbolic.gaussian import quadrature_nd

    z1, z2, z3 = sp.symbols("z1 z2 z3")
    rule = gauss_hermite(120, 3)
    x = rule.nodes
    for expr, f in ((sp.exp(z1) * (z1 ** 2 - 1) * z2 ** 2 * z3 ** 2,
                     lambda p: np.exp(p[:, 0]) * (p[:, 0] ** 2 - 1) * p[:, 1] ** 2 * p[:, 2] ** 2),
                    (sp.tanh(z1 + z2) * z3 ** 2 + z1 * z2 * z3 ** 2 + sp.cos(z1),
                     lambda p: np.tanh(p[:, 0] + p[:, 1]) * p[:, 2] ** 2 + p[:, 0] * p[:, 1] * p[:, 2] ** 2
                     + np.cos(p[:, 0]))):
        value, err = quadrature_nd(expr, [z1, z2, z3])
        assert abs(value - float(rule.weights @ f(x))) < 1e-12 and err < 1e-12
    assert abs(quadrature_nd(sp.exp(z1) * (z1 ** 2 - 1) * z2 ** 2 * z3 ** 2, [z1, z2, z3])[0]
               - math.exp(0.5)) < 1e-13


def test_a_child_call_past_its_time_limit_answers_none_at_once():
    """in_child runs SymPy calls that can hang (monotonicity with parameters) in a forked child: past the limit the
    child is killed and the answer is None, after the limit, not after the call."""
    import time

    from theorykit.symbolic.gaussian import in_child

    t0 = time.perf_counter()
    assert in_child(time.sleep, (30,), 0.5) is None
    assert time.perf_counter() - t0 < 5
    assert in_child(sp.factorial, (sp.Integer(5),), 30) == 120


def _slow_square(x):
    import time

    time.sleep(0.6)
    return x * x


def test_a_child_call_runs_beside_the_caller_and_counts_its_limit_from_its_start():
    """start_in_child: the child works while the caller does (the hard threshold's closed form beside its numerical
    average); result(limit, since_start=True) waits only for what is left of the limit, and kills the child."""
    import time

    from theorykit.symbolic.gaussian import start_in_child

    call = start_in_child(_slow_square, (7,))
    assert not call.ready(0.0)
    time.sleep(1.0)  # the caller's own work, longer than the child's
    t0 = time.perf_counter()
    assert call.ready(0.0) and call.result(0.0) == 49 and time.perf_counter() - t0 < 0.5  # arrived: read at once
    late = start_in_child(time.sleep, (30,))
    time.sleep(0.8)
    t0 = time.perf_counter()
    assert late.result(1.0, since_start=True) is None and time.perf_counter() - t0 < 0.6
    assert late.result(1.0) is None  # collected once: later calls answer None


def test_a_non_zero_expression_is_refuted_by_numbers():
    """nonzero_at_points: clearly non-zero somewhere -> True, with no simplify; an identity that is zero -> False (the
    symbolic proof then decides), also with a positive parameter."""
    from theorykit.symbolic.gaussian import nonzero_at_points

    x, y = sp.symbols("x y", real=True)
    q = sp.Symbol("q", positive=True)
    assert nonzero_at_points(sp.Max(x, y) + sp.Max(-x, -y))
    assert not nonzero_at_points(sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1)
    assert not nonzero_at_points(sp.sqrt(q) ** 2 - q)
    assert nonzero_at_points(sp.sin(q * x) - sp.sin(x))


def test_quadrature_nd_of_products_and_powers_against_exact_moments():
    """The tensor rule evaluates an integrand as the product of its factors' grid values (each factor, and each
    integer power, computed once and reused by the next integrand).  Against the whole integrand lambdified on the
    same nodes, and against E[exp(a z1 z2)] = 1 / sqrt(1 - a^2) (a non-separable factor, so the tensor grid is used)."""
    from theorykit.rules import gauss_hermite

    z1, z2, z3 = sp.symbols("z1 z2 z3", real=True)
    g = sp.exp(z1 * z2 / 2)
    value, err = quadrature_nd(2 * z3 ** 2 * g, [z1, z2, z3], order=24)
    assert abs(value - 2 / np.sqrt(0.75)) < 1e-9 + err
    rule = gauss_hermite(48, 3)
    for expr in (-3 * (z1 + z2) ** 3 * g * (z1 + z2) * z3 ** 2, z1 * g ** 2 * sp.sqrt(1 + (z2 - z3) ** 2) / 7,
                 sp.Rational(1, 3) * g * sp.cos(z1 + z2 * z3) ** 3, g ** sp.Rational(3, 2) * (z1 - z3) ** 5 * z2):
        value, _ = quadrature_nd(expr, [z1, z2, z3], order=24)
        f = sp.lambdify([z1, z2, z3], expr, "numpy")
        direct = float(rule.weights @ f(*rule.nodes.T))
        assert abs(value - direct) <= 1e-12 * max(1.0, abs(direct)), (expr, value, direct)
        with shared_grid_values():  # the factors' values kept between integrals: the same sums
            again = [quadrature_nd(expr, [z1, z2, z3], order=24)[0] for _ in range(2)]
        assert again == [value, value]
