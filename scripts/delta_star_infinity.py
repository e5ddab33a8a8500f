#!/usr/bin/env python
"""delta*(infinity) -- the Hessian threshold at the DMFT's stationary state -- for the settings of tables/delta_nn.md.

    python scripts/delta_star_infinity.py   # writes tables/delta_star_infinity.{md,csv}

Per setting (width m = 1, or 2 with a = (1, 1)) and truncation d (None: the n -> infinity law, only where D is
bounded below): delta*(infinity) (where the hard outlier at the stationary state turns negative) and the separation
point from theorykit.thresholds.delta_star_infinity (default grid: 8 log-spaced deltas in [1, 40], bracketed secant to a
relative width 2e-3), its error bound (bracket + quadrature), the Hessian prediction at the bracket's upper end, the
deltas without a stationary state, and the wall time.  The CLI equivalent of one row:
theorykit threshold --activation A --link L --loss LOSS --eta 1 --nn [--d D] [--width 2].
"""
from __future__ import annotations

import math
import os
import sys
import time

import theorykit as tk
from theorykit.report.writer import now, write_study
from theorykit.thresholds import delta_star_infinity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = [  # name, activation, link, loss, truncation dimensions, width
    ("bounded-gelu", "gelu", "sign-symmetric", "logistic", (None,), 1),
    ("pr-gelu-centred", "gelu", "z**2 - 1", "square", (None, 400, 10_000, 10 ** 8), 1),
    ("pr-x2-centred", "x**2", "z**2 - 1", "square", (None, 400, 10_000, 10 ** 8), 1),
    ("pr-gelu", "gelu", "phase-retrieval", "square", (None, 400, 10_000, 10 ** 8), 1),
    ("pr-xtanh", "x*tanh(x)", "phase-retrieval", "square", (None, 400), 1),
    # width 2 on the bounded setting only: on phase retrieval a width-2 state takes minutes (tables/stationary_bench.md)
    ("bounded-gelu-m2", "gelu", "sign-symmetric", "logistic", (None,), 2),
]


def main(argv):
    names = set(argv)
    started, t0 = now(), time.perf_counter()
    rows, lines = [], ["| setting | activation / link / loss | d | delta_alg | delta*(inf) | error bound | bracket | "
                       "separation | edge | outlier | overlap^2 | no state at | seconds |", "|---" * 13 + "|"]
    for name, act, link, loss, ds, width in SETTINGS:
        if names and name not in names:
            continue
        p = tk.Problem(act, link, loss, delta=5.0, eta=1.0, steps=10, width=width)
        da = p.analysis.delta_alg.value
        for d in ds:
            t1 = time.perf_counter()
            r = delta_star_infinity(p, d=d)
            sec = time.perf_counter() - t1
            bad = ", ".join(f"{k:.3g}" for k in sorted(r.states))
            rows.append(dict(setting=name, activation=act, link=link, loss=loss, width=width, d=d, delta_alg=da,
                             value=r.value,
                             error_bound=r.error_bound, bracket_lo=r.bracket[0], bracket_hi=r.bracket[1],
                             separation=r.separation,
                             edge=r.edge, outlier=r.outlier, overlap2=r.overlap2, no_state=bad, error=r.error,
                             seconds=sec))
            val = f"{r.value:.4f}" if math.isfinite(r.value) else f"— ({r.error})"
            lines.append(f"| {name} | {act} / {link} / {loss} | {d if d else '∞ (no truncation)'} | "
                         f"{da if da is None else f'{da:.4g}'} | {val} | {r.error_bound:.2g} | "
                         f"[{r.bracket[0]:.4g}, {r.bracket[1]:.4g}] | {r.separation:.4f} | {r.edge:.4g} | "
                         f"{r.outlier:.4g} | "
                         f"{r.overlap2:.3g} | {bad or '-'} | {sec:.0f} |")
            print(lines[-1], flush=True)
    header = ["delta*(infinity): the smallest delta at which the Hessian at the DMFT's stationary state (GD converged, "
              "no hard overlap; docs/theory.md §3.4) has a negative hard outlier below its bulk (docs/theory.md §5); "
              "separation: where that outlier first leaves the bulk (at a positive eigenvalue, since the bulk's edge "
              "is >= 0 at a converged state); width 1 unless the name ends in -m2, "
              "eta irrelevant (the state forgets it).  d: the law truncated at its 1/n quantile, n = delta d (needed "
              "where D is unbounded below; at the stationary state the law has a left edge, the support check "
              "re-solving each proximal point, so no truncation is needed).  'no state at': grid deltas below the "
              "interpolation threshold (the limit "
              "depends on the initialisation)."]
    return write_study("delta_star_infinity", __file__, argv, rows, lines,
                       title="delta*(infinity) from the stationary state",
                       header=header, started=started, t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
