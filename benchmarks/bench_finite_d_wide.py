"""Benchmark of the finite-d prediction at width m >= 3 (issue 30 point 5: the finite-d answer at m = 4 in <= 10 min
on 2 cores).

Runs ``tk.finite_d`` as ``scripts/finite_d_wide.py`` does -- phase retrieval, square loss, GeLU, eta = 1, width 4
with a = +-1, horizon 200, d = 400 -- on a grid of two deltas with one root-finding step, and reports:

* the wall time against the goal;
* every DMFT solve it made, timed (the module's ``dmft`` wrapped): their number, their summed time (the floor of
  this method: everything else is bookkeeping), and the time of one solve;
* the brute-force alternative the anchors and the bracket search replace: the width-2 construction's full ladder
  (16 rungs) on 12 anchors, at the measured cost per solve.

    python benchmarks/bench_finite_d_wide.py [--paths 16384] [--deltas 7,10] [--refine 1] [--default-grid]
        [--out tables/finite_d_wide_bench.md]

--default-grid adds a second row: what `theorykit threshold ... --width 4 --a=1,-1,1,-1 --d 400 --horizon 200` does
without --horizon-deltas (the command's own grid, THRESHOLD_POINTS deltas over THRESHOLD_DELTA_RANGE, searched by
bisection, and finite_d's default root finding).  With --out it writes that table (and its CSV) with the command, the
date and the machine.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

import theorykit as tk
from theorykit.report.writer import check_table_writable, now, regenerate_command, table_stem, write_table
from theorykit.thresholds import capture


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", type=int, default=16384)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--deltas", default="7,10")
    ap.add_argument("--refine", type=int, default=1)
    ap.add_argument("--d", type=int, default=400)
    ap.add_argument("--default-grid", action="store_true", dest="default_grid",
                    help="also time the threshold command's own grid (bisection) with the default root finding")
    ap.add_argument("--out", default=None, help="Markdown table to write (default: print only)")
    args = ap.parse_args()
    if args.out:
        check_table_writable(table_stem(args.out))
    started = now()
    solves = []
    inner = capture.dmft

    def timed(*a, **k):
        t0 = time.perf_counter()
        r = inner(*a, **k)
        solves.append((time.perf_counter() - t0, r.settings.get("T", None)))
        return r

    capture.dmft = timed
    pr = tk.Problem("gelu", "phase-retrieval", "square", 4, a=[1, -1, 1, -1], delta=8.0, eta=1.0, steps=200)
    runs = [("given", [float(v) for v in args.deltas.split(",")], args.refine, "grid")]
    if args.default_grid:
        from theorykit.thresholds import THRESHOLD_DELTA_RANGE, THRESHOLD_POINTS

        runs.append(("threshold's own", [float(v) for v in np.geomspace(*THRESHOLD_DELTA_RANGE, THRESHOLD_POINTS)],
                     3, "bisect"))
    rows, lines, t_all = [], [], time.perf_counter()
    for name, deltas, refine, scan in runs:
        solves.clear()
        t0 = time.perf_counter()
        try:
            fd = tk.finite_d(pr, deltas, [args.d], 200, paths=args.paths, replicas=args.replicas, refine=refine,
                             scan=scan)
        except BaseException:
            capture.dmft = inner
            raise
        wall = time.perf_counter() - t0
        total = sum(s for s, _ in solves)
        per = total / max(len(solves), 1)
        mp = fd.midpoints[0]
        brute = len(fd.deltas) * (16 * 12 + 1) * per
        # with a midpoint, a NaN end of its band lies beyond the delta grid (finite_d's note)
        found = math.isfinite(mp["midpoint"])
        lo_s = (f"< {min(fd.deltas):g}" if found and not math.isfinite(mp["band"][0])
                else format(mp["band"][0], ".2f"))
        hi_s = (f"> {max(fd.deltas):g}" if found and not math.isfinite(mp["band"][1])
                else format(mp["band"][1], ".2f"))
        grid = " ".join(f"{x:.3g}" for x in deltas)
        print(f"width 4 (a = +-1), GeLU, phase retrieval, d = {args.d}, horizon 200, {args.paths} paths in "
              f"{args.replicas} replicas (the ladders in 2), {name} grid [{grid}] ({scan}) + up to {refine} "
              f"root-finding step(s): {wall / 60:.1f} min (goal <= 10 min); {len(solves)} DMFT solves over "
              f"{len(fd.deltas)} deltas, {total / 60:.1f} min in them ({per:.1f} s each on average; the floor of this "
              f"method); midpoint {mp['midpoint']:.2f} [{lo_s}, {hi_s}].  Brute force "
              f"(16-rung ladders on 12 anchors per delta, the width-2 construction): {brute / 60:.0f} min.",
              flush=True)
        rows.append(dict(d=args.d, paths=args.paths, replicas=args.replicas, grid=grid, scan=scan,
                         deltas=" ".join(f"{x:.4g}" for x in fd.deltas), refine=refine, wall_min=wall / 60,
                         solves=len(solves), solve_min=total / 60, per_solve_s=per, midpoint=mp["midpoint"],
                         band_low=mp["band"][0], band_high=mp["band"][1], brute_min=brute / 60))
        lines.append(f"| {args.d} | {name}: {grid} ({scan}), up to {refine} root-finding step(s) | "
                     f"{rows[-1]['deltas']} | {wall / 60:.1f} min | {len(solves)} | {total / 60:.1f} min | "
                     f"{per:.1f} s | {mp['midpoint']:.2f} [{lo_s}, {hi_s}] | {brute / 60:.0f} min |")
        method = fd.method
    capture.dmft = inner
    if args.out:
        body = ["| d | grid | deltas solved | wall (goal 10 min) | DMFT solves | in the solves | per solve | "
                "midpoint [band] | brute force (16 rungs x 12 anchors) |", "|---|---|---|---|---|---|---|---|---|",
                *lines, "", f"Method (last row): {method}"]
        write_table(table_stem(args.out), rows, list(rows[0]), body,
                    title="The finite-d prediction at width 4: wall time",
                    command=regenerate_command("python benchmarks/bench_finite_d_wide.py", sys.argv[1:]),
                    started=started, wall=time.perf_counter() - t_all)


if __name__ == "__main__":
    main()
