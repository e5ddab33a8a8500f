"""tables/thresholds_vs_sim.md's regeneration: a new case version recomputes the prediction and reads GD's rows back
from the table (GD does not depend on the prediction's version), so a clean checkout does not rerun the simulations."""
import csv

import theorykit.referee
from theorykit.report.writer import write_csv
from theorykit.validation import thresholds_vs_sim as tvs


def test_a_new_case_version_recomputes_the_prediction_and_reads_gd_back(tmp_path, monkeypatch):
    setting, deltas, ds, seeds, horizon = tvs.QUICK[0]
    old_key = "finite_d_0_an-older-version"
    gd = {(10.0, 100): 0.25, (10.0, 200): 0.5, (17.0, 100): 0.75, (17.0, 200): 1.0}
    rows = [{"part": "finite_d", "setting": setting, "delta": dl, "d": d, "horizon": horizon, "P_pred": 0.0,
             "P_low": 0.0, "P_high": 0.0, "sim_frac": frac, "sim_se": 0.2, "sim_escaped": round(frac * seeds),
             "sim_runs": seeds, "t_sim_median": 9.0, "t_sim_q25": 3.0, "t_sim_q75": float("inf"),
             "seconds_sim": 0.5, "case_key": old_key} for (dl, d), frac in gd.items()]
    stem = tmp_path / "t"
    write_csv(str(stem) + ".csv", rows, list(rows[0]))

    def no_sweep(*a, **k):
        raise AssertionError("GD was rerun although the table holds its rows")

    monkeypatch.setattr(theorykit.referee, "sweep", no_sweep)
    tvs.main(["--quick", "--out", str(stem), "--cache", str(tmp_path / "cache")])
    with open(str(stem) + ".csv", newline="") as f:
        got = list(csv.DictReader(f))
    assert len(got) == 4 and all(r["case_key"] != old_key for r in got)  # the prediction's own (new) key
    for r in got:
        assert float(r["sim_frac"]) == gd[(float(r["delta"]), int(r["d"]))]
        assert float(r["P_pred"]) > 0  # recomputed, not the old rows' 0
        assert (r["pass"] == "True") == (abs(float(r["P_pred"]) - float(r["sim_frac"])) <= max(0.4, tvs.TOL))

