"""Tests of theorykit.referee.hessian: Hessian-vector products, the dense Hessian, bottom eigenpairs, hard overlaps."""
import numpy as np
import pytest

import theorykit as tk
from theorykit.errors import TheorykitError
from theorykit.referee.hessian import HessianSpectrum, dense_hessian, hessian_bottom, hessian_matvec

CASES = {
    # name: (activation, loss, m, a, label)
    "gelu-logistic": ("gelu", "logistic", 2, (1, -1), "sign"),
    "quad-square": ("quad", "square", 2, None, "pr"),
}


def make(case, d=20, delta=3.0, seed=0, theta=None):
    act, loss, m, a, label = CASES[case]
    rng = np.random.default_rng(seed)
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    z = X[:, 0]
    y = np.sign(np.abs(z) - 0.6745) if label == "sign" else z ** 2
    net = tk.symbolic.Network(act, loss, m, a=a)
    if theta is None:
        theta = rng.standard_normal((d, m)) / np.sqrt(d)
    return X, y, net, theta


def gradient(X, y, net, theta, ridge):
    """grad L = (1/n) X^T F(X Theta, y) + ridge Theta (written here independently of the module)."""
    return X.T @ net.evaluate(X @ theta, y).F / len(y) + ridge * theta


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("ridge", [0.0, 0.3])
def test_matvec_matches_finite_differences_of_gradient(case, ridge):
    X, y, net, theta = make(case, d=15, seed=1)
    der = net.evaluate(X @ theta, y)
    rng = np.random.default_rng(2)
    eps = 1e-5
    for _ in range(3):
        V = rng.standard_normal(theta.shape)
        fd = (gradient(X, y, net, theta + eps * V, ridge) - gradient(X, y, net, theta - eps * V, ridge)) / (2 * eps)
        hv = hessian_matvec(X, der, V, ridge=ridge)
        assert hv.shape == theta.shape
        assert np.allclose(hv, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())
        # the flattened (C order) input gives the same product
        assert np.array_equal(hessian_matvec(X, der, V.ravel(), ridge=ridge), hv)


@pytest.mark.parametrize("case", list(CASES))
def test_dense_hessian_equals_matvec_on_identity_columns(case):
    X, y, net, theta = make(case, d=12, seed=3)
    der = net.evaluate(X @ theta, y)
    d, m = theta.shape
    H = dense_hessian(X, der, ridge=0.1)
    assert H.shape == (d * m, d * m)
    eye = np.eye(d * m)
    cols = np.stack([hessian_matvec(X, der, eye[:, p].reshape(d, m), ridge=0.1).ravel() for p in range(d * m)], 1)
    assert np.allclose(H, cols, rtol=1e-12, atol=1e-13)
    assert np.array_equal(H, H.T)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("mixed", [False, True])
def test_lanczos_matches_dense_eigh(case, mixed):
    X, y, net, theta = make(case, d=40, delta=4.0, seed=4)
    der = net.evaluate(X @ theta, y)
    k = 6
    w, V = np.linalg.eigh(dense_hessian(X, der, ridge=0.05))
    spec = hessian_bottom(X, der, k=k, ridge=0.05, mixed_precision=mixed)
    assert isinstance(spec, HessianSpectrum) and spec.method == "lanczos" and spec.matvecs > 0
    assert spec.eigenvectors.shape == (k, 40, 2)
    assert np.all(np.diff(spec.eigenvalues) >= 0)
    assert np.allclose(spec.eigenvalues, w[:k], rtol=0, atol=1e-8)
    overlaps = np.abs(np.einsum("kp,pk->k", spec.eigenvectors.reshape(k, -1), V[:, :k]))
    gaps = np.minimum(np.diff(w[: k + 1])[:k], np.r_[np.inf, np.diff(w[:k])])
    assert np.all(overlaps[gaps > 1e-3] > 1 - 1e-6)
    assert np.allclose(np.linalg.norm(spec.eigenvectors.reshape(k, -1), axis=1), 1.0)
    dense = hessian_bottom(X, der, k=k, ridge=0.05, method="dense")
    assert dense.method == "dense" and np.allclose(dense.eigenvalues, w[:k], atol=1e-12)
    assert np.array_equal(spec.hard_overlap2, np.zeros(k)) and spec.hard_weight == 0.0


def test_lanczos_handles_degenerate_spectrum():
    # quad at Theta = 0: grad f = 0, D_i = c_i I_2, so H = M (x) I_2 and every eigenvalue is double
    X, y, net, _ = make("quad-square", d=30, seed=5)
    theta = np.zeros((30, 2))
    der = net.evaluate(X @ theta, y)
    w = np.linalg.eigvalsh(dense_hessian(X, der))
    spec = hessian_bottom(X, der, k=4)
    assert np.allclose(spec.eigenvalues, w[:4], atol=1e-8)
    assert np.allclose(spec.eigenvalues[0::2], spec.eigenvalues[1::2], atol=1e-8)


def test_hard_overlap_planted():
    d, m = 30, 2
    rng = np.random.default_rng(6)
    theta = rng.standard_normal((d, m)) / np.sqrt(d)
    theta[0] = [0.7, -0.4]  # planted overlap with the hard direction e_0 (y = z^2 with z = x_0)
    X, y, net, theta = make("quad-square", d=d, delta=6.0, seed=7, theta=theta)
    der = net.evaluate(X @ theta, y)
    k = 5
    e0 = np.eye(d)[:, 0]
    spec = hessian_bottom(X, der, k=k, hard_dirs=e0)
    w, V = np.linalg.eigh(dense_hessian(X, der))
    Vk = V[:, :k].T.reshape(k, d, m)
    direct = np.sum(Vk[:, 0, :] ** 2, axis=1)  # ||e_0^T V_j||^2
    assert np.allclose(spec.hard_overlap2, direct, atol=1e-6)
    assert spec.hard_weight == pytest.approx(direct.sum(), abs=1e-6)
    assert spec.hard_weight > 5 * k / d  # the planted direction is visible at the bottom (random: ~ k/d)
    # a 2-column hard subspace and the dense method agree with the direct computation too
    E = np.eye(d)[:, :2]
    both = hessian_bottom(X, der, k=k, hard_dirs=E, method="dense")
    assert np.allclose(both.hard_overlap2, np.sum(Vk[:, :2, :] ** 2, axis=(1, 2)), atol=1e-10)
    # completeness: summed over all md eigenvectors, the overlap is k_H * m
    full = hessian_bottom(X, der, k=d * m, hard_dirs=E, method="dense")
    assert full.hard_weight == pytest.approx(2 * m, abs=1e-10)
    assert hessian_bottom(X, der, k=2, hard_dirs=np.zeros((d, 0)), method="dense").hard_weight == 0.0


def test_bad_inputs_raise_one_line_errors():
    X, y, net, theta = make("gelu-logistic", d=10, seed=8)
    der = net.evaluate(X @ theta, y)
    bad = [
        lambda: hessian_matvec(X, der, np.zeros((10, 3))),
        lambda: hessian_matvec(X[:-1], der, theta),
        lambda: hessian_matvec(X[0], der, theta),
        lambda: hessian_matvec(X, der.F, theta),
        lambda: hessian_matvec(X, der, theta, ridge="a lot"),
        lambda: dense_hessian(X[:, :5], der, ridge=np.inf),
        lambda: hessian_bottom(X, der, k=0),
        lambda: hessian_bottom(X, der, k=21),
        lambda: hessian_bottom(X, der, method="arnoldi"),
        lambda: hessian_bottom(X, der, tol=-1),
        lambda: hessian_bottom(X, der, hard_dirs=np.ones(10)),  # not unit norm
        lambda: hessian_bottom(X, der, hard_dirs=np.eye(9)[:, :1]),
        lambda: hessian_bottom(X, der, k=3, max_matvecs=5, mixed_precision=False),  # not converged
        lambda: hessian_bottom(np.where(X > 2, np.nan, X), der),
        lambda: hessian_bottom(np.where(X > 2, np.inf, X), der, mixed_precision=True, threads=2),
        lambda: hessian_bottom(X, der, threads=0),
    ]
    for f in bad:
        with pytest.raises(TheorykitError) as err:
            f()
        assert "\n" not in str(err.value)
    big = tk.symbolic.Network("gelu", "square", 2).evaluate(np.zeros((1, 2)), np.zeros(1))
    with pytest.raises(TheorykitError, match="6000"):
        dense_hessian(np.zeros((1, 3001)), big)


# ------------------------------------------------------------------ the fused, chunked, threaded product
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ridge", [0.0, 0.2])
def test_fused_operator_matches_two_matmul_product(monkeypatch, threads, ridge):
    from theorykit.referee import hessian as sp

    monkeypatch.setattr(sp, "CHUNK_BYTES", 4 * 40 * 7)  # 7-row float32 chunks: many chunks, uneven last one
    X, y, net, theta = make("gelu-logistic", d=40, delta=3.0, seed=11)
    der = net.evaluate(X @ theta, y)
    Q = np.random.default_rng(12).standard_normal((80, 5))
    ref = np.stack([hessian_matvec(X, der, Q[:, c], ridge=ridge).ravel() for c in range(5)], axis=1)
    with sp.row_parallel(threads) as (pool, limiter):
        assert (pool is None) == (threads == 1)
        op = sp.HessianOperator(X, der, ridge, True, pool, limiter)
        assert op.single and op.X32.dtype == np.float32
        assert np.allclose(op.row_norm2, np.sum(X * X, axis=1), rtol=1e-5)
        assert np.allclose(op.apply(Q), ref, rtol=1e-12, atol=1e-13 * np.abs(ref).max())
        assert np.allclose(op.apply(Q, single=True), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    assert np.allclose(sp.block_product(X, der, Q, ridge), ref, rtol=1e-12, atol=1e-13 * np.abs(ref).max())


def test_operator_leaves_float32_when_x_exceeds_its_range():
    from theorykit.referee import hessian as sp

    X, y, net, theta = make("quad-square", d=10, seed=13)
    der = net.evaluate(X @ theta, y)
    X = X.copy()
    X[3, 2] = 1e39  # finite in float64, inf in float32
    op = sp.HessianOperator(X, der, 0.0, True)
    assert not op.single and np.isfinite(op.row_norm2).all()
    X[3, 2] = np.inf
    with pytest.raises(TheorykitError, match="non-finite"):
        sp.HessianOperator(X, der, 0.0, True)


@pytest.mark.parametrize("case", list(CASES))
def test_lanczos_threaded_and_float64_continuation(monkeypatch, case):
    """Row-parallel products (2 threads, small chunks) and a tol below the float32 floor, which makes the float32
    phase hand over to float64 Lanczos; both still match dense eigh."""
    from theorykit.referee import hessian as sp

    monkeypatch.setattr(sp, "CHUNK_BYTES", 4 * 60 * 16)
    X, y, net, theta = make(case, d=60, delta=4.0, seed=14)
    der = net.evaluate(X @ theta, y)
    k = 5
    w, V = np.linalg.eigh(dense_hessian(X, der))
    for tol in (1e-8, 1e-13):
        spec = hessian_bottom(X, der, k=k, tol=tol, mixed_precision=True, threads=2, block_size=6)
        assert np.allclose(spec.eigenvalues, w[:k], rtol=0, atol=max(1e-8, 10 * tol * np.abs(w).max()))
        gaps = np.minimum(np.diff(w[: k + 1])[:k], np.r_[np.inf, np.diff(w[:k])])
        ov = np.abs(np.einsum("kp,pk->k", spec.eigenvectors.reshape(k, -1), V[:, :k]))
        assert np.all(ov[gaps > 1e-3] > 1 - 1e-6)
        assert spec.residuals.max() <= 10 * np.sqrt(tol) * np.abs(w).max()


@pytest.mark.parametrize("m", [1, 2, 3])
def test_spike_start_picks_the_lowest_single_sample_spikes(m):
    from theorykit.referee import hessian as sp

    rng = np.random.default_rng(16)
    X = rng.standard_normal((50, 7))
    net = tk.symbolic.Network("gelu", "square", m)
    der = net.evaluate(X @ (rng.standard_normal((7, m)) / 2), X[:, 0] ** 2)
    op = sp.HessianOperator(X, der, 0.0, False)
    S = op.spike_start(4)
    lam, U = np.linalg.eigh(der.D)
    idx = np.argsort(lam[:, 0] * np.sum(X * X, axis=1))[:4]
    ref = (X[idx][:, :, None] * U[idx, None, :, 0]).reshape(4, -1).T
    assert S.shape == (7 * m, 4)
    assert np.allclose(np.abs(np.sum(S * ref, axis=0)), np.linalg.norm(ref, axis=0) ** 2)  # equal up to sign


@pytest.mark.parametrize("n, d", [(1200, 1000), (1900, 1000)])
def test_lanczos_converges_on_a_singular_relu_hessian(n, d):
    """ReLU with square loss: D_i = 1{u_i > 0}, so H has a kernel of dimension ~ d - n/2 (more than k eigenvalues at
    exactly 0) or, at n/2 ~ d, a hard edge with gaps ~1e-6 ||H||.  Degenerate Ritz values are tested as a cluster
    (Kato-Temple with the block residual), and the float32 phase stops when it stalls; before, both failed after
    5000 matvecs.  The eigenvalues agree with the dense solver."""
    pr = tk.Problem("relu", "phase-retrieval", "square", 1, delta=n / d, eta=0.5, steps=0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    der = pr.network.evaluate(X @ (rng.standard_normal((d, 1)) / np.sqrt(d)), X[:, 0] ** 2)
    hb = hessian_bottom(X, der, k=10)
    ev = np.linalg.eigvalsh(dense_hessian(X, der, 0.0))[:10]
    scale = float(np.abs(ev).max()) + 1.0
    np.testing.assert_allclose(hb.eigenvalues, ev, atol=1e-9 * scale)
    assert hb.matvecs < 5000
