"""Benchmark of the finite-d prediction at width m >= 3 (issue 30 point 5: the finite-d answer at m = 4 in <= 10 min
on 2 cores).

Runs ``tk.finite_d`` as ``scripts/finite_d_wide.py`` does -- phase retrieval, square loss, GeLU, eta = 1, width 4
with a = +-1, horizon 200, d = 400 -- on a grid of two deltas with one root-finding step, and reports:

* the wall time against the goal;
* every DMFT solve it made, timed (the module's ``dmft`` wrapped): their number, their summed time (the floor of
  this method: everything else is bookkeeping), and the time of one solve;
* the brute-force alternative the anchors and the adaptive ladders replace: the width-2 construction's full ladder
  (16 rungs) on 12 anchors, at the measured cost per solve.

    python benchmarks/bench_finite_d_wide.py [--paths 16384] [--deltas 7,10] [--refine 1]

Results with their date and machine: tables/finite_d_wide_bench.md.
"""
from __future__ import annotations

import argparse
import time

import theorykit as tk
from theorykit.thresholds import capture


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", type=int, default=16384)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--deltas", default="7,10")
    ap.add_argument("--refine", type=int, default=1)
    ap.add_argument("--d", type=int, default=400)
    args = ap.parse_args()
    solves = []
    inner = capture.dmft

    def timed(*a, **k):
        t0 = time.perf_counter()
        r = inner(*a, **k)
        solves.append((time.perf_counter() - t0, r.settings.get("T", None)))
        return r

    capture.dmft = timed
    pr = tk.Problem("gelu", "phase-retrieval", "square", 4, a=[1, -1, 1, -1], delta=8.0, eta=1.0, steps=200)
    deltas = [float(v) for v in args.deltas.split(",")]
    t0 = time.perf_counter()
    try:
        fd = tk.finite_d(pr, deltas, [args.d], 200, paths=args.paths, replicas=args.replicas, refine=args.refine)
    finally:
        capture.dmft = inner
    wall = time.perf_counter() - t0
    total = sum(s for s, _ in solves)
    per = total / max(len(solves), 1)
    mp = fd.midpoints[0]
    print(f"width 4 (a = +-1), GeLU, phase retrieval, d = {args.d}, horizon 200, {args.paths} paths in "
          f"{args.replicas} replicas, deltas {deltas} + {args.refine} root-finding step(s): {wall / 60:.1f} min "
          f"(goal <= 10 min); {len(solves)} DMFT solves over {len(fd.deltas)} deltas, {total / 60:.1f} min in them "
          f"({per:.1f} s each on average; the floor of this method); midpoint {mp['midpoint']:.2f} "
          f"[{mp['band'][0]:.2f}, {mp['band'][1]:.2f}].  Brute force (16-rung ladders on 12 anchors per delta, the "
          f"width-2 construction): {len(fd.deltas) * (16 * 12 + 1) * per / 60:.0f} min.", flush=True)


if __name__ == "__main__":
    main()
