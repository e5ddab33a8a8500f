"""The DMFT's history pass and the hard process' routes (docs/theory.md §3 numerics, §3.2)."""
import numpy as np
import pytest

import theorykit as tk
import theorykit.dynamics.sample_side as ss
from theorykit.dynamics.hard_process import hard_tangents


@pytest.mark.parametrize("m, t", [(1, 0), (1, 37), (2, 50), (3, 9)])
def test_history_pass_is_the_two_products(m, t):
    rng = np.random.default_rng(0)
    N, T = 300, 60
    U = rng.standard_normal((T + 1, m, N))
    V = rng.standard_normal((3, N))
    R = rng.standard_normal((m, (t + 1) * m))
    E, mem = ss.history_pass(U, t, V, R)
    Ut = U[:t + 1].reshape((t + 1) * m, N)
    assert np.allclose(E, V @ Ut.T, rtol=1e-12, atol=1e-10)
    assert np.allclose(mem, R @ Ut, rtol=1e-12, atol=1e-10)
    E2, none = ss.history_pass(U, t, V, None)
    assert none is None and np.array_equal(E, E2)


def _pr(steps, **kw):
    return tk.dmft("gelu", "phase-retrieval", "square", 1, delta=4.0, eta=1.0, steps=steps, paths=2048, replicas=2,
                   processes=1, bias_check=False, response="direct", **kw)


def test_kernel_route_equals_the_tangents_with_every_source(monkeypatch):
    """With every source on the whole batch, the parameter-side recursion on the Jacobians' kernels is the tangents'
    recursion summed over paths: the same C_mu (float32 rounding apart); the tangents with every drive exact."""
    kern = _pr(25, fine_lags=None)
    assert kern.method["hard_process"]["routes"] == {"jacobian kernels": 2}
    assert kern.method["hard_process"]["tangent_check"] < 1e-5
    monkeypatch.setattr(ss, "HARD_KERNEL_TOL", -1.0)  # every replica falls back to the tangents
    monkeypatch.setattr(ss, "hard_tangents", lambda *a, **k: hard_tangents(*a, **{**k, "rank": k.get("rank", 1000),
                                                                                   "residual_fraction": 0.0}))
    tan = _pr(25, fine_lags=None)
    assert tan.method["hard_process"]["routes"] == {"pathwise tangents": 2}
    rel = np.abs(kern.C_mu - tan.C_mu).max() / np.abs(tan.C_mu).max()
    assert 0 < rel < 1e-4, rel
    assert np.allclose(kern.C_mu_init, tan.C_mu_init, rtol=1e-4)
    assert np.array_equal(kern.gram, tan.gram)  # the route touches only the hard process


def test_dyadic_kernel_route_is_checked_and_falls_back(monkeypatch):
    """On the dyadic grid the interpolation in s is checked against the first tangents; a replica whose check
    exceeds HARD_KERNEL_TOL is solved by the tangents (the same C_mu as a solve without the kernel route)."""
    r = _pr(60, fine_lags=4)
    hp = r.method["hard_process"]
    assert hp["tangent_check"] is not None and hp["tangent_check"] > 0
    assert sum(hp["routes"].values()) == 2
    monkeypatch.setattr(ss, "HARD_KERNEL_TOL", 0.0)
    fb = _pr(60, fine_lags=4)
    assert fb.method["hard_process"]["routes"] == {"pathwise tangents": 2}
    monkeypatch.setattr(ss, "HARD_KERNEL_TOL", -1.0)
    assert np.array_equal(_pr(60, fine_lags=4).C_mu, fb.C_mu)


def test_exact_drives_stop_at_the_residual_fraction():
    rng = np.random.default_rng(2)
    S, N = 80, 512
    D = (0.1 * rng.standard_normal((S, N, 1, 1))).astype(np.float32)
    zeta = rng.standard_normal(N)
    w = np.full(N, 1.0 / N)
    R = np.zeros((S, S, 1, 1))
    for t in range(1, S):
        R[t, t - 1] = -0.25
    s = np.arange(S)
    Cu = np.exp(-0.5 * ((s[:, None] - s[None, :]) / 12.0) ** 2)[:, :, None, None]  # fast spectral decay
    etas = np.full(S, 0.5)
    args = (D, zeta, w, R, Cu, etas, 2.0, 0.0, np.eye(1))
    _, few = hard_tangents(*args, residual_fraction=1e-2)
    _, many = hard_tangents(*args, residual_fraction=1e-4)
    _, cap = hard_tangents(*args, residual_fraction=0.0)
    assert few["rank"] < many["rank"] < cap["rank"] <= 32
    assert 1 - few["exact_fraction"] <= 1e-2 and 1 - many["exact_fraction"] <= 1e-4
