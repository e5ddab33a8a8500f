"""theorykit.rules: every rule integrates what it promises, has the node count it promises, and reports an error that
covers its actual error; weighted quantiles and binned conditional means."""
import math
import warnings

import numpy as np
import pytest

from theorykit import rules
from theorykit.errors import TheorykitError


def dfact(p):
    """E[G^p] for G ~ N(0, 1): (p - 1)!! for even p, 0 for odd p."""
    return 0.0 if p % 2 else float(math.prod(range(p - 1, 0, -2)))


def power(p, axis=0):
    return lambda x: x[:, axis] ** p


# ------------------------------------------------------------------------------------------------- Gauss-Hermite
@pytest.mark.parametrize("order", [1, 2, 3, 4, 7, 16, 40])
def test_gauss_hermite_exact_to_degree_2_order_minus_1(order):
    r = rules.gauss_hermite(order, 1)
    assert r.nodes.shape == (order, 1) and r.weights.shape == (order,) and r.size == order
    assert r.degree == 2 * order - 1
    assert abs(r.weights.sum() - 1) <= 4e-16
    for p in range(2 * order):
        val, _ = r.integrate(power(p))
        assert abs(val - dfact(p)) <= 1e-12 * dfact(p + p % 2), (order, p)  # rounding: relative to E[G^(p+1)]
    # and not beyond: degree 2 order is off (He_order^2 has mean order! but vanishes on the nodes); the relative
    # miss order! / (2 order - 1)!! is lost in rounding for large orders
    if order <= 16:
        val, _ = r.integrate(power(2 * order))
        assert abs(val - dfact(2 * order)) > 1e-6 * dfact(2 * order)


def test_gauss_hermite_fourth_and_sixth_moments():
    assert rules.gauss_hermite(3).integrate(power(4))[0] == pytest.approx(3, abs=1e-14)
    assert rules.gauss_hermite(4).integrate(power(6))[0] == pytest.approx(15, abs=1e-13)
    assert rules.gauss_hermite(3).integrate(power(6))[0] != pytest.approx(15, abs=1e-6)  # 3 nodes: degree <= 5


@pytest.mark.parametrize("dim,order", [(0, 5), (2, 4), (3, 3)])
def test_tensor_gauss_hermite(dim, order):
    r = rules.gauss_hermite(order, dim)
    assert r.nodes.shape == (order ** dim, dim) and r.weights.shape == (order ** dim,)
    assert abs(r.weights.sum() - 1) <= 1e-15
    if dim == 0:
        assert r.nodes.shape == (1, 0) and r.weights.tolist() == [1.0]
        return
    for a in range(2 * order):
        for b in range(2 * order):
            want = dfact(a) * dfact(b)
            val, _ = r.integrate(lambda x: x[:, 0] ** a * x[:, dim - 1] ** b)
            assert val == pytest.approx(want, abs=1e-11 * max(1, want)), (a, b)
    # nodes in C order (last axis fastest); weights the products of the one-dimensional ones, in axis order
    one = rules.gauss_hermite(order, 1)
    assert np.array_equal(r.nodes[:order, -1], one.nodes[:, 0]) and np.all(r.nodes[:order, 0] == one.nodes[0, 0])
    w0 = one.weights[0] if dim == 2 else one.weights[0] * one.weights[0]
    assert np.array_equal(r.weights[:order], w0 * one.weights)


def test_gauss_hermite_error_estimate_covers_the_error():
    r = rules.gauss_hermite(12, 1)
    assert r.reference.size == rules.lower_order(12) == 8
    val, err = r.integrate(lambda x: np.cos(x[:, 0]))
    true = math.exp(-0.5)
    assert 0 < abs(val - true) <= err < 1e-4
    # a companion order can be chosen, and the reference of the reference is none
    r = rules.gauss_hermite(20, 2, reference=10)
    assert r.reference.size == 100 and r.reference.reference is None
    val, err = r.integrate(lambda x: np.cos(x[:, 0] + x[:, 1]))
    assert abs(val - math.exp(-1)) <= err


@pytest.mark.parametrize("kw", [dict(order=0, dim=1), dict(order=371, dim=1), dict(order=True, dim=1),
                                dict(order=2.0, dim=1), dict(order=3, dim=-1), dict(order=100, dim=4),
                                dict(order=5, dim=1, reference=0)])
def test_gauss_hermite_rejects_bad_arguments(kw):
    with pytest.raises(TheorykitError) as e:
        rules.gauss_hermite(**kw)
    assert "\n" not in str(e.value)


def test_gauss_hermite_largest_order_is_sound():
    r = rules.gauss_hermite(rules.HERMITE_MAX_ORDER)
    assert np.all(np.isfinite(r.weights)) and np.all(r.weights > 0)
    assert abs(r.weights.sum() - 1) < 1e-14
    assert r.integrate(power(6))[0] == pytest.approx(15, rel=1e-12)
    # one order more and numpy's weights are all 0 (population_loss returned 0.0 silently), beyond that NaN
    from theorykit.population import population_loss
    from theorykit.symbolic import Network

    with pytest.raises(TheorykitError, match=f"1..{rules.HERMITE_MAX_ORDER}"):
        population_loss(Network("tanh", "square", 1), "z", np.zeros((1, 1)), np.zeros((1, 1)), order=371)


# ------------------------------------------------------------------------------------------------- Gauss-Legendre
@pytest.mark.parametrize("n,a,b", [(1, -1, 1), (3, 0, 2), (5, -2.5, 0.5), (12, 1, 4)])
def test_gauss_legendre_exact_to_degree_2n_minus_1(n, a, b):
    r = rules.gauss_legendre(n, a, b)
    assert r.nodes.shape == (n, 1) and r.degree == 2 * n - 1
    assert r.weights.sum() == pytest.approx(b - a, rel=1e-14)
    assert np.all((r.nodes > a) & (r.nodes < b))
    for p in range(2 * n):
        want = (b ** (p + 1) - a ** (p + 1)) / (p + 1)
        assert r.integrate(power(p))[0] == pytest.approx(want, rel=1e-12, abs=1e-12), p
    if n <= 5:  # and not beyond (for larger n the miss is lost in rounding)
        want = (b ** (2 * n + 1) - a ** (2 * n + 1)) / (2 * n + 1)
        assert abs(r.integrate(power(2 * n))[0] - want) > 1e-9 * abs(want)


@pytest.mark.parametrize("n,order", [(8, 8), (64, 8), (120, 8), (296, 8), (1200, 8), (30, 5), (4, 4)])
def test_composite_gauss_legendre_has_exactly_n_nodes(n, order):
    r = rules.composite_gauss_legendre(n, -1, 1, order)
    assert r.nodes.shape == (n, 1) and r.weights.shape == (n,)
    t = r.nodes[:, 0]
    assert np.all(np.diff(t) > 0)
    assert np.array_equal(t, -t[::-1]) and np.array_equal(r.weights, r.weights[::-1])  # mirror-symmetric, bit-exact
    assert abs(r.weights.sum() - 2) <= 1e-13
    # exact to degree 2 order - 1 on every panel, hence on [-1, 1]
    for p in range(2 * order):
        assert r.integrate(power(p))[0] == pytest.approx(2 / (p + 1) if p % 2 == 0 else 0.0, abs=1e-13), p


def test_composite_gauss_legendre_on_an_interval():
    r = rules.composite_gauss_legendre(40, 1.0, 3.0)
    assert r.nodes.shape == (40, 1) and r.reference.size == 16  # companion: half the panels
    for p in range(16):
        assert r.integrate(power(p))[0] == pytest.approx((3 ** (p + 1) - 1) / (p + 1), rel=1e-13)
    # a low order, where the error is visible: the estimate (half the panels) covers it
    r = rules.composite_gauss_legendre(16, 0.0, 3.0, order=2)
    val, err = r.integrate(lambda x: np.exp(x[:, 0]))
    assert 0 < abs(val - (math.exp(3) - 1)) <= err < 1e-2


@pytest.mark.parametrize("n", [1, 5, 60, 300, 1201])
def test_composite_gauss_legendre_refuses_a_count_it_cannot_deliver(n):
    with pytest.raises(TheorykitError, match="not a multiple of the panel order 8") as e:
        rules.composite_gauss_legendre(n)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kw", [dict(n=8, a=1, b=1), dict(n=8, a=0, b=float("inf")), dict(n=8, a="x", b=1),
                                dict(n=0), dict(n=16, order=0)])
def test_gauss_legendre_rejects_bad_arguments(kw):
    with pytest.raises(TheorykitError):
        rules.composite_gauss_legendre(**kw)
    if "order" not in kw:
        with pytest.raises(TheorykitError):
            rules.gauss_legendre(**kw)


def half_moment(p):
    """E[G^p; G > 0] = 2^(p/2) Gamma((p + 1)/2) / (2 sqrt(pi))."""
    return 2 ** (p / 2) * math.gamma((p + 1) / 2) / (2 * math.sqrt(math.pi))


@pytest.mark.parametrize("order", [1, 2, 5, 8, 16, 24])
def test_half_gauss_hermite_is_exact_for_piecewise_polynomials_kinked_at_zero(order):
    """Against the half-normal's moments in closed form: every monomial to degree 2 order - 1 on each half-line, so
    E|G|^p, and an integrand with a kink at 0 (which Gauss-Hermite integrates to a power of 1 / order)."""
    r = rules.half_gauss_hermite(order)
    t = r.nodes[:, 0]
    assert r.size == 2 * order and np.all(np.diff(t) > 0) and np.allclose(t, -t[::-1], atol=0, rtol=0)
    assert abs(r.weights.sum() - 1) <= 1e-14
    for p in range(2 * order):
        pos = np.sum(r.weights[t > 0] * t[t > 0] ** p)
        assert abs(pos - half_moment(p)) <= 2e-14 * half_moment(p), (order, p)
    if order >= 2:  # E[max(G, 0)^3 - 2 min(G, 0)] = E[G^3; G > 0] + 2 E[G; G > 0]
        val, _ = r.integrate(lambda x: np.maximum(x[:, 0], 0) ** 3 - 2 * np.minimum(x[:, 0], 0))
        assert val == pytest.approx(half_moment(3) + 2 * half_moment(1), rel=1e-14)
        gh, _ = rules.gauss_hermite(2 * order).integrate(lambda x: np.maximum(x[:, 0], 0) ** 3)
        assert abs(gh - half_moment(3)) > 1e-8 * half_moment(3)  # the whole-line rule is not exact there
    assert r.reference is None if order == 1 else r.reference.size == 2 * rules.lower_order(order)
    with pytest.raises(TheorykitError):
        rules.half_gauss_hermite(25)


def test_gauss_legendre_normal_moments():
    r = rules.gauss_legendre_normal(2000)
    assert r.nodes.shape == (2000, 1)
    assert abs(r.weights.sum() - 1) <= 1e-14
    assert r.integrate(power(4))[0] == pytest.approx(3, abs=1e-13)
    assert r.integrate(power(6))[0] == pytest.approx(15, abs=1e-12)
    assert abs(r.integrate(power(5))[0]) < 1e-14  # mirror symmetry: odd moments vanish up to rounding
    # a kink at 0, on a panel edge (250 panels): E|G| = sqrt(2/pi) to rounding; the companion (125 panels) has the
    # kink inside its middle panel, so the estimate is pessimistic here but covers the error
    val, err = r.integrate(lambda x: np.abs(x[:, 0]))
    assert val == pytest.approx(math.sqrt(2 / math.pi), abs=1e-14) and abs(val - math.sqrt(2 / math.pi)) <= err < 1e-4
    with pytest.raises(TheorykitError):
        rules.gauss_legendre_normal(2000, width=-1)


@pytest.mark.parametrize("dims,level,per_axis", [(1, 0, 200_000), (1, 1, 100_000), (1, 20, 8), (2, 0, 1200),
                                                 (2, 1, 600), (2, 2, 296), (2, 3, 144), (3, 0, 128), (3, 1, 64)])
def test_quadrature_nodes_counts(dims, level, per_axis):
    """The link analysis's grid has the node count its description states, at every level (the old helper returned
    fewer nodes than it was asked for, and callers re-read the count)."""
    import theorykit as tk
    from theorykit.symbolic.links import quadrature_nodes

    spec = {1: "z**2", 2: "z**2 + 0.5*eps", 3: "z1*z2 + eps"}[dims]
    pts, w, desc = quadrature_nodes(tk.link(spec), level)
    assert per_axis % 8 == 0
    assert pts.shape == (per_axis ** dims, dims) and w.shape == (per_axis ** dims,)
    assert f"{per_axis} nodes per axis" in desc
    if per_axis >= 56:  # (8 nodes on [-10, 10] is a poor rule, but the count is what was asked for)
        assert abs(w.sum() - 1) < 1e-8
    with pytest.raises(TheorykitError):
        quadrature_nodes(tk.link(spec), -1)


# ------------------------------------------------------------------------------------------------- random rules
def test_monte_carlo_normal_moments_within_standard_errors():
    r = rules.monte_carlo_normal(200_000, 2, np.random.default_rng(7))
    assert r.nodes.shape == (200_000, 2) and np.all(r.weights == 1 / 200_000)
    assert np.array_equal(r.nodes, np.random.default_rng(7).standard_normal((200_000, 2)))
    for f, want in ((power(4), 3.0), (power(6, 1), 15.0), (lambda x: x[:, 0] ** 2 * x[:, 1] ** 2, 1.0)):
        val, err = r.integrate(f)
        assert 0 < err < 0.5 and abs(val - want) <= 4 * err
    # the seed form
    assert np.array_equal(rules.monte_carlo_normal(10, 3, 5).nodes, np.random.default_rng(5).standard_normal((10, 3)))


def test_sobol_normal_moments_and_replica_error():
    """Within 4.5 replica standard errors (the two-sided 99.99% point of Student's t with 31 degrees of freedom is
    4.45).  E[G^6] is the weak spot: its replica means are skewed, and with 8 replicas 5% of seeds landed beyond 3
    standard errors (measured over 40 seeds)."""
    r = rules.sobol_normal(1 << 15, 3, np.random.default_rng(0), replicas=32)
    assert r.nodes.shape == (1 << 15, 3) and r.replicas == 32 and "32 x 1024" in r.method
    for f, want in ((power(4), 3.0), (power(6, 2), 15.0), (lambda x: np.cos(x.sum(axis=1)), math.exp(-1.5))):
        val, err = r.integrate(f)
        assert 0 < err < 0.2 and abs(val - want) <= 4.5 * err
    # one net: the i.i.d. standard error (pessimistic for these smooth moments)
    one = rules.sobol_normal(1 << 14, 3, 0)
    for f, want in ((power(4), 3.0), (power(6, 2), 15.0)):
        val, err = one.integrate(f)
        assert abs(val - want) <= 3 * err
    # QMC beats i.i.d. sampling on a smooth integrand
    mc = rules.monte_carlo_normal(1 << 15, 3, 1)
    assert r.integrate(power(2))[1] < mc.integrate(power(2))[1] / 5


def test_sobol_normal_is_the_dmft_construction_and_silences_the_balance_warning():
    from scipy.special import ndtri
    from scipy.stats import qmc

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = rules.sobol_normal(1000, 4, np.random.default_rng(3))  # not a power of two: no warning
    assert "unbalanced" in r.method and r.replicas == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pts = qmc.Sobol(4, scramble=True, seed=np.random.default_rng(3)).random(1000)
    assert np.array_equal(r.nodes, ndtri(np.clip(pts, 1e-16, 1 - 1e-16)))
    r = rules.sobol_normal(1024, 2, 3)
    assert "unbalanced" not in r.method
    val, err = r.integrate(power(4))
    assert abs(val - 3) <= 4 * err


@pytest.mark.parametrize("call", [lambda: rules.sobol_normal(0, 2, 1), lambda: rules.sobol_normal(8, 0, 1),
                                  lambda: rules.sobol_normal(10, 2, 1, replicas=3),
                                  lambda: rules.sobol_normal(8, 2, "seed"), lambda: rules.monte_carlo_normal(8, 2, -1),
                                  lambda: rules.monte_carlo_normal(8, 2.5, 1),
                                  lambda: rules.gauss_hermite(3).integrate(np.ones(3)),
                                  lambda: rules.gauss_hermite(3).integrate(lambda x: 1 / x[:, 0] ** 0 / 0)])
def test_random_rules_and_integrate_reject_bad_arguments(call):
    with pytest.raises(TheorykitError) as e:
        call()
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------------- quantiles
def _reference_weighted_quantiles(values, weights, qs):
    """The algorithm of the DMFT's weighted quantiles (theorykit/dmft.py: _weighted_quantiles), verbatim."""
    order = np.argsort(values)
    v, cw = values[order], np.cumsum(weights[order])
    cw /= cw[-1]
    return [float(v[min(np.searchsorted(cw, q), len(v) - 1)]) for q in qs]


def test_weighted_quantiles_hand_example():
    v, w = np.array([3.0, 1.0, 2.0]), np.array([0.5, 0.25, 0.25])  # sorted 1, 2, 3 with cumulative 0.25, 0.5, 1
    qs = [0.0, 0.1, 0.25, 0.3, 0.5, 0.5000001, 0.9, 1.0]
    assert rules.weighted_quantiles(v, w, qs) == [1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0]
    # infinities sort last, zero weights never win
    assert rules.weighted_quantiles([np.inf, 0.0, 5.0], [1, 1, 0], [0.5, 0.75]) == [0.0, np.inf]


def test_weighted_quantiles_equal_weights_is_numpy_inverted_cdf():
    rng = np.random.default_rng(11)
    for n in (1, 2, 7, 100, 2501):
        v = np.round(rng.standard_normal(n), 1)  # with ties
        qs = np.concatenate([rng.random(40), [0.0, 1.0]])
        got = rules.weighted_quantiles(v, np.ones(n), qs)
        assert got == [float(x) for x in np.quantile(v, qs, method="inverted_cdf")]


def test_weighted_quantiles_is_bit_identical_to_the_dmft_helper():
    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(1, 4000))
        v = np.round(rng.standard_normal(n), int(rng.integers(0, 3)))
        v[rng.random(n) < 0.05] = np.inf
        w = rng.random(n) * (rng.random(n) < 0.9) + 1e-300
        qs = [1e-5, 1e-4, 1e-3, 0.5, 1 - 1e-4, 0.0, 1.0] + list(rng.random(5))
        assert rules.weighted_quantiles(v, w, qs) == _reference_weighted_quantiles(v, w, qs)


@pytest.mark.parametrize("args", [([1.0, 2.0], [1.0], [0.5]), ([], [], [0.5]), ([1.0], [-1.0], [0.5]),
                                  ([1.0], [0.0], [0.5]), ([1.0], [np.nan], [0.5]), ([1.0], [1.0], [1.5])])
def test_weighted_quantiles_rejects_bad_arguments(args):
    with pytest.raises(TheorykitError):
        rules.weighted_quantiles(*args)
    with pytest.raises(TheorykitError):
        rules.weighted_quantiles([1.0], [1.0], [0.5], kind="heapsort")


# ------------------------------------------------------------------------------------------------- binning
def test_conditional_means_hand_example():
    idx = np.array([0, 0, 2, 2, 2])
    x = np.array([[1.0], [3.0], [1.0], [2.0], [6.0]])
    mass, means = rules.conditional_means(idx, x)
    assert mass.tolist() == [2.0, 0.0, 3.0] and means[:, 0].tolist() == [2.0, 0.0, 3.0]
    mass, means = rules.conditional_means(idx, x, weights=np.array([1.0, 3.0, 0.5, 0.5, 0.0]), groups=4)
    assert mass.tolist() == [4.0, 0.0, 1.0, 0.0] and means[:, 0].tolist() == [2.5, 0.0, 1.5, 0.0]
    with pytest.raises(TheorykitError):
        rules.conditional_means(idx, x[:, 0])
    with pytest.raises(TheorykitError):
        rules.conditional_means(idx, x, groups=2)


def test_quantile_bins_many_equals_one_count_at_a_time_and_weighted_quantiles():
    """One sort of y for several numbers of bins: the same bins as the inverted-CDF edges of weighted_quantiles
    (stable sort), count by count; a discrete y gets its values as bins whatever the count."""
    rng = np.random.default_rng(3)
    y, w = rng.standard_normal(5000) ** 3, rng.random(5000)
    many = rules.quantile_bins_many(y, w, (7, 100, 1000))
    for b, idx in zip((7, 100, 1000), many):
        edges = np.unique(rules.weighted_quantiles(rules.round_significant(y), w, np.arange(1, b) / b, kind="stable"))
        assert np.array_equal(idx, np.searchsorted(edges, rules.round_significant(y), side="right"))
        assert np.array_equal(idx, rules.quantile_bins(y, w, b))
    d = np.round(y, 0).clip(-3, 3)
    assert all(np.array_equal(i, np.searchsorted(np.unique(d), d)) for i in rules.quantile_bins_many(d, w, (5, 50)))


def test_quantile_bins_discrete_and_continuous():
    y = np.array([2.0, -1.0, 2.0, 0.5, -1.0])
    assert rules.quantile_bins(y, np.ones(5), 10).tolist() == [2, 0, 2, 1, 0]  # discrete: one bin per value
    rng = np.random.default_rng(2)
    z = rng.standard_normal(20_000)
    y = z ** 2  # continuous; mirror pairs z, -z share y and must share a bin
    y[1::2] = y[::2]
    idx = rules.quantile_bins(y, np.ones(len(y)), 50)
    assert idx.max() == 49 and np.array_equal(idx[::2], idx[1::2])
    counts = np.bincount(idx)
    assert counts.min() >= 0.9 * len(y) / 50 and counts.max() <= 1.1 * len(y) / 50
    mass, means = rules.conditional_means(idx, y[:, None])
    assert mass.sum() == len(y) and np.all(np.diff(means[:, 0]) > 0)  # the bins are ordered in y


def test_one_node_rules_have_no_error_estimate_but_the_trivial_rule_is_exact():
    assert rules.gauss_hermite(1).integrate(power(2)) == (0.0, math.inf)
    assert rules.gauss_legendre(1, 0, 1).integrate(power(1)) == (0.5, math.inf)
    assert rules.gauss_hermite(4, 0).integrate(lambda x: np.full(len(x), 2.0)) == (2.0, 0.0)


def test_below_quantile_is_the_cumulative_weight_at_most_1_over_n():
    v = np.array([3.0, 0.0, 1.0, 1.0, 2.0])
    w = np.array([0.2, 0.1, 0.15, 0.15, 0.4])
    tc = rules.below_quantile(v, w, 4)  # 1/n = 0.25: 0.0 (0.1) and one of the tied 1.0s (0.25)
    assert tc.cut == 2 and tc.mask.tolist() == [False, True, True, False, False] and tc.weight == 0.25
    assert tc.quantile == 1.0
    tw = rules.below_quantile(v, w, 4, whole_ties=True)  # a tie group is never split
    assert tw.cut == 1 and tw.mask.tolist() == [False, True, False, False, False] and tw.quantile == 1.0
    assert rules.below_quantile(v, w, 1).cut == 5 and rules.below_quantile(v, w, 1).quantile == 3.0
    with pytest.raises(TheorykitError, match="n must be >= 1"):
        rules.below_quantile(v, w, 0)


def test_tail_quantiles_by_partition_equal_the_full_sort():
    """weighted_quantiles at tail levels sorts only the values on that side (np.argpartition): the same values as the
    full sort, with ties, infinities and weights far from equal; the full sort where the partition's weight falls
    short of the level."""
    from theorykit import rules

    rng = np.random.default_rng(3)
    for trial in range(40):
        N = int(rng.integers(rules.TAIL_PARTITION_MIN, 3 * rules.TAIL_PARTITION_MIN))
        v = rng.standard_normal(N) * np.exp(rng.standard_normal(N))
        if trial % 3 == 0:
            v = np.round(v, 1)
        if trial % 5 == 0:
            v[rng.integers(0, N, 5)] = np.inf
        w = np.exp(3 * rng.standard_normal(N))
        for qs in ([0.0, 1e-5, 1e-4, 1e-3], [1 - 1e-4], [0.995, 0.999], [1.0]):
            assert rules.weighted_quantiles(v, w, qs) == rules.weighted_quantiles(v, w, qs, kind="stable")
    # one heavy value far above the partition (the 1/32 smallest) carries nearly all the weight: the partition's
    # share falls short of the level and the full sort answers
    v = np.arange(10_000, dtype=float)
    w = np.ones(10_000)
    w[5000] = 1e6
    assert rules.weighted_quantiles(v, w, [0.01]) == [5000.0]
    assert rules.weighted_quantiles(-v, w, [0.99]) == [-5000.0]


def test_latent_rule_cut_on_the_axes_integrates_a_link_kinked_there():
    """sign(z1 z2) and |z1| z2^2 kink only on the axes: a product rule cut there (Gauss-Legendre on each half-line of
    each cut axis) gets E|z1 z2| = 2/pi and E[|z1| z2^2] = sqrt(2/pi) to 1e-7, where tensor Gauss-Hermite with as many
    nodes per axis is off by 5%; flat cuts with k = 1 and noise keep the single-index form."""
    cut = rules.latent_rule(2, False, 16, [[0.0], [0.0]])
    gh = rules.latent_rule(2, False, 32, ())
    for r in (cut, gh):
        assert r.dim == 2 and r.size == 1024
    z1, z2 = cut.nodes.T
    assert cut.weights @ np.abs(z1 * z2) == pytest.approx(2 / math.pi, abs=1e-7)
    assert cut.weights @ (np.abs(z1) * z2 ** 2) == pytest.approx(math.sqrt(2 / math.pi), abs=1e-7)
    assert abs(gh.weights @ np.abs(gh.nodes[:, 0] * gh.nodes[:, 1]) - 2 / math.pi) > 0.01
    one = rules.latent_rule(2, True, 16, [[0.0], []])  # z1 cut, z2 and eps by Gauss-Hermite
    assert one.dim == 3 and one.size == 32 * 16 * 16 and "z2: Gauss-Hermite" in one.method and "eps" in one.method
    assert one.weights @ (np.abs(one.nodes[:, 0]) * one.nodes[:, 1] ** 2 * one.nodes[:, 2] ** 2) == pytest.approx(
        math.sqrt(2 / math.pi), abs=1e-7)
    assert rules.latent_rule(1, True, 8, [0.0]).dim == 2
    assert rules.latent_rule(2, False, 8, [0.0]).method.startswith("tensor Gauss-Hermite")  # flat cuts name no axis
    with pytest.raises(TheorykitError, match="one sequence for each"):
        rules.latent_rule(2, False, 8, [[0.0]])
