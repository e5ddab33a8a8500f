"""Benchmark: delta_NN's speed and the long-time DMFT's accuracy (issue 13 point 5; docs/theory.md §3 numerics, §5).
Not a test: it prints a table and writes it to tables/delta_nn_bench.md with the command that made it.

(a) Accuracy of one long solve, same seed and paths in every column (bounded setting: GeLU, logistic loss,
    y = sign(|z| - median|z|), eta = 1, delta = 8, T = 400, 16384 paths in 4 replicas, direct responses).  Three
    estimators:
    - every source time on the whole batch (4096 response paths per replica; the memory cap raised for this
      column only);
    - the same on the 1024 paths that fit in RESPONSE_MEMORY (what the scan used before the dyadic grid);
    - the dyadic source grid, W = DYADIC_FINE_LAGS, on the whole batch (the default now).
    For each: Theta^T Theta, the train and test losses at T with their replica standard errors, the bottom 1e-3
    quantile of lambda_min(D), and the wall time; a fourth column repeats the dyadic solve with dmft's bias check
    (as many replicas with half the paths: their mean minus the reported one estimates the finite-path bias).
(b) delta_NN with its evidence, :func:`theorykit.thresholds.delta_nn` for the bounded setting, m = 1, T = --T
    (default 1000), 6 geometric times from t = 25, deltas 6 log-spaced in (4, 12), the threshold defaults otherwise
    (16384 paths in 4 replicas, 2 regula-falsi solves per t).  Target <= 10 min (aim 2), with the wall time split
    into the full-horizon scan solves and the refinements.

    python benchmarks/bench_delta_nn.py [--part a|b|all] [--T 1000] [--out tables/delta_nn_bench.md]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

import theorykit as tk
from theorykit import thresholds as th
from theorykit.dynamics import plan as dplan

TARGET_B = 600.0


def part_a():
    pr = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=8.0, eta=1.0, steps=400)
    opts = dict(paths=16384, replicas=4, hard_process=False, response="direct")
    cols = [("every source, whole batch", dict(fine_lags=None, response_paths=4096), 4e9),
            ("every source, memory cap", dict(fine_lags=None), None),
            (f"dyadic W = {dplan.DYADIC_FINE_LAGS}, whole batch", dict(fine_lags="auto"), None),
            (f"dyadic W = {dplan.DYADIC_FINE_LAGS}, whole batch, with the bias check", dict(fine_lags="auto",
                                                                                           bias_check=True), None)]
    rows = []
    for name, extra, mem in cols:
        saved = dplan.RESPONSE_MEMORY
        if mem:
            dplan.RESPONSE_MEMORY = mem
        try:
            t0 = time.perf_counter()
            r = tk.dmft(pr, **{"bias_check": False, **opts, **extra})
            sec = time.perf_counter() - t0
        finally:
            dplan.RESPONSE_MEMORY = saved
        rows.append([name, r.settings["response_paths_per_replica"], r.settings["fine_lags"],
                     f"{r.gram[-1, 0, 0]:.4f} ± {r.stderr['gram'][-1, 0, 0]:.4f}",
                     f"{r.train_loss[-1]:.5f} ± {r.stderr['train_loss'][-1]:.5f}",
                     f"{r.test_loss[-1]:.5f} ± {r.stderr['test_loss'][-1]:.5f}", f"{r.D_tail[-1, 3]:.4f}",
                     (f"{r.bias['gram'][-1, 0, 0]:+.4f}" if r.bias else "—"), f"{sec:.1f}"])
        print(" | ".join(str(v) for v in rows[-1]), flush=True)
    return rows


def part_b(T):
    pr = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=4.0, eta=1.0, steps=T)
    spent = {"scan": 0.0, "refine": 0.0, "solves_T": 0, "solves_short": 0}
    real = th.dmft

    def timed(problem, **kw):
        t0 = time.perf_counter()
        out = real(problem, **kw)
        full = problem.steps == T
        spent["scan" if full else "refine"] += time.perf_counter() - t0
        spent["solves_T" if full else "solves_short"] += 1
        return out

    th.dmft = timed
    import theorykit.dynamics.scan as scan_mod
    real_scan = scan_mod.dmft
    scan_mod.dmft = timed
    try:
        t0 = time.perf_counter()
        r = th.delta_nn(pr, T, points_t=6, first_t=25, delta_range=(4.0, 12.0), points=6)
        wall = time.perf_counter() - t0
    finally:
        th.dmft, scan_mod.dmft = real, real_scan
    seq = ", ".join(f"{q.t}: {q.value:.3f} ± {q.stderr:.3f}" for q in r.sequence)
    print(f"delta_NN {r.value:.3f} ± {r.stderr:.3f}, converged {r.converged}; {seq}; {wall:.0f} s", flush=True)
    return r, wall, spent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", default="all", choices=["a", "b", "all"])
    ap.add_argument("--T", type=int, default=1000)
    ap.add_argument("--out", default="tables/delta_nn_bench.md")
    args = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    md = ["# delta_NN benchmark (issue 13 point 5)\n",
          f"Command (from the repository root): `python benchmarks/bench_delta_nn.py {' '.join(argv or sys.argv[1:])}`"
          .rstrip() + "\n",
          f"Date: {started}. Machine: {platform.machine()}, {os.cpu_count()} CPUs, NumPy {np.__version__}. "
          "Generated file; notes in tables/delta_nn_bench_notes.md.\n"]
    if args.part in ("a", "all"):
        md.append("## (a) One long solve, three response estimators (bounded, delta = 8, T = 400, same paths)\n")
        hdr = ["estimator", "response paths / replica", "fine_lags", "Theta^T Theta ± se", "train loss ± se",
               "test loss ± se", "1e-3 quantile of lambda_min(D)", "bias of Theta^T Theta (half paths - all)",
               "seconds"]
        rows = part_a()
        md += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
        md += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
        md.append("")
    if args.part in ("b", "all"):
        r, wall, spent = part_b(args.T)
        md.append(f"## (b) delta_NN, bounded setting, m = 1, T = {args.T}\n")
        md.append(f"* Wall time {wall:.0f} s (target {TARGET_B:.0f} s): {'met' if wall <= TARGET_B else 'NOT met'}. "
                  f"Solves to T: {spent['solves_T']} ({spent['scan']:.0f} s); shorter refinement solves: "
                  f"{spent['solves_short']} ({spent['refine']:.0f} s).")
        md.append(f"* delta_NN = {r.value:.3f} ± {r.stderr:.3f}, converged: {r.converged}. {r.note}.")
        md.append("* Sequence (t: delta*(t) ± se, edge): " + "; ".join(
            f"{q.t}: {q.value:.3f} ± {q.stderr:.3f}, {q.edge:.4f}" for q in r.sequence) + ".")
        md.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
