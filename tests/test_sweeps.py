"""Sweeps: every run recorded (failed ones too), CSV header with settings, reproducible seeds, parallel = serial."""
import json

import numpy as np
import pandas as pd
import pytest

from theorykit.cli import main
from theorykit.sweeps import read_csv, summarise, sweep

BASE = dict(activation="quad", link="phase-retrieval", loss="square", width=1, d=60, steps=30, eta=0.05)


def test_parallel_equals_serial_and_csv_roundtrip(tmp_path):
    path = tmp_path / "s.csv"
    df2 = sweep([1.0, 6.0], range(3), processes=2, csv=str(path), progress=False, **BASE)
    df1 = sweep([1.0, 6.0], range(3), processes=1, progress=False, **BASE)
    assert len(df2) == 6 and list(df2.status) == ["ok"] * 6
    cols = ["delta", "seed", "success", "escape_time", "final_overlap", "final_train_loss"]
    pd.testing.assert_frame_equal(df1[cols], df2[cols])
    back = read_csv(str(path))
    assert back.attrs["settings"]["simulate"]["eta"] == 0.05 and back.attrs["settings"]["seeds"] == [0, 1, 2]
    np.testing.assert_allclose(back.final_overlap, df2.final_overlap)
    s = summarise(df2)
    assert list(s.delta) == [1.0, 6.0] and (s.ok == 3).all()
    # success grows with delta for phase retrieval with sigma = x^2 (THEORY section 5: midpoint ~5 at small d)
    assert s.success_probability.iloc[1] >= s.success_probability.iloc[0]


def test_failed_and_diverged_runs_are_recorded(tmp_path, capsys):
    df = sweep([2.0], [0, 1], processes=1, progress=False, **{**BASE, "eta": 50.0})
    assert len(df) == 2 and set(df.status) == {"diverged"}
    # a run that raises (here: a link that is not finite at some z) is a row with status failed
    df = sweep([2.0], [0], processes=1, progress=False, **{**BASE, "link": "log(z)"})
    assert len(df) == 1 and df.status[0] == "failed" and "not real and finite" in df.error[0]
    assert "1 of 1 runs failed" in capsys.readouterr().err


def test_cli_sweep_json(tmp_path, capsys):
    out = tmp_path / "c.csv"
    rc = main(["sweep", "--activation", "quad", "--link", "phase-retrieval", "--d", "40", "--steps", "10",
               "--eta", "0.05", "--deltas", "2,3", "--seeds", "2", "--processes", "1", "--out", str(out), "--json"])
    assert rc == 0
    r = json.loads(capsys.readouterr().out)
    assert len(r["runs"]) == 4 and len(r["summary"]) == 2 and out.exists()
    assert main(["sweep", "--activation", "quad", "--link", "phase-retrieval", "--d", "40", "--steps", "10",
                 "--eta", "0.05", "--deltas", "2,-1"]) == 2
    assert "positive" in capsys.readouterr().err
