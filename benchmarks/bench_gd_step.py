"""Benchmark: the simulator's GD step against the physical floor, one read of X, measured in the same run.

    python benchmarks/bench_gd_step.py [--repeats 21] [--out tables/gd_step_bench.md]

The step is memory-bound (m <= 8 columns: 2m flops per 8 bytes of X), so its floor is one streaming read of X
(n x d float64), timed here as a row sum by the fused kernel's own threads (numba, every core).  For each shape it times, interleaved round
by round so that a busy neighbour slows every column alike:

* floor: one read of X;
* fused step: ``FusedStep.step`` (theorykit/referee/_fused.py), one pass over X: loss sum and X^T F;
* numpy step: ``net.evaluate(X @ theta, y)`` and ``X.T @ F``, the kernel="numpy" path;
* matmuls alone: ``X @ theta`` + ``X.T @ F`` with NumPy's BLAS (no evaluation);
* whole simulate() iteration per step (fused and numpy; test loss on n_test = n fresh samples, so two matrices
  are read: its floor is two reads), from two runs of different length (their difference / the extra steps).

It reports medians over the rounds (and the minimum), and the ratio of each to the floor (goal: fused step <= 2x).
Then both kernels run the same --seeds seeds near a threshold (success fractions and equal escape times).
Setting: gelu, phase retrieval, square loss.
"""
import argparse
import os
import sys
import time

import numpy as np

SHAPES = [(6000, 1000, 4), (6000, 1000, 1), (6000, 1000, 2), (16000, 1000, 2), (4000, 400, 1)]


def _floor_kernel():
    """One streaming read of X by the same threads as the fused kernel (its thread pool, the same row chunks), so
    that the floor and the step are measured alike (a numba parallel region or BLAS leaves threads spinning that
    would slow the next measurement)."""
    import numba

    from theorykit.referee._fused import CHUNKS, _pool, available_threads

    @numba.njit(nogil=True, fastmath=True)
    def rows_sum(X, out, i0, i1):
        d = X.shape[1]
        for i in range(i0, i1):
            s = 0.0
            for j in range(d):
                s += X[i, j]
            out[i] = s

    def read_once(X):
        n = X.shape[0]
        out = np.empty(n)
        workers = available_threads()
        bounds = [round(w * n / workers) for w in range(workers + 1)]
        list(_pool(workers).map(lambda w: rows_sum(X, out, bounds[w], bounds[w + 1]), range(workers)))
        return out

    del CHUNKS
    return read_once


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=21, help="interleaved rounds per shape (default 21)")
    p.add_argument("--out", default=None, help="Markdown table to write (default: print only)")
    p.add_argument("--no-full", action="store_true", help="skip the whole-iteration timing")
    p.add_argument("--seeds", type=int, default=64, help="seeds of the kernels' agreement check (0: skip)")
    args = p.parse_args(argv)

    import theorykit as tk
    from theorykit.referee._fused import fused_kernel

    read_once = _floor_kernel()
    rows = []
    for n, d, m in SHAPES:
        net = tk.Network("gelu", "square", m)
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, d))
        y = X[:, 0] ** 2
        theta = rng.standard_normal((d, m)) / np.sqrt(d)
        F = rng.standard_normal((n, m))
        fused, why = fused_kernel(net)
        if fused is None:
            sys.exit(f"fused kernel not available: {why}")
        cols = {"floor": lambda: read_once(X), "fused": lambda: fused.step(X, y, theta),
                "numpy": lambda: X.T @ net.evaluate(X @ theta, y).F, "matmuls": lambda: (X @ theta, X.T @ F)}
        for fn in cols.values():
            fn()  # warm up (compilation, lambdify caches)
        times = {k: [] for k in cols}
        ratios = {"fused": [], "numpy": []}
        for _ in range(args.repeats):
            for k, fn in cols.items():
                times[k].append(timed(fn))
            # the ratio within the round: this VM's bandwidth drifts by tens of percent between rounds, so each step
            # is divided by the floor measured next to it (before and after), and the median of those ratios is kept
            after = timed(cols["floor"])
            for k in ratios:
                ratios[k].append(times[k][-1] / (0.5 * (times["floor"][-1] + after)))
        med = {k: float(np.median(v)) for k, v in times.items()}
        low = {k: float(np.min(v)) for k, v in times.items()}
        row = {"n": n, "d": d, "m": m, **{f"{k}_ms": 1e3 * med[k] for k in cols},
               **{f"{k}_min_ms": 1e3 * low[k] for k in cols},
               "fused_over_floor": float(np.median(ratios["fused"])),
               "fused_over_floor_iqr": [float(v) for v in np.percentile(ratios["fused"], [25, 75])],
               "numpy_over_floor": float(np.median(ratios["numpy"]))}
        if not args.no_full:
            for kernel in ("fused", "numpy"):
                kw = dict(delta=n / d, d=d, eta=1e-3, n_test=n, seed=0, kernel=kernel)
                tk.simulate("gelu", "phase-retrieval", "square", m, steps=1, **kw)  # warm up (symbolic set-up)
                short = timed(lambda: tk.simulate("gelu", "phase-retrieval", "square", m, steps=5, **kw))
                long_ = timed(lambda: tk.simulate("gelu", "phase-retrieval", "square", m, steps=45, **kw))
                row[f"iter_{kernel}_ms"] = 1e3 * (long_ - short) / 40
            row["iter_fused_over_floor2"] = row["iter_fused_ms"] / (2 * row["floor_ms"])
        rows.append(row)
        print(f"n={n} d={d} m={m}: floor {row['floor_ms']:.2f} ms, fused {row['fused_ms']:.2f} "
              f"({row['fused_over_floor']:.2f}x), numpy {row['numpy_ms']:.2f} ({row['numpy_over_floor']:.2f}x), "
              f"matmuls {row['matmuls_ms']:.2f}" + ("" if args.no_full else
              f"; simulate per step: fused {row['iter_fused_ms']:.2f}, numpy {row['iter_numpy_ms']:.2f}"),
              flush=True)
    agree = None if args.seeds == 0 else _agreement(args.seeds)
    if args.out:
        _write(args, rows, agree)


def _agreement(seeds):
    """Both kernels over the same seeds near a threshold (bounded setting, GD's escape is chaotic in the initial
    condition there): success counts, and in how many runs the escape time is the same."""
    import theorykit as tk

    kw = dict(activation="gelu", link="sign-symmetric", loss="logistic", width=1, d=300, steps=400, eta=1.0,
              processes=1)
    out = {"setting": "gelu, sign-symmetric, logistic, m = 1, d = 300, delta = 8, 400 steps", "seeds": seeds}
    t0 = time.perf_counter()
    runs = {k: tk.sweep([8.0], range(seeds), kernel=k, **kw) for k in ("fused", "numpy")}
    out["seconds"] = time.perf_counter() - t0
    for k, df in runs.items():
        out[k] = int(df["success"].sum())
    a, b = runs["fused"]["escape_time"].to_numpy(), runs["numpy"]["escape_time"].to_numpy()
    out["same_escape"] = int(np.sum((a == b) | (np.isnan(a) & np.isnan(b))))
    print(f"{seeds} seeds: successes fused {out['fused']}, numpy {out['numpy']}; same escape time in "
          f"{out['same_escape']} runs", flush=True)
    return out


def _write(args, rows, agree):
    import platform

    cmd = "python benchmarks/bench_gd_step.py" + "".join(f" {a}" for a in (sys.argv[1:] or []))
    lines = [f"# The simulator's GD step against one read of X", "",
             f"Regenerate: `{cmd}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."
             f" Medians over {args.repeats} interleaved rounds (min in brackets), ms. gelu, phase retrieval, square loss.",
             "floor = one streaming read of X (n x d float64, a row sum by the fused kernel's threads); fused = theorykit's one-pass step "
             "(kernel=\"fused\"); numpy = evaluate + two matmuls (kernel=\"numpy\"); matmuls = X @ Theta + X^T F alone. "
             "simulate per step: a whole recorded iteration (with the test loss on n_test = n fresh samples: two "
             "matrices read, floor 2x).  fused / floor and numpy / floor: the median over the rounds of the step's "
             "time over the floor measured next to it (the mean of a read just before and just after), with the "
             "quartiles of that ratio for the fused step; this VM's memory bandwidth drifts by tens of percent "
             "between rounds, so a ratio of two medians taken apart is not reliable.", "",
             "| n | d | m | floor | fused step | fused / floor [quartiles] | numpy step | numpy / floor | matmuls alone |"
             + ("" if args.no_full else " simulate/step fused | numpy | fused / (2 floor) |"),
             "|---|---|---|---|---|---|---|---|---|" + ("" if args.no_full else "---|---|---|")]
    for r in rows:
        line = (f"| {r['n']} | {r['d']} | {r['m']} | {r['floor_ms']:.2f} ({r['floor_min_ms']:.2f}) | "
                f"{r['fused_ms']:.2f} ({r['fused_min_ms']:.2f}) | {r['fused_over_floor']:.2f} "
                f"[{r['fused_over_floor_iqr'][0]:.2f}, {r['fused_over_floor_iqr'][1]:.2f}] | "
                f"{r['numpy_ms']:.2f} ({r['numpy_min_ms']:.2f}) | {r['numpy_over_floor']:.2f} | "
                f"{r['matmuls_ms']:.2f} ({r['matmuls_min_ms']:.2f}) |")
        if not args.no_full:
            line += f" {r['iter_fused_ms']:.2f} | {r['iter_numpy_ms']:.2f} | {r['iter_fused_over_floor2']:.2f} |"
        lines.append(line)
    if agree is not None:
        se = lambda c: (c / agree["seeds"] * (1 - c / agree["seeds"]) / agree["seeds"]) ** 0.5  # noqa: E731
        lines += ["", f"Same answers: {agree['setting']}, {agree['seeds']} seeds with each kernel "
                      f"({agree['seconds']:.0f} s): success fraction fused {agree['fused'] / agree['seeds']:.3f} ± "
                      f"{se(agree['fused']):.3f}, numpy {agree['numpy'] / agree['seeds']:.3f} ± "
                      f"{se(agree['numpy']):.3f}; the same escape time (or none) in {agree['same_escape']} of "
                      f"{agree['seeds']} runs."]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
