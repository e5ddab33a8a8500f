"""`theorykit plot KIND`: every kind writes a PNG and a PDF that hold a picture, returns the numbers it drew, and
refuses bad input in one line."""
import json

import matplotlib.image as mpimg
import numpy as np
import pytest

from theorykit.cli import main


def run(capsys, *argv):
    assert main(["plot", *argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    png, pdf = out["files"]
    img = mpimg.imread(png)
    assert img.shape[0] > 200 and img.shape[1] > 300 and float(np.std(img)) > 0.01  # not a blank canvas
    with open(pdf, "rb") as fh:
        assert fh.read(5) == b"%PDF-"
    return out


def _table(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("# generated\npart,setting,t,delta_star,delta_star_se,delta,d,escape_median,escape_q25,"
                    "escape_q75,escaped,runs\n"
                    "nn,a,10,3.0,0.1,,,,,,,\nnn,a,100,4.0,0.2,,,,,,,\nnn,b,10,5.0,,,,,,,,\n"
                    "escape,a,,,,6,200,50,40,60,8,8\nescape,a,,,,9,200,20,15,30,8,8\nescape,a,,,,9,400,30,25,40,7,8\n")
    return str(path)


def test_table_kinds(capsys, tmp_path):
    t = _table(tmp_path)
    out = run(capsys, "delta-star", "--table", t, "--out", str(tmp_path / "ds"))
    assert [r["delta_star"] for r in out["data"]["rows"]] == [3.0, 4.0, 5.0]
    out = run(capsys, "escape", "--table", t, "--settings", "a", "--out", str(tmp_path / "es"))
    assert sorted({r["d"] for r in out["data"]["rows"]}) == [200.0, 400.0]


def test_success_marks_delta_alg(capsys, tmp_path):
    out = run(capsys, "success", "--activations", "gelu", "--link", "phase-retrieval", "--d", "40", "--steps", "30",
              "--deltas", "2,10", "--seeds", "2", "--mark", "gelu:delta_NN=6", "--out", str(tmp_path / "s"))
    assert [r["delta"] for r in out["data"]["curves"]["gelu"]] == [2.0, 10.0]
    marks = out["data"]["marks"]["gelu (eta 1)"]
    assert marks["delta_alg"] == 0.5 and marks["delta_NN"] == 6.0


def test_hessian_and_dynamics_kinds(capsys, tmp_path):
    out = run(capsys, "hessian", "--activation", "gelu", "--link", "sign-symmetric", "--loss", "logistic",
              "--delta", "6", "--eta", "1", "--t", "5", "--d", "80", "--paths", "1024", "--replicas", "2",
              "--out", str(tmp_path / "h"))
    assert np.isfinite(out["data"]["edge"]) and np.isfinite(out["data"]["eigenvalues_min"])
    out = run(capsys, "dmft-vs-sim", "--activation", "tanh", "--link", "z+z**2/2", "--delta", "2", "--eta", "1",
              "--steps", "4", "--d", "80", "--seeds", "2", "--paths", "1024", "--replicas", "2",
              "--out", str(tmp_path / "dv"))
    assert len(out["data"]["dmft_train_loss"]) == 5
    out = run(capsys, "grokking", "--activation", "gelu", "--link", "phase-retrieval", "--delta", "8", "--eta", "1",
              "--steps", "30", "--d", "60", "--seeds", "2", "--out", str(tmp_path / "g"))
    assert len(out["data"]["escape_times"]) == 2


@pytest.mark.parametrize("argv,msg", [
    (["hessian", "--activation", "gelu", "--link", "phase-retrieval", "--delta", "4", "--eta", "1", "--t", "2"],
     "needs --d"),
    (["delta-star", "--table", "/nonexistent/t.csv"], "does not exist"),
    (["success", "--activations", "gelu", "--link", "phase-retrieval", "--d", "40", "--steps", "3", "--deltas", "2",
      "--mark", "relu:x=1"], "not among the curves"),
])
def test_plot_one_line_errors(capsys, tmp_path, argv, msg):
    assert main(["plot", *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1
