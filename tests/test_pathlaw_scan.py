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
    rs = tk.dmft_scan(pr, [3.0, 4.0, 5.0], paths=8192, replicas=2, processes=1)
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
    rs = tk.dmft_scan(pr, [2.0, 2.005, 2.01], paths=4096, replicas=2, processes=1)
    g = np.array([r.test_loss[-1] for r in rs])
    se = rs[1].stderr["test_loss"][-1]
    assert abs(g[0] - 2 * g[1] + g[2]) < 0.01 * se


def test_scan_bad_deltas():
    pr = tk.Problem("tanh", "z", delta=2.0, eta=1.0, steps=2)
    for bad in ([], [2.0, 2.0], [-1.0], "x"):
        with pytest.raises(tk.TheorykitError):
            tk.dmft_scan(pr, bad, paths=256, replicas=2)
