#!/usr/bin/env python
"""The finite-d prediction at width m >= 3 against GD (issue 30 points 4-5).

    python scripts/finite_d_wide.py            # writes tables/finite_d_wide.{md,csv}; GD runs kept in
                                               # tables/raw/finite_d_wide_*.csv
    python scripts/finite_d_wide.py gelu-m4    # one case (gelu-m4, x2-m4, gelu-m8, bounded-m4, relu-m4)
    python scripts/finite_d_wide.py --reuse gelu-m4   # the table again from the saved prediction and GD runs

Phase retrieval (y = z^2, square loss), width m with a = +-1 (half +1, half -1; the rows of
tables/paper_comparison.md): GeLU at eta = 1, horizon 200; x^2 at eta = 0.05, horizon 400.  And a bounded case: GeLU on
the sign link y = sign(|z| - median |z|) with logistic loss, eta = 1, horizon 200; and a kinked one: ReLU on phase
retrieval, eta = 1, horizon 200.  Prediction:
theorykit.finite_d (default ladder and anchors for m >= 3, DMFT with PATHS paths in REPLICAS replicas) at d = 400 and
800, timed.  GD: theorykit.sweep at the same d and horizon, SEEDS seeds per delta; success = cos^2 > 1/2 between the
hard direction and the top left singular vector of Theta by the horizon.  GD's midpoint: logistic maximum-likelihood
fit (theorykit.validation.stats.logistic_midpoint) with a 95% band of +- 1.96 bootstrap standard errors.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from types import SimpleNamespace

import numpy as np

import theorykit as tk
from theorykit.report.writer import now, write_study
from theorykit.validation.stats import logistic_midpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DS, SEEDS, PATHS, REPLICAS = (400, 800), 24, 16384, 4

PR = ("phase-retrieval", "square")
#: name, activation, eta, width, horizon, the prediction's delta grid, GD's deltas, root-finding steps per d after the
#: grid (each a new delta with its ladders; 0: P on the grid, compared with GD's success fractions at the same deltas),
#: (link, loss)
CASES = [("gelu-m4", "gelu", 1.0, 4, 200, [8.0, 10.0, 13.0], [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0], 1, PR),
         ("x2-m4", "quad", 0.05, 4, 400, [5.0, 7.0], [2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0], 1, PR),
         ("gelu-m8", "gelu", 1.0, 8, 200, [9.0, 13.0], [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0], 1, PR),
         ("bounded-m4", "gelu", 1.0, 4, 200, [9.0, 13.0], [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0, 14.0], 1,
          ("sign-symmetric", "logistic")),
         ("relu-m4", "relu", 1.0, 4, 200, [8.0, 14.0], [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0, 14.0], 1, PR)]


def case(name, act, eta, m, horizon, grid, gd_deltas, refine, link_loss, rows, lines, reuse=False):
    a = [1.0 if j % 2 == 0 else -1.0 for j in range(m)]
    pr = tk.Problem(act, link_loss[0], link_loss[1], m, a=a, delta=gd_deltas[0], eta=eta, steps=horizon)
    saved = os.path.join(ROOT, "tables", "raw", f"finite_d_wide_{name}_prediction.json")
    if reuse:  # the saved prediction (its time is the original run's), e.g. after a change of the table's format
        with open(saved) as fh:
            rec = json.load(fh)
        fd = SimpleNamespace(deltas=tuple(rec["deltas"]), ds=tuple(rec["d"]), midpoints=rec["finite_d"],
                             per_delta=rec["per_delta"], **{k: np.asarray(rec[k], dtype=float)
                                                            for k in ("probability", "low", "high")})
        s_fd = float(rec["seconds"])
    else:
        t1 = time.perf_counter()
        # paths: finite_d's default (PATHS; a kinked activation KINKED_REPLICA_PATHS per replica, finite_d_paths)
        fd = tk.finite_d(pr, grid, list(DS), horizon, paths=None if pr.network.kinked else PATHS, replicas=REPLICAS,
                         refine=refine, progress=True)
        s_fd = time.perf_counter() - t1
        with open(saved, "w") as fh:
            json.dump(dict(fd.as_dict(), probability=fd.probability.tolist(), low=fd.low.tolist(),
                           high=fd.high.tolist(), seconds=s_fd), fh, default=float)
    lines += [f"### {name}: {act}, {link_loss[0]}, {link_loss[1]} loss, width {m}, a = +-1, eta = {eta:g}, "
              f"horizon {horizon}", "",
              f"Prediction ({s_fd / 60:.1f} min for both d, {len(fd.deltas)} deltas: {fd.deltas}, grid {grid} and "
              f"{refine} root-finding step(s) per d): "
              + "; ".join(f"delta {p['delta']:g}: " + ", ".join(
                  f"u = {[round(v, 2) for v in r['direction']]} m* = "
                  + ("none" if r["m_star"] is None else f"{r['m_star']:.3g}") for r in p["rays"])
                          for p in fd.per_delta), "",
              "Predicted P(capture by the horizon) [band] per delta, with t_match and diag V_eff(t_match): "
              + "; ".join(f"delta {x:g}: " + ", ".join(
                  f"d = {D}: {fd.probability[i, j, -1]:.3f} [{fd.low[i, j, -1]:.3f}, {fd.high[i, j, -1]:.3f}]"
                  for j, D in enumerate(fd.ds))
                  + (f" (t_match {p['t_match']}, V_eff diag {[round(float(v), 2) for v in np.diag(p['V'])]})"
                     if p["V"] is not None else f" ({p['error']})")
                  for i, (x, p) in enumerate(zip(fd.deltas, fd.per_delta))), "",
              "| d | predicted delta_1/2 [band] | GD delta_1/2 [95% band] | GD success fraction by delta | runs | "
              "GD seconds |", "|---|---|---|---|---|---|"]
    for mp in fd.midpoints:
        D = mp["d"]
        t2 = time.perf_counter()
        df = tk.sweep(gd_deltas, range(SEEDS), processes=2, quiet=True, problem=pr, d=D, stop_after_escape=0,
                      csv=os.path.join(ROOT, "tables", "raw", f"finite_d_wide_{name}_d{D}_T{horizon}.csv"))
        ok = df[df["status"].isin(["ok", "diverged"])]
        mid, se = logistic_midpoint(ok["delta"].to_numpy(float), ok["success"].to_numpy(float))
        frac = ok.groupby("delta")["success"].mean()
        sec = time.perf_counter() - t2
        fr = " ".join(f"{k:g}:{v:.2f}" for k, v in frac.items())
        lo, hi = (float(v) for v in mp["band"])
        # with a midpoint, a NaN end of its band lies beyond the delta grid (finite_d's note): an open end here
        open_lo, open_hi = (math.isfinite(mp["midpoint"]) and not math.isfinite(v) for v in (lo, hi))
        lo_c, hi_c = (-math.inf if open_lo else lo), (math.inf if open_hi else hi)
        band = (f"[{'< ' + format(min(fd.deltas), 'g') if open_lo else format(lo, '.2f')}, "
                f"{'> ' + format(max(fd.deltas), 'g') if open_hi else format(hi, '.2f')}]")
        rows.append(dict(case=name, activation=act, width=m, eta=eta, horizon=horizon, d=D,
                         predicted=mp["midpoint"], band_low=lo, band_high=hi, predict_minutes=s_fd / 60,
                         gd_midpoint=mid, gd_stderr=se, gd_low=mid - 1.96 * se, gd_high=mid + 1.96 * se,
                         runs=len(ok), fractions=fr, gd_seconds=sec,
                         covered=bool(lo_c - 1.96 * se <= mid <= hi_c + 1.96 * se)))
        lines.append(f"| {D} | {mp['midpoint']:.2f} {band} | {mid:.2f} [{mid - 1.96 * se:.2f}, "
                     f"{mid + 1.96 * se:.2f}] | {fr} | {len(ok)} | {sec:.0f} |")
        print(lines[-1], flush=True)
    lines.append("")


def _record(name):
    return os.path.join(ROOT, "tables", "raw", f"finite_d_wide_{name}_result.json")


def main(argv):
    """Runs the cases named in argv (default: all) and writes the table from every case's latest result: each case
    keeps its rows and section in tables/raw/finite_d_wide_<case>_result.json, with the command and date of its run,
    so that rerunning one case leaves the others' results in the table."""
    reuse = "--reuse" in argv  # the table from the saved predictions and the cached GD runs, without recomputing
    argv = [a for a in argv if a != "--reuse"]
    started, t0 = now(), time.perf_counter()
    rows, lines = [], []
    for c in CASES:
        saved = os.path.join(ROOT, "tables", "raw", f"finite_d_wide_{c[0]}_prediction.json")
        if (argv and c[0] not in argv) or (reuse and not os.path.exists(saved)):  # not asked, or nothing to reuse
            if os.path.exists(_record(c[0])):
                with open(_record(c[0])) as fh:
                    rec = json.load(fh)
                rows += rec["rows"]
                lines += rec["lines"]
            continue
        head = f"Case command: `python scripts/finite_d_wide.py {c[0]}`, run {now().strftime('%Y-%m-%d %H:%M %Z')}."
        if reuse and os.path.exists(_record(c[0])):
            with open(_record(c[0])) as fh:
                head = json.load(fh)["lines"][1].split(" Table rebuilt")[0] + (
                    f" Table rebuilt from its saved prediction (`--reuse`) {now().strftime('%Y-%m-%d %H:%M %Z')}.")
        case_rows, case_lines = [], [head, ""]
        case(*c, case_rows, case_lines, reuse=reuse)
        case_lines = case_lines[2:3] + case_lines[:2] + case_lines[3:]  # the section's title first
        with open(_record(c[0]), "w") as fh:
            json.dump({"rows": case_rows, "lines": case_lines}, fh, default=float)
        rows += case_rows
        lines += case_lines
    header = [f"Phase retrieval with square loss (and one bounded case, each section names its link and loss), "
              f"a = +-1; prediction by theorykit.finite_d ({PATHS} paths in {REPLICAS} replicas, a kinked activation "
              f"{REPLICAS} x 16384; at width >= 3 the ladders in 2 replicas of the same paths, a kinked activation at "
              "least 16384 paths per ladder replica; the bracket search and the "
              "default anchors; the root-finding steps per d are in each case's section), GD by "
              f"theorykit.sweep with {SEEDS} seeds per delta "
              "at d = " + ", ".join(map(str, DS)) + "; GD's midpoint: logistic fit, 95% band from the bootstrap.  "
              "covered: GD's midpoint lies in the predicted band widened by GD's 1.96 s.e."]
    return write_study("finite_d_wide", __file__, argv, rows, lines,
                       title="Width m >= 3 at finite d: the capture prediction against GD", header=header,
                       started=started, t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
