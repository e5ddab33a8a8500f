"""Benchmark: delta_NN's speed and the long-time DMFT's accuracy (issue 13 point 5; docs/theory.md §3 numerics, §5).
Not a test: it prints a table and writes it to tables/delta_nn_bench.md and .csv with the command that made it.

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

    python benchmarks/bench_delta_nn.py [--part a|b|all] [--T 1000] [--out tables/delta_nn_bench]
"""
from __future__ import annotations

import argparse
import sys
import time

import theorykit as tk
from theorykit import thresholds as th
from theorykit.dynamics import plan as dplan
from theorykit.report.writer import check_table_writable, md_table, now, regenerate_command, table_stem, write_table

TARGET_B = 600.0


def part_a():
    pr = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=8.0, eta=1.0, steps=400)
    opts = dict(paths=16384, replicas=4, hard_process=False, response="direct")
    cols = [("every source, whole batch", dict(fine_lags=None, response_paths=4096), 4e9),
            ("every source, memory cap", dict(fine_lags=None), None),
            (f"dyadic W = {dplan.DYADIC_FINE_LAGS}, whole batch", dict(fine_lags="auto"), None),
            (f"dyadic W = {dplan.DYADIC_FINE_LAGS}, whole batch, with the bias check", dict(fine_lags="auto",
                                                                                           bias_check=True), None)]
    rows = []  # one dict of the measured numbers per estimator (the CSV rows)
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
        rows.append({"part": "a", "estimator": name,
                     "response_paths_per_replica": r.settings["response_paths_per_replica"],
                     "fine_lags": r.settings["fine_lags"], "gram": float(r.gram[-1, 0, 0]),
                     "gram_se": float(r.stderr["gram"][-1, 0, 0]), "train_loss": float(r.train_loss[-1]),
                     "train_loss_se": float(r.stderr["train_loss"][-1]), "test_loss": float(r.test_loss[-1]),
                     "test_loss_se": float(r.stderr["test_loss"][-1]), "lambda_min_q1e-3": float(r.D_tail[-1, 3]),
                     "gram_bias": float(r.bias["gram"][-1, 0, 0]) if r.bias else None, "seconds": sec})
        print(" | ".join(str(v) for v in cells_a(rows[-1])), flush=True)
    return rows


def cells_a(r) -> list:
    """The Markdown cells of a part (a) row."""
    return [r["estimator"], r["response_paths_per_replica"], r["fine_lags"], f"{r['gram']:.4f} ± {r['gram_se']:.4f}",
            f"{r['train_loss']:.5f} ± {r['train_loss_se']:.5f}", f"{r['test_loss']:.5f} ± {r['test_loss_se']:.5f}",
            f"{r['lambda_min_q1e-3']:.4f}", (f"{r['gram_bias']:+.4f}" if r["gram_bias"] is not None else "—"),
            f"{r['seconds']:.1f}"]


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


COLUMNS = ["part", "estimator", "response_paths_per_replica", "fine_lags", "gram", "gram_se", "train_loss",
           "train_loss_se", "test_loss", "test_loss_se", "lambda_min_q1e-3", "gram_bias", "t", "delta_star",
           "delta_star_se", "edge", "delta_nn", "delta_nn_se", "converged", "T", "seconds", "seconds_scan",
           "solves_T", "seconds_refine", "solves_short"]


def table(rows_a, part_b_result, T):
    """(CSV rows, Markdown body) of the measured parts: rows_a from part_a (or None), part_b_result = part_b's
    (result, wall, spent) (or None)."""
    rows, md = [], []
    if rows_a is not None:
        md.append("## (a) One long solve, three response estimators (bounded, delta = 8, T = 400, same paths)\n")
        hdr = ["estimator", "response paths / replica", "fine_lags", "Theta^T Theta ± se", "train loss ± se",
               "test loss ± se", "1e-3 quantile of lambda_min(D)", "bias of Theta^T Theta (half paths - all)",
               "seconds"]
        md += [md_table(hdr, [cells_a(r) for r in rows_a]), ""]
        rows += rows_a
    if part_b_result is not None:
        r, wall, spent = part_b_result
        md.append(f"## (b) delta_NN, bounded setting, m = 1, T = {T}\n")
        md.append(f"* Wall time {wall:.0f} s (target {TARGET_B:.0f} s): {'met' if wall <= TARGET_B else 'NOT met'}. "
                  f"Solves to T: {spent['solves_T']} ({spent['scan']:.0f} s); shorter refinement solves: "
                  f"{spent['solves_short']} ({spent['refine']:.0f} s).")
        md.append(f"* delta_NN = {r.value:.3f} ± {r.stderr:.3f}, converged: {r.converged}. {r.note}.")
        md.append("* Sequence (t: delta*(t) ± se, edge): " + "; ".join(
            f"{q.t}: {q.value:.3f} ± {q.stderr:.3f}, {q.edge:.4f}" for q in r.sequence) + ".")
        md.append("")
        common = {"part": "b", "delta_nn": float(r.value), "delta_nn_se": float(r.stderr), "converged": r.converged,
                  "T": T, "seconds": wall, "seconds_scan": spent["scan"], "solves_T": spent["solves_T"],
                  "seconds_refine": spent["refine"], "solves_short": spent["solves_short"]}
        rows += [dict(common, t=q.t, delta_star=float(q.value), delta_star_se=float(q.stderr), edge=float(q.edge))
                 for q in r.sequence]
    return rows, md


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", default="all", choices=["a", "b", "all"])
    ap.add_argument("--T", type=int, default=1000)
    ap.add_argument("--out", default="tables/delta_nn_bench.md", help="the table (stem, or its .md or .csv file)")
    args = ap.parse_args(argv)
    stem = table_stem(args.out)
    check_table_writable(stem)
    t0, started = time.perf_counter(), now()
    rows_a = part_a() if args.part in ("a", "all") else None
    part_b_result = part_b(args.T) if args.part in ("b", "all") else None
    rows, md = table(rows_a, part_b_result, args.T)
    files = write_table(stem, rows, COLUMNS, md, title="delta_NN benchmark (issue 13 point 5)",
                        command=regenerate_command("python benchmarks/bench_delta_nn.py",
                                                   sys.argv[1:] if argv is None else argv),
                        started=started, wall=time.perf_counter() - t0)
    print(f"wrote {', '.join(files)}")


if __name__ == "__main__":
    main()
