"""Direct Jacobian responses on a dyadic grid of source times (theorykit.dynamics.responses.DyadicJacobians):
exact at the sources on the grid, interpolated in s between them, and close to the full estimator in the DMFT."""
from types import SimpleNamespace

import numpy as np
import pytest

import theorykit as tk
from theorykit.dynamics.plan import DYADIC_FINE_LAGS, response_bytes
from theorykit.dynamics.responses import DyadicJacobians, direct_lags, dyadic_drop_lag, dyadic_response_floats


def _random_step_inputs(T, m, N, rng):
    R_theta = np.tril(rng.standard_normal((T + 1, T + 1, m, m)).transpose(2, 3, 0, 1), -1).transpose(2, 3, 0, 1) * 0.3
    ders = [SimpleNamespace(grad_f=rng.standard_normal((N, m)), l2=rng.uniform(0, 1, N),
                            curv=rng.standard_normal((N, m)) * 0.2) for _ in range(T + 1)]
    return R_theta, ders, np.full(N, 1.0 / N)


@pytest.mark.parametrize("m", [1, 2])
def test_the_grid_with_every_source_is_the_full_estimator_and_exact_on_its_sources(m):
    """W > T: the full estimator.  W = 4 with R_theta(t, s') the same for every s' < t: the storage blocks' product
    (sum of R_theta over a block) x (mean of K over it) is exact, so the grid is exact on its sources, and every s'
    is counted once through the blocks' merges.  With random kernels the grid's approximation is visible."""
    assert DyadicJacobians(40, 1, 4, W=4).schedule.held[40] < 40
    T, N = 40, 16
    rng = np.random.default_rng(1)
    R_theta, ders, w = _random_step_inputs(T, m, N, rng)
    R_flat = np.tril(np.ones((T + 1, T + 1)), -1)[:, :, None, None] * R_theta[:, :1]  # R_theta(t, s') = R_theta(t, 0)
    full, full_flat = np.zeros((T + 1, T + 1, m, m)), np.zeros((T + 1, T + 1, m, m))
    K = np.zeros((T + 1, T + 1, m, N, m), dtype=np.float32)
    K_flat = np.zeros_like(K)
    every, coarse, flat = np.zeros_like(full), np.zeros_like(full), np.zeros_like(full)
    dy_every = DyadicJacobians(T, m, N, W=T + 1)
    dy = DyadicJacobians(T, m, N, W=4)
    dy_flat = DyadicJacobians(T, m, N, W=4)
    merged = 0
    for t in range(T + 1):
        direct_lags(full, K, t, R_theta, ders[t], w, m, N)
        direct_lags(full_flat, K_flat, t, R_flat, ders[t], w, m, N)
        dy_every.step(every, t, R_theta, ders[t], w)
        dy.step(coarse, t, R_theta, ders[t], w)
        dy_flat.step(flat, t, R_flat, ders[t], w)
        on = np.asarray(dy.active[:-1], dtype=int)  # the sources propagated at this t (t itself was just added)
        assert np.allclose(flat[t, on], full_flat[t, on], rtol=1e-5, atol=1e-6)
        assert 0 in dy.active and (t == 0 or t - 1 in dy.active)
        assert len(dy.active) <= 4 + 2 * (np.log2(max(t, 1) / 4) + 2)
        # every source holds the blocks the schedule's dry run predicts for its lag (after this step: lag + 1)
        assert all(dy.count[s] == dy.schedule.held[t + 1 - s] for s in dy.active[:-1] if t + 1 - s <= T)
        merged = max(merged, max(t - s - dy.count[s] for s in dy.active))
    assert merged >= 10  # the storage blocks did merge: a source holds fewer blocks than its lag
    assert np.allclose(every, full, rtol=1e-5, atol=1e-6)
    off = np.abs(coarse - full).max()
    assert off > 1e-3  # random kernels are not smooth in s: the interpolation is visible (the test can fail)


def test_drop_lags_and_memory():
    assert dyadic_drop_lag(0, 8) == np.inf
    assert [dyadic_drop_lag(s, 8) for s in (1, 2, 3, 4, 12)] == [8, 16, 8, 32, 32]
    T, W = 1000, 32
    assert dyadic_response_floats(T, W) < (T + 1) ** 2 / 50  # the live blocks: 50x fewer than every source's history
    assert response_bytes(T, 1, None) == (T + 1) ** 2 * 4
    # a source's membership is monotone: once off the grid it never returns
    for s in range(1, 200):
        on = [t - s < dyadic_drop_lag(s, W) for t in range(s, 400)]
        assert on == sorted(on, reverse=True)


@pytest.mark.parametrize("setting, T, W, tol", [
    (("gelu", "sign-symmetric", "logistic", 1, 1.0), 60, 32, 2e-4),  # bounded D
    (("gelu", "sign-symmetric", "logistic", 1, 1.0), 60, 8, 2e-2),
    (("gelu", "phase-retrieval", "square", 2, 1.0), 40, 8, 2e-2),    # unbounded D, m = 2
    (("quad", "phase-retrieval", "square", 1, 0.05), 60, 16, 2e-2),  # x^2: small steps
])
def test_dyadic_dmft_is_close_to_the_full_direct_dmft(setting, T, W, tol):
    act, link, loss, m, eta = setting
    pr = tk.Problem(act, link, loss, m, delta=6.0, eta=eta, steps=T)
    opts = dict(paths=2048, replicas=2, processes=1, bias_check=False, hard_process=False, response="direct")
    full = tk.dmft(pr, **opts, fine_lags=None)
    dy = tk.dmft(pr, **opts, fine_lags=W)
    assert full.settings["fine_lags"] is None and dy.settings["fine_lags"] == W
    assert "dyadic" in dy.method["response_sources"]
    assert full.settings["response_paths_per_replica"] == dy.settings["response_paths_per_replica"]
    rel = np.abs(dy.gram[-1] - full.gram[-1]).max() / np.abs(full.gram[-1]).max()
    assert rel < tol
    assert abs(dy.train_loss[-1] - full.train_loss[-1]) < tol * abs(full.train_loss[-1])


def test_auto_takes_the_grid_only_where_the_full_jacobians_do_not_fit():
    pr = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=6.0, eta=1.0, steps=20)
    r = tk.dmft(pr, paths=512, replicas=2, processes=1, bias_check=False, hard_process=False, response="direct")
    assert r.settings["fine_lags"] is None and r.method["response_sources"] == "every source time s"
    from theorykit.dynamics.plan import make_plan
    from theorykit.symbolic.ingredients import link as make_link
    from theorykit.symbolic.network import Network

    net, lk = Network("gelu", "logistic", 1), make_link("sign-symmetric")
    plan = make_plan(net, lk, np.zeros((1, 0)), np.ones(1000), paths=16384, replicas=4, latent="monte-carlo",
                     order=None, response="direct", response_paths=None, window=0, sampler="sobol",
                     bias_check=False, processes=1)
    assert plan.fine_lags == DYADIC_FINE_LAGS and plan.n_main == 4096 and plan.n_resp >= 2048
    full = make_plan(net, lk, np.zeros((1, 0)), np.ones(1000), paths=16384, replicas=4, latent="monte-carlo",
                     order=None, response="direct", response_paths=None, window=0, sampler="sobol",
                     bias_check=False, processes=1, fine_lags=None)
    assert full.fine_lags is None and full.n_resp == 256
    with pytest.raises(tk.TheorykitError, match="fine_lags"):
        tk.dmft(pr, paths=512, replicas=2, processes=1, response="direct", fine_lags=1)


def test_a_dyadic_solve_with_a_horizon_is_the_prefix_of_the_longer_solve():
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=5.0, eta=1.0, steps=40)
    opts = dict(paths=1024, replicas=2, processes=1, bias_check=False, response="direct", fine_lags=4,
                hard_process=False)
    long = tk.dmft(pr, **opts)
    short = tk.dmft(pr.replace(steps=25), **opts, horizon=40)
    assert np.array_equal(short.gram, long.gram[:26]) and np.array_equal(short.M, long.M[:26])


def test_linear_model_dyadic_against_the_exact_limit_and_the_full_estimator():
    """An outside reference: on the linear model R_u is path-independent, so with the same paths the dyadic and the full
    solves differ only by the interpolation in s; both must sit on the Marchenko-Pastur limit within their errors.
    delta = 1.5 without ridge keeps a long memory (slowest mode ~ 60 steps)."""
    from theorykit.dynamics.linear_gd import linear_gd_limit

    T, S = 150, dict(delta=1.5, eta=0.5, ridge=0.0)
    ex = linear_gd_limit(**S, steps=T, noise=0.5)
    opts = dict(activation="linear", link="z + eps/2", loss="square", width=1, **S, steps=T, response="direct",
                paths=16384, replicas=4, processes=1, hard_process=False, bias_check=False)
    full = tk.dmft(**opts, fine_lags=None)
    dy = tk.dmft(**opts, fine_lags=DYADIC_FINE_LAGS)
    g_full, g_dy = full.gram[:, 0, 0], dy.gram[:, 0, 0]
    assert np.max(np.abs(g_dy - g_full) / g_full) < 5e-3  # measured 2.5e-3 at T = 400
    for r in (full, dy):
        for t in (50, 100, 150):
            assert abs(r.gram[t, 0, 0] - ex.gram[t]) <= 4 * r.stderr["gram"][t, 0, 0] + 1e-3
