"""Kinked activations and losses: detection of the kinks and their Dirac terms in the DMFT (docs/theory.md §3.1).

References that do not use the DMFT code: exact t = 0 responses (hand-derived closed forms and 1-D quadrature), and
an independent quadrature of the t = 1 Gram matrix (tensor Gauss-Hermite in z, half-line Gauss-Legendre in w, the
Dirac term integrated against the density of w at the kink).
"""
import math

import numpy as np
import pytest
from scipy.integrate import quad

import theorykit as tk
from theorykit.errors import TheorykitError

PHI0 = 1 / math.sqrt(2 * math.pi)


def phi(x):
    return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)


@pytest.mark.parametrize("spec, points, jumps", [
    ("relu", [0.0], [1.0]),
    ("abs(x)", [0.0], [2.0]),
    ("max(x/10, x)", [0.0], [0.9]),
    ("min(1, max(-1, x))", [-1.0, 1.0], [1.0, -1.0]),
    ("max(0, x - sqrt(2))", [math.sqrt(2)], [1.0]),
    ("max(0, x - 1) + max(0, -x - 2)", [-2.0, 1.0], [1.0, 1.0]),
    ("gelu", [], []),
    ("tanh", [], []),
    ("relu(x)**2", [], []),  # sigma' is continuous: no Dirac term
])
def test_activation_kinks(spec, points, jumps):
    k = tk.activation(spec).kinks
    assert np.allclose(k.points, points, atol=1e-12) and np.allclose(k.jumps, jumps, atol=1e-6)
    assert k.discontinuities == ()


def test_discontinuous_activation_is_refused_by_the_dmft():
    assert tk.activation("sign(x)").kinks.discontinuities == (0.0,)
    with pytest.raises(TheorykitError, match="jumps at x = 0"):
        tk.dmft("sign(x)", "z", "square", 1, delta=2, eta=1, steps=1, paths=256, replicas=2)


@pytest.mark.parametrize("spec, jumps", [("square", False), ("logistic", False), ("huber", False),
                                         ("huber:c=2", False), ("abs(y - yhat)", True), ("max(0, 1 - y*yhat)", True)])
def test_loss_derivative_jumps(spec, jumps):
    assert tk.loss(spec).derivative_jumps is jumps


def test_direct_responses_are_refused_with_a_kink_and_auto_uses_stein():
    with pytest.raises(TheorykitError, match="cannot carry the Dirac terms"):
        tk.dmft("relu", "z", "square", 1, delta=2, eta=1, steps=2, paths=256, replicas=2, response="direct")
    with pytest.raises(TheorykitError, match="cannot carry the Dirac terms"):
        tk.dmft("relu", "z", "square", 1, delta=2, eta=1, steps=2, paths=256, replicas=2, response="stein", window=2)
    r = tk.dmft("relu", "z", "square", 1, delta=2, eta=0.1, steps=2, paths=1024, replicas=2)
    assert r.settings["response"] == "stein" and "kinked" in r.method["response_auto"]
    assert r.method["kinks"]["exact"] is True and r.method["kinks"]["activation"]["points"] == [0.0]
    assert r.settings["kinked"] is True
    smooth = tk.dmft("gelu", "z", "square", 1, delta=2, eta=1, steps=1, paths=256, replicas=2)
    assert smooth.method["kinks"] is None and smooth.settings["kinked"] is False


def test_equal_time_response_of_relu_at_t0_is_exact():
    # sigma = relu, square loss, y = z^2, r^0 = w ~ N(0, 1) independent of z:
    # R_u(0, 0) = E[sigma'(w)^2] + E[(sigma(0) - y)] phi(0) = 1/2 - 1/sqrt(2 pi)  (the Dirac term is the second)
    r = tk.dmft("relu", "phase-retrieval", "square", 1, delta=2, eta=1, steps=1, paths=8192, replicas=4, kernels=True)
    exact = 0.5 - PHI0
    se = float(r.kernels["R_u_stderr"][0, 0, 0, 0])
    assert abs(float(r.kernels["R_u"][0, 0, 0, 0]) - exact) <= 4 * se + 1e-4
    # what dropping the Dirac term gives (0.5) is far outside that
    assert abs(0.5 - exact) > 100 * (4 * se + 1e-4)


def test_equal_time_response_of_a_kinked_loss_at_t0():
    # hinge loss l = max(0, 1 - y yhat), relu, y = z^2: R_u(0, 0) = E[y sigma'(w)^2 delta(w - 1/y)] - phi(0) E[y]
    # = E[z^2 phi(1/z^2)] - phi(0) (Dirac terms of the loss and of the activation), by 1-D quadrature
    exact = 2 * quad(lambda z: z * z * phi(1 / z ** 2) * phi(z), 0, 50, limit=200)[0] - PHI0
    r = tk.dmft("relu", "phase-retrieval", "max(0, 1 - y*yhat)", 1, delta=2, eta=1, steps=1, paths=32768,
                replicas=4, kernels=True)
    se = float(r.kernels["R_u_stderr"][0, 0, 0, 0])
    assert se < 0.01
    assert abs(float(r.kernels["R_u"][0, 0, 0, 0]) - exact) <= 4 * se


def _half_line_rule(n=120, upper=14.0):
    """Nodes and weights for integrals over w > 0 against the standard normal density (Gauss-Legendre on [0, upper])."""
    x, w = np.polynomial.legendre.leggauss(n)
    x = 0.5 * upper * (x + 1)
    return x, 0.5 * upper * w * np.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi)


def _relu_gram1(a, delta, eta, link):
    """gram(1) = M_1^T M_1 + C_theta(1, 1) of the DMFT for sigma = relu, square loss, width 2, b = 0, Sigma_0 = I,
    M_0 = 0, by quadrature independent of theorykit.dmft:
        r^0 = w ~ N(0, I_2) independent of z ~ N(0, I_2), u^0 = (f(w) - y) grad f(w), grad f_j = a_j 1{w_j > 0} / 2,
        R_u(0, 0) = E[D^0] with the Dirac terms diag_j (a_j / 2) phi(0) E[f(w) - y | w_j = 0],
        P_1 = I - eta R_u(0, 0), C_theta(1, 1) = P_1 P_1^T + (eta^2 / delta) E[u^0 u^0T], M_1 = -eta E[z u^0T]."""
    zx, zw = np.polynomial.hermite_e.hermegauss(40)
    zw = zw / zw.sum()
    Z1, Z2 = np.meshgrid(zx, zx, indexing="ij")
    Wz = np.outer(zw, zw).ravel()
    Z = np.stack([Z1.ravel(), Z2.ravel()], axis=1)
    y = link(Z[:, 0], Z[:, 1])
    hx, hw = _half_line_rule()
    # w_j: either <= 0 (relu = 0, mass 1/2) or > 0 (nodes hx with weights hw); enumerate the four quadrants
    parts = [(np.array([0.0]), np.array([0.5])), (hx, hw)]
    a = np.asarray(a, float)
    m = 2
    E_zu = np.zeros((2, m))
    C_u = np.zeros((m, m))
    R_u = np.zeros((m, m))
    for x1, w1 in parts:
        for x2, w2 in parts:
            W1, W2 = np.meshgrid(x1, x2, indexing="ij")
            ww = np.outer(w1, w2).ravel()
            w = np.stack([W1.ravel(), W2.ravel()], axis=1)  # relu(w): the quadrant's values (0 on the left)
            g = (w > 0) * a / m                              # grad f, (Nw, 2)
            f = w @ a / m                                     # relu(w) = w on the right, 0 on the left
            res = f[:, None] - y[None, :]                     # (Nw, Nz)
            wt = ww[:, None] * Wz[None, :]
            for i in range(m):
                E_zu[:, i] += np.einsum("wz,wz,zk->k", wt, res * g[:, i:i + 1], Z)
                for j in range(m):
                    C_u[i, j] += np.sum(wt * res ** 2 * g[:, i:i + 1] * g[:, j:j + 1])
                    R_u[i, j] += np.sum(wt * g[:, i:i + 1] * g[:, j:j + 1])  # l'' grad f grad f^T
    # Dirac terms: neuron j on its kink (w_j = 0, density phi(0)); the other neuron and z integrated
    dirac = np.zeros(m)
    for j in range(m):
        o = 1 - j
        Ey = float(Wz @ y)
        Ef_other = a[o] / m * float(hw @ hx)  # E[a_o relu(w_o)] / m
        dirac[j] = a[j] / m * PHI0 * (Ef_other - Ey)
    R_u += np.diag(dirac)
    P1 = np.eye(m) - eta * R_u
    C11 = P1 @ P1.T + eta ** 2 / delta * C_u
    M1 = -eta * E_zu
    return M1.T @ M1 + C11, R_u, dirac


@pytest.mark.parametrize("delta", [3.0, 5.0])
def test_relu_gram_at_t1_against_independent_quadrature(delta):
    link = "z1 + z2/2 + z2**2/2"
    ref, R_ref, dirac = _relu_gram1((1, -1), delta, 1.0, lambda z1, z2: z1 + z2 / 2 + z2 ** 2 / 2)
    r = tk.dmft("relu", link, "square", 2, a=[1, -1], delta=delta, eta=1.0, steps=1, paths=32768, replicas=4,
                kernels=True)
    tol = 4 * r.stderr["gram"][1] + 2e-3 * np.abs(ref).max()
    assert np.all(np.abs(r.gram[1] - ref) <= tol)
    tol_R = 4 * r.kernels["R_u_stderr"][0, 0] + 1e-3
    assert np.all(np.abs(r.kernels["R_u"][0, 0] - R_ref) <= tol_R)
    # the Dirac terms matter: dropping them moves R_u(0, 0) by 10x the tolerance or more
    assert np.all(np.abs(dirac) >= 10 * np.diag(tol_R))


def test_hard_process_of_relu_at_t1_is_exact():
    # relu, square loss, y = z^2 (hard), m = 1, delta = 4, eta = 1: the hard process' first step
    #   C_mu(1) = (1 - eta R^zeta(0, 0))^2 + (eta^2 / delta) E[zeta^2 u^0 u^0],
    #   R^zeta(0, 0) = E[z^2 D^0] = E[z^2] / 2 - E[z^4] phi(0) = 1/2 - 3 phi(0)       (Dirac term: -E[z^2 y] phi(0))
    #   E[z^2 u^0 u^0] = E[z^2 (w - z^2)^2 1{w > 0}] = 1/2 - 2 E[z^4] phi(0) + E[z^6] / 2 = 8 - 6 phi(0)
    delta = 4.0
    exact = (1 - (0.5 - 3 * PHI0)) ** 2 + (8 - 6 * PHI0) / delta
    r = tk.dmft("relu", "phase-retrieval", "square", 1, delta=delta, eta=1.0, steps=2, paths=16384, replicas=4)
    se = float(r.stderr["C_mu"][1, 0, 0, 0])
    assert abs(float(r.C_mu[1, 0, 0, 0]) - exact) <= 4 * se + 1e-3 * exact
    assert "Stein" in r.method["kinks"]["hard_process"]
