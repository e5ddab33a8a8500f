"""Tests of theorykit.population: the population (fresh-sample) test loss E[l(y, f(M^T z + g))], g ~ N(0, C)."""
import mpmath
import numpy as np
import pytest
import sympy as sp

import theorykit as tk
from theorykit import conventions as cv
from theorykit.errors import TheorykitError
from theorykit.population import PopulationLoss, population_loss


def independent_mc(net, link, M, C, n=400_000, seed=123):
    """Monte Carlo written independently of the module: r = M^T z + C^{1/2} g with a Cholesky-free square root."""
    lk = tk.link(link)
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, lk.k))
    eps = rng.standard_normal(n)
    s, U = np.linalg.eigh(C)
    root = U @ np.diag(np.sqrt(np.clip(s, 0, None))) @ U.T
    r = z @ np.asarray(M) + rng.standard_normal((n, net.m)) @ root
    y = lk.numpy(*[z[:, i] for i in range(lk.k)], eps)
    loss = net.loss.numpy(y, net.activation.numpy(r + net.b)[0] @ net.a / net.m)[0]
    return loss.mean(), loss.std(ddof=1) / np.sqrt(n)


def test_linear_network_closed_form():
    # sigma = x, square loss (y - yhat)^2 / 2, y = z + s eps: yhat = a^T (M^T z + g) / m, so
    # E = ((1 - M a / m)^2 + a^T C a / m^2 + s^2) / 2
    a = np.array([1.0, 2.0, -0.5])
    m = 3
    net = tk.symbolic.Network("linear", "square", m, a="1,2,-0.5")
    M = np.array([[0.4, -0.3, 0.8]])
    B = np.random.default_rng(0).standard_normal((3, 3))
    C = B @ B.T / 3
    for link, s in (("linear", 0.0), ("z + eps/2", 0.5)):
        e = population_loss(net, link, M, C)
        closed = 0.5 * ((1 - (M @ a)[0] / m) ** 2 + a @ C @ a / m ** 2 + s ** 2)
        assert e.tier == "exact" and e.error == 0.0 and e.exact is None
        assert "exact for polynomials of degree" in e.method
        assert e.value == pytest.approx(closed, rel=1e-13)
    # singular C: rank 1 and 0 (null directions dropped: fewer Gaussian variables)
    u = np.array([1.0, -1.0, 2.0])
    for C1, q in ((np.outer(u, u) * 0.3, 1), (np.zeros((3, 3)), 0)):
        e = population_loss(net, "linear", M, C1)
        assert e.value == pytest.approx(0.5 * ((1 - (M @ a)[0] / m) ** 2 + a @ C1 @ a / m ** 2), rel=1e-13)
        assert f"over {1 + q} Gaussian variable" in e.method
    # M of shape (m,) is accepted for k = 1
    assert population_loss(net, "linear", M[0], C).value == population_loss(net, "linear", M, C).value


def test_polynomial_exact_tier_beyond_four_variables():
    # quad activation, square loss, staircase link: degree-4 integrand over z1, z2 and 3 directions of g (D = 5):
    # 3 nodes per axis are exact, so more nodes change nothing; Monte Carlo agrees
    net = tk.symbolic.Network("quad", "square", 3, a="1,-1,0.5", b="0,0.3,0")
    M = np.array([[0.5, 0.1, -0.2], [0.3, 0.6, 0.0]])
    C = np.diag([0.5, 0.2, 0.3]) + 0.05
    e = population_loss(net, "staircase", M, C)
    assert e.tier == "exact" and "3 nodes per axis over 5 Gaussian variables" in e.method
    pl = PopulationLoss(net, "staircase")
    M_, L = pl.directions(M, C)
    assert pl.grid_value(M_, L, 5) == pytest.approx(e.value, rel=1e-12)
    mc, se = independent_mc(net, "staircase", M, C)
    assert abs(e.value - mc) < 5 * se


def test_quadrature_matches_mpmath_in_one_dimension():
    # C = 0, k = 1, noiseless: a 1-d integral over z, checked with mpmath from the SymPy expressions
    net = tk.symbolic.Network("gelu", "square", 2, a="1,-2")
    M = np.array([[0.9, -0.4]])
    lk = tk.link("phase-retrieval")
    z = cv.Z
    expr = net.loss_expr.subs({net.r[0]: M[0, 0] * z, net.r[1]: M[0, 1] * z, cv.Y: lk.expr})
    f = sp.lambdify(z, expr, modules=["mpmath"])
    with mpmath.workdps(30):
        ref = float(mpmath.quad(lambda t: f(t) * mpmath.exp(-t * t / 2) / mpmath.sqrt(2 * mpmath.pi),
                                [-mpmath.inf, 0, mpmath.inf]))
    e = population_loss(net, lk, M, np.zeros((2, 2)))
    assert e.tier == "quadrature" and "over 1 Gaussian variable (z)" in e.method
    assert e.value == pytest.approx(ref, rel=1e-12, abs=1e-12)
    assert e.error < 1e-10


def test_quadrature_error_estimate_is_honest_for_a_kink():
    # relu link: a kink at z = 0, so Gauss-Hermite converges slowly; the reported error must cover the truth
    net = tk.symbolic.Network("tanh", "square", 1)
    lk = tk.link("relu")
    M = np.array([[0.7]])
    expr = net.loss_expr.subs({net.r[0]: 0.7 * cv.Z, cv.Y: lk.expr})
    f = sp.lambdify(cv.Z, expr, modules=["mpmath"])
    with mpmath.workdps(30):
        ref = float(mpmath.quad(lambda t: f(t) * mpmath.exp(-t * t / 2) / mpmath.sqrt(2 * mpmath.pi),
                                [-mpmath.inf, 0, mpmath.inf]))
    for order in (10, 30, 80):
        e = population_loss(net, lk, M, np.zeros((1, 1)), order=order)
        assert abs(e.value - ref) <= e.error
        assert f"{order} nodes per axis" in e.method


@pytest.mark.parametrize("act,loss,link", [("gelu", "logistic", "sign-symmetric"), ("tanh", "huber", "abs"),
                                           ("relu", "square", "noisy-phase-retrieval")])
def test_quadrature_agrees_with_monte_carlo(act, loss, link):
    net = tk.symbolic.Network(act, loss, 2, a="1,-1" if loss == "logistic" else None)
    M = np.array([[0.8, 0.3]])
    C = np.array([[0.5, 0.2], [0.2, 0.4]])
    e = population_loss(net, link, M, C)
    assert e.tier == "quadrature"
    mc, se = independent_mc(net, link, M, C)
    assert abs(e.value - mc) < 5 * se + e.error


def test_monte_carlo_tier_beyond_four_variables():
    net = tk.symbolic.Network("gelu", "logistic", 3, a="1,-1,1")
    M = np.array([[0.5, 0.1, -0.2], [0.3, 0.6, 0.0]])
    C = np.diag([0.5, 0.2, 0.3])
    e = population_loss(net, "product", M, C, samples=100_000, seed=3)
    assert e.tier == "monte-carlo" and "100000 samples, seed 3" in e.method and "5 Gaussian variables" in e.method
    assert e.error > 0
    assert population_loss(net, "product", M, C, samples=100_000, seed=3).value == e.value  # reproducible
    mc, se = independent_mc(net, "product", M, C)
    assert abs(e.value - mc) < 5 * np.hypot(se, e.error)
    # a rank-1 C leaves 3 Gaussian variables: quadrature
    e1 = population_loss(net, "product", M, np.outer([1.0, 0.0, 1.0], [1.0, 0.0, 1.0]) * 0.3)
    assert e1.tier == "quadrature" and "3 Gaussian variables" in e1.method


def test_population_loss_class_reuses_rules_and_matches_function(monkeypatch):
    from theorykit import rules

    built = []
    real = rules.latent_rule

    def counted(k, noisy, order, *args, **kw):
        built.append(order)
        return real(k, noisy, order, *args, **kw)

    net = tk.symbolic.Network("tanh", "square", 2)
    pl = PopulationLoss(net, "easy-quadratic", order={3: 10})
    monkeypatch.setattr(rules, "latent_rule", counted)
    Ms = np.array([[[0.1, 0.2]], [[0.5, -0.1]], [[0.9, 0.4]]])
    Cs = np.array([np.eye(2) * v for v in (1.0, 0.5, 0.1)])
    out = pl.many(Ms, Cs)
    assert built == [10, 6]  # the value rule and the coarser one, built once for the three (M, C)
    assert len(out) == 3 and all("10 nodes per axis" in e.method for e in out)
    for e, M, C in zip(out, Ms, Cs):
        assert e.value == population_loss(net, "easy-quadratic", M, C, order=10).value


def test_rounding_level_negative_eigenvalues_are_clamped():
    net = tk.symbolic.Network("tanh", "square", 2)
    theta = np.random.default_rng(4).standard_normal((5, 2))
    M = theta[:1]
    C = theta.T @ theta - M.T @ M  # = theta[1:]^T theta[1:] up to rounding
    C_bad = C - 1e-14 * np.eye(2)
    a = population_loss(net, "linear", M, C)
    assert population_loss(net, "linear", M, C_bad).value == pytest.approx(a.value, abs=1e-12)


@pytest.mark.parametrize("bad", [
    lambda net: population_loss("gelu", "linear", np.zeros((1, 2)), np.eye(2)),
    lambda net: population_loss(net, "linear", np.zeros((2, 2)), np.eye(2)),
    lambda net: population_loss(net, "linear", np.zeros((1, 2)), np.eye(3)),
    lambda net: population_loss(net, "linear", np.zeros((1, 2)), np.array([[1.0, 0.5], [0.0, 1.0]])),
    lambda net: population_loss(net, "linear", np.zeros((1, 2)), np.diag([1.0, -0.5])),
    lambda net: population_loss(net, "linear", np.full((1, 2), np.nan), np.eye(2)),
    lambda net: population_loss(net, "linear", np.zeros((1, 2)), np.eye(2), order=0),
    lambda net: population_loss(net, "linear", np.zeros((1, 2)), np.eye(2), samples=1),
    lambda net: population_loss(net, "not a link ((", np.zeros((1, 2)), np.eye(2)),
])
def test_bad_inputs_raise_one_line_errors(bad):
    net = tk.symbolic.Network("gelu", "square", 2)
    with pytest.raises(TheorykitError) as err:
        bad(net)
    assert "\n" not in str(err.value)


def test_exported():
    assert tk.population.population_loss is population_loss and "population_loss" in tk.population.__all__


def test_a_link_that_jumps_is_integrated_between_its_breakpoints():
    """y = sign(|z| - median|z|) jumps at z = +-0.674: Gauss-Hermite across the jumps was 0.019 off (0.760 against
    0.741 at t = 0 for GeLU and the logistic loss); the split rule agrees with scipy's adaptive quadrature, cut at the
    same points, to 1e-8."""
    import numpy as np
    from scipy import integrate
    from scipy.stats import norm

    import theorykit as tk
    from theorykit.population import population_loss

    net = tk.symbolic.Network("gelu", "logistic", 1)
    M, C = 0.35, 0.8
    got = population_loss(net, "sign-symmetric", [[M]], [[C]])
    xi, wx = np.polynomial.hermite_e.hermegauss(120)
    wx = wx / wx.sum()
    med = norm.ppf(0.75)

    def inner(z):
        y = np.sign(abs(z) - med)
        return float(wx @ net.loss_values((M * z + np.sqrt(C) * xi)[:, None], np.full(xi.size, y))) * norm.pdf(z)

    ref = sum(integrate.quad(inner, a, b, epsabs=1e-13, epsrel=1e-12)[0]
              for a, b in [(-12, -med), (-med, 0), (0, med), (med, 12)])
    assert abs(got.value - ref) < 1e-8
    assert got.error < 1e-6 and "breakpoints" in got.method


def test_a_multi_index_link_kinked_on_the_axes_is_integrated_exactly():
    """y = sign(z1 z2) kinks only on the axes: the quadrature tier cuts its latent rule there, so its error estimate
    is ~1e-8 and it agrees with an independent Monte Carlo (2e6 draws) within 4 s.e.  (Tensor Gauss-Hermite across
    the axes gave 0.69643 with an estimated error 0.001, 0.002 below this value.)"""
    net = tk.symbolic.Network("gelu", "logistic", 1)
    M, C = np.array([[0.7], [0.5]]), np.array([[0.4]])
    e = population_loss(net, "sign(z1*z2)", M, C)
    assert e.tier == "quadrature" and "z1 at 0; z2 at 0" in e.method and e.error < 1e-6
    mc, se = independent_mc(net, "sign(z1*z2)", M, C, n=2_000_000)
    assert abs(e.value - mc) < 4 * se
