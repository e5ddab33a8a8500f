#!/usr/bin/env python
"""The late-time growth rate of a small hard overlap, from the DMFT with mirrored paths.

    python scripts/late_growth_rate.py [NAME ...]   # writes tables/late_growth_rate.{md,csv}

Per setting and delta: one DMFT run (16384 paths in 4 replicas, mirrored paths: docs/theory.md §3 numerics) from
M0 = m0 e with m0 = 1e-8, so that the hard overlap stays in its linear phase, M_t = m0 A_t(delta), until it reaches
LINEAR_LIMIT.  The rate on a window [t1, t2] is the least-squares slope of ln M_t (replica mean; stderr: the spread
of the replicas' own slopes / sqrt(replicas)), over the steps of the window where every replica is still linear.
The zero crossing of a window's rate in delta is where that window's growth changes sign; the horizon-c ln d
threshold tends to the delta where the late rate equals 1 / (2c) (docs/theory.md §5, "The d -> infinity limit").
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

import theorykit as tk
from theorykit.report.writer import now, write_study
from theorykit.rules import crossing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M0 = 1e-8
LINEAR_LIMIT = 1e-3
T = 460
WINDOWS = ((50, 115), (115, 230), (230, 460))
CASES = {
    "pr-gelu": ("gelu", "phase-retrieval", "square", 1.0, [8, 12, 16, 20, 24, 28, 32]),
    "pr-gelu-centred": ("gelu", "z**2 - 1", "square", 1.0, [4, 6, 8, 10, 12, 14]),
}


def rates(M: np.ndarray) -> list:
    """Per window: (rate, stderr, steps used) from the per-replica hard overlaps M (replicas, T + 1)."""
    out = []
    linear = np.all(np.abs(M) < LINEAR_LIMIT, axis=0) & np.all(M > 0, axis=0)
    for t1, t2 in WINDOWS:
        t = np.arange(t1, t2 + 1)
        t = t[linear[t]]
        if len(t) < 3:
            out.append((math.nan, math.nan, len(t)))
            continue
        per = [np.polyfit(t, np.log(M[i, t]), 1)[0] for i in range(len(M))]
        mean = np.polyfit(t, np.log(M[:, t].mean(axis=0)), 1)[0]
        out.append((float(mean), float(np.std(per, ddof=1) / math.sqrt(len(per))), len(t)))
    return out


def main(argv=()):
    names = [a for a in argv if not a.startswith("-")] or list(CASES)
    t0, started = time.perf_counter(), now()
    rows = []
    for name in names:
        act, link, loss, eta, deltas = CASES[name]
        for dl in deltas:
            p = tk.Problem(act, link, loss, width=1, delta=float(dl), eta=eta, steps=T, M0=[[M0]])
            s = time.perf_counter()
            r = tk.dmft(p, paths=16384, replicas=4, seed=0, bias_check=False, hard_process=False, mirror=True)
            M = np.asarray(r.per_replica["M"])[:, :, 0, 0]
            row = {"setting": name, "activation": act, "link": link, "loss": loss, "eta": eta, "delta": float(dl),
                   "status": r.status, "seconds": time.perf_counter() - s,
                   "M_T": float(M[:, -1].mean()) if r.status == "ok" else math.nan}
            for (t1, t2), (g, se, n) in zip(WINDOWS, rates(M)):
                row.update({f"rate_{t1}_{t2}": g, f"rate_{t1}_{t2}_stderr": se, f"steps_{t1}_{t2}": n})
            rows.append(row)
            print(row, flush=True)
    lines = ["| setting | delta | " + " | ".join(f"rate on [{a}, {b}]" for a, b in WINDOWS) + " | M_T | s |",
             "|---|---|" + "---|" * len(WINDOWS) + "---|---|"]
    for r in rows:
        cells = []
        for a, b in WINDOWS:
            g, se, n = r[f"rate_{a}_{b}"], r[f"rate_{a}_{b}_stderr"], r[f"steps_{a}_{b}"]
            cells.append(f"{g:+.4f} ± {se:.4f} ({n} steps)" if math.isfinite(g) else f"— ({n} linear steps)")
        lines.append(f"| {r['setting']} ({r['link']}, eta {r['eta']:g}) | {r['delta']:g} | " + " | ".join(cells)
                     + f" | {r['M_T']:.3g} | {r['seconds']:.0f} |")
    lines += ["", "Where each window's rate turns positive for good: the last upward zero crossing in delta (linear "
              "interpolation between grid points; rates within 2 standard errors of 0 on both sides are flagged):", ""]
    for name in names:
        sub = [r for r in rows if r["setting"] == name]
        for a, b in WINDOWS:
            pts = [(r["delta"], r[f"rate_{a}_{b}"], r[f"rate_{a}_{b}_stderr"]) for r in sub
                   if math.isfinite(r[f"rate_{a}_{b}"])]
            i = next((j for j in range(len(pts) - 2, -1, -1) if pts[j][1] <= 0 < pts[j + 1][1]), None)
            if i is None:
                lines.append(f"* {name}, window [{a}, {b}]: no upward crossing on the grid")
                continue
            x = crossing([pts[i][0], pts[i + 1][0]], [pts[i][1], pts[i + 1][1]], level=0.0, upward=True)
            weak = all(abs(g) <= 2 * se for _, g, se in pts[i:i + 2])
            lines.append(f"* {name}, window [{a}, {b}]: {x:.2f} (between delta = {pts[i][0]:g} and {pts[i + 1][0]:g})"
                         + (" -- both rates within 2 s.e. of 0: not resolved" if weak else ""))
    header = [f"M0 = {M0:g} e, T = {T}, 16384 paths in 4 replicas, mirrored paths; a window's rate uses only its steps "
              f"where every replica's M_t is positive and below {LINEAR_LIMIT:g} (the linear phase)."]
    return write_study("late_growth_rate", __file__, argv, rows, lines,
                       title="Late-time growth rate of a small hard overlap (DMFT, mirrored paths)",
                       header=header, started=started, t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
