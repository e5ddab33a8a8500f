"""Tests of the finite-d simulator (theorykit.referee.gd) and its CLI."""
import json
import math

import numpy as np
import pytest

import theorykit as tk
from theorykit.cli import main, to_json
from theorykit.errors import TheorykitError
from theorykit.referee.gd import empirical_risk, risk_gradient, simulate

JSON_KEYS = {"status", "t", "M", "gram", "train_loss", "test_loss", "population_test_loss",
             "population_test_loss_error", "success", "escape_time", "hessian", "settings", "method", "problem"}


def _fd_gradient(net, X, y, theta, ridge, h=1e-5):
    g = np.zeros_like(theta)
    for idx in np.ndindex(*theta.shape):
        tp, tm = theta.copy(), theta.copy()
        tp[idx] += h
        tm[idx] -= h
        g[idx] = (empirical_risk(net, X, y, tp, ridge) - empirical_risk(net, X, y, tm, ridge)) / (2 * h)
    return g


@pytest.mark.parametrize("act,loss,a,b,ridge", [("gelu", "square", "1,-1,2", "0,0.5,-1", 0.0),
                                                 ("tanh", "huber", None, "0.3,0,0", 0.25)])
def test_gradient_matches_finite_differences(act, loss, a, b, ridge):
    rng = np.random.default_rng(1)
    d, n, m = 7, 40, 3
    net = tk.symbolic.Network(act, loss, m, a=a, b=b)
    X = rng.standard_normal((n, d))
    y = X[:, 0] + X[:, 1] ** 2
    theta = rng.standard_normal((d, m))
    g = risk_gradient(net, X, y, theta, ridge)
    g_fd = _fd_gradient(net, X, y, theta, ridge)
    assert np.linalg.norm(g - g_fd) / np.linalg.norm(g_fd) < 1e-6


def test_first_step_and_documented_draw_order():
    """Rebuild step 0 -> 1 by hand from the documented rng order (Theta0, X, eps, ...)."""
    d, delta, m, eta, ridge, seed = 30, 2.0, 2, 0.7, 0.3, 5
    res = simulate("gelu", "noisy-phase-retrieval", "square", m, delta=delta, d=d, steps=1, eta=eta, ridge=ridge,
                   seed=seed, n_test=50)
    n = int(round(delta * d))
    rng = np.random.default_rng(seed)
    theta0 = rng.standard_normal((d, m)) / math.sqrt(d)
    X = rng.standard_normal((n, d))
    eps = rng.standard_normal(n)
    y = X[:, 0] ** 2 + 0.5 * eps
    net = tk.symbolic.Network("gelu", "square", m)
    theta1 = theta0 - eta * risk_gradient(net, X, y, theta0, ridge)
    assert np.allclose(res.M[0], theta0[:1], rtol=0, atol=1e-14)
    assert np.allclose(res.M[1], theta1[:1], rtol=1e-12, atol=1e-14)
    assert np.allclose(res.gram[1], theta1.T @ theta1, rtol=1e-12)
    # train loss excludes the ridge term
    assert res.train_loss[0] == pytest.approx(empirical_risk(net, X, y, theta0, 0.0), rel=1e-12)
    assert res.settings["n"] == n and res.settings["n_test"] == 50 and res.settings["seed"] == seed
    assert res.M.shape == (2, 1, m) and res.gram.shape == (2, m, m) and res.t.tolist() == [0, 1]


def test_reproducible_with_seed():
    kw = dict(delta=2, d=60, steps=5, eta=0.5, n_test=100)
    r1 = simulate("gelu", "staircase", "square", 2, seed=3, **kw)
    r2 = simulate("gelu", "staircase", "square", 2, seed=3, **kw)
    r3 = simulate("gelu", "staircase", "square", 2, seed=4, **kw)
    for name in ("M", "gram", "train_loss", "test_loss", "success"):
        assert np.array_equal(getattr(r1, name), getattr(r2, name))
    assert not np.array_equal(r1.M, r3.M)
    assert not np.array_equal(r1.train_loss, r3.train_loss)


def test_constrained_gd_keeps_hard_overlap_zero():
    res = simulate("gelu", "staircase", "square", 3, delta=3, d=80, steps=15, eta=1.0, constrained=True, n_test=100)
    assert res.settings["hard_dim"] == 1 and res.status == "ok"
    assert np.max(np.abs(res.M[:, 1, :])) <= 1e-12  # hard direction e2 of the latent space
    assert np.max(res.overlap) <= 1e-12 and not res.success.any() and res.escape_time is None
    assert np.max(np.abs(res.M[-1, 0, :])) > 0.3  # the easy direction z1 is still learned
    free = simulate("gelu", "staircase", "square", 3, delta=3, d=80, steps=15, eta=1.0, n_test=100)
    assert np.max(np.abs(free.M[:, 1, :])) > 1e-3


def test_divergence_reported_without_nan():
    res = simulate("x**2", "phase-retrieval", "square", 2, delta=2, d=100, steps=50, eta=5.0, n_test=200)
    assert res.status == "diverged"
    step = res.diverged_at["step"]
    assert 0 < step <= 50 and len(res.t) == step and res.M.shape[0] == step
    for arr in (res.M, res.gram, res.train_loss, res.test_loss):
        assert np.all(np.isfinite(arr))
    assert res.diverged_at["loss"] > 1e6 and "eta" in res.diverged_at["hint"]
    out = res.as_dict()
    assert set(out) == JSON_KEYS | {"diverged_at"}
    json.loads(to_json(out))  # strict JSON (no NaN/Infinity)


def test_memory_refusal_names_the_size():
    with pytest.raises(TheorykitError) as e:
        simulate("gelu", "phase-retrieval", "square", 2, delta=1000, d=10 ** 6, steps=1, eta=1.0)
    msg = str(e.value)
    assert "\n" not in msg and "TiB" in msg and "1000000000 x 1000000" in msg


@pytest.mark.parametrize("kw,word", [(dict(delta=0), "delta"), (dict(delta=-1), "delta"), (dict(d=0), "d must"),
                                     (dict(eta=0), "eta"), (dict(eta=-0.1), "eta"), (dict(steps=-1), "steps"),
                                     (dict(init="pca"), "init"), (dict(delta=float("nan")), "delta"),
                                     (dict(spectral_T="y"), "spectral")])
def test_bad_inputs_one_line(kw, word):
    base = dict(delta=2, d=20, steps=1, eta=1.0)
    base.update(kw)
    with pytest.raises(TheorykitError) as e:
        simulate("gelu", "phase-retrieval", "square", 1, **base)
    assert word in str(e.value) and "\n" not in str(e.value)


def test_spectral_init_beats_random():
    kw = dict(delta=4, d=400, steps=0, eta=1.0, n_test=10, seed=0)
    spec = simulate("gelu", "phase-retrieval", "square", 1, init="spectral", **kw)
    rand = simulate("gelu", "phase-retrieval", "square", 1, **kw)
    assert spec.overlap[0] > 0.5 and spec.success[0] and spec.escape_time == 0
    assert rand.overlap[0] < 0.05
    assert spec.gram[0, 0, 0] == pytest.approx(1.0, abs=1e-12)  # unit norm
    assert spec.settings["spectral_T"] is not None and spec.settings["init"] == "spectral"


def test_easy_link_learned_in_few_steps():
    res = simulate("tanh", "z + z**2/2", "square", 2, delta=2, d=400, steps=20, eta=1.0, seed=0, n_test=500)
    norms = np.linalg.norm(res.M, axis=(1, 2))
    assert res.status == "ok" and len(norms) == 21
    assert norms[0] < 4 / math.sqrt(400)  # |M_0| ~ sqrt(m/d) = 0.07
    assert norms[20] > 0.8 and norms[5] > 5 * norms[0]  # O(1) after O(1) steps
    assert res.train_loss[20] < 0.6 * res.train_loss[0] and res.test_loss[20] < res.test_loss[0]
    assert res.settings["success_target"] == "latent" and res.escape_time is not None
    # gram starts near I_m
    assert np.allclose(res.gram[0], np.eye(2), atol=0.25)


def test_hessian_checkpoints_match_dense_hessian():
    d, delta, m, ridge, seed = 8, 5.0, 2, 0.1, 2
    res = simulate("gelu", "phase-retrieval", "square", m, delta=delta, d=d, steps=2, eta=0.5, ridge=ridge,
                   seed=seed, hessian_every=2, hessian_k=4, n_test=20)
    assert [h["t"] for h in res.hessian] == [0, 2]
    h0 = res.hessian[0]
    assert {"t", "eigenvalues", "hard_overlap2", "hard_weight"} <= set(h0)
    # dense Hessian at t = 0 by finite differences of the (checked) gradient
    n = int(round(delta * d))
    rng = np.random.default_rng(seed)
    theta0 = rng.standard_normal((d, m)) / math.sqrt(d)
    X = rng.standard_normal((n, d))
    y = X[:, 0] ** 2
    net = tk.symbolic.Network("gelu", "square", m)
    H = np.zeros((d * m, d * m))
    h = 1e-5
    for i in range(d * m):
        e = np.zeros(d * m)
        e[i] = h
        H[:, i] = (risk_gradient(net, X, y, theta0 + e.reshape(d, m), ridge)
                   - risk_gradient(net, X, y, theta0 - e.reshape(d, m), ridge)).ravel() / (2 * h)
    w, V = np.linalg.eigh((H + H.T) / 2)
    assert np.allclose(np.sort(h0["eigenvalues"]), w[:4], atol=1e-6)
    ov = np.sum(V.reshape(d, m, -1)[0] ** 2, axis=0)[:4]  # hard direction = e1
    assert np.allclose(np.sort(h0["hard_overlap2"])[::-1].sum(), ov.sum(), atol=1e-5)
    assert h0["hard_weight"] == pytest.approx(ov.sum(), abs=1e-5)


def test_cli_json_keys(capsys):
    rc = main(["simulate", "--activation", "gelu", "--link", "phase-retrieval", "--loss", "square", "--width", "2",
               "--delta", "2", "--d", "40", "--steps", "3", "--eta", "0.5", "--seed", "1", "--n-test", "50",
               "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == JSON_KEYS
    assert out["status"] == "ok" and out["t"] == [0, 1, 2, 3]
    assert np.array(out["M"]).shape == (4, 1, 2) and np.array(out["gram"]).shape == (4, 2, 2)
    assert len(out["train_loss"]) == 4 and len(out["success"]) == 4 and out["hessian"] == []
    assert len(out["population_test_loss"]) == 4 and len(out["population_test_loss_error"]) == 4
    s = out["settings"]
    assert (s["seed"] == 1 and s["n"] == 80 and s["d"] == 40 and s["eta"] == 0.5 and "theta_star" in out["method"]
            and "theta_star" not in s)
    # values, not just keys: the CLI run is the API run with the same settings (bit for bit: JSON keeps a float's
    # shortest repr), and t = 0 is the documented first draw from default_rng(seed): Theta0 ~ N(0, I/d), then X
    res = simulate("gelu", "phase-retrieval", "square", 2, delta=2, d=40, steps=3, eta=0.5, seed=1, n_test=50)
    for key in ("M", "gram", "train_loss", "test_loss", "population_test_loss", "population_test_loss_error"):
        np.testing.assert_array_equal(out[key], getattr(res, key), err_msg=key)
    rng = np.random.default_rng(1)
    theta0 = rng.standard_normal((40, 2)) / math.sqrt(40)
    X = rng.standard_normal((80, 40))
    np.testing.assert_allclose(out["M"][0], theta0[:1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(out["gram"][0], theta0.T @ theta0, rtol=1e-13)
    net = tk.symbolic.Network("gelu", "square", 2)
    assert out["train_loss"][0] == pytest.approx(empirical_risk(net, X, X[:, 0] ** 2, theta0, 0.0), rel=1e-12)
    # measured: the train loss falls 0.906 -> 0.618 in 3 steps, the overlap stays small (no success, no escape)
    assert out["train_loss"][3] < 0.7 * out["train_loss"][0]
    assert out["success"] == [False] * 4 and out["escape_time"] is None


def test_cli_text_progress_and_errors(capsys):
    rc = main(["simulate", "--activation", "x**2", "--link", "phase-retrieval", "--width", "2", "--delta", "2",
               "--d", "40", "--steps", "30", "--eta", "5", "--n-test", "50", "--progress"])
    cap = capsys.readouterr()
    assert rc == 0 and "status: diverged" in cap.out and "simulate [" in cap.err
    rc = main(["simulate", "--activation", "gelu", "--link", "phase-retrieval", "--delta", "-1", "--d", "40",
               "--steps", "3", "--eta", "0.5", "--json"])
    cap = capsys.readouterr()
    assert rc == 2 and cap.err.count("\n") == 1 and "delta" in cap.err


def test_hessian_lanczos_agrees_with_dense():
    kw = dict(delta=4, d=50, steps=2, eta=0.5, hessian_every=2, hessian_k=5, n_test=20, seed=1)
    dense = simulate("gelu", "phase-retrieval", "square", 2, hessian_method="dense", **kw)
    lanc = simulate("gelu", "phase-retrieval", "square", 2, hessian_method="lanczos", **kw)
    for hd, hl in zip(dense.hessian, lanc.hessian):
        assert hl["method"] == "lanczos" and hd["method"] == "dense" and len(hl["eigenvalues"]) == 5
        assert np.allclose(hd["eigenvalues"], hl["eigenvalues"], atol=1e-8)
        assert hd["hard_weight"] == pytest.approx(hl["hard_weight"], abs=1e-6)


def _rng_at_the_test_set(res, lk):
    """The run's generator replayed in the documented order (Theta(0), X, eps) up to its test set's draws."""
    s = res.settings
    rng = np.random.default_rng(s["seed"])
    rng.standard_normal((s["d"], s["width"]))
    rng.standard_normal((s["n"], s["d"]))
    if lk.noisy:
        rng.standard_normal(s["n"])
    return rng


def _per_sample_test_losses(res, net, lk, theta):
    """Rebuild the test set from the documented rng order and return the per-sample test losses at theta."""
    s = res.settings
    rng = _rng_at_the_test_set(res, lk)
    X_test = rng.standard_normal((s["n_test"], s["d"]))
    eps = rng.standard_normal(s["n_test"]) if lk.noisy else None
    return net.loss_values(X_test @ theta, lk.response(X_test[:, :lk.k], eps))


@pytest.mark.parametrize("link,width", [("z + z**2/2", 2), ("z + eps/2", 1)])
def test_population_test_loss_matches_fresh_sample_test_loss(link, width):
    """At d = 2000 the test loss on the fresh test set agrees with the population test loss (from M_t and
    C_t = gram_t - M_t^T M_t) within the test set's sampling error, at the first and the last step."""
    d, seed = 2000, 7
    res = simulate("tanh", link, "square", width, delta=2, d=d, steps=8, eta=1.0, seed=seed, test_set="fresh")
    assert res.status == "ok"
    pop, err = res.population_test_loss, res.population_test_loss_error
    assert pop.shape == err.shape == res.test_loss.shape == (9,)
    assert np.all(np.isfinite(pop)) and np.all(err < 1e-2)
    assert res.method["population_test_loss"]["max_error"] == pytest.approx(err.max())
    net, lk = tk.symbolic.Network("tanh", "square", width), tk.link(link)
    rng = np.random.default_rng(seed)
    theta0 = rng.standard_normal((d, width)) / math.sqrt(d)
    for t, theta in ((0, theta0), (8, res.theta)):
        losses = _per_sample_test_losses(res, net, lk, theta)
        assert np.mean(losses) == pytest.approx(res.test_loss[t], rel=1e-10)
        se = np.std(losses, ddof=1) / math.sqrt(len(losses))
        assert abs(res.test_loss[t] - pop[t]) < 4 * se + err[t], (t, res.test_loss[t], pop[t], se)
    # training moved the loss by many standard errors, so the agreement is not trivial
    assert abs(pop[8] - pop[0]) > 5 * se


def _overlap_test_set(res, lk):
    """The test set of test_set "overlaps" from the documented rng order: coordinates (n_test, k + p) and y_test."""
    s = res.settings
    rng = _rng_at_the_test_set(res, lk)
    Z = rng.standard_normal((s["n_test"], lk.k + min(s["width"], s["d"] - lk.k)))
    eps = rng.standard_normal(s["n_test"]) if lk.noisy else None
    return Z, lk.response(Z[:, :lk.k], eps)


def test_overlaps_test_loss_is_the_average_over_its_test_coordinates():
    """The default test loss: the average loss over (z, g) @ [M_t; R_t] with R_t^T R_t = Theta_t[k:]^T Theta_t[k:]."""
    from theorykit.referee.gd import overlap_weights

    res = simulate("tanh", "z + eps/2", "square", 3, delta=2, d=60, steps=6, eta=1.0, seed=2, n_test=500)
    assert res.settings["test_set"] == "overlaps" and "overlaps" in res.method["test_loss"]
    net, lk = tk.symbolic.Network("tanh", "square", 3), tk.link("z + eps/2")
    Z, y = _overlap_test_set(res, lk)
    theta0 = np.random.default_rng(2).standard_normal((60, 3)) / math.sqrt(60)
    for t, theta in ((0, theta0), (6, res.theta)):
        W = overlap_weights(theta, 1, 3)
        assert np.allclose(W[1:].T @ W[1:], theta[1:].T @ theta[1:], rtol=1e-12, atol=1e-15)
        assert np.mean(net.loss_values(Z @ W, y)) == pytest.approx(res.test_loss[t], rel=1e-12)


def test_overlap_weights_of_a_singular_complement():
    """m > d - k: C_t has rank d - k, and R_t (d - k rows) still gives R_t^T R_t = C_t."""
    from theorykit.referee.gd import overlap_weights

    theta = np.random.default_rng(0).standard_normal((3, 4))
    W = overlap_weights(theta, 1, 2)
    assert W.shape == (3, 4) and np.allclose(W[1:].T @ W[1:], theta[1:].T @ theta[1:], atol=1e-12)
    assert np.all(np.isnan(overlap_weights(np.full((5, 2), np.inf), 1, 2)[1:]))


def _sample_losses(res, net, lk, theta, test_set):
    if test_set == "fresh":
        return _per_sample_test_losses(res, net, lk, theta)
    from theorykit.referee.gd import overlap_weights

    Z, y = _overlap_test_set(res, lk)
    return net.loss_values(Z @ overlap_weights(theta, lk.k, Z.shape[1] - lk.k), y)


@pytest.mark.parametrize("act,link,width,d", [("tanh", "z + z**2/2", 2, 150), ("tanh", "z + eps/2", 1, 150),
                                              ("tanh", "z + z**2/2", 4, 150), ("gelu", "phase-retrieval", 4, 3)])
def test_overlaps_test_loss_agrees_with_a_large_fresh_test_set(act, link, width, d):
    """The test loss from the overlaps and from a large fresh (n_test, d) test set, on the same training run (same
    seed, same draws up to the test set): within their Monte Carlo standard errors at the first and the last step, and
    both within theirs of the population test loss (quadrature, where k + noisy + m <= 4).  k + m = 5 (no quadrature)
    and d = 3 < k + m (the complement has rank d - k < m) included."""
    seed, steps = 11, 8
    kw = dict(delta=3, d=d, steps=steps, eta=1.0, seed=seed, kernel="numpy")
    over = simulate(act, link, "square", width, n_test=100000, **kw)
    fresh = simulate(act, link, "square", width, n_test=20000, test_set="fresh", **kw)
    assert over.settings["test_set"] == "overlaps" and fresh.settings["test_set"] == "fresh"
    assert np.array_equal(over.M, fresh.M) and np.array_equal(over.train_loss, fresh.train_loss)
    net, lk = tk.symbolic.Network(act, "square", width), tk.link(link)
    theta0 = np.random.default_rng(seed).standard_normal((d, width)) / math.sqrt(d)
    pop, err = over.population_test_loss, over.population_test_loss_error
    for t, theta in ((0, theta0), (steps, over.theta)):
        se = {}
        for name, res in (("overlaps", over), ("fresh", fresh)):
            losses = _sample_losses(res, net, lk, theta, name)
            assert np.mean(losses) == pytest.approx(res.test_loss[t], rel=1e-10)
            se[name] = np.std(losses, ddof=1) / math.sqrt(len(losses))
        gap = abs(over.test_loss[t] - fresh.test_loss[t])
        assert gap < 4 * math.hypot(se["overlaps"], se["fresh"]), (t, over.test_loss[t], fresh.test_loss[t], se)
        if pop is not None:
            assert abs(over.test_loss[t] - pop[t]) < 4 * se["overlaps"] + err[t], (t, over.test_loss[t], pop[t])
    # training moved the loss by many standard errors, so the agreement is not trivial
    assert abs(over.test_loss[steps] - over.test_loss[0]) > 10 * se["fresh"]


def test_bad_test_set_is_one_line():
    with pytest.raises(TheorykitError, match="test_set must be one of 'overlaps', 'fresh', got 'train'"):
        simulate("gelu", "phase-retrieval", "square", 1, delta=2, d=20, steps=1, eta=0.5, test_set="train")


def test_population_test_loss_skipped_with_too_many_gaussian_variables():
    res = simulate("gelu", "staircase", "square", 3, delta=2, d=30, steps=2, eta=0.5, n_test=50)
    assert res.population_test_loss is None and res.population_test_loss_error is None
    assert "k + noisy + m = 2 + 0 + 3 > 4" in res.method["population_test_loss"]
    out = res.as_dict()
    assert out["population_test_loss"] is None and set(out) == JSON_KEYS


def test_population_test_loss_exact_for_polynomial_network():
    res = simulate("quad", "phase-retrieval", "square", 2, delta=2, d=50, steps=3, eta=0.05, n_test=50)
    assert "population_test_loss" not in res.settings  # computed on first access: sweeps never pay for it
    assert np.all(res.population_test_loss_error == 0.0)
    (method,) = res.method["population_test_loss"]["methods"]
    assert "exact for polynomials" in method
    # independent check at t = 0 with the population_loss front door
    M, gram = res.M[0], res.gram[0]
    e = tk.population.population_loss(tk.symbolic.Network("quad", "square", 2), "phase-retrieval", M, gram - M.T @ M)
    assert e.value == pytest.approx(res.population_test_loss[0], rel=1e-12)


def test_stop_after_escape_ends_the_run_at_the_escape():
    pr = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=10.0, eta=1.0, steps=300)
    full = tk.simulate(pr, d=150, seed=3)
    assert full.escape_time is not None and full.settings["stopped_at"] is None
    for K in (0, 4):
        r = tk.simulate(pr, d=150, seed=3, stop_after_escape=K)
        assert r.escape_time == full.escape_time and len(r.t) == full.escape_time + K + 1
        assert r.settings["stopped_at"] == full.escape_time + K
        assert np.array_equal(r.overlap, full.overlap[:len(r.t)])  # the same run, cut short
    never = tk.simulate(pr.replace(delta=2.0, steps=20), d=150, seed=3, stop_after_escape=0)
    assert never.escape_time is None and len(never.t) == 21
    with pytest.raises(tk.TheorykitError, match="stop_after_escape"):
        tk.simulate(pr, d=150, stop_after_escape=-1)
