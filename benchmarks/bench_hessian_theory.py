"""Benchmark: the Hessian theory's speed (issue 12 point 7; docs/theory.md §4-5), at the accuracy the validation
table uses.  Not a test: it prints a table and writes it to tables/hessian_bench.md (and .csv) with the command that
made it.

(a) The outlier/edge solve for one law, :func:`theorykit.spectra.hessian.hessian_prediction`, on the DMFT's PathLaw
    (GeLU, y = z^2, square loss, delta = 10, eta = 1, t = 50, the dmft defaults' paths and replicas) for m = 1 (the
    classic scalar core, and the m x m continuation forced) and m = 2 (a = [1, 1], the continuation); each on the raw
    n -> infinity law and on the law truncated at n = delta d (d = 1000).  Target <= 1 s each.  Median of --repeats
    runs, the residual evaluations (pred.evaluations; 0 for the classic core, which does not count them), and a floor
    measured in the same run: one streaming pass over the law's D array (np.sum, median of 20) x the evaluations --
    each residual evaluation of the continuation reads every path at least once, so no solver that evaluates the
    residual that many times can be faster than that.
(b) delta*(t), :func:`theorykit.thresholds.delta_star` with its defaults (THRESHOLD_PATHS paths in THRESHOLD_REPLICAS
    replicas, THRESHOLD_REFINE regula-falsi solves per t): GeLU, logistic loss, y = sign-symmetric, eta = 1,
    delta_range (2, 12), 6 grid points; m = 1 for t in [0, 25, 50, 100, 200] (target <= 2 min) and m = 2 (a = [1, 1])
    for t in [0, 25, 50, 100] (target <= 5 min).  --setting phase-retrieval runs GeLU / z^2 / square with d = 1000
    instead.  The time is split by instrumenting thresholds' dmft_scan, dmft, law_at and hessian_prediction (call
    counts and seconds; the DMFT solves' final times T are recorded), and --profile adds cProfile's top functions.

    python benchmarks/bench_hessian_theory.py [--part a|b|all] [--repeats 5] [--setting bounded|phase-retrieval]
                                              [--only-m 1|2] [--profile] [--out tables/hessian_bench.md]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

import numpy as np

import theorykit as tk
from theorykit import defaults
from theorykit import thresholds as th
from theorykit.errors import TheorykitError
from theorykit.report.writer import check_table_writable, now, regenerate_command, table_stem, write_table
from theorykit.spectra.hessian import hessian_prediction

TARGET_A = 1.0
TARGETS_B = {1: 120.0, 2: 300.0}
TIMES_B = {1: [0, 25, 50, 100, 200], 2: [0, 25, 50, 100]}


def _median_time(fn, repeats):
    ts, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), ts, out


# ------------------------------------------------------------------------------------------------ (a)
def part_a(args):
    rows = []
    for m in (1, 2):
        if args.only_m and m != args.only_m:
            continue
        p = tk.Problem("gelu", "z**2", "square", m, a=1, delta=10.0, eta=1.0, steps=50)
        t = time.perf_counter()
        res = tk.dmft(p, keep_law_at=[50], bias_check=False, paths=args.paths_a, replicas=args.replicas_a, seed=0)
        t_dmft = time.perf_counter() - t
        print(f"(a) m = {m}: DMFT to t = 50 ({args.paths_a} paths, {args.replicas_a} replicas) {t_dmft:.1f} s, "
              f"status {res.status}", flush=True)
        for label, law in (("raw", th.law_at(res, 50)), ("n = 10^4 (d = 1000)", th.law_at(res, 50, d=1000))):
            solvers = ["auto", "continuation"] if m == 1 else ["auto"]
            t_pass = _median_time(lambda: np.sum(law.D), 20)[0]
            for solver in solvers:
                hessian_prediction(law, solver=solver)  # warm-up (imports, caches)
                med, ts, pred = _median_time(lambda: hessian_prediction(law, solver=solver), args.repeats)
                ev = pred.evaluations
                kind = "classic scalar core" if "classic" in pred.method else "m x m continuation"
                rows.append(dict(m=m, law=label, solver=kind, paths=len(law.weights), median=med, runs=ts,
                                 evaluations=ev, t_pass=t_pass, floor=(ev * t_pass if ev else None),
                                 edge=pred.edge, outliers=len(pred.outliers), spikes=len(getattr(pred, "spikes", ())),
                                 ok=med <= TARGET_A))
                r = rows[-1]
                print(f"    {label:20s} {kind:20s} N = {r['paths']:6d}: median {med * 1e3:8.1f} ms "
                      f"({', '.join(f'{x * 1e3:.0f}' for x in ts)}), {ev} evaluations, floor "
                      f"{(ev * t_pass * 1e3) if ev else float('nan'):.2f} ms (pass {t_pass * 1e6:.0f} us), edge "
                      f"{pred.edge:.6g}, {len(pred.outliers)} outliers", flush=True)
    return rows


# ------------------------------------------------------------------------------------------------ (b)
class Instrument:
    """Count calls and seconds of thresholds' dmft_scan, dmft, law_at and hessian_prediction (module attributes
    swapped for timed wrappers, restored on exit); dmft's final times T are recorded."""

    NAMES = ("dmft_scan", "dmft", "law_at", "hessian_prediction")

    def __init__(self):
        self.calls = {k: 0 for k in self.NAMES}
        self.seconds = {k: 0.0 for k in self.NAMES}
        self.dmft_T = []
        self._orig = {}

    def __enter__(self):
        for name in self.NAMES:
            fn = getattr(th, name)
            self._orig[name] = fn
            setattr(th, name, self._wrap(name, fn))
        return self

    def _wrap(self, name, fn):
        def timed(*a, **k):
            if name == "dmft":
                self.dmft_T.append(a[0].n_steps)
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.calls[name] += 1
                self.seconds[name] += time.perf_counter() - t
        return timed

    def __exit__(self, *exc):
        for name, fn in self._orig.items():
            setattr(th, name, fn)


def part_b(args):
    rows = []
    for m in (1, 2):
        if args.only_m and m != args.only_m:
            continue
        times = TIMES_B[m]
        if args.setting == "bounded":
            p = tk.Problem("gelu", "sign-symmetric", "logistic", m, a=1, delta=2.0, eta=1.0, steps=max(times))
            kw = dict(delta_range=(2.0, 12.0), points=6)
        else:
            p = tk.Problem("gelu", "z**2", "square", m, a=1, delta=2.0, eta=1.0, steps=max(times))
            kw = dict(delta_range=(2.0, 12.0), points=6, d=1000)
        p.analysis  # the link analysis (SymPy, a few s) is not part of the threshold search
        prof = cProfile.Profile() if args.profile else None
        err, res = None, []
        with Instrument() as ins:
            t = time.perf_counter()
            if prof:
                prof.enable()
            try:
                res = th.delta_star(p, times, **kw)
            except TheorykitError as e:
                err = str(e)
            finally:
                if prof:
                    prof.disable()
            wall = time.perf_counter() - t
        scan_solves = len(kw.get("deltas", ())) or kw["points"]
        row = dict(m=m, times=times, wall=wall, target=TARGETS_B[m], ok=(err is None and wall <= TARGETS_B[m]),
                   error=err, calls=dict(ins.calls), seconds=dict(ins.seconds), refine_T=list(ins.dmft_T),
                   scan_solves=scan_solves, results=[r.as_dict() for r in res], setting=args.setting, kw=kw)
        rows.append(row)
        other = wall - sum(ins.seconds[k] for k in ("dmft_scan", "dmft", "law_at", "hessian_prediction"))
        print(f"(b) m = {m}, t in {times}: {wall:.1f} s (target {TARGETS_B[m]:.0f} s) "
              f"{'OK' if row['ok'] else 'MISSED'}{'; error: ' + err if err else ''}", flush=True)
        print(f"    dmft_scan {ins.seconds['dmft_scan']:.1f} s ({scan_solves} solves to T = {max(times)}); "
              f"refinement dmft {ins.seconds['dmft']:.1f} s ({ins.calls['dmft']} solves, T = {ins.dmft_T}); "
              f"law_at {ins.seconds['law_at']:.1f} s ({ins.calls['law_at']} calls); hessian_prediction "
              f"{ins.seconds['hessian_prediction']:.1f} s ({ins.calls['hessian_prediction']} calls); other "
              f"{other:.1f} s", flush=True)
        for r in res:
            print(f"    t = {r.t:4d}: delta* = {r.value:.4f} +/- {r.stderr:.2g}  bracket [{r.bracket[0]:.4f}, "
                  f"{r.bracket[1]:.4f}]  outlier {r.outlier:.5g} < edge {r.edge:.5g}, overlap^2 {r.overlap2:.3g}")
        if prof:
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
            row["profile"] = s.getvalue()
            print(row["profile"])
    return rows


# ------------------------------------------------------------------------------------------------ table
#: the CSV's columns: part (a) one row per law and solver, part (b) one row per t of each delta*(t) scan
COLUMNS = ["part", "m", "law", "solver", "paths", "median_s", "evaluations", "floor_s", "outliers", "t", "delta_star",
           "stderr", "bracket_low", "bracket_high", "edge", "outlier", "overlap2", "wall_s", "target_s", "ok", "error"]


def csv_rows(rows_a, rows_b) -> list:
    """The measured numbers as CSV rows (COLUMNS)."""
    out = [{"part": "a", "m": r["m"], "law": r["law"], "solver": r["solver"], "paths": r["paths"],
            "median_s": r["median"], "evaluations": r["evaluations"], "floor_s": r["floor"], "edge": r["edge"],
            "outliers": r["outliers"], "ok": r["ok"]} for r in rows_a]
    for r in rows_b:
        common = {"part": "b", "m": r["m"], "wall_s": r["wall"], "target_s": r["target"], "ok": r["ok"],
                  "error": r["error"]}
        out += [dict(common, t=q["t"], delta_star=q["value"], stderr=q["stderr"], bracket_low=q["bracket"][0],
                     bracket_high=q["bracket"][1], edge=q["edge"], outlier=q["outlier"], overlap2=q["overlap2"])
                for q in r["results"]] or [common]
    return out


def markdown(rows_a, rows_b) -> list:
    """The Markdown body (lines) of the table."""
    lines = []
    if rows_a:
        lines += ["## (a) outlier/edge solve for one law (`hessian_prediction`), target <= 1 s",
                  "",
                  "DMFT PathLaw of GeLU / y = z^2 / square loss, delta = 10, eta = 1, t = 50 (dmft's default paths "
                  "and replicas).  Median of the runs; floor = one streaming pass over the law's D array (np.sum) x "
                  "the residual evaluations (the classic core does not count its evaluations).", "",
                  "| m | law | solver | paths | median (ms) | evaluations | floor (ms) | edge | outliers | <= 1 s |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in rows_a:
            fl = "-" if r["floor"] is None else f"{r['floor'] * 1e3:.2f}"
            lines.append(f"| {r['m']} | {r['law']} | {r['solver']} | {r['paths']} | {r['median'] * 1e3:.1f} | "
                         f"{r['evaluations'] or '-'} | {fl} | {r['edge']:.6g} | {r['outliers']} | "
                         f"{'yes' if r['ok'] else 'NO'} |")
        lines.append("")
    if rows_b:
        r0 = rows_b[0]
        name = ("GeLU / sign-symmetric / logistic" if r0["setting"] == "bounded" else
                "GeLU / z^2 / square, d = 1000")
        lines += ["## (b) delta*(t) (`thresholds.delta_star`), targets: m = 1 <= 2 min, m = 2 <= 5 min", "",
                  f"Setting {r0['setting']}: {name}, eta = 1, delta_range {r0['kw']['delta_range']}, "
                  f"{r0['kw']['points']} grid points, "
                  f"{th.THRESHOLD_PATHS} paths in {th.THRESHOLD_REPLICAS} replicas, {th.THRESHOLD_REFINE} "
                  "regula-falsi solves per t.  Seconds by part (instrumented): the scan's DMFT solves, the "
                  "refinement DMFT solves (each to its own t, innovations drawn to T = max t), building the laws "
                  "(law_at) and the Hessian "
                  "predictions.", "",
                  "| m | t | wall (s) | target (s) | met | scan DMFT (s, solves) | refine DMFT (s, solves) "
                  "| law_at (s, calls) | hessian_prediction (s, calls) |",
                  "|---|---|---:|---:|---|---:|---:|---:|---:|"]
        for r in rows_b:
            s, c = r["seconds"], r["calls"]
            lines.append(f"| {r['m']} | {', '.join(map(str, r['times']))} | {r['wall']:.1f} | {r['target']:.0f} | "
                         f"{'yes' if r['ok'] else 'NO'} | {s['dmft_scan']:.1f} ({r['scan_solves']}) | "
                         f"{s['dmft']:.1f} ({c['dmft']}) | {s['law_at']:.1f} ({c['law_at']}) | "
                         f"{s['hessian_prediction']:.1f} ({c['hessian_prediction']}) |")
        lines += ["", "delta*(t) found:", "", "| m | t | delta* | stderr | bracket | edge | outlier | overlap^2 |",
                  "|---|---:|---:|---:|---|---:|---:|---:|"]
        for r in rows_b:
            if r["error"]:
                lines.append(f"| {r['m']} | - | error: {r['error'][:200]} | | | | | |")
            for q in r["results"]:
                lines.append(f"| {r['m']} | {q['t']} | {q['value']:.4f} | {q['stderr']:.2g} | "
                             f"[{q['bracket'][0]:.4f}, {q['bracket'][1]:.4f}] | {q['edge']:.5g} | {q['outlier']:.5g} | "
                             f"{q['overlap2']:.3g} |")
        lines.append("")
    return lines


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=["a", "b", "all"], default="all")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--paths-a", type=int, default=defaults.DMFT_PATHS, help="DMFT paths of part (a)'s law")
    p.add_argument("--replicas-a", type=int, default=defaults.DMFT_REPLICAS)
    p.add_argument("--setting", choices=["bounded", "phase-retrieval"], default="bounded",
                   help="part (b): GeLU / sign-symmetric / logistic (default) or GeLU / z^2 / square with d = 1000")
    p.add_argument("--only-m", type=int, choices=[1, 2], default=None)
    p.add_argument("--profile", action="store_true", help="part (b): cProfile's top 25 functions by cumulative time")
    p.add_argument("--out", default="tables/hessian_bench.md",
                   help="the table, .md and .csv (stem, or its .md file; '-': do not write)")
    args = p.parse_args(argv)
    stem = None if args.out == "-" else table_stem(args.out)
    if stem:
        os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
        check_table_writable(stem)
    t0, started = time.perf_counter(), now()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows_a = part_a(args) if args.part in ("a", "all") else []
    rows_b = part_b(args) if args.part in ("b", "all") else []
    md = markdown(rows_a, rows_b)
    if stem:
        files = write_table(stem, csv_rows(rows_a, rows_b), COLUMNS, md,
                            title="Hessian theory: speed (issue 12 point 7)",
                            command=regenerate_command("python benchmarks/bench_hessian_theory.py", argv),
                            started=started, wall=time.perf_counter() - t0,
                            timing=f"load average {os.getloadavg()[0]:.2f} at the end")
        print(f"wrote {', '.join(files)}")


if __name__ == "__main__":
    main()
