"""Sweeps: every run recorded (failed ones too), CSV header with settings, reproducible seeds, parallel = serial;
no lost work (rows appended as runs finish, resume, settings checked, Ctrl-C keeps the rows); Wilson intervals."""
import json
import math
import time

import numpy as np
import pandas as pd
import pytest

import theorykit.referee.gd as gd
from theorykit.cli import main
from theorykit.validation import binomial
from theorykit.errors import TheorykitError
from theorykit.referee.gd import simulate
from theorykit.referee.sweeps import read_csv, summarise, sweep
from theorykit.runner import wilson

BASE = dict(activation="quad", link="phase-retrieval", loss="square", width=1, d=60, steps=30, eta=0.05)
Z = 1.959963984540054  # the two-sided 95% normal quantile, Phi^-1(0.975)


def wilson_by_hand(k, n, z=Z):
    """The Wilson score interval written out: centre (p + z^2/2n)/(1 + z^2/n), half
    z sqrt(p(1-p)/n + z^2/4n^2)/(...)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@pytest.fixture
def counted(monkeypatch):
    """The (delta, seed) of every simulate call the sweep makes in this process (processes=1)."""
    calls = []

    def counting(*args, **kwargs):
        calls.append((kwargs["delta"], kwargs["seed"]))
        return real_simulate(*args, **kwargs)

    real_simulate = gd.simulate
    monkeypatch.setattr(gd, "simulate", counting)
    return calls


def test_parallel_equals_serial_and_csv_roundtrip(tmp_path):
    path = tmp_path / "s.csv"
    df2 = sweep([1.0, 6.0], range(6), processes=2, csv=str(path), progress=False, **BASE)
    df1 = sweep([1.0, 6.0], range(6), processes=1, progress=False, **BASE)
    assert len(df2) == 12 and list(df2.status) == ["ok"] * 12
    assert list(df2.delta) == [1.0] * 6 + [6.0] * 6 and list(df2.seed) == list(range(6)) * 2
    cols = ["delta", "seed", "success", "escape_time", "final_overlap", "final_train_loss"]
    pd.testing.assert_frame_equal(df1[cols], df2[cols])
    back = read_csv(str(path))
    assert back.attrs["settings"]["simulate"]["eta"] == 0.05 and df2.attrs["settings"]["seeds"] == list(range(6))
    assert sorted(set(back.seed)) == list(range(6))
    np.testing.assert_allclose(back.final_overlap, df2.final_overlap)
    # every row is exactly the run simulate gives for its (delta, seed): the sweep adds no reseeding or mixing
    for row in df2.itertuples():
        res = simulate(delta=row.delta, seed=row.seed, **BASE)
        assert (math.isnan(row.escape_time) if res.escape_time is None else row.escape_time == res.escape_time)
        assert row.final_overlap == res.overlap[-1] and row.max_overlap == np.max(res.overlap)
    # phase retrieval with sigma = x^2 at d = 60 (THEORY section 5: midpoint ~5 at small d): measured on these seeds,
    # no run escapes by t = 30 at delta = 1 and seeds 3, 4, 5 escape at delta = 6 (t = 12, 28, 15), so the summary is
    # exactly P = 0 and 1/2, binomial s.e. 0 and sqrt(1/4 / 6), median escape time 15
    assert [int(t) for t in df2.escape_time.dropna()] == [12, 28, 15] and list(df2.seed[df2.success]) == [3, 4, 5]
    s = summarise(df2)
    assert list(s.delta) == [1.0, 6.0] and (s.runs == 6).all() and (s.ok == 6).all()
    assert (s.diverged == 0).all() and (s.failed == 0).all()
    assert list(s.success_probability) == [0.0, 0.5]
    assert s.stderr[0] == 0.0 and s.stderr[1] == pytest.approx(math.sqrt(0.25 / 6), rel=1e-15)
    assert math.isnan(s.median_escape_time[0]) and s.median_escape_time[1] == 15.0
    # Wilson 95% intervals of 0/6 and 3/6: [0, z^2/(6 + z^2)] and the formula written out (symmetric about 1/2)
    assert (list(s.successes) == [0, 3] and s.low[0] == 0.0
            and s.high[0] == pytest.approx(Z * Z / (6 + Z * Z), rel=1e-12))
    assert (s.low[1], s.high[1]) == pytest.approx(wilson_by_hand(3, 6), rel=1e-12)
    assert s.low[1] + s.high[1] == pytest.approx(1.0, rel=1e-12)


def test_failed_and_diverged_runs_are_recorded(tmp_path, capsys):
    df = sweep([2.0], [0, 1], processes=1, progress=False, **{**BASE, "eta": 50.0})
    assert len(df) == 2 and set(df.status) == {"diverged"}
    # diverged runs are runs that did not succeed: P = 0/2 (before: NaN, "no ok run"), Wilson [0, z^2/(2 + z^2)]
    s = summarise(df)
    assert (s.ok[0], s.diverged[0], s.successes[0], s.success_probability[0], s.stderr[0]) == (0, 2, 0, 0.0, 0.0)
    assert s.low[0] == 0.0 and s.high[0] == pytest.approx(Z * Z / (2 + Z * Z), rel=1e-12)
    # a run that raises (here: a link that is not finite at some z) is a row with status failed
    df = sweep([2.0], [0], processes=1, progress=False, **{**BASE, "link": "log(z)"})
    assert len(df) == 1 and df.status[0] == "failed" and "not real and finite" in df.error[0]
    assert "1 of 1 runs failed" in capsys.readouterr().err


def test_cli_sweep_json(tmp_path, capsys):
    out = tmp_path / "c.csv"
    rc = main(["sweep", "--activation", "quad", "--link", "phase-retrieval", "--d", "60", "--steps", "30",
               "--eta", "0.05", "--deltas", "1,6", "--seeds", "0,3", "--processes", "1", "--out", str(out), "--json"])
    assert rc == 0
    r = json.loads(capsys.readouterr().out)
    assert len(r["runs"]) == 4 and len(r["summary"]) == 2 and out.exists() and r["csv"] == str(out)
    assert r["settings"]["seeds"] == [0, 3] and r["settings"]["deltas"] == [1.0, 6.0]
    assert r["settings"]["simulate"] == {**r["settings"]["simulate"], **BASE}  # the CLI passes the same settings
    # each run is simulate's run for its (delta, seed), and the summary the success fraction among them: at d = 60
    # seed 3 escapes at delta = 6 (t = 12) and nothing else does (the same runs as the API test above)
    for run in r["runs"]:
        res = simulate(delta=run["delta"], seed=run["seed"], **BASE)
        assert run["status"] == "ok" and run["escape_time"] == res.escape_time
        assert run["final_overlap"] == res.overlap[-1] and run["final_train_loss"] == res.train_loss[-1]
    assert [(x["delta"], x["seed"], x["escape_time"]) for x in r["runs"]] == \
        [(1.0, 0, None), (1.0, 3, None), (6.0, 0, None), (6.0, 3, 12)]
    assert [(x["delta"], x["ok"], x["success_probability"], x["median_escape_time"]) for x in r["summary"]] == \
        [(1.0, 2, 0.0, None), (6.0, 2, 0.5, 12.0)]
    assert r["summary"][0]["stderr"] == 0.0 and r["summary"][1]["stderr"] == pytest.approx(math.sqrt(0.25 / 2))
    np.testing.assert_allclose(read_csv(str(out)).final_overlap, [x["final_overlap"] for x in r["runs"]], rtol=1e-12)
    assert main(["sweep", "--activation", "quad", "--link", "phase-retrieval", "--d", "40", "--steps", "10",
                 "--eta", "0.05", "--deltas", "2,-1"]) == 2
    assert "positive" in capsys.readouterr().err
    # --keep: the runs' trajectories in the JSON (and the CSV), the run's own
    rc = main(["sweep", "--activation", "quad", "--link", "phase-retrieval", "--d", "60", "--steps", "30",
               "--eta", "0.05", "--deltas", "6", "--seeds", "1", "--processes", "1", "--keep", "overlap", "--json"])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert rc == 0 and run["overlap_t"] == simulate(delta=6.0, seed=0, **BASE).overlap.tolist()


def test_diverged_runs_count_against_the_success_fraction():
    """P = successes / (ok + diverged): a run that escaped and then diverged is not a success.  Measured at d = 60,
    delta = 6, eta = 0.3: seeds 0, 1 stay finite and escape (t = 7, 16); seeds 2..5 diverge (4 and 5 after escaping
    at t = 9 and 5).  So P = 2/6 = 1/3 (counting only the ok runs it would be 2/2 = 1), s.e. sqrt((1/3)(2/3)/6) =
    sqrt(1/27), median escape time over the ok runs (7 + 16)/2 = 11.5."""
    df = sweep([6.0], range(6), processes=1, progress=False, **{**BASE, "eta": 0.3})
    assert (list(df.status) == ["ok"] * 2 + ["diverged"] * 4
            and list(df.success) == [True, True, False, False, True, True])
    assert [int(t) for t in df.escape_time.dropna()] == [7, 16, 9, 5]
    s = summarise(df)
    assert (s.runs[0], s.ok[0], s.diverged[0], s.failed[0], s.successes[0]) == (6, 2, 4, 0, 2)
    assert s.success_probability[0] == 2 / 6 and s.stderr[0] == pytest.approx(math.sqrt(1 / 27), rel=1e-15)
    assert (s.low[0], s.high[0]) == pytest.approx(wilson_by_hand(2, 6), rel=1e-12)
    assert s.median_escape_time[0] == 11.5


def test_wilson_interval_at_0_and_n_is_not_empty():
    """0/8 and 8/8: [0, z^2/(8 + z^2)] = [0, 0.3244] and [8/(8 + z^2), 1] = [0.6756, 1], never [0, 0] or [1, 1]
    (what p +- z se gives); compare.stats.binomial uses the same function."""
    lo, hi = wilson(0, 8)
    assert lo == 0.0 and hi == pytest.approx(Z * Z / (8 + Z * Z), rel=1e-12) and hi == pytest.approx(0.32441, abs=1e-5)
    lo, hi = wilson(8, 8)
    assert hi == 1.0 and lo == pytest.approx(8 / (8 + Z * Z), rel=1e-12) and lo == pytest.approx(0.67559, abs=1e-5)
    assert (binomial(0, 8).low, binomial(0, 8).high) == wilson(0, 8)
    assert (binomial(8, 8).low, binomial(8, 8).high) == wilson(8, 8)
    assert wilson(3, 10) == pytest.approx(wilson_by_hand(3, 10), rel=1e-12)
    assert all(math.isnan(v) for v in wilson(0, 0))
    with pytest.raises(ValueError):
        wilson(9, 8)


def test_rows_are_appended_and_an_interrupted_sweep_resumes(tmp_path, counted):
    """Truncate the file of a finished sweep to its first rows (and half a row, as a kill mid-write leaves it):
    rerunning the same call computes only the missing runs and gives the same table."""
    path = tmp_path / "s.csv"
    full = sweep([1.0, 6.0], range(3), processes=1, csv=str(path), progress=False, **BASE)
    assert len(counted) == 6
    lines = path.read_text().splitlines(keepends=True)
    assert lines[0].startswith("# ") and lines[1].startswith("# settings: ") and lines[2].startswith("job,delta,seed,")
    assert len(lines) == 3 + 6  # one line per run, appended as it finished
    path.write_text("".join(lines[:5]) + lines[5][:20])  # header + the first 2 rows + a cut row
    counted.clear()
    again = sweep([1.0, 6.0], range(3), processes=1, csv=str(path), progress=False, **BASE)
    assert counted == [(1.0, 2), (6.0, 0), (6.0, 1), (6.0, 2)]  # only the 4 missing runs
    cols = [c for c in full.columns if c != "seconds"]
    pd.testing.assert_frame_equal(again[cols], full[cols])
    pd.testing.assert_frame_equal(read_csv(str(path))[cols], full[cols])
    counted.clear()
    sweep([1.0, 6.0], range(3), processes=1, csv=str(path), progress=False, **BASE)
    assert counted == []  # a finished sweep is read back, not recomputed


def test_ctrl_c_keeps_the_rows_and_the_rerun_finishes(tmp_path, monkeypatch, capsys):
    path = tmp_path / "s.csv"
    real = gd.simulate
    calls = []

    def interrupted_at_seed_2(*args, **kwargs):
        calls.append(kwargs["seed"])
        if kwargs["seed"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(gd, "simulate", interrupted_at_seed_2)
    with pytest.raises(KeyboardInterrupt):
        sweep([6.0], range(4), processes=1, csv=str(path), progress=False, **BASE)
    assert "rerun the same command to resume" in capsys.readouterr().err
    assert list(read_csv(str(path)).seed) == [0, 1]  # the rows done are kept
    monkeypatch.setattr(gd, "simulate", lambda *a, **k: calls.append(k["seed"]) or real(*a, **k))
    df = sweep([6.0], range(4), processes=1, csv=str(path), progress=False, **BASE)
    assert calls == [0, 1, 2, 2, 3] and list(df.seed) == [0, 1, 2, 3] and set(df.status) == {"ok"}
    # the same runs as an uninterrupted sweep (first test: at delta = 6 seed 3 is the first to escape, at t = 12)
    assert [int(t) for t in df.escape_time.dropna()] == [12] and list(df.seed[df.success]) == [3]


def test_ctrl_c_stops_the_workers_within_seconds(tmp_path, monkeypatch):
    """Processes = 2: one run is interrupted while the other sleeps 60 s; the pool is terminated at once and the rows
    already written stay."""
    path = tmp_path / "s.csv"
    real = gd.simulate

    def slow(*args, **kwargs):  # inherited by the forked workers
        if kwargs["seed"] == 2:
            time.sleep(2)  # seeds 0 and 1 are written by then
            raise KeyboardInterrupt
        if kwargs["seed"] == 3:
            time.sleep(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(gd, "simulate", slow)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sweep([6.0], range(4), processes=2, csv=str(path), progress=False, **BASE)
    assert time.monotonic() - t0 < 15
    assert sorted(read_csv(str(path)).seed) == [0, 1]


def test_resume_into_other_settings_is_refused(tmp_path, counted):
    path = tmp_path / "s.csv"
    sweep([6.0], [0, 1], processes=1, csv=str(path), progress=False, **BASE)
    before = path.read_text()
    counted.clear()
    with pytest.raises(TheorykitError, match=r"other settings.*simulate") as err:
        sweep([6.0], [0, 1], processes=1, csv=str(path), progress=False, **{**BASE, "eta": 0.1})
    assert "\n" not in str(err.value)
    with pytest.raises(TheorykitError, match=r"other settings.*keep"):
        sweep([6.0], [0, 1], processes=1, csv=str(path), progress=False, keep=["overlap"], **BASE)
    assert counted == [] and path.read_text() == before  # nothing ran, the file is untouched


def test_more_seeds_or_deltas_extend_the_file(tmp_path, counted):
    """A row is one (delta, seed) run: the same settings with other seeds or deltas compute only the new runs, and
    return only the rows asked for."""
    path = tmp_path / "s.csv"
    sweep([6.0], [0, 1], processes=1, csv=str(path), progress=False, **BASE)
    counted.clear()
    df = sweep([6.0], [0, 1, 2], processes=1, csv=str(path), progress=False, **BASE)
    assert counted == [(6.0, 2)] and list(df.seed) == [0, 1, 2] and df.attrs["summary"]["skipped"] == 2
    counted.clear()
    df = sweep([6.0, 8.0], [1], processes=1, csv=str(path), progress=False, **BASE)
    assert counted == [(8.0, 1)] and list(df.delta) == [6.0, 8.0] and list(df.seed) == [1, 1]
    assert len(read_csv(str(path))) == 4


def test_kept_trajectories_are_the_runs_own(tmp_path):
    """keep=("overlap", "full"): each row holds its run's per-step arrays, as simulate gives them, through the CSV
    and back; an unknown keep is one line."""
    path = tmp_path / "k.csv"
    df = sweep([6.0], [3], processes=1, csv=str(path), progress=False, keep=("full", "overlap"), **BASE)
    res = simulate(delta=6.0, seed=3, **BASE)
    row = read_csv(str(path)).iloc[0]
    for r in (df.iloc[0], row):
        np.testing.assert_array_equal(np.asarray(r.M_t), res.M)
        np.testing.assert_array_equal(np.asarray(r.overlap_t), res.overlap)
        np.testing.assert_array_equal(np.asarray(r.success_t, dtype=bool), res.success)
        np.testing.assert_allclose(np.asarray(r.test_loss_t), res.population_test_loss, rtol=1e-12)
        assert len(r.train_loss_t) == len(res.t) and r.test_kind.startswith("population")
    with pytest.raises(TheorykitError, match="keep: unknown trajectory 'overlaps'"):
        sweep([6.0], [3], processes=1, keep=["overlaps"], **BASE)
    plain = sweep([6.0], [3], processes=1, progress=False, **BASE)
    assert "M_t" not in plain.columns


def test_unwritable_csv_is_refused_before_any_run(tmp_path, counted, capsys):
    (tmp_path / "afile").write_text("")
    with pytest.raises(TheorykitError, match="cannot write"):
        sweep([6.0], [0, 1], processes=1, csv=str(tmp_path / "afile" / "s.csv"), progress=False, **BASE)
    assert counted == []
    rc = main(["sweep", "--activation", "quad", "--link", "phase-retrieval", "--d", "60", "--steps", "30", "--eta",
               "0.05", "--deltas", "6", "--seeds", "2", "--processes", "1", "--out", str(tmp_path / "afile" / "c.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and counted == [] and err.count("\n") == 1 and "cannot write" in err


def test_repeated_deltas_or_seeds_are_refused(counted):
    with pytest.raises(TheorykitError, match=r"seeds repeat \[0\]") as err:
        sweep([6.0], [0, 1, 0], processes=1, progress=False, **BASE)
    assert "\n" not in str(err.value)
    with pytest.raises(TheorykitError, match=r"deltas repeat \[2.0\]"):
        sweep([2, 6.0, 2.0], [0], processes=1, progress=False, **BASE)
    assert counted == []


def test_cli_exits_2_with_one_line_when_every_run_failed(tmp_path, capsys):
    out = tmp_path / "f.csv"
    rc = main(["sweep", "--activation", "quad", "--link", "log(z)", "--d", "60", "--steps", "30", "--eta", "0.05",
               "--deltas", "2,6", "--seeds", "2", "--processes", "1", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    assert cap.err.count("\n") == 1 and cap.err.startswith("theorykit: error: every one of the 4 runs failed")
    assert "not real and finite" in cap.err
    df = read_csv(str(out))
    assert len(df) == 4 and set(df.status) == {"failed"}  # recorded all the same
    # every run diverged (none failed): a result, not an error -- exit 0, P = 0/2
    rc = main(["sweep", "--activation", "quad", "--link", "phase-retrieval", "--d", "60", "--steps", "30",
               "--eta", "50", "--deltas", "2", "--seeds", "2", "--processes", "1", "--json"])
    cap = capsys.readouterr()
    assert rc == 0 and cap.err == ""
    summ = json.loads(cap.out)["summary"]
    assert [(x["diverged"], x["failed"], x["success_probability"]) for x in summ] == [(2, 0, 0.0)]


def test_sweep_takes_a_problem():
    """sweep(problem=...) runs the Problem at each delta: the same rows as the keyword form."""
    import theorykit as tk

    pr = tk.Problem("quad", "phase-retrieval", delta=1.0, eta=0.05, steps=5)
    a = sweep([2.0, 3.0], [0, 1], problem=pr, d=40, n_test=1, processes=1, progress=False)
    b = sweep([2.0, 3.0], [0, 1], activation="quad", link="phase-retrieval", eta=0.05, steps=5, d=40, n_test=1,
              processes=1, progress=False)
    cols = ["delta", "seed", "status", "final_overlap", "final_train_loss", "final_test_loss"]
    assert a[cols].equals(b[cols]) and (a.status == "ok").all()
    assert a.attrs["settings"]["simulate"]["problem"]["activation"] == "quad"


def test_a_file_of_the_earlier_format_resumes_with_its_own_deltas_and_seeds(tmp_path, counted):
    """Files written before a row was keyed by (delta, seed) alone record their deltas and seeds: the same sweep
    resumes them (nothing recomputed); other seeds are refused as before."""
    from theorykit.runner import SETTINGS_PREFIX

    path = tmp_path / "old.csv"
    sweep([6.0], [0, 1], processes=1, csv=str(path), progress=False, **BASE)
    lines = path.read_text().splitlines(keepends=True)
    i = next(j for j, line in enumerate(lines) if line.startswith(SETTINGS_PREFIX))
    header = json.loads(lines[i][len(SETTINGS_PREFIX):])
    header["settings"].update(deltas=[6.0], seeds=[0, 1])  # what the earlier writer recorded
    lines[i] = SETTINGS_PREFIX + json.dumps(header, sort_keys=True) + "\n"
    path.write_text("".join(lines))
    counted.clear()
    df = sweep([6.0], [0, 1], processes=1, csv=str(path), progress=False, **BASE)
    assert counted == [] and list(df.seed) == [0, 1]
    with pytest.raises(TheorykitError, match=r"other settings.*seeds"):
        sweep([6.0], [0, 1, 2], processes=1, csv=str(path), progress=False, **BASE)
