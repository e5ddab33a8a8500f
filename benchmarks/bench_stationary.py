#!/usr/bin/env python
"""Benchmark of the stationary (t = infinity) route to delta_NN against the long-time DMFT route (issue 28 point 6).

    python benchmarks/bench_stationary.py   # writes tables/stationary_bench.{md,csv}

Rows: one stationary state (the default rule, with its coarser-rule check) and delta*(infinity) from the default grid
(8 log-spaced deltas in [1, 40], bracketed secant), for the bounded setting (GeLU, sign-symmetric link, logistic loss,
no truncation) and centred phase retrieval (GeLU, y = z^2 - 1, square loss, truncated at d = 400), at width m = 1 and
2 (a = (1, 1));
wall time and peak resident memory (ru_maxrss) of this process.  The comparison is the DMFT route measured in
tables/delta_nn_bench.md: delta_NN by the sequence rule to T = 1000 in 589 s, not converged.
"""
from __future__ import annotations

import os
import resource
import sys
import time

import theorykit as tk
from theorykit.dynamics.stationary import stationary_state
from theorykit.report.writer import now, write_study
from theorykit.thresholds import delta_star_infinity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# name, activation, link, loss, truncation d, delta of the single state, width, whether delta*(infinity) is run
CASES = [("bounded", "gelu", "sign-symmetric", "logistic", None, 8.0, 1, True),
         ("pr-gelu-centred", "gelu", "z**2 - 1", "square", 400, 8.0, 1, True),
         ("bounded-m2", "gelu", "sign-symmetric", "logistic", None, 8.0, 2, True),
         ("pr-gelu-centred-m2", "gelu", "z**2 - 1", "square", 400, 8.0, 2, True)]


def fmt_q(q) -> str:
    """q (m = 1) or the diagonal and off-diagonal of Q (m = 2)."""
    return f"{q:.5f}" if isinstance(q, float) else f"({q[0, 0]:.5f}, {q[0, 1]:.5f})"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv):
    started, t0 = now(), time.perf_counter()
    rows = []
    lines = ["| setting | task | value | seconds | peak RSS (MB) |", "|---|---|---|---|---|"]
    for name, act, link, loss, d, delta, m, run_nn in CASES:
        p = tk.Problem(act, link, loss, delta=delta, eta=1.0, steps=1, width=m)
        t1 = time.perf_counter()
        st = stationary_state(p)
        s1 = time.perf_counter() - t1
        q0 = float(st.q) if m == 1 else float(st.q[0, 0])
        rows.append(dict(setting=name, task=f"stationary state at delta {delta:g}", value=q0, seconds=s1,
                         rss_mb=rss_mb()))
        lines.append(f"| {name} | one stationary state, delta = {delta:g} (q = {fmt_q(st.q)}, with the check) | "
                     f"{q0:.5f} | {s1:.1f} | {rss_mb():.0f} |")
        if not run_nn:
            print(lines[-1], flush=True)
            continue
        t1 = time.perf_counter()
        r = delta_star_infinity(p, d=d)
        s2 = time.perf_counter() - t1
        rows.append(dict(setting=name, task="delta*(infinity)", value=r.value, seconds=s2, rss_mb=rss_mb()))
        lines.append(f"| {name} | delta*(infinity){' at d = ' + str(d) if d else ''} (error bound "
                     f"{r.error_bound:.2g}) | {r.value:.4f} | {s2:.1f} | {rss_mb():.0f} |")
        print(lines[-2], lines[-1], sep="\n", flush=True)
    header = ["Goal (issue 28 point 6): delta_NN to 2 digits in <= 2 min for m = 1 and <= 5 min for m = 2.  The DMFT "
              "route to T = 1000 took 589 s (m = 1) and did not converge (tables/delta_nn_bench.md)."]
    return write_study("stationary_bench", __file__, argv, rows, lines,
                       title="Stationary route to delta_NN: wall time and memory",
                       header=header, started=started, t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
