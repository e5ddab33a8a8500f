"""Finite-d answers from the DMFT (issue 14 points 3-4; docs/theory.md §5): P(capture by t) for every t from one
capture ladder per delta, the midpoint delta_1/2(d, T), escape times t_1/2(delta, d), and the threshold command's
--d D [D ...] --horizon T.  The measured comparison with GD is tables/thresholds_vs_sim.md; here: the construction
(exact in its inputs), its monotonicity, and its contract."""
import json
import math

import numpy as np
import pytest
from scipy.stats import chi2

import theorykit as tk
from theorykit.cli import main
from theorykit.thresholds import _capture_probabilities, finite_d


def _curve(m_star, reps, cos2_top):
    T = len(m_star) - 1
    cos2 = np.full((3, T + 1), 0.1)
    cos2[-1] = cos2_top
    return {"m0s": [0.01, 0.1, 0.5], "cos2": cos2, "m_star": m_star, "m_star_replicas": reps}


def test_capture_probabilities_are_the_matched_chi2_formula():
    """P(t) = P(chi2_1 > d m*(t)^2 / v_eff(min(t, t_match))), the band from the replicas' m* and v_eff +- 2 se; where
    m* is above the ladder P = 0 with the top rung's P as its upper end."""
    v, se = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.1, 0.1, 0.2, 0.2])
    curve = _curve([None, 0.2, 0.1, 0.05], [[None, 0.25, 0.12, 0.04], [None, 0.18, 0.09, 0.06]], [0.3, 0.6, 0.7, 0.8])
    P, lo, hi = _capture_probabilities(curve, v, se, t_match=2, d=100)
    assert P[0] == 0.0 and lo[0] == 0.0 and hi[0] == pytest.approx(chi2.sf(100 * 0.25 / 1.2, 1))
    for t, m, reps in ((1, 0.2, (0.18, 0.25)), (2, 0.1, (0.09, 0.12)), (3, 0.05, (0.04, 0.06))):
        k = min(t, 2)  # v_eff frozen after t_match
        assert P[t] == pytest.approx(chi2.sf(100 * m * m / v[k], 1), rel=1e-12)
        assert lo[t] == pytest.approx(chi2.sf(100 * max(reps) ** 2 / (v[k] - 2 * se[k]), 1), rel=1e-12)
        assert hi[t] == pytest.approx(chi2.sf(100 * min(reps) ** 2 / (v[k] + 2 * se[k]), 1), rel=1e-12)
        assert lo[t] <= P[t] <= hi[t]
    # captured from the bottom rung: P = 1 with the bottom rung's P as the lower end
    below = _curve([None], [[None]], [0.9])
    below["cos2"][:, 0] = 0.9
    P, lo, hi = _capture_probabilities(below, v, se, 0, 100)
    assert P[0] == 1.0 and hi[0] == 1.0 and lo[0] == pytest.approx(chi2.sf(100 * 0.01 ** 2 / 0.8, 1))


@pytest.fixture(scope="module")
def small():
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    return finite_d(pr, [8.0, 17.0], [200, 800], 40, paths=2048, replicas=2)


def test_finite_d_monotone_in_delta_t_and_d(small):
    r = small
    P = r.probability
    assert P.shape == (2, 2, 41) and np.all((P >= 0) & (P <= 1))
    assert np.all(r.low <= P + 1e-12) and np.all(P <= r.high + 1e-12)
    # more samples capture more; a larger d starts from a smaller overlap (1/sqrt(d)) and captures less by t
    assert np.all(P[1, :, -1] >= P[0, :, -1]) and np.all(P[:, 0, -1] >= P[:, 1, -1])
    # escape times: the first t with P >= 1/2; later at larger d (the ~ln d growth), none below the threshold
    esc = {(e["delta"], e["d"]): e for e in r.escape_time}
    hi200, hi800 = esc[(17.0, 200)], esc[(17.0, 800)]
    assert hi200["t"] is not None and hi800["t"] is not None and hi200["t"] <= hi800["t"]
    assert P[1, 0, hi200["t"]] >= 0.5 > P[1, 0, hi200["t"] - 1]
    assert hi200["band"][0] <= hi200["t"] <= hi200["band"][1]
    assert esc[(8.0, 800)]["t"] is None and "horizon 40" in esc[(8.0, 800)]["note"]
    for m in r.midpoints:  # delta_1/2 inside the grid and inside its band
        assert 8.0 < m["midpoint"] < 17.0 and m["band"][0] <= m["midpoint"] <= m["band"][1]
    assert r.midpoints[0]["midpoint"] < r.midpoints[1]["midpoint"]  # d = 800 needs more samples per dimension
    c = r.curve(17.0, 200)
    assert c["probability"][hi200["t"]] == P[1, 0, hi200["t"]] and len(c["t"]) == 41
    assert "chi2_1" in r.method and "ladder of 16" in r.method


def test_finite_d_refuses_what_it_cannot_answer():
    pr = tk.Problem("gelu", "phase-retrieval", "square", 2, delta=10.0, eta=1.0, steps=1)
    with pytest.raises(tk.TheorykitError, match="width m = 1"):
        finite_d(pr, [8.0], [200], 10)
    one = tk.Problem("gelu", "z", "square", 1, delta=10.0, eta=1.0, steps=1)
    with pytest.raises(tk.TheorykitError, match="no hard direction"):
        finite_d(one, [8.0], [200], 10)
    with pytest.raises(tk.TheorykitError, match="horizon"):
        finite_d(pr.replace(width=1, a=None), [8.0], [200], 0)


def test_finite_d_records_a_delta_where_the_dmft_diverges(monkeypatch):
    import theorykit.dynamics as dyn

    def boom(*a, **k):
        raise tk.DivergenceError("the DMFT from m0 = 0.002 stopped at step 3 (GD is unstable)")

    monkeypatch.setattr(dyn, "capture_curve", boom)
    pr = tk.Problem("quad", "phase-retrieval", "square", 1, delta=3.0, eta=0.05, steps=1)
    r = finite_d(pr, [3.0], [200], 10)
    assert "stopped at step 3" in r.per_delta[0]["error"] and np.isnan(r.probability).all()
    assert math.isnan(r.midpoints[0]["midpoint"]) and r.escape_time == ()


def test_threshold_cli_horizon_contract(capsys):
    argv = ["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", "--d", "200", "800",
            "--horizon", "20", "--horizon-deltas", "10", "17", "--paths", "1024", "--replicas", "2", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["delta_star"] == [] and {f["d"] for f in out["finite_d"]} == {200, 800}
    assert set(out["finite_d"][0]) >= {"d", "horizon", "midpoint", "band"}
    assert set(out["escape_time"][0]) >= {"delta", "d", "t"} and len(out["escape_time"]) == 4
    assert out["finite_d_info"]["horizon"] == 20 and out["settings"]["horizon"] == 20
    for bad, msg in ((["--horizon", "20"], "--d"), (["--d", "200", "--horizon", "20", "--width", "2"], "width 1"),
                     (["--horizon-deltas", "3", "--t", "0"], "only with --horizon"), ([], "nothing to compute")):
        rc = main(["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", *bad])
        err = capsys.readouterr().err
        assert rc == 2 and msg in err and err.count("\n") == 1, (bad, err)
