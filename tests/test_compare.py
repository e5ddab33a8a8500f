"""theorykit.validation: the statistics against hand-computed values, the resumable runner, the table writer."""
import json
import math
import os
import time

import numpy as np
import pytest

import theorykit as tk
from theorykit.validation import (binomial, compare, cv_mean, extrapolate_inverse, fit_over_d, in_band, loglog_slope,
                               crossing, notes_path, per_seed_rms, read_rows, regenerate_command, run_jobs, run_sims,
                               signed, within, within_factor, within_se, write_table, check_table_writable)

Z95 = 1.959963984540054  # the two-sided 95% normal quantile


# ------------------------------------------------------------------------------------------------ proportions
def test_wilson_interval_3_of_10():
    pr = binomial(3, 10)
    n, k, z = 10, 3, Z95
    # the Wilson interval written as (k + z^2/2)/(n + z^2) +- z sqrt(n)/(n + z^2) sqrt(p q + z^2/(4n))
    c = (k + z * z / 2) / (n + z * z)
    h = z * math.sqrt(n) / (n + z * z) * math.sqrt(0.3 * 0.7 + z * z / (4 * n))
    assert pr.p == 0.3
    assert pr.se == pytest.approx(math.sqrt(0.21 / 10), rel=1e-14)
    assert pr.low == pytest.approx(c - h, rel=1e-12) and pr.high == pytest.approx(c + h, rel=1e-12)
    assert (round(pr.low, 4), round(pr.high, 4)) == (0.1078, 0.6032)  # the tabulated value


def test_wilson_edges():
    assert binomial(0, 5).low == 0.0 and binomial(0, 5).high > 0.3  # not empty at p = 0, unlike p +- z se
    assert binomial(5, 5).high == 1.0 and binomial(5, 5).se == 0.0
    assert math.isnan(binomial(0, 0).p)
    assert binomial(3, 10, level=0.99).high > binomial(3, 10).high
    with pytest.raises(ValueError):
        binomial(4, 3)


def test_crossing():
    assert crossing([1, 2, 3, 4], [0.1, 0.3, 0.7, 0.9]) == pytest.approx(2.5)
    assert crossing([4, 6, 8], [0.9, 0.6, 0.2]) == pytest.approx(6 + 0.1 / 0.4 * 2)  # decreasing
    assert crossing([1, 2], [0.5, 0.8]) == 1  # on the level
    assert crossing([1, 2, 3], [0.1, 0.2, 0.4]) is None  # not crossed
    # non-monotone: the first bracketing pair wins, a flat touch is skipped, a NaN never brackets
    assert crossing([1, 2, 3, 4], [0.2, 0.6, 0.4, 0.8]) == pytest.approx(1.75)
    assert crossing([1, 2, 3], [0.5, 0.5, 0.9]) == 2
    assert crossing([1, 2, 3], [0.2, float("nan"), 0.8]) is None


# ------------------------------------------------------------------------------------------------ DMFT vs seeds
    # upward only: a downward crossing is skipped, the first upward one taken
    assert crossing([4, 6, 8], [0.9, 0.6, 0.2], upward=True) is None
    assert crossing([1, 2, 3, 4], [0.6, 0.4, 0.8, 0.9], upward=True) == pytest.approx(2.25)


def test_first_passage():
    from theorykit.rules import first_passage

    assert first_passage([0.1, 0.4, 0.5, 0.9]) == 2 and first_passage([0.6, 0.2]) == 0
    assert first_passage([0.1, float("nan"), 0.3]) is None

def test_compare_scalar_and_matrix():
    c = compare(2.0, 0.1, np.array([1.0, 3.0, 2.0, 2.4]))
    mean, se = 2.1, np.std([1.0, 3.0, 2.0, 2.4], ddof=1) / 2
    assert c["sim_mean"] == pytest.approx(mean) and c["sim_se"] == pytest.approx(se)
    assert c["rel_err"] == pytest.approx(0.1 / 2.1)
    assert c["rel_se"] == pytest.approx(math.sqrt(0.01 + se ** 2) / 2.1)
    X = np.array([[[3.0, 0.0], [0.0, 4.0]], [[3.0, 0.0], [0.0, 4.0]]])  # two identical seeds: se 0
    c = compare(np.array([[3.0, 0.0], [0.0, 3.0]]), np.zeros((2, 2)), X)
    assert c["sim_mean"] == pytest.approx(5.0) and c["dmft"] == pytest.approx(math.sqrt(18))
    assert c["rel_err"] == pytest.approx(1 / 5) and c["rel_se"] == 0.0
    assert per_seed_rms(np.eye(2) * 3, X) == pytest.approx(1 / math.sqrt(18))


def test_signed_scalar():
    dm = np.array([3.0, 4.0])  # ||dm|| = 5, direction (0.6, 0.8)
    arr = np.array([[3.0, 4.0], [6.0, 8.0]])
    s_dm, s_se, s, frob, full, rms = signed(dm, np.array([0.5, 0.0]), arr)
    assert s_dm == 5 and s_se == pytest.approx(0.3) and s == pytest.approx([5.0, 10.0])
    assert frob == pytest.approx(7.5 - 5) and full == pytest.approx(2.5 / 5)
    assert rms == pytest.approx(math.sqrt((0 + 25) / 2) / 5)


def test_cv_mean_removes_known_zero_mean_noise():
    rng = np.random.default_rng(0)
    C = rng.normal(size=(40, 2))
    x = 1.5 + 2 * C[:, 0] - C[:, 1]  # exactly linear in the covariates: the intercept is exact
    m, se = cv_mean(x, C)
    assert m == pytest.approx(1.5, abs=1e-12) and se < 1e-10
    assert abs(np.mean(x) - 1.5) > 0.01  # the plain mean is off by the covariates' sample mean
    m, se = cv_mean(x[:4], C[:4])  # too few seeds: the plain mean
    assert m == pytest.approx(np.mean(x[:4])) and se == pytest.approx(np.std(x[:4], ddof=1) / 2)


# ------------------------------------------------------------------------------------------------ fits over d
DS = [500, 1000, 2000, 4000]


def test_fit_over_d_recovers_c_and_exponent():
    c = 40.0
    g = c / np.array(DS, float)
    fit = fit_over_d(DS, g, [1e-4] * 4, 1e-5)
    assert fit["fit_c"] == pytest.approx(c, rel=1e-6) and fit["chi2_c"] < 1e-6
    assert fit["pow_p"] == pytest.approx(-1.0, abs=1e-6) and fit["pow_A"] == pytest.approx(c / 1000, rel=1e-6)
    assert fit["fit_b"] == pytest.approx(0.0, abs=1e-6)
    assert fit["verdict"] == "gap shrinks"
    # a power law with another exponent: A and p recovered
    g = 0.02 * (np.array(DS, float) / 1000) ** -0.5
    fit = fit_over_d(DS, g, [1e-5] * 4, 1e-6)
    assert fit["pow_p"] == pytest.approx(-0.5, abs=1e-6) and fit["pow_A"] == pytest.approx(0.02, rel=1e-6)


def test_fit_over_d_offset_and_no_gap():
    g = 0.01 + 5.0 / np.array(DS, float)
    fit = fit_over_d(DS, g, [1e-4] * 4, 1e-5)
    assert fit["fit_b"] == pytest.approx(0.01, rel=1e-4) and fit["fit_c2"] == pytest.approx(5.0, rel=1e-3)
    assert fit["p_c"] < 0.01 and fit["verdict"] == "offset persists"
    fit = fit_over_d(DS, [1e-4, -1e-4, 0.0, 5e-5], [1e-3] * 4, 0.0)
    assert fit["verdict"] == "no measurable gap"
    assert fit["bound_1000"] == pytest.approx(1e-4 + 2e-3) and fit["bound_d"] == 1000
    fit = fit_over_d([500, 1000], [0.02, 0.01], [1e-4, 1e-4], 0.0)  # two d: no b, no power law
    assert fit["fit_b"] is None and fit["pow_p"] is None and fit["verdict"] == "gap shrinks"


def test_extrapolate_and_slope():
    x = np.array([1 / 1024, 1 / 4096, 1 / 16384])
    inf, inf_se, chi2, dof = extrapolate_inverse(x, 2.0 + 3.0 * x, [1e-3] * 3)
    assert inf == pytest.approx(2.0) and chi2 == pytest.approx(0.0, abs=1e-12) and dof == 1
    assert loglog_slope([100, 400, 1600], [1.0, 0.5, 0.25]) == pytest.approx(-0.5)


def test_pass_criteria():
    assert within(0.03, 0.03) and not within(0.031, 0.03) and not within(float("nan"), 0.03)
    assert within_se(0.5, 0.42, 0.05) and not within_se(0.5, 0.35, 0.05)  # max(2 se, 0.1) = 0.1
    assert within_se(0.5, 0.2, 0.15)  # 2 se = 0.3
    assert within_se(0.5, 0.35, 0.05, slack=0.06) and not within_se(0.5, 0.2, 0.15, k=1)
    assert within_factor(1.4) and within_factor(1 / 1.4) and not within_factor(1.6)
    assert in_band(0.5, 0.55, 0.7, 0.03) and not in_band(0.5, 0.6, 0.7, 0.03)


# ------------------------------------------------------------------------------------------------ the runner
def square(x, log=None, interrupt=None, traj=False):
    """A tiny job: records that it ran, raises on request."""
    if log:
        with open(log, "a") as fh:
            fh.write(f"{x}\n")
    if interrupt and x == 3 and os.path.exists(interrupt):
        raise KeyboardInterrupt
    if x == -1:
        raise ValueError("bad x -1\nsecond line")
    return {"x": x, "y": x * x, **({"traj": np.arange(x, dtype=float) / 3} if traj else {})}


def nap(x):
    if x == 0:
        time.sleep(0.3)
        raise KeyboardInterrupt
    time.sleep(20)
    return {"x": x}


def _ran(log):
    return [int(v) for v in open(log).read().split()] if os.path.exists(log) else []


def _jobs(xs, **kw):
    return [dict(key=f"x={x}", x=x, **kw) for x in xs]


def test_runner_resumes_after_an_interrupt(tmp_path):
    out, log, stop = tmp_path / "rows.csv", str(tmp_path / "ran.txt"), str(tmp_path / "stop")
    open(stop, "w").close()
    jobs = _jobs(range(5), log=log, interrupt=stop, traj=True)
    with pytest.raises(KeyboardInterrupt):
        run_jobs(jobs, square, out, ["x", "y", "traj"], settings={"n": 5}, processes=1, json_columns=["traj"])
    assert _ran(log) == [0, 1, 2, 3]
    assert list(read_rows(out).x) == [0, 1, 2]  # the rows done are kept
    os.remove(stop)
    df = run_jobs(jobs, square, out, ["x", "y", "traj"], settings={"n": 5}, processes=1, json_columns=["traj"])
    assert _ran(log) == [0, 1, 2, 3, 3, 4]  # only the missing jobs ran
    assert list(df.job) == [f"x={x}" for x in range(5)] and list(df.y) == [0, 1, 4, 9, 16]
    assert list(df.status) == ["ok"] * 5 and df.attrs["summary"]["skipped"] == 3
    assert df.traj[4] == pytest.approx([0, 1 / 3, 2 / 3, 1])  # JSON columns round-trip (exactly: repr)
    with open(out) as fh:
        head = [next(fh) for _ in range(3)]
    assert head[0].startswith("# theorykit.validation.run_jobs") and json.loads(head[1][len("# settings: "):])[
        "settings"] == {"n": 5}
    assert head[2].strip() == "job,x,y,traj,status,error,seconds"
    again = run_jobs(jobs, square, out, ["x", "y", "traj"], settings={"n": 5}, processes=1, json_columns=["traj"])
    assert again.attrs["summary"]["ran"] == 0 and len(_ran(log)) == 6


def test_runner_pool_resume_and_order(tmp_path):
    out, log = tmp_path / "rows.csv", str(tmp_path / "ran.txt")
    df = run_jobs(_jobs(range(3), log=log), square, out, ["x", "y"], processes=2)
    assert list(df.y) == [0, 1, 4]
    df = run_jobs(_jobs(range(6), log=log), square, out, ["x", "y"], processes=2)
    assert sorted(_ran(log)) == [0, 1, 2, 3, 4, 5] and list(df.x) == list(range(6))


def test_runner_ctrl_c_terminates_the_pool(tmp_path):
    out = tmp_path / "rows.csv"
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_jobs(_jobs([0, 1]), nap, out, ["x"], processes=2)
    assert time.monotonic() - t0 < 8  # the 20 s job was terminated


def test_runner_refuses_other_settings(tmp_path):
    out = tmp_path / "rows.csv"
    run_jobs(_jobs([1]), square, out, ["x", "y"], settings={"d": 100}, processes=1)
    with pytest.raises(tk.TheorykitError, match="other settings.*d"):
        run_jobs(_jobs([1, 2]), square, out, ["x", "y"], settings={"d": 200}, processes=1)
    with pytest.raises(tk.TheorykitError, match="other settings.*columns"):
        run_jobs(_jobs([1, 2]), square, out, ["x"], settings={"d": 100}, processes=1)
    (tmp_path / "foreign.csv").write_text("a,b\n1,2\n")
    with pytest.raises(tk.TheorykitError, match="not written by"):
        run_jobs(_jobs([1]), square, tmp_path / "foreign.csv", ["x", "y"], processes=1)
    assert len(read_rows(out)) == 1  # untouched


def test_runner_refuses_unwritable_output_before_running(tmp_path):
    (tmp_path / "afile").write_text("")
    log = str(tmp_path / "ran.txt")
    with pytest.raises(tk.TheorykitError, match="cannot write"):
        run_jobs(_jobs(range(3), log=log), square, tmp_path / "afile" / "rows.csv", ["x", "y"], processes=1)
    assert _ran(log) == []
    with pytest.raises(tk.TheorykitError, match="cannot write"):
        check_table_writable(str(tmp_path / "afile" / "table"))


def test_runner_records_a_failing_job(tmp_path, capsys):
    out, log = tmp_path / "rows.csv", str(tmp_path / "ran.txt")
    df = run_jobs(_jobs([1, -1, 2], log=log), square, out, ["x", "y"], processes=2)
    assert list(df.status) == ["ok", "failed", "ok"]
    assert df.error[1] == "ValueError: bad x -1" and df.error[0] == ""
    assert df.attrs["summary"]["failed"] == [{"key": "x=-1", "error": "ValueError: bad x -1"}]
    assert "1 of 3 jobs failed" in capsys.readouterr().err
    df = run_jobs(_jobs([1, -1, 2], log=log), square, out, ["x", "y"], processes=1, retry_failed=False)
    assert _ran(log).count(-1) == 1 and df.attrs["summary"]["failed"][0]["key"] == "x=-1"
    run_jobs(_jobs([1, -1, 2], log=log), square, out, ["x", "y"], processes=1)  # retried by default
    assert _ran(log).count(-1) == 2


def test_runner_deadline_and_bad_jobs(tmp_path):
    out, log = tmp_path / "rows.csv", str(tmp_path / "ran.txt")
    df = run_jobs(_jobs(range(3), log=log), square, out, ["x", "y"], processes=1, deadline=time.time() - 1)
    assert len(df) == 0 and df.attrs["summary"]["not_started"] == ["x=0", "x=1", "x=2"] and _ran(log) == []
    with pytest.raises(tk.TheorykitError, match="unique"):
        run_jobs(_jobs([1, 1]), square, out, ["x", "y"], processes=1)
    df = run_jobs(_jobs([4]), square, tmp_path / "narrow.csv", ["x"], processes=1)  # y is not a column
    assert df.status[0] == "failed" and "not in the table" in df.error[0]


def test_run_sims_matches_simulate_and_resumes(tmp_path):
    base = dict(activation="tanh", link="z+z**2/2", loss="square", width=2, a=[1, -1], delta=2.0, d=30, steps=4,
                eta=1.0)
    rs = run_sims(base, [0, 1], processes=1, cache=str(tmp_path), verbose=False)
    r = tk.simulate(**base, seed=1, n_test=1)
    assert [x["seed"] for x in rs] == [0, 1] and rs[1]["status"] == r.status and rs[1]["steps"] == len(r.t)
    np.testing.assert_array_equal(rs[1]["M"], r.M)
    np.testing.assert_array_equal(rs[1]["train"], r.train_loss)
    files = os.listdir(tmp_path)
    rs2 = run_sims(base, [0, 1, 2], keep=("full",), processes=1, cache=str(tmp_path), verbose=False)
    assert os.listdir(tmp_path) == files and len(rs2) == 3
    np.testing.assert_array_equal(rs2[0]["gram"], rs[0]["gram"])
    ro = run_sims(base, [0], keep=("overlap",), processes=1, verbose=False)  # no cache: a temporary file
    assert ro[0]["success"].dtype == bool and "M" not in ro[0]


# ------------------------------------------------------------------------------------------------ tables
def test_write_table_keeps_notes(tmp_path):
    stem = str(tmp_path / "t")
    notes = notes_path(stem)
    assert notes == stem + "_notes.md"
    cmd = regenerate_command("python scripts/x.py", ["--out", "a b", "--note", "secret"], redact=("--note",))
    assert cmd == "python scripts/x.py --out 'a b' --note '<see Note>'"
    rows = [{"a": 1, "b": 0.123456789}, {"a": 2, "b": None}]
    import datetime

    started = datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.timezone.utc)
    write_table(stem, rows, ["a", "b"], ["## Body", "text"], title="T", command=cmd, started=started, wall=90.0)
    md = open(stem + ".md").read()
    assert f"`{cmd}`" in md and "Date: 2026-01-02 03:04 UTC. Wall time: 1.5 min. Machine: " in md
    assert "hand-written notes belong in" in md and md.rstrip().endswith("text")
    assert open(stem + ".csv").read() == "a,b\n1,0.123457\n2,\n"
    with open(notes, "w") as fh:
        fh.write("my note\n")
    write_table(stem, rows[:1], ["a", "b"], ["## Body"], title="T", command=cmd, started=started, wall=1.0)
    assert open(notes).read() == "my note\n"
    assert "Hand-written notes on this table:" in open(stem + ".md").read()


def test_logistic_midpoint_recovers_a_known_curve():
    from theorykit.validation.stats import logistic_midpoint

    rng = np.random.default_rng(5)
    x = np.repeat(np.linspace(5.0, 9.0, 9), 200)
    y = (rng.random(x.size) < 1 / (1 + np.exp(-(x - 7.0) / 0.5))).astype(float)
    mid, se = logistic_midpoint(x, y, resamples=100)
    assert 0.005 < se < 0.1 and abs(mid - 7.0) < 3 * se
