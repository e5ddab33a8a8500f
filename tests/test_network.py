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
