"""`theorykit table`: columns and their parsing, cached cells (an interrupted table resumes), failed cells recorded
while the others go on, the CSV/Markdown with the regenerating command, one-line errors."""
import json

import pandas as pd
import pytest

from theorykit._cli._args import split_top
from theorykit.cli import main
from theorykit.report import table as st
from theorykit.errors import TheorykitError


def test_parse_columns():
    cols = st.parse_columns("delta_alg, delta_star@t=50:d=400 ,sim@d=400:T=150,delta_nn@T=200")
    assert [c.name for c in cols] == ["delta_alg", "delta_star@t=50:d=400", "sim@d=400:T=150", "delta_nn@T=200"]
    assert cols[2].get("d") == 400 and cols[2].get("T") == 150 and cols[1].get("d") == 400
    for bad, msg in [("delta_x", "unknown column"), ("sim@d=400", "needs T=N"), ("sim@d=4x:T=3", "integer"),
                     ("delta_alg@t=3", "no parameters"), ("delta_alg,delta_alg", "twice"), ("", "no columns"),
                     ("delta_star@t=-1", ">= 0"), ("sim@d=0:T=5", ">= 1")]:
        with pytest.raises(TheorykitError, match=msg):
            st.parse_columns(bad)


def test_parse_eta_and_split():
    assert st.parse_eta("0.5", ["gelu", "quad"]) == {"gelu": 0.5, "quad": 0.5}
    assert st.parse_eta("quad=0.05", ["gelu", "quad"]) == {"gelu": 1.0, "quad": 0.05}
    with pytest.raises(TheorykitError, match="not among"):
        st.parse_eta("relu=1", ["gelu"])
    with pytest.raises(TheorykitError, match="> 0"):
        st.parse_eta("-1", ["gelu"])
    assert split_top("gelu,Max(0, x),x*tanh(x)") == ["gelu", "Max(0, x)", "x*tanh(x)"]


def test_table_end_to_end_cached_and_failed_cells(tmp_path, capsys, monkeypatch):
    from theorykit.report import table as table_module

    real = table_module.COMPUTE["finite_d"]

    def refuse_width_3(problem, *a, **k):  # a cell that fails: recorded, the rest goes on, retried on the rerun
        if problem.m == 3:
            raise TheorykitError("refused for this test at width 3")
        return real(problem, *a, **k)

    monkeypatch.setitem(table_module.COMPUTE, "finite_d", refuse_width_3)
    stem = str(tmp_path / "t")
    argv = ["table", "--activations", "gelu,Max(0,x)", "--widths", "1,3", "--link", "phase-retrieval",
            "--eta", "0.5", "--columns", "delta_alg,sim@d=40:T=30,finite_d@d=40:T=5", "--deltas", "2,12",
            "--seeds", "2", "--paths", "256", "--replicas", "2", "--out", stem, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert len(rows) == 4 and out["columns"] == ["delta_alg", "sim@d=40:T=30", "finite_d@d=40:T=5"]
    for r in rows:
        assert r["delta_alg"] == 0.5 and r["delta_alg_status"] == "computed"
        assert "simulated GD at d = 40" in r["sim@d=40:T=30_how"] and r["sim@d=40:T=30_status"] == "computed"
        assert r["seconds"] >= 0 and r["wall_seconds"] >= 0
        if r["width"] == 3:  # a failed cell is recorded, and the rest goes on
            assert r["finite_d@d=40:T=5_status"] == "failed" and "refused for this test" in r["finite_d@d=40:T=5_error"]
        else:
            assert r["finite_d@d=40:T=5_status"] == "computed", r["finite_d@d=40:T=5_error"]
    with open(stem + ".md") as fh:
        md = fh.read()
    assert "theorykit table --activations" in md and "How each value was obtained" in md
    df = pd.read_csv(stem + ".csv", comment=None)
    assert list(df["activation"]) == ["gelu", "gelu", "Max(0,x)", "Max(0,x)"]
    # the same command again: every finished cell is read back, the failed ones are tried again
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)["rows"]
    for a, b in zip(rows, again):
        assert b["delta_alg_status"] == "cached" and b["sim@d=40:T=30_status"] == "cached"
        assert b["sim@d=40:T=30"] == a["sim@d=40:T=30"]  # (null both times when it does not cross 1/2)
        assert b["finite_d@d=40:T=5_status"] == ("failed" if b["width"] == 3 else "cached")


def test_table_one_line_errors(capsys, tmp_path):
    base = ["table", "--activations", "gelu", "--link", "phase-retrieval", "--cache", str(tmp_path)]
    for extra, msg in [(["--columns", "nope"], "unknown column"), (["--widths", "1,0"], "> 0"),
                       (["--deltas", "2,2"], "repeats"), (["--eta", "quad=1"], "not among"),
                       (["--delta-range", "5", "2"], "LO < HI")]:
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1
