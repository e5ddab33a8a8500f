"""The Hessian theory against finite-d Hessians (slow): the quick version of scripts/hessian_vs_finite_d.py.

    pytest -m slow tests/test_hessian_validation.py        (about 3 min; the full table: tables/hessian_vs_finite_d.md)

Four cases (bounded GeLU/logistic at t = 50, GeLU phase retrieval at t = 0, ReLU phase retrieval at t = 0 with no
outlier, GeLU m = 2 with two outliers), two seeds at d = 1000: the sample law (the random-matrix code) must pass on
every seed, the DMFT law (the chain DMFT -> law -> spectrum) against the seed mean, counts within +-2."""
import pytest

pytestmark = pytest.mark.slow


def test_quick_hessian_table(tmp_path):
    from theorykit.validation.hessian_check import main

    rows = main(["--quick", "--out", str(tmp_path / "t"), "--cache", str(tmp_path / "c"), "--paths", "32768"],
                prog="test", root=str(tmp_path))
    assert len(rows) == 4
    for r in rows:
        assert r["law_mean_ok"], r  # the sample law: paired errors over the seeds (per seed: the table's notes)
        assert r["dmft_ok"], r
        assert r["count_pass"] == r["count_cases"], r
    two = [r for r in rows if r["m"] == 2][0]
    assert len(two["dmft_outliers"]) == 2 and len(two["finite_outliers"]) == 2
    none = [r for r in rows if r["setting"] == "pr-relu"][0]
    assert none["dmft_outliers"] == []


def test_the_march_does_not_jump_branches_over_the_fold():
    """A finite-d sample law (GeLU phase retrieval, m = 2, delta = 40, t = 50, d = 1000, seed 5) on which a long march
    step landed on another solution of F = 0 with the same tr S, skipping the fold: the edge came out at -0.0491
    instead of -0.0452, and the outlier's root bracket then failed ('the real continuation of S failed').  The edge
    must be the first fold (lambda rises up to it along the march), the outlier within 3% of the finite-d one."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from theorykit.validation.hessian_check import finite_d_job, match_outliers

    with threadpool_limits(1):  # the failing run was single-threaded (the validation's workers)
        row = finite_d_job("pr-gelu-m2", 40.0, 50, 1000, 5)
    assert row["law_edge"] == pytest.approx(-0.04516, abs=2e-4)
    lam_f, ov_f = match_outliers(row["law_outliers"], row["eig"], row["eig_overlap2"])
    assert np.allclose(row["law_outliers"], lam_f, rtol=0.03)
    assert np.allclose(row["law_overlap2"], ov_f, atol=0.05)
