"""The DMFT's PathLaw (its law of (r, y, z, D, zeta) at requested times) and the scan mode (issue 10 point 2)."""
import numpy as np
import pytest

import theorykit as tk


def test_path_law_integrates_to_the_solver_own_expectations():
    # smooth sigma: R_u(t, t) = E[D^t] on the whole batch, the replica mean; the law must reproduce it exactly
    r = tk.dmft("gelu", "phase-retrieval", "square", 1, delta=4.0, eta=1.0, steps=5, paths=4096, replicas=2,
                keep_law_at=[0, 5], kernels=True, processes=1)
    assert sorted(r.laws) == [0, 5]
    for t in (0, 5):
        law = r.laws[t]
        assert law.t == t and law.r.shape == (4096, 1) and law.D.shape == (4096, 1, 1) and law.zeta.shape == (4096, 1)
        assert abs(law.weights.sum() - 1) < 1e-12 and not law.excluded.any()
        assert np.isclose(law.expectation(law.D[:, 0, 0]), r.kernels["R_u"][t, t, 0, 0], rtol=1e-10)
        # zeta is the hard latent coordinate: y = z^2 = zeta^2 for phase retrieval
        assert np.allclose(law.y, law.zeta[:, 0] ** 2)
        assert set(np.unique(law.replica)) == {0, 1}
    # the tails reported by the solver are those of the law's D
    assert np.isclose(r.laws[5].D[:, 0, 0].min(), r.D_tail[5, 0])


def test_path_law_of_a_kinked_activation_has_no_dirac_terms():
    # relu: the finite-n D = l'' sigma'^2 = 1{r > 0}; the response R_u(0, 0) = 1/2 - 1/sqrt(2 pi) carries the Dirac term
    r = tk.dmft("relu", "phase-retrieval", "square", 1, delta=2.0, eta=1.0, steps=1, paths=2048, replicas=2,
                keep_law_at=[0], kernels=True, processes=1)
    law = r.laws[0]
    assert np.array_equal(law.D[:, 0, 0], (law.r[:, 0] > 0).astype(float))
    assert abs(r.kernels["R_u"][0, 0, 0, 0] - (0.5 - 1 / np.sqrt(2 * np.pi))) < 1e-3


def test_keep_law_at_checks_its_times():
    with pytest.raises(tk.TheorykitError, match="keep_law_at"):
        tk.dmft("gelu", "z", delta=2.0, eta=1.0, steps=3, paths=256, replicas=2, keep_law_at=[4])


def test_scan_freezes_choices_and_unites_the_excluded_paths():
    # sigma = x^2, eta = 0.05: the outer Gauss-Hermite nodes are single-path unstable at delta = 3 but not all of them
    # at delta = 4, 5; the scan excludes the union everywhere, so every solve sees the same paths
    pr = tk.Problem("quad", "phase-retrieval", delta=4.0, eta=0.05, steps=40)
    rs = tk.dynamics.dmft_scan(pr, [3.0, 4.0, 5.0], paths=8192, replicas=2, processes=1)
    masks = [np.concatenate(r.excluded_masks) for r in rs]
    assert masks[0].any() and all(np.array_equal(m, masks[0]) for m in masks)
    assert rs[0].settings["scan"]["resolved_again_with_the_union"] == [4.0, 5.0]
    assert all(r.settings["response"] == rs[0].settings["response"] for r in rs)
    assert [r.problem.delta for r in rs] == [3.0, 4.0, 5.0]
    # a scan result is the plain solve with the frozen options and the union excluded (deterministic)
    frozen = rs[0].settings["scan"]["frozen"]
    again = tk.dmft(pr.replace(delta=5.0), paths=8192, replicas=2, processes=1, **frozen,
                    exclude=[m for m in rs[0].excluded_masks])
    assert np.array_equal(again.gram, rs[2].gram)


def test_scan_outputs_are_smooth_in_delta():
    # common random numbers: over a step of 0.005 in delta the second difference is O(step^2), far below the replicas'
    # standard error (independent solves would scatter by ~2.5 standard errors)
    pr = tk.Problem("tanh", "z+z**2/2", delta=2.0, eta=1.0, steps=10)
    rs = tk.dynamics.dmft_scan(pr, [2.0, 2.005, 2.01], paths=4096, replicas=2, processes=1)
    g = np.array([r.test_loss[-1] for r in rs])
    se = rs[1].stderr["test_loss"][-1]
    assert abs(g[0] - 2 * g[1] + g[2]) < 0.01 * se


def test_scan_bad_deltas():
    pr = tk.Problem("tanh", "z", delta=2.0, eta=1.0, steps=2)
    for bad in ([], [2.0, 2.0], [-1.0], "x"):
        with pytest.raises(tk.TheorykitError):
            tk.dynamics.dmft_scan(pr, bad, paths=256, replicas=2)


@pytest.mark.parametrize("activation, link, loss, width, sampler", [
    ("gelu", "phase-retrieval", "square", 1, "sobol"),   # smooth, unbounded D, QMC paths
    ("relu", "phase-retrieval", "square", 1, "sobol"),   # kinked (Stein responses with Dirac terms)
    ("tanh", "sign-symmetric", "logistic", 2, "sobol"),  # bounded, m = 2
    ("gelu", "phase-retrieval", "square", 1, "random"),
])
def test_a_solve_with_a_horizon_is_the_prefix_of_the_longer_solve(activation, link, loss, width, sampler):
    # the innovations are drawn to the horizon: solving to 8 steps reproduces the first 8 steps of the solve to 30
    pr = tk.Problem(activation, link, loss, width, delta=5.0, eta=1.0, steps=30)
    opts = dict(paths=2048, replicas=2, processes=1, sampler=sampler, bias_check=False, keep_law_at=[8])
    long = tk.dmft(pr, **opts)
    short = tk.dmft(pr.replace(steps=8), **opts, horizon=30)
    assert np.array_equal(short.gram, long.gram[:9]) and np.array_equal(short.M, long.M[:9])
    assert np.array_equal(short.laws[8].D, long.laws[8].D)
    assert short.settings["horizon"] == 30
    if sampler == "sobol":  # without the horizon the scrambled net has fewer dimensions: other paths
        plain = tk.dmft(pr.replace(steps=8), **opts)
        assert not np.array_equal(plain.gram, long.gram[:9])
    with pytest.raises(tk.TheorykitError, match="horizon"):
        tk.dmft(pr, **opts, horizon=29)


def test_without_the_hard_process_the_easy_dynamics_and_laws_are_unchanged():
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=5.0, eta=1.0, steps=12)
    opts = dict(paths=2048, replicas=2, processes=1, bias_check=False, keep_law_at=[12])
    full = tk.dmft(pr, **opts)
    easy = tk.dmft(pr, **opts, hard_process=False)
    assert np.allclose(easy.gram, full.gram, rtol=1e-9, atol=0)  # one GEMM fewer rows: rounding only
    assert np.allclose(easy.laws[12].D, full.laws[12].D, rtol=1e-9, atol=1e-9)  # D is O(1)
    assert np.array_equal(easy.laws[12].zeta, full.laws[12].zeta)
    assert full.C_mu.shape[1] == 1 and easy.C_mu.shape[1] == 0
    with pytest.raises(tk.TheorykitError, match="hard_process"):
        tk.dmft(pr, **opts, hard_process="no")


def test_delta_star_refinements_are_the_scan_margin():
    # delta*(t)'s refinements solve to t only; their margins are those of the full-horizon scan at the same delta
    from theorykit.thresholds import delta_star, law_at
    from theorykit.spectra.hessian import hessian_prediction

    pr = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=4.0, eta=1.0, steps=6)
    opts = dict(paths=2048, replicas=2, seed=3)
    grid = [2.0, 3.0, 4.5, 7.0]
    res = delta_star(pr, [2, 6], grid, refine=1, **opts)
    t2 = res[0]
    assert t2.t == 2 and len(t2.tried) == len(grid) + 1 + 0
    c, mc = t2.tried[len(grid)]  # the refinement, solved to t = 2
    assert c not in grid and np.isfinite(mc)
    full = tk.dynamics.dmft_scan(pr, grid + [c], bias_check=False, keep_law_at=[2, 6], hard_process=False, **opts)
    assert hessian_prediction(law_at(full[-1], 2)).margin == pytest.approx(mc, abs=1e-12)
    assert grid[0] < t2.value < grid[-1] and t2.bracket[0] <= t2.value <= t2.bracket[1]
