#!/usr/bin/env python
"""delta*(0)'s reported uncertainty against its exact value, over seeds.

    python scripts/delta_star_error_bars.py        # writes tables/delta_star_error_bars.md and .csv (about 10 min)

GeLU, y = sign(|z| - median |z|) (sign-symmetric), logistic loss, m = 1, eta = 1: the README's example, whose
delta*(0) = 3.2429 is exact (tables/hessian_vs_finite_d.md: the t = 0 Hessian is the classic spectral method's, with a
closed form).  For seeds 0..7, delta_star asked for t = 0 alone and for t = 0 with t = 25 (the solve then draws its
innovations in 26 dimensions, a different Sobol point set: a different sample of paths, not a different law), with the
default 2 regula-falsi refinements and with 6.  Per run: the value, its stderr (4 replicas, 3 degrees of freedom),
its interpolation error, the 95% interval (Student's t + interpolation error) and whether it covers the exact value.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import theorykit as tk
from theorykit.report.writer import now, regenerate_command, write_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXACT = 3.2429
SEEDS = range(8)


def main(argv=()):
    t0, started = time.perf_counter(), now()
    p = tk.Problem("gelu", "sign-symmetric", "logistic", width=1, delta=3.0, eta=1.0, steps=1)
    rows = []
    for times in ([0], [0, 25]):
        for refine in (2, 6):
            for seed in SEEDS:
                q = tk.delta_star(p, times, delta_range=(2, 12), points=6, seed=seed, refine=refine, processes=1)[0]
                lo, hi = q.interval95
                rows.append({"times": " ".join(map(str, times)), "refine": refine, "seed": seed, "value": q.value,
                             "stderr": q.stderr, "dof": q.dof, "interpolation_error": q.interpolation_error,
                             "low": lo, "high": hi, "covers_exact": bool(lo <= EXACT <= hi),
                             "z": (q.value - EXACT) / q.stderr})
                print(rows[-1], flush=True)
    lines = ["| t asked | refinements | mean delta*(0) (± s.e. over seeds) | sd over seeds | rms stderr | "
             "mean interpolation error | intervals covering 3.2429 |", "|---|---|---|---|---|---|---|"]
    for times in ("0", "0 25"):
        for refine in (2, 6):
            sel = [r for r in rows if r["times"] == times and r["refine"] == refine]
            v = np.array([r["value"] for r in sel])
            se = np.array([r["stderr"] for r in sel])
            ie = np.array([r["interpolation_error"] for r in sel])
            lines.append(f"| {times} | {refine} | {v.mean():.4f} ± {v.std(ddof=1) / np.sqrt(len(v)):.4f} | "
                         f"{v.std(ddof=1):.4f} | {np.sqrt(np.mean(se ** 2)):.4f} | {np.nanmean(ie):.4f} | "
                         f"{sum(r['covers_exact'] for r in sel)} of {len(sel)} |")
    header = [f"Exact delta*(0) = {EXACT}.  One row per (t asked, refinements) over seeds {SEEDS.start}.."
              f"{SEEDS.stop - 1}; the CSV has every run (z = (value - exact) / stderr)."]
    return write_table(os.path.join(ROOT, "tables", "delta_star_error_bars"), rows, list(rows[0]), lines,
                       title="delta*(0)'s error bar against its exact value",
                       command=regenerate_command("python scripts/delta_star_error_bars.py", argv), started=started,
                       wall=time.perf_counter() - t0, header=header, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
