"""Benchmark and convergence study of the DMFT solver (THEORY.md sections 3 and 5; issue: long times).

Sections (run all, or pick with --only):

* speed:  T = 200 GD steps, m = 2 (tanh, y = z + z^2/2, a = (1, -1), delta = 2, eta = 1): wall time and the
          largest relative standard error of Theta^T Theta over t (goals: <= 60 s on the 2-core machine, <= 1%).
* paths:  the same at T = 50 for paths = 2^13 ... 2^17: standard errors should fall like paths^(-1/2) (or faster,
          thanks to the Sobol paths) and the means stay within their errors.
* grid:   gradient-flow mode: flow_schedule(flow time 8, eta0 = h, eta_max = 4h) for h = 0.2, 0.1, 0.05, 0.025:
          the gram at flow time 8 converges at first order in h (successive differences halve).
* long:   m = 1, phase retrieval (GeLU, square loss, delta = 4, eta = 1), T = 1000 GD steps; and the gradient-flow
          grid up to flow time 200.  Reports gram, losses and the low tail of D (min and the 1e-5, 1e-4, 1e-3
          quantiles of its smallest eigenvalue) along t, to show whether they converge as t grows.
* long2:  m = 2, phase retrieval (GeLU, a = (1, 1), delta = 4, eta = 1), T = 200.
* hard:   the hard process' tangents alone (S = 1001 times, 8192 paths, 37 tangents, m = 1, synthetic inputs): the
          step-by-step recursion (block 1, the whole history in memory: the former code path) against the blocked,
          grouped one, beside the floor of its multiply-adds at this machine's float32 GEMM rate (measured here).
* short:  many short solves, as the finite-d capture machinery makes them: theorykit.thresholds.finite_d at width 2
          (GeLU, phase retrieval, deltas 4 and 30, d = 40, horizon 5, 1024 paths in 2 replicas: 162 DMFT solves) and
          one solve of that size with processes = 1, 2 and the default, each after a warm-up in this process; the
          finite_d call in a fresh process.
* t1000:  the default DMFT (65536 paths, 8 replicas in 2 processes) of the bounded setting (GeLU, sign link,
          logistic, delta = 8, eta = 1) to T = 1000: wall time and the peak memory of each process.

    python benchmarks/bench_dmft.py [--only speed,paths,grid,long,long2,hard,short,t1000] [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from theorykit import dmft
from theorykit.dynamics import flow_schedule

EASY = dict(activation="tanh", link="z+z**2/2", loss="square", width=2, a="1,-1", delta=2.0)
PR1 = dict(activation="gelu", link="z**2", loss="square", width=1, delta=4.0)
PR2 = dict(activation="gelu", link="z**2", loss="square", width=2, a="1,1", delta=4.0)


def rel_gram_error(r):
    """max over t and entries of stderr(gram) / sqrt(gram_ii gram_jj)."""
    diag = np.sqrt(np.einsum("tii->ti", r.gram))
    scale = diag[:, :, None] * diag[:, None, :]
    return float(np.max(r.stderr["gram"] / scale))


def speed(quick):
    T = 100 if quick else 200
    t0 = time.perf_counter()
    r = dmft(**EASY, eta=1.0, steps=T, paths=65536, replicas=8)
    sec = time.perf_counter() - t0
    print(f"[speed] T = {T}, m = 2, {r.settings['paths_total']} paths in {r.settings['replicas']} replicas "
          f"({r.settings['processes']} processes): {sec:.1f} s (goal <= 60 s); max relative stderr of gram over t: "
          f"{100 * rel_gram_error(r):.2f}% (goal <= 1%)")
    for t in (0, 10, 50, 100, 200):
        if t <= T:
            print(f"    t = {t:4d}: gram = {np.round(r.gram[t].ravel(), 4)} "
                  f"+- {np.round(r.stderr['gram'][t].ravel(), 4)}"
                  f", train = {r.train_loss[t]:.4f}, test = {r.test_loss[t]:.4f}")


def paths(quick):
    print("[paths] T = 50, m = 2: convergence in the number of paths (Sobol paths, Gauss-Hermite latent)")
    sizes = [2 ** 13, 2 ** 14, 2 ** 15] if quick else [2 ** 13, 2 ** 14, 2 ** 15, 2 ** 16, 2 ** 17]
    for P in sizes:
        t0 = time.perf_counter()
        r = dmft(**EASY, eta=1.0, steps=50, paths=P, replicas=8)
        print(f"    paths = {P:7d}: gram(50) = {np.round(r.gram[50].ravel(), 4)}, "
              f"max rel stderr {100 * rel_gram_error(r):.3f}%"
              f", train(50) = {r.train_loss[50]:.5f} +- {r.stderr['train_loss'][50]:.5f}  "
              f"({time.perf_counter() - t0:.1f} s)")


def grid(quick):
    print("[grid] gradient-flow mode, flow time 8: convergence in the grid (eta0 = h, eta_max = 4 h, doubling every 8)")
    hs = [0.2, 0.1, 0.05] if quick else [0.2, 0.1, 0.05, 0.025]
    prev = None
    for h in hs:
        sched = flow_schedule(8.0, eta0=h, eta_max=4 * h, doubling_every=8)
        t0 = time.perf_counter()
        r = dmft(**EASY, schedule=sched, paths=32768, replicas=8)
        g = r.gram[-1]
        diff = "" if prev is None else f", change from the coarser grid {np.max(np.abs(g - prev)):.4f}"
        print(f"    h = {h:6.3f}: {len(sched):4d} steps, gram(8) = {np.round(g.ravel(), 4)} +- "
              f"{np.max(r.stderr['gram'][-1]):.4f}{diff}  ({time.perf_counter() - t0:.1f} s)")
        prev = g


def _tail_report(r, ts):
    for t in ts:
        if t < len(r.t):
            d = r.D_tail[t]
            print(f"    t = {t:5d} (time {r.time[t]:7.1f}): gram = {np.round(r.gram[t].ravel(), 3)} "
                  f"(rel se {100 * np.max(r.stderr['gram'][t] / np.abs(r.gram[t]).max()):.2f}%), train = "
                  f"{r.train_loss[t]:.4f}, test = {r.test_loss[t]:.4f}, C_mu = {np.round(np.trace(r.C_mu[t, 0]), 2)}; "
                  f"D: min {d[0]:.3g}, q1e-5 {d[1]:.3g}, q1e-4 {d[2]:.3g}, q1e-3 {d[3]:.3g}")


def long(quick):
    T = 300 if quick else 1000
    t0 = time.perf_counter()
    r = dmft(**PR1, eta=1.0, steps=T, paths=32768, replicas=8)
    print(f"[long] m = 1, phase retrieval, GeLU, delta = 4, eta = 1, T = {T}: {time.perf_counter() - t0:.1f} s, "
          f"status {r.status}")
    _tail_report(r, [0, 10, 50, 100, 200, 400, 700, 1000])
    tau = 60.0 if quick else 200.0
    sched = flow_schedule(tau, eta0=0.05, eta_max=1.0, doubling_every=40)
    t0 = time.perf_counter()
    r = dmft(**PR1, schedule=sched, paths=32768, replicas=8)
    print(f"[long] gradient-flow grid to time {tau:g}: {len(sched)} steps, {time.perf_counter() - t0:.1f} s")
    idx = [int(np.searchsorted(r.time, x)) for x in (0, 5, 20, 50, 100, 150, 200) if x <= tau]
    _tail_report(r, idx)


def long2(quick):
    T = 100 if quick else 200
    t0 = time.perf_counter()
    r = dmft(**PR2, eta=1.0, steps=T, paths=65536, replicas=8)
    print(f"[long2] m = 2, phase retrieval, GeLU, a = (1, 1), delta = 4, eta = 1, T = {T}: "
          f"{time.perf_counter() - t0:.1f} s, max rel stderr of gram {100 * rel_gram_error(r):.2f}%")
    _tail_report(r, [0, 10, 50, 100, 200])


def hard(quick):
    from theorykit.dynamics.hard_process import hard_tangents

    S, N = (301, 4096) if quick else (1001, 8192)
    rng = np.random.default_rng(0)
    D = rng.normal(0.3, 0.5, size=(S, N, 1, 1)).astype(np.float32)
    lag = np.subtract.outer(np.arange(S), np.arange(S))
    R = np.where(lag > 0, -0.02 * np.exp(-0.05 * np.maximum(lag, 0)), 0.0)[:, :, None, None]
    U = rng.normal(size=(S, 64)) / 8.0
    Cu = (U @ U.T)[:, :, None, None]
    zeta, w = rng.normal(size=N), np.full(N, 1.0 / N)
    args = (D, zeta, w, R, Cu, np.full(S, 1.0), 8.0, 0.0, np.eye(1))
    A = rng.normal(size=(32, S)).astype(np.float32)
    B = rng.normal(size=(S, 37 * N // 8)).astype(np.float32)
    t0 = time.perf_counter()
    A @ B
    rate = 2 * A.shape[0] * S * B.shape[1] / (time.perf_counter() - t0)
    floor = 37 * N * S * S / rate  # multiply-adds of sum_{s<t} R(t, s) K^s over t, 37 tangents: 2 J N S^2 / 2 flops
    res = {}
    for name, kw in (("step by step, whole history (former)", dict(block=1, memory=1e12)), ("blocked, grouped", {})):
        t0 = time.perf_counter()
        res[name] = hard_tangents(*args, **kw)[0]
        print(f"[hard] {name}: {time.perf_counter() - t0:.1f} s")
    a, b = res.values()
    print(f"[hard] S = {S}, N = {N}, 37 tangents: GEMM floor {floor:.1f} s ({rate / 1e9:.1f} GFLOP/s float32); "
          f"largest relative difference of C_mu {float(np.max(np.abs(a - b) / np.abs(a))):.1e}")


def short(quick):
    import theorykit as tk

    p2 = tk.Problem("gelu", "phase-retrieval", "square", 2, delta=30.0, eta=1.0, steps=5, M0=[[0.1, 0.1]])
    dmft(p2, paths=1024, replicas=2, processes=1, bias_check=False)  # warm-up: imports and compiled kernels
    for procs in (1, 2, None):
        t0 = time.perf_counter()
        for _ in range(10):
            dmft(p2, paths=1024, replicas=2, processes=procs, bias_check=False)
        print(f"[short] one solve (m = 2, T = 5, 1024 paths, 2 replicas), processes = {procs}: "
              f"{(time.perf_counter() - t0) / 10 * 1e3:.0f} ms")
    # finite_d in a fresh process (what a user's command pays: nothing imported or compiled before its first solve)
    import subprocess
    import sys

    code = ("import time; t0 = time.perf_counter(); import numpy as np, theorykit as tk; "
            "from theorykit.thresholds import finite_d; "
            "pr = tk.Problem('gelu', 'phase-retrieval', 'square', 2, delta=1.0, eta=1.0, steps=1); "
            "r = finite_d(pr, [4.0, 30.0], [40], 5, paths=1024, replicas=2); "
            "print(f'{time.perf_counter() - t0:.1f} s; P(capture by 5) = {np.round(r.probability[:, 0, -1], 4)}')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    print(f"[short] finite_d at width 2 (d = 40, horizon 5, deltas 4 and 30; a fresh process, imports included): {out}")


def t1000(quick):
    import json
    import resource
    import subprocess
    import sys

    T = 300 if quick else 1000
    cmd = [sys.executable, "-m", "theorykit.cli", "dmft", "--activation", "gelu", "--link", "sign-symmetric", "--loss",
           "logistic", "--delta", "8", "--eta", "1", "--steps", str(T), "--json"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2 ** 20
    r = json.loads(out)
    print(f"[t1000] bounded, delta = 8, T = {T}, default paths: {wall:.1f} s wall, peak {peak:.2f} GiB per "
          f"process; gram(T) {r['gram'][-1][0][0]:.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="speed,paths,grid,long,long2,hard,short,t1000")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    for name in args.only.split(","):
        globals()[name.strip()](args.quick)


if __name__ == "__main__":
    main()
