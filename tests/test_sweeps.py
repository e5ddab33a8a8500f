"""Sweeps: every run recorded (failed ones too), CSV header with settings, reproducible seeds, parallel = serial."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from theorykit.cli import main
from theorykit.referee.gd import simulate
from theorykit.referee.sweeps import read_csv, summarise, sweep

BASE = dict(activation="quad", link="phase-retrieval", loss="square", width=1, d=60, steps=30, eta=0.05)


def test_parallel_equals_serial_and_csv_roundtrip(tmp_path):
    path = tmp_path / "s.csv"
    df2 = sweep([1.0, 6.0], range(6), processes=2, csv=str(path), progress=False, **BASE)
    df1 = sweep([1.0, 6.0], range(6), processes=1, progress=False, **BASE)
    assert len(df2) == 12 and list(df2.status) == ["ok"] * 12
    assert list(df2.delta) == [1.0] * 6 + [6.0] * 6 and list(df2.seed) == list(range(6)) * 2
    cols = ["delta", "seed", "success", "escape_time", "final_overlap", "final_train_loss"]
    pd.testing.assert_frame_equal(df1[cols], df2[cols])
    back = read_csv(str(path))
    assert back.attrs["settings"]["simulate"]["eta"] == 0.05 and back.attrs["settings"]["seeds"] == list(range(6))
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


def test_failed_and_diverged_runs_are_recorded(tmp_path, capsys):
    df = sweep([2.0], [0, 1], processes=1, progress=False, **{**BASE, "eta": 50.0})
    assert len(df) == 2 and set(df.status) == {"diverged"}
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
