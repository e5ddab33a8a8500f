"""The dynamical criterion (issue 13 point 2): the capture curve m*(t) from a ladder of nonlinear DMFT runs, its
growth rate gamma = -d ln m*/dT, delta_dyn where gamma crosses 0, and the finite-d kick test beside it.  Tiny
settings; the table (tables/delta_nn.md) holds the measured comparison."""
import math

import numpy as np
import pytest

import theorykit as tk
from types import SimpleNamespace as NS

from theorykit.thresholds import capture_curve, growth_rate
from theorykit.thresholds.capture import CaptureCurve
from theorykit.referee import kick_growth_rate


def test_growth_rate_of_an_exponential_curve_is_exact():
    m = [0.1 * math.exp(-0.02 * t) for t in range(101)]
    g = growth_rate(CaptureCurve(t=(), m_star=m, m0s=(), cos2=None), (20, 80))
    assert g.value == pytest.approx(0.02, rel=1e-10) and g.stderr < 1e-10 and g.t_range == (20, 80)
    with pytest.raises(tk.TheorykitError, match="inside the ladder"):
        growth_rate(CaptureCurve(t=(), m_star=[None] * 50 + m[:2], m0s=(), cos2=None), (0, 60))
    # with the replicas' own curves the standard error is their spread
    reps = [[0.1 * math.exp(-g * t) for t in range(101)] for g in (0.019, 0.021)]
    g = growth_rate(CaptureCurve(t=(), m_star=m, m0s=(), cos2=None, m_star_replicas=reps), (20, 80))
    assert g.stderr == pytest.approx(np.std([0.019, 0.021], ddof=1) / math.sqrt(2), rel=1e-8)
    assert "replicas" in g.how and g.per_replica == pytest.approx([0.019, 0.021])


def test_capture_curve_interpolates_the_ladder_and_is_monotone_in_the_horizon():
    # GeLU phase retrieval above the transition: ever smaller kicks are captured as the horizon grows
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=17.0, eta=1.0, steps=1)
    c = capture_curve(pr, 30, [0.05, 0.1, 0.2, 0.4, 0.8], paths=2048, replicas=2)
    ms = c.m_star
    # cos^2(0) = m0^2 / (m0^2 + 1) < 1/2 on the whole ladder (Sigma0 = 1): nothing is captured at t = 0
    assert np.allclose(c.cos2[:, 0], np.array(c.m0s) ** 2 / (np.array(c.m0s) ** 2 + 1), rtol=1e-9)
    assert ms[0] is None
    t = next(i for i, v in enumerate(ms) if v is not None)
    j = int(np.flatnonzero(c.cos2[:, t] >= 0.5)[0])
    lo, hi = c.cos2[j - 1, t], c.cos2[j, t]
    assert lo < 0.5 <= hi and c.m0s[j - 1] < ms[t] <= c.m0s[j]
    known = [v for v in ms if v is not None]
    assert known[-1] < known[0]
    assert c.cos2.shape == (5, 31)
    with pytest.raises(tk.TheorykitError, match="M0"):
        capture_curve(pr.replace(M0=[[0.1]]), 5)
    with pytest.raises(tk.TheorykitError, match="m0s"):
        capture_curve(pr, 5, [0.1, 1.5])


def test_delta_dyn_finds_the_sign_change(monkeypatch):
    import theorykit.thresholds.dynamical as dyn

    monkeypatch.setattr(dyn, "capture_curve", lambda p, T, m0s=None, on_solve=None, **k: NS(delta=p.delta))
    monkeypatch.setattr(dyn, "growth_rate", lambda c, r: NS(value=0.01 * (c.delta - 10.0), stderr=0.001,
                                                         t_range=tuple(r), points=50, how=""))
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=5.0, eta=1.0, steps=1)
    r = tk.delta_dyn(pr, [6.0, 9.0, 12.0, 15.0], (50, 150))
    assert r.value == pytest.approx(10.0) and r.criterion == "dynamical" and r.reason is None
    assert r.stderr == pytest.approx(math.sqrt((2 / 3 * 0.001) ** 2 + (1 / 3 * 0.001) ** 2) / 0.01)
    assert [g["delta"] for g in r.gamma] == [6.0, 9.0, 12.0, 15.0]
    above = tk.delta_dyn(pr, [12.0, 15.0], (50, 150))
    assert math.isnan(above.value) and "below" in above.reason
    with pytest.raises(tk.TheorykitError, match="t_range"):
        tk.delta_dyn(pr, [6.0, 9.0], (50, 51))


def test_delta_dyn_skips_a_delta_where_m_star_leaves_the_ladder(monkeypatch):
    import theorykit.thresholds.dynamical as dyn

    def curve(p, T, m0s=None, on_solve=None, **k):
        return NS(delta=p.delta, m_star=[None] * (T + 1))

    def rate(c, r):
        if c.delta < 7:  # nothing captured by the horizon: no rate
            raise tk.TheorykitError("m*(t) is inside the ladder at 0 time(s)")
        return NS(value=0.01 * (c.delta - 10.0), stderr=0.001, t_range=tuple(r), points=50, how="")

    monkeypatch.setattr(dyn, "capture_curve", curve)
    monkeypatch.setattr(dyn, "growth_rate", rate)
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=5.0, eta=1.0, steps=1)
    r = tk.delta_dyn(pr, [5.0, 8.0, 12.0], (50, 150))
    assert math.isnan(r.gamma[0]["value"]) and "ladder" in r.gamma[0]["note"]
    assert r.value == pytest.approx(10.0)
    one = tk.delta_dyn(pr, [5.0, 6.0, 12.0], (50, 150))
    assert math.isnan(one.value) and "defined at 1" in one.reason


def test_delta_dyn_records_a_delta_where_the_dmft_diverges(monkeypatch):
    """sigma = x^2 at small delta: GD itself diverges (the DMFT says so).  That delta gets no rate and its reason; the
    others go on.  A bad argument is not caught: it still fails the whole call."""
    import theorykit.thresholds.dynamical as dyn

    def curve(p, T, m0s=None, on_solve=None, **k):
        if p.delta < 4:
            raise tk.errors.DivergenceError("the DMFT from m0 = 0.0001 stopped at step 134 (GD is unstable)")
        if p.delta > 20:
            raise tk.TheorykitError("capture_curve takes a theorykit.Problem")
        return NS(delta=p.delta)

    monkeypatch.setattr(dyn, "capture_curve", curve)
    monkeypatch.setattr(dyn, "growth_rate", lambda c, r: NS(value=0.01 * (c.delta - 10.0), stderr=0.001,
                                                         t_range=tuple(r), points=50, how=""))
    pr = tk.Problem("quad", "phase-retrieval", "square", 1, delta=5.0, eta=0.05, steps=1)
    r = tk.delta_dyn(pr, [3.0, 8.0, 12.0], (50, 150))
    assert math.isnan(r.gamma[0]["value"]) and "stopped at step 134" in r.gamma[0]["note"]
    assert r.value == pytest.approx(10.0)
    with pytest.raises(tk.TheorykitError, match="Problem"):
        tk.delta_dyn(pr, [8.0, 30.0], (50, 150))


def test_kick_growth_rate_at_finite_d():
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=17.0, eta=1.0, steps=1)
    r = kick_growth_rate(pr, d=200, m0=0.1, t_range=(5, 30), seeds=(0, 1, 2, 3))
    assert len(r["per_seed"]) + len(r["escaped_before_window"]) == 4
    assert all(lo >= 5 and hi <= 30 for lo, hi in r["fitted_on"])
    if len(r["per_seed"]) >= 2:
        assert np.isfinite(r["value"]) and r["stderr"] >= 0
    # below the transition nothing escapes early and every seed gives a rate
    low = kick_growth_rate(pr.replace(delta=4.0), d=200, m0=0.1, t_range=(5, 30), seeds=(0, 1))
    assert len(low["per_seed"]) == 2 and low["escaped_before_window"] == [] and np.isfinite(low["value"])
    with pytest.raises(tk.TheorykitError, match="m0"):
        kick_growth_rate(pr, d=50, m0=2.0, t_range=(5, 30))


def test_threshold_cli_dyn_contract():
    from tests.test_delta_nn import ok

    out = ok(["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", "--paths", "2048",
              "--replicas", "2", "--t", "0", "--delta-range", "1", "40", "--points", "3", "--refine", "0",
              "--d", "500", "--dyn", "2", "8", "--dyn-deltas", "14", "17"])
    dy = out["delta_dyn"]
    assert {"value", "stderr", "criterion", "gamma", "t_range", "definition", "reason", "method"} <= set(dy)
    assert dy["criterion"] == "dynamical" and dy["t_range"] == [2, 8]
    assert [g["delta"] for g in dy["gamma"]] == [14.0, 17.0]
    assert all({"delta", "value", "stderr"} <= set(g) for g in dy["gamma"])
    assert (dy["value"] is None) == (dy["reason"] is not None)
    assert out["settings"]["dyn"] == [2, 8]


def test_threshold_cli_dyn_refuses_bad_ranges():
    import contextlib
    import io

    from theorykit.cli import main

    for bad in (["--dyn", "10", "11"], ["--dyn", "5", "20", "--width", "2"], ["--dyn", "2", "8", "--dyn-deltas", "14"],
                ["--dyn-deltas", "3", "4"], ["--nn", "2"]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = main(["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", "--t", "0"]
                          + bad)
            except SystemExit as e:
                rc = e.code
        assert rc == 2 and len(err.getvalue().strip().splitlines()) == 1 and bad[0] in err.getvalue(), bad
