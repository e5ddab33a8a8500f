"""The Hessian theory against finite-d Hessians (slow): the quick version of scripts/hessian_vs_finite_d.py.

    pytest -m slow tests/test_hessian_validation.py        (about 3 min; the full table: tables/hessian_vs_finite_d.md)

Four cases (bounded GeLU/logistic at t = 50, GeLU phase retrieval at t = 0, ReLU phase retrieval at t = 0 with no
outlier, GeLU m = 2 with two outliers), two seeds at d = 1000: the sample law (the random-matrix code) must pass on
every seed, the DMFT law (the chain DMFT -> law -> spectrum) against the seed mean, counts within +-2."""
import pytest

pytestmark = pytest.mark.slow


def test_quick_hessian_table(tmp_path):
    from theorykit.compare.hessian_check import main

    rows = main(["--quick", "--out", str(tmp_path / "t"), "--cache", str(tmp_path / "c"), "--paths", "32768"],
                prog="test", root=str(tmp_path))
    assert len(rows) == 4
    for r in rows:
        assert r["law_pass"] == r["seeds"], r
        assert r["dmft_ok"], r
        assert r["count_pass"] == r["count_cases"], r
    two = [r for r in rows if r["m"] == 2][0]
    assert len(two["dmft_outliers"]) == 2 and len(two["finite_outliers"]) == 2
    none = [r for r in rows if r["setting"] == "pr-relu"][0]
    assert none["dmft_outliers"] == []
