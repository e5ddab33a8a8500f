"""F(r, y) and D(r, y): symbolic vs vectorised vs finite differences."""
import numpy as np
import pytest
import sympy as sp

import theorykit as tk

CASES = [
    ("gelu", "square", 2, "1,-1", "0,0.5"),
    ("tanh", "logistic", 3, "1,2,-1", None),
    ("quad", "square", 1, None, None),
    ("x*erf(x)", "huber", 2, "1,1", "0.2,-0.3"),
    ("erf", "(y - yhat)**4/4 + (y-yhat)**2", 2, None, None),
]


def loss_of_r(net, r, y):
    return net.loss_values(r, y)


def setup_case(act, loss, m, a, b, seed, N):
    """A network and N random (r, y) points (labels +-1 for the logistic loss)."""
    net = tk.symbolic.Network(act, loss, m, a=a, b=b)
    rng = np.random.default_rng(seed)
    r = rng.standard_normal((N, m))
    y = rng.choice([-1.0, 1.0], N) if loss == "logistic" else rng.standard_normal(N) ** 2
    return net, r, y, rng


@pytest.mark.parametrize("act,loss,m,a,b", CASES)
def test_symbolic_equals_vectorised(act, loss, m, a, b):
    net, r, y, rng = setup_case(act, loss, m, a, b, 0, 50)
    F_sym, D_sym = net.lambdified_symbolic()(r, y)
    d = net.evaluate(r, y)
    assert d.F.shape == (50, m) and d.D.shape == (50, m, m)
    np.testing.assert_allclose(d.F, F_sym, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(d.D, D_sym, rtol=1e-12, atol=1e-13)
    v = rng.standard_normal((50, m))
    np.testing.assert_allclose(d.D_apply(v), np.einsum("nij,nj->ni", d.D, v), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("act,loss,m,a,b", CASES)
def test_finite_differences(act, loss, m, a, b):
    net, r, y, _ = setup_case(act, loss, m, a, b, 1, 20)
    d = net.evaluate(r, y)
    h = 1e-5
    for j in range(m):
        e = np.zeros(m)
        e[j] = h
        fd = (loss_of_r(net, r + e, y) - loss_of_r(net, r - e, y)) / (2 * h)
        mask = np.abs(np.abs(y - net.output(r)) - 1) > 1e-3 if loss == "huber" else slice(None)
        np.testing.assert_allclose(d.F[mask, j], fd[mask], rtol=1e-7, atol=1e-9)
        fdF = (net.evaluate(r + e, y).F - net.evaluate(r - e, y).F) / (2 * h)
        np.testing.assert_allclose(d.D[mask, :, j], fdF[mask], rtol=1e-6, atol=1e-8)


def test_relu_second_derivative_is_distributional():
    act = tk.activation("relu")
    assert act.d2_distribution.has(sp.DiracDelta) and act.d2_expr == 0
    assert "DiracDelta" in act.note and "almost surely" in act.note
    net = tk.symbolic.Network("relu", "square", 2)
    d = net.evaluate(np.array([[0.3, -0.2]]), np.array([1.0]))
    assert np.all(d.curv == 0)
    assert tk.activation("gelu").note == ""


def test_bad_inputs():
    with pytest.raises(tk.TheorykitError, match="entries but the width"):
        tk.symbolic.Network("gelu", "square", 2, a="1,2,3")
    with pytest.raises(tk.TheorykitError, match="not a number"):
        tk.symbolic.Network("gelu", "square", 2, a="1,foo")
    with pytest.raises(tk.TheorykitError, match="width"):
        tk.symbolic.Network("gelu", "square", 0)
    with pytest.raises(tk.TheorykitError, match="expected r of shape"):
        tk.symbolic.Network("gelu", "square", 2).evaluate(np.zeros((3, 3)), np.zeros(3))


@pytest.mark.parametrize("a,exact", [
    (1, sp.Integer(1)), (-2, sp.Integer(-2)), (0.5, sp.Rational(1, 2)), (0.1, sp.Rational(1, 10)),
    (np.float64(0.25), sp.Rational(1, 4)), (np.int64(3), sp.Integer(3)), (np.array(-1.5), sp.Rational(-3, 2)),
    (sp.sqrt(2), sp.sqrt(2)), (sp.Rational(1, 3), sp.Rational(1, 3)),
])
@pytest.mark.parametrize("m", [1, 3])
def test_scalar_a_b_broadcast(a, exact, m):
    """A single number is accepted wherever a vector is, at any width (broadcast), and equals the explicit vector."""
    net = tk.symbolic.Network("gelu", "square", m, a=a, b=a)
    assert net.a_sym == (exact,) * m and net.b_sym == (exact,) * m
    np.testing.assert_array_equal(net.a, np.full(m, float(exact)))
    ref = tk.symbolic.Network("gelu", "square", m, a=[exact] * m, b=[exact] * m)
    r = np.random.default_rng(0).standard_normal((4, m))
    y = np.array([0.5, 1.0, 2.0, 0.0])
    np.testing.assert_array_equal(net.evaluate(r, y).D, ref.evaluate(r, y).D)


def test_length_one_vector_forms_agree():
    """a = 1, [1], (1,), np.array([1.]), "1" all give the same network, broadcast to every unit."""
    for m in (1, 3):
        for a in (1, 1.0, [1], (1,), np.array([1.0]), "1", sp.Integer(1)):
            assert tk.symbolic.Network("gelu", "square", m, a=a).a_sym == (1,) * m


@pytest.mark.parametrize("a,needle", [
    ("1,2,3", "has 3 entries but the width is m = 2"),
    ([1, 2, 3], "has 3 entries but the width is m = 2"),
    (np.ones((2, 1)), "shape (2, 1)"),
    (True, "got bool"),
    (1j, "got complex"),
    ({"a": 1}, "got dict"),
    (object(), "got object"),
    (float("nan"), "not a number"),
    (float("inf"), "not a number"),
    ([1, "foo"], "'foo' is not a number"),
    ([1, None], "None is not a number"),
    (sp.I, "not a real finite number"),
    (sp.Symbol("x"), "x is not a number"),
    ([1, sp.zoo], "not a real finite number"),
])
def test_bad_vectors_one_line_error(a, needle):
    with pytest.raises(tk.TheorykitError) as e:
        tk.symbolic.Network("gelu", "square", 2, a=a)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("act,loss,m,a", [("gelu", "square", 4, "1,-1,1,-1"), ("tanh", "logistic", 3, "1,2,-1"),
                                          ("relu", "square", 4, None), ("quad", "square", 8, None),
                                          ("gelu", "huber", 8, "1,-1,1,-1,1,-1,1,-1")])
def test_eigen_range_equals_eigvalsh(act, loss, m, a):
    """The smallest and largest eigenvalue of each per-sample D (the secular-equation roots at m >= 3) equal numpy's
    eigvalsh of the formed D to 1e-13 of the inputs' scale, degenerate samples included: equal neurons (a repeated
    diagonal entry), a zero gradient entry (ReLU's flat side), entries of 1e-200 (GeLU's far tail), l2 = 0, a
    negative l2 (the logistic loss has none; quad with y far off the output); a non-finite preactivation gives NaN."""
    net = tk.symbolic.Network(act, loss, m, a=a)
    rng = np.random.default_rng(7)
    N = 4000
    r = 2 * rng.standard_normal((N, m))
    r[:500, 1] = r[:500, 0]  # two neurons alike
    r[500:700] = r[500:700, :1]  # all alike
    r[700:800, 0] = r[700:800, 0] + 1e-12 * r[700:800, 1]
    r[800:900, ::2] = -25 - rng.random((100, len(r[0, ::2])))  # GeLU's far tail: entries of 1e-130 .. 1e-300
    y = rng.choice([-1.0, 1.0], N) if loss == "logistic" else 3 * rng.standard_normal(N)
    d = net.evaluate(r, y)
    lo, hi = d.eigen_range()
    ev = np.linalg.eigvalsh(d.D)
    # the inputs' scale (D's own norm can be far smaller: curv and l2 grad grad^T cancel)
    scale = (np.abs(d.curv) + np.abs(d.l2)[:, None] * d.grad_f ** 2).sum(axis=1) + 1e-300
    assert np.max(np.abs(lo - ev[:, 0]) / scale) < 1e-13 and np.max(np.abs(hi - ev[:, -1]) / scale) < 1e-13
    r[0, 0] = np.nan
    lo, hi = net.evaluate(r[:3], y[:3]).eigen_range()
    assert np.isnan(lo[0]) and np.isnan(hi[0]) and np.all(np.isfinite(lo[1:]))
