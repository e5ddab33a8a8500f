#!/usr/bin/env python
"""How often full-batch GD itself diverges, and whether it escapes first: sigma = x + x^2/2 on phase retrieval,
square loss, eta = 0.5, width 1 (the setting of issue 28 point 5 where the finite-d DMFT diverges at every delta).

    python scripts/gd_divergence_check.py   # writes tables/gd_divergence_check.{md,csv}

For each (d, delta) and seed: ``theorykit.simulate`` from the random start to the horizon; the run's status
("diverged" with its step, or "ok"), its escape time (first t with cos^2 > 1/2, GD's success statistic) and whether
it escaped before diverging.  Seeds 0..S-1 of numpy.random.default_rng, as ``theorykit simulate --seed``.
"""
from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import theorykit as tk
from theorykit.report.writer import now, regenerate_command, script_prog, write_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTING = dict(activation="x + x**2/2", link="phase-retrieval", loss="square", width=1, eta=0.5)
HORIZON = 200
# (d, delta, seeds)
CELLS = [(400, 1.0, 8), (400, 2.5, 8), (400, 5.0, 8), (400, 6.5, 8), (400, 8.0, 24), (400, 9.0, 24), (400, 10.0, 24),
         (800, 9.0, 12), (1600, 9.0, 8)]


def one(job):
    d, delta, seed = job
    r = tk.simulate(**SETTING, delta=delta, steps=HORIZON, d=d, seed=seed, threads=1)
    div = None if r.diverged_at is None else int(r.diverged_at["step"])
    return d, delta, seed, div, r.escape_time


def main(argv=()):
    t0, started = time.perf_counter(), now()
    jobs = [(d, dl, s) for d, dl, S in CELLS for s in range(S)]
    with ProcessPoolExecutor(2) as ex:
        out = list(ex.map(one, jobs))
    rows, lines = [], ["| d | δ | seeds | diverged by t = 200 | of them escaped first | escaped by 200 (GD's success) "
                       "| median divergence step | median escape time |", "|---|---|---|---|---|---|---|---|"]
    for d, dl, S in CELLS:
        cell = [o for o in out if o[0] == d and o[1] == dl]
        div = [o for o in cell if o[3] is not None]
        first = [o for o in div if o[4] is not None and o[4] < o[3]]
        esc = [o for o in cell if o[4] is not None]
        rows += [dict(d=d, delta=dl, seed=o[2], diverged_at=o[3], escape_time=o[4]) for o in cell]
        med = lambda v: f"{np.median(v):.0f}" if v else "—"  # noqa: E731
        lines.append(f"| {d} | {dl:g} | {S} | {len(div)} | {len(first)} | {len(esc)} | {med([o[3] for o in div])} | "
                     f"{med([o[4] for o in esc])} |")
    head = [f"σ = x + x²/2, phase retrieval y = z², square loss, η = 0.5, width 1, random start, horizon {HORIZON}.",
            "A run 'diverged' when theorykit.simulate stopped it (loss not finite or above its limit); "
            "'escaped' = cos² > ½ (GD's success statistic) at some t ≤ 200 before any divergence.", ""]
    write_table(os.path.join(ROOT, "tables", "gd_divergence_check"), rows,
                ["d", "delta", "seed", "diverged_at", "escape_time"], lines,
                title="GD's own divergence: x + x²/2 on phase retrieval, η = 0.5",
                command=regenerate_command(script_prog(__file__, ROOT), argv), started=started,
                wall=time.perf_counter() - t0, header=head, root=ROOT)
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
