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
    # escape time against d: tables/thresholds_vs_sim.csv's rows (GD's median against the DMFT's t_1/2)
    fd = tmp_path / "fd.csv"
    fd.write_text("part,setting,delta,d,t_pred,t_pred_early,t_pred_late,t_sim_median,t_sim_q25,t_sim_q75\n"
                  "finite_d,a,12,200,20,18,23,25,15,40\nfinite_d,a,12,800,30,27,34,41,30,inf\n"
                  "finite_d,a,8,200,,,,,,\nfinite_d,b,12,200,10,9,11,12,8,16\n")
    out = run(capsys, "escape-d", "--table", str(fd), "--out", str(tmp_path / "ed"))
    assert [(r["d"], r["t_pred"], r["t_sim_median"]) for r in out["data"]["rows"] if r["setting"] == "a"
            and r["delta"] == 12] == [(200.0, 20.0, 25.0), (800.0, 30.0, 41.0)]


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
    (["success", "--activations", "gelu", "--link", "phase-retrieval", "--d", "40", "--steps", "3", "--deltas", "2",
      "--paths", "1024"], "add --predict"),
    (["success", "--activations", "gelu", "--link", "phase-retrieval", "--d", "40", "--steps", "3", "--deltas", "2",
      "--predict", "--predict-deltas", "2,x"], "--predict-deltas must be comma-separated numbers"),
    (["success", "--activations", "gelu", "--link", "phase-retrieval", "--d", "40", "--steps", "3", "--deltas", "2",
      "--delta-nn-table", "/nonexistent/t.csv"], "--delta-nn-table /nonexistent/t.csv does not exist"),
    (["success", "--activations", "gelu", "--link", "phase-retrieval", "--d", "40", "--steps", "3", "--deltas", "2",
      "--mark", "gelu:delta_NN=3", "--delta-nn-table", "NN"], "given twice"),
])
def test_plot_one_line_errors(capsys, tmp_path, argv, msg):
    argv = [_nn_table(tmp_path) if a == "NN" else a for a in argv]
    assert main(["plot", *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1


def _nn_table(tmp_path):
    path = tmp_path / "nn.csv"
    path.write_text("part,setting,t,T,delta_nn,converged,delta_star,error\n"
                    "nn,pr-gelu,10,1000,23.98,False,20.0,\nnn,pr-gelu,1000,1000,23.98,False,23.98,\n"
                    "nn,bounded,1000,1000,7.5,True,7.5,\nnn,pr-x2,,1000,,,,no hard outlier\n")
    return str(path)


def test_success_prediction_and_delta_nn_from_a_table(capsys, tmp_path):
    """m = 1: the finite-d prediction (theorykit.finite_d) is drawn and returned; delta_NN of the matching setting
    (pr-gelu) is a labelled lower bound, off the plotted range, and the caption says so."""
    argv = ["success", "--activations", "gelu", "--link", "phase-retrieval", "--d", "40", "--steps", "5", "--deltas",
            "2,10", "--seeds", "2", "--predict", "--predict-deltas", "10", "--paths", "1024", "--replicas", "2",
            "--delta-nn-table", _nn_table(tmp_path), "--csv-dir", str(tmp_path / "c"), "--out", str(tmp_path / "s")]
    out = run(capsys, *argv)
    pred = out["data"]["prediction"]["gelu"]
    assert pred["reason"] is None and [p["delta"] for p in pred["points"]] == [10.0] and pred["cached"] == 0
    again = run(capsys, *argv)["data"]["prediction"]["gelu"]  # --csv-dir: read back, the same numbers
    assert again["cached"] == 1 and again["points"] == pred["points"]
    p = pred["points"][0]
    assert not p["error"] and 0 <= p["low"] <= p["probability"] <= p["high"] <= 1
    assert "to t = 5" in pred["how"] and "1024 paths in 2 replicas" in pred["how"] and pred["how"] in out["caption"]
    nn = out["data"]["marks"]["gelu (eta 1)"]["delta_NN"]
    assert nn["delta"] == 23.98 and nn["text"] == "delta_NN (gelu) >= 23.98 (not converged by t = 1000)"
    assert out["data"]["delta_nn"]["gelu"]["setting"] == "pr-gelu"
    off = out["caption"].split("Off the plotted range")[1]
    assert "delta_NN (gelu) >= 23.98" in off and "delta_alg" in off


def test_success_prediction_m2(capsys, tmp_path):
    """m = 2: the finite-d prediction is built (capture rays over the circle of initial-overlap directions); a
    delta_NN table without a width-2 setting says so instead of dropping the mark."""
    out = run(capsys, "success", "--activations", "gelu", "--width", "2", "--link", "phase-retrieval", "--d", "20",
              "--steps", "3", "--deltas", "2,4", "--seeds", "1", "--predict", "--predict-deltas", "4", "--paths",
              "1024", "--replicas", "2", "--delta-nn-table", _nn_table(tmp_path), "--mark", "gelu:delta_NN>=3",
              "--out", str(tmp_path / "s"))
    pred = out["data"]["prediction"]["gelu"]
    assert pred["reason"] is None and len(pred["points"]) == 1 and "ray" in pred["how"]
    p = pred["points"][0]
    assert not p["error"] and 0 <= p["low"] <= p["probability"] <= p["high"] <= 1
    assert "has no rows of setting pr-gelu-m2" in out["data"]["delta_nn"]["gelu"]["reason"]
    assert out["data"]["marks"]["gelu (eta 1)"]["delta_NN"]["text"] == "delta_NN (gelu) >= 3 (a lower bound)"

def test_table_and_plot_share_the_finite_d_pipeline(monkeypatch):
    """theorykit table's finite_d cell answers as `threshold --d --horizon` does: at width 1 (a link even along its
    hard direction) the midpoint by root finding from the median start (theorykit.thresholds.finite_d_midpoint); at
    width 2 the crossing of theorykit.thresholds.finite_d's P (which plot success --predict draws)."""
    import theorykit.thresholds as th
    from theorykit.report import table as st
    from theorykit.problem import Problem

    seen, returned = [], []  # the pipeline's calls, and what each returned (the cell must be that answer)
    real, real_mid = th.finite_d, th.finite_d_midpoint

    def spy(problem, deltas, ds, horizon, **kw):
        seen.append(("grid", problem.m, list(deltas), list(ds), horizon, kw.get("paths"), kw.get("replicas")))
        returned.append(real(problem, deltas, ds, horizon, **kw))
        return returned[-1]

    def spy_mid(problem, ds, horizon, **kw):
        seen.append(("root", problem.m, list(kw.get("delta_range")), list(ds), horizon, kw.get("paths"),
                     kw.get("replicas")))
        returned.append(real_mid(problem, ds, horizon, **kw))
        return returned[-1]

    monkeypatch.setattr(th, "finite_d", spy)
    monkeypatch.setattr(th, "finite_d_midpoint", spy_mid)
    pr = Problem("gelu", "phase-retrieval", "square", 1, eta=1.0, delta=1.0, steps=1)
    opt = st.TableOptions(paths=1024, replicas=2, deltas=(4.0, 30.0))
    col = st.parse_columns("finite_d@d=40:T=5")[0]
    cell = st.COMPUTE["finite_d"](pr, col, opt)
    assert seen == [("root", 1, [4.0, 30.0], [40], 5, 1024, 2)]
    fm = returned[-1]
    m = fm.midpoints[0]
    assert np.allclose([cell["value"], cell["low"], cell["high"]], [m["midpoint"], *m["band"]], equal_nan=True)
    assert cell["how"].startswith("theorykit.thresholds.finite_d_midpoint (")
    # the escape time at the evaluated delta nearest the midpoint from above (the optimiser's ingredient)
    above = sorted((e for e in fm.escape_time if e["t"] is not None and e["delta"] >= m["midpoint"]),
                   key=lambda e: e["delta"]) if np.isfinite(m["midpoint"]) else []
    want = {"delta": above[0]["delta"], "t": above[0]["t"], "band": list(above[0]["band"])} if above else None
    assert cell["escape_time"] == want
    seen.clear()
    p2 = Problem("gelu", "phase-retrieval", "square", 2, eta=1.0, delta=1.0, steps=1)
    cell2 = st.COMPUTE["finite_d"](p2, col, opt)
    assert seen == [("grid", 2, [4.0, 30.0], [40], 5, 1024, 2)]
    m2 = returned[-1].midpoints[0]
    assert np.allclose([cell2["value"], cell2["low"], cell2["high"]], [m2["midpoint"], *m2["band"]], equal_nan=True)
    # the table's grid is searched by bisection: its "how" lists P at the deltas solved (here P < 1/2 at 30, so 4,
    # below it, is not needed)
    fd2 = returned[-1]
    parts = ", ".join(f"{dl:g}: {p:.2f}" for dl, p in zip(fd2.deltas, fd2.probability[:, 0, 5]))
    assert cell2["how"].startswith("theorykit.finite_d (") and "by bisection over its indices" in cell2["how"]
    assert f"P(capture by T) {parts}" in cell2["how"]
