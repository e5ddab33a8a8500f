"""Benchmark: the simulator's GD step against the physical floor, one read of X, measured in the same run.

    python benchmarks/bench_gd_step.py [--repeats 21] [--out tables/gd_step_bench.md]

With m <= 8 columns a step does 4m flops per 8 bytes of X, so on most machines its floor is one streaming read of X
(n x d float64), timed here as a row sum by the fused kernel's own threads (numba, every core).  Where the cores are
slow against memory the arithmetic can cost as much as the read (measured here: at m = 4 on this 2-core VM), so the
benchmark also measures the compute-bound floor, the step's 4 n d m flops at the machine's DGEMM rate, and the fused
kernel's own arithmetic with X in cache.  For each shape it times, interleaved round by round so that a busy neighbour
slows every column alike (the one-pass kernels first, then the BLAS paths, then a pause: OpenBLAS's threads
busy-wait after a call and would slow whatever runs next):

* floor: one read of X; GEMM floor: 4 n d m flops at the rate of a GEMM_N^2 DGEMM; compute: the fused kernel on a
  cache-resident block of CACHE_ROWS rows, repeated to n rows of work;
* fused step: ``FusedStep.step`` (theorykit/referee/_fused.py), one pass over X: loss sum and X^T F;
* fused step on X stored in float32 (simulate's ``storage="float32"``: float64 arithmetic, half the bytes), against
  the same float64 floor, and the float32 read of X beside it;
* numpy step: ``net.evaluate(X @ theta, y)`` and ``X.T @ F``, the kernel="numpy" path;
* matmuls alone: ``X @ theta`` + ``X.T @ F`` with NumPy's BLAS (no evaluation);
* whole simulate() iteration per step, from two runs of different length (their difference / the extra steps),
  against the floor read just before and just after, over --iter-rounds rounds: the default (fused kernel, test loss
  from the overlaps with n_test = n: one read of X per step), X stored in float32, the numpy kernel, and the test loss
  on a fresh (n_test, d) test set (test_set="fresh", n_test = n: two matrices read per step).

It reports medians over the rounds (and the minimum), and the ratio of each to the floor (goals: fused step <= 2x the
physical floor, max(read, GEMM floor); a whole default iteration <= 2x one read of X).
Then both kernels, and the fused kernel on float32 storage, run the same --seeds seeds near a threshold (success
fractions and equal escape times).
Setting: gelu, phase retrieval, square loss.
"""
import argparse
import sys
import time

import numpy as np

from theorykit.report.writer import check_table_writable, now, regenerate_command, table_stem, write_table

#: seconds of pause after the BLAS timings (OpenBLAS's threads busy-wait after a call and would slow the next timing)
SETTLE = 2.0
SHAPES = [(6000, 1000, 4), (6000, 1000, 1), (6000, 1000, 2), (16000, 1000, 2), (4000, 400, 1)]


def _floor_kernel():
    """One streaming read of X by the same threads as the fused kernel (its thread pool, the same row chunks), so
    that the floor and the step are measured alike (a numba parallel region or BLAS leaves threads spinning that
    would slow the next measurement)."""
    import numba

    from theorykit.referee._fused import CHUNKS, available_threads, in_threads

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
        in_threads(workers, lambda w: rows_sum(X, out, bounds[w], bounds[w + 1]))
        return out

    del CHUNKS
    return read_once


#: size of the square DGEMM (BLAS, every core) whose rate gives the compute floor: the step's 4 n d m flops at that rate
GEMM_N = 1024
#: rows of the cache-resident block of the compute floor (64 x d float64: 512 KB at d = 1000, inside one core's L2)
CACHE_ROWS = 64


def _compute_floor(fused, X, y, theta):
    """The fused step's arithmetic without the memory traffic: the same kernel, by the same threads, on a block of
    CACHE_ROWS rows of X that stays in each core's cache, repeated until it has done n rows' work.  The step cannot
    beat max(read, compute); with no overlap between them it takes read + compute."""
    import numba

    from theorykit.referee._fused import in_threads

    kernel = fused._kernel
    n, d = X.shape
    m = theta.shape[1]
    rows = min(CACHE_ROWS, n)
    Xc = np.ascontiguousarray(X[:rows])
    yc = np.ascontiguousarray(y[:rows])
    thT = np.ascontiguousarray(theta.T)
    workers = fused.threads
    reps = max(1, round(n / (rows * workers)))
    bufs = [(np.empty((1, m, d)), np.empty(1)) for _ in range(workers)]

    @numba.njit(nogil=True)
    def repeat(kernel, Xc, yc, thT, am, b, G, L, reps):
        for _ in range(reps):
            kernel(Xc, yc, thT, am, b, G, L, 1, True, 0, 1)

    def run():
        in_threads(workers, lambda w: repeat(kernel, Xc, yc, thT, fused.am, fused.b, bufs[w][0], bufs[w][1], reps))

    run()  # compile
    return run


#: the whole simulate() iteration: (name, kernel, storage, test_set), the default first and BLAS last (see SETTLE)
ITER_VARIANTS = (("fused", "fused", "float64", "overlaps"), ("fused32", "fused", "float32", "overlaps"),
                 ("fresh", "fused", "float64", "fresh"), ("numpy", "numpy", "float64", "overlaps"))
#: steps of the short and the long run: their time difference / (ITER_LONG - ITER_SHORT) is one iteration
ITER_SHORT, ITER_LONG = 5, 125


def _iterations(n, d, m, read_once, X, rounds) -> dict:
    """Per variant of ITER_VARIANTS: the median time of one simulate() iteration (ms) and the median, with quartiles,
    of its ratio to the read of X measured just before and just after it in the same round."""
    import theorykit as tk

    out: dict = {}
    for name, kernel, storage, test_set in ITER_VARIANTS:
        kw = dict(delta=n / d, d=d, eta=1e-3, n_test=n, seed=0, kernel=kernel, storage=storage, test_set=test_set)

        def run(steps, kw=kw):
            return tk.simulate("gelu", "phase-retrieval", "square", m, steps=steps, **kw)

        run(1)  # warm up (symbolic set-up, kernels)
        per, ratio = [], []
        for _ in range(rounds):
            before = timed(lambda: read_once(X))
            short = timed(lambda: run(ITER_SHORT))
            long_ = timed(lambda: run(ITER_LONG))
            after = timed(lambda: read_once(X))
            it = (long_ - short) / (ITER_LONG - ITER_SHORT)
            per.append(it)
            ratio.append(it / (0.5 * (before + after)))
        out[f"iter_{name}_ms"] = 1e3 * float(np.median(per))
        out[f"iter_{name}_over_floor"] = float(np.median(ratio))
        out[f"iter_{name}_over_floor_iqr"] = [float(v) for v in np.percentile(ratio, [25, 75])]
    time.sleep(SETTLE)
    return out


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=21, help="interleaved rounds per shape (default 21)")
    p.add_argument("--out", default=None, help="Markdown table to write (default: print only)")
    p.add_argument("--no-full", action="store_true", help="skip the whole-iteration timing")
    p.add_argument("--iter-rounds", type=int, default=7, help="rounds of the whole-iteration timing (default 7)")
    p.add_argument("--seeds", type=int, default=64, help="seeds of the kernels' agreement check (0: skip)")
    args = p.parse_args(argv)
    if args.out:
        check_table_writable(table_stem(args.out))
    t0, started = time.perf_counter(), now()

    import theorykit as tk
    from theorykit.referee._fused import fused_kernel

    read_once = _floor_kernel()
    rows = []
    GA, GB = np.random.default_rng(1).standard_normal((2, GEMM_N, GEMM_N))  # the machine's DGEMM rate
    for n, d, m in SHAPES:
        net = tk.symbolic.Network("gelu", "square", m)
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, d))
        X32 = X.astype(np.float32)
        y = X[:, 0] ** 2
        theta = rng.standard_normal((d, m)) / np.sqrt(d)
        F = rng.standard_normal((n, m))
        fused, why = fused_kernel(net)
        if fused is None:
            sys.exit(f"fused kernel not available: {why}")
        one_pass = {"floor": lambda: read_once(X), "fused": lambda: fused.step(X, y, theta),
                    "fused32": lambda: fused.step(X32, y, theta), "floor32": lambda: read_once(X32),
                    "compute": _compute_floor(fused, X, y, theta), "compute32": _compute_floor(fused, X32, y, theta)}
        blas = {"floor": lambda: read_once(X), "numpy": lambda: X.T @ net.evaluate(X @ theta, y).F,
                "matmuls": lambda: (X @ theta, X.T @ F), "gemm": lambda: GA @ GB}
        cols = {**one_pass, **blas}
        times = {k: [] for k in cols}
        ratios = {"fused": [], "numpy": [], "fused32": [], "floor32": [], "compute": [], "compute32": []}
        sums = {"": [], "32": []}
        # two phases, each interleaved round by round with the floor: first the one-pass kernels, then the BLAS paths
        # (OpenBLAS's threads busy-wait after a call and slow whatever runs in the next ~0.1-1 s; measured: the fused
        # step 3.7 -> 6.7 ms right after BLAS calls), with a pause of SETTLE seconds after every BLAS phase
        for phase in (one_pass, blas):
            for fn in phase.values():
                fn()  # warm up (compilation, lambdify caches)
            for _ in range(args.repeats):
                for k, fn in phase.items():
                    times[k].append(timed(fn))
                # the ratio within the round: this VM's bandwidth drifts by tens of percent between rounds, so each
                # step is divided by the floor measured next to it (before and after), and the median is kept
                after = timed(phase["floor"])
                floor = 0.5 * (times["floor"][-1] + after)
                for k in ratios:
                    if k in phase:
                        ratios[k].append(times[k][-1] / floor)
                if "compute" in phase:  # the step against read + compute (no overlap) and against max(read, compute)
                    for sfx, fl in (("", floor), ("32", times["floor32"][-1])):
                        c = times["compute" + sfx][-1]
                        sums[sfx].append(times["fused" + sfx][-1] / (fl + c))
        time.sleep(SETTLE)
        med = {k: float(np.median(v)) for k, v in times.items()}
        low = {k: float(np.min(v)) for k, v in times.items()}
        row = {"n": n, "d": d, "m": m, **{f"{k}_ms": 1e3 * med[k] for k in cols},
               **{f"{k}_min_ms": 1e3 * low[k] for k in cols},
               "fused_over_floor": float(np.median(ratios["fused"])),
               "fused_over_floor_iqr": [float(v) for v in np.percentile(ratios["fused"], [25, 75])],
               "numpy_over_floor": float(np.median(ratios["numpy"])),
               "fused32_over_floor": float(np.median(ratios["fused32"])),
               "fused32_over_floor_iqr": [float(v) for v in np.percentile(ratios["fused32"], [25, 75])],
               "floor32_over_floor": float(np.median(ratios["floor32"])),
               "compute_over_floor": float(np.median(ratios["compute"])),
               "compute32_over_floor": float(np.median(ratios["compute32"])),
               "fused_over_sum": float(np.median(sums[""])), "fused32_over_sum": float(np.median(sums["32"])),
               "gemm_gflops": 2 * GEMM_N ** 3 / med["gemm"] / 1e9}
        row["gemm_floor_ms"] = 1e3 * 4 * n * d * m / (row["gemm_gflops"] * 1e9)
        row["fused_over_physical"] = row["fused_ms"] / max(row["floor_ms"], row["gemm_floor_ms"])
        if not args.no_full:
            row.update(_iterations(n, d, m, read_once, X, args.iter_rounds))
        rows.append(row)
        print(f"n={n} d={d} m={m}: floor {row['floor_ms']:.2f} ms, fused {row['fused_ms']:.2f} "
              f"({row['fused_over_floor']:.2f}x; in-cache compute {row['compute_over_floor']:.2f}x, fused / (read + "
              f"compute) {row['fused_over_sum']:.2f}), fused on float32 X {row['fused32_ms']:.2f} "
              f"({row['fused32_over_floor']:.2f}x; / (f32 read + compute) {row['fused32_over_sum']:.2f}), "
              f"numpy {row['numpy_ms']:.2f} ({row['numpy_over_floor']:.2f}x), "
              f"matmuls {row['matmuls_ms']:.2f}" + ("" if args.no_full else
              f"; simulate per step: fused {row['iter_fused_ms']:.2f} ({row['iter_fused_over_floor']:.2f}x one "
              f"read), float32 X {row['iter_fused32_ms']:.2f} ({row['iter_fused32_over_floor']:.2f}x), numpy "
              f"{row['iter_numpy_ms']:.2f}, fresh test set {row['iter_fresh_ms']:.2f} "
              f"({row['iter_fresh_over_floor']:.2f}x)"),
              flush=True)
    agree = None if args.seeds == 0 else _agreement(args.seeds)
    if args.out:
        _write(args, rows, agree, sys.argv[1:] if argv is None else argv, started, time.perf_counter() - t0)


#: deltas of the agreement check: near the middle of the transition (success ~0.4) and above it (~0.95)
AGREE_DELTAS = (6.0, 8.0)


def _agreement(seeds):
    """Both kernels, and the fused kernel on X stored in float32, over the same seeds near a threshold (bounded
    setting, GD's escape is chaotic in the initial condition there): success counts per delta, and in how many runs
    the escape time is the same as the fused float64 run's."""
    import theorykit as tk

    kw = dict(activation="gelu", link="sign-symmetric", loss="logistic", width=1, d=300, steps=400, eta=1.0,
              processes=1)
    out = {"setting": "gelu, sign-symmetric, logistic, m = 1, d = 300, 400 steps", "seeds": seeds, "deltas": []}
    t0 = time.perf_counter()
    variants = {"fused": dict(kernel="fused"), "numpy": dict(kernel="numpy"),
                "float32": dict(kernel="fused", storage="float32")}
    for delta in AGREE_DELTAS:
        runs = {k: tk.sweep([delta], range(seeds), **v, **kw) for k, v in variants.items()}
        row = {"delta": delta, **{k: int(df["success"].sum()) for k, df in runs.items()}}
        a = runs["fused"]["escape_time"].to_numpy()
        for k in ("numpy", "float32"):
            c = runs[k]["escape_time"].to_numpy()
            row[f"same_{k}"] = int(np.sum((a == c) | (np.isnan(a) & np.isnan(c))))
        out["deltas"].append(row)
        print(f"delta = {delta}, {seeds} seeds: successes fused {row['fused']}, numpy {row['numpy']}, fused on "
              f"float32 X {row['float32']}; same escape time as fused in {row['same_numpy']} (numpy) and "
              f"{row['same_float32']} (float32) runs", flush=True)
    out["seconds"] = time.perf_counter() - t0
    return out


def csv_rows(rows, agree) -> list:
    """The measured numbers as CSV rows: one per shape (part "step"; a quartile pair as two columns) and one per
    delta of the agreement check (part "agreement")."""
    out = []
    for r in rows:
        row = {"part": "step"}
        for k, v in r.items():
            if isinstance(v, (list, tuple)):
                row[f"{k}_q25"], row[f"{k}_q75"] = v
            else:
                row[k] = v
        out.append(row)
    if agree is not None:
        out += [{"part": "agreement", "seeds": agree["seeds"], **r} for r in agree["deltas"]]
    return out


def _write(args, rows, agree, argv, started, wall):
    flat = csv_rows(rows, agree)
    columns = list(dict.fromkeys(k for r in flat for k in r))
    lines = [f"Medians over {args.repeats} interleaved rounds (min in brackets), ms. gelu, phase retrieval, square "
             "loss.",
             "floor = one streaming read of X (n x d float64, a row sum by the fused kernel's threads); GEMM floor = "
             "the step's 4 n d m flops at this machine's DGEMM rate (a 1024 x 1024 BLAS product on every core, timed "
             "in the same run); the physical floor is the larger of the two.  compute = the fused kernel's own "
             "arithmetic with X in cache (the same kernel and threads on a 64-row block repeated to n rows): the step "
             "cannot beat max(floor, compute), and with no overlap of memory and arithmetic it takes floor + compute.  "
             "fused = theorykit's one-pass step "
             "(kernel=\"fused\"); fused f32 = the same on X stored in float32 (storage=\"float32\", float64 "
             "arithmetic), its ratio to the same float64 floor, and the float32 read of X / floor beside it; numpy = "
             "evaluate + two matmuls (kernel=\"numpy\"); matmuls = X @ Theta + X^T F alone. "
             f"simulate per step: a whole recorded iteration of simulate() (the difference of a {ITER_LONG}- and a "
             f"{ITER_SHORT}-step run over {ITER_LONG - ITER_SHORT}; median over {args.iter_rounds} rounds, its ratio "
             "to the read of X just before and after it, with quartiles): the default (fused kernel, test loss from "
             "the overlaps, n_test = n: one read of X per step), X stored in float32, the numpy kernel, and the test "
             "loss on a fresh n_test = n x d test set read every step (test_set=\"fresh\", the default before: two "
             "matrices read).  fused / floor and numpy / floor: the median over the rounds of the step's "
             "time over the floor measured next to it (the mean of a read just before and just after), with the "
             "quartiles of that ratio for the fused steps (the other ratios are of the medians); this VM's memory "
             "bandwidth drifts by tens of percent "
             "between rounds, so a ratio of two medians taken apart is not reliable.", "",
             "| n | d | m | floor | GEMM floor | fused step | fused / floor [quartiles] "
             "| fused / max(floor, GEMM floor) "
             "| compute / floor | fused / (floor + compute) "
             "| fused f32 | fused f32 / floor [quartiles] | f32 read / floor | compute f32 / floor "
             "| fused f32 / (f32 read + compute f32) | numpy step | numpy / floor | matmuls alone |"
             + ("" if args.no_full
                else " simulate/step (default) | / floor [quartiles] | fused f32 | / floor | numpy | / floor "
                     "| fresh test set | / floor [quartiles] |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
             + ("" if args.no_full else "---|---|---|---|---|---|---|---|")]
    for r in rows:
        line = (f"| {r['n']} | {r['d']} | {r['m']} | {r['floor_ms']:.2f} ({r['floor_min_ms']:.2f}) | "
                f"{r['gemm_floor_ms']:.2f} | "
                f"{r['fused_ms']:.2f} ({r['fused_min_ms']:.2f}) | {r['fused_over_floor']:.2f} "
                f"[{r['fused_over_floor_iqr'][0]:.2f}, {r['fused_over_floor_iqr'][1]:.2f}] | "
                f"{r['fused_over_physical']:.2f} | {r['compute_over_floor']:.2f} | {r['fused_over_sum']:.2f} | "
                f"{r['fused32_ms']:.2f} ({r['fused32_min_ms']:.2f}) | {r['fused32_over_floor']:.2f} "
                f"[{r['fused32_over_floor_iqr'][0]:.2f}, {r['fused32_over_floor_iqr'][1]:.2f}] | "
                f"{r['floor32_over_floor']:.2f} | {r['compute32_over_floor']:.2f} | {r['fused32_over_sum']:.2f} | "
                f"{r['numpy_ms']:.2f} ({r['numpy_min_ms']:.2f}) | {r['numpy_over_floor']:.2f} | "
                f"{r['matmuls_ms']:.2f} ({r['matmuls_min_ms']:.2f}) |")
        if not args.no_full:
            q, qf = r["iter_fused_over_floor_iqr"], r["iter_fresh_over_floor_iqr"]
            line += (f" {r['iter_fused_ms']:.2f} | {r['iter_fused_over_floor']:.2f} [{q[0]:.2f}, {q[1]:.2f}] | "
                     f"{r['iter_fused32_ms']:.2f} | {r['iter_fused32_over_floor']:.2f} | {r['iter_numpy_ms']:.2f} | "
                     f"{r['iter_numpy_over_floor']:.2f} | {r['iter_fresh_ms']:.2f} | {r['iter_fresh_over_floor']:.2f} "
                     f"[{qf[0]:.2f}, {qf[1]:.2f}] |")
        lines.append(line)
    if agree is not None:
        S = agree["seeds"]

        def frac(c):
            return f"{c / S:.3f} ± {(c / S * (1 - c / S) / S) ** 0.5:.3f}"

        lines += ["", f"Same answers: {agree['setting']}, {S} seeds with each variant ({agree['seconds']:.0f} s); "
                      "success fraction ± its binomial standard error, and in how many runs the escape time (or "
                      "none) equals the fused float64 run's:", "",
                  "| delta | fused (float64) | numpy (float64) | fused, X stored float32 | same escape: numpy | "
                  "same escape: float32 |", "|---|---|---|---|---|---|"]
        for r in agree["deltas"]:
            lines.append(f"| {r['delta']:g} | {frac(r['fused'])} | {frac(r['numpy'])} | {frac(r['float32'])} | "
                         f"{r['same_numpy']} of {S} | {r['same_float32']} of {S} |")
    files = write_table(table_stem(args.out), flat, columns, lines,
                        title="The simulator's GD step against one read of X",
                        command=regenerate_command("python benchmarks/bench_gd_step.py", argv), started=started,
                        wall=wall)
    print(f"wrote {', '.join(files)}")


if __name__ == "__main__":
    main()
