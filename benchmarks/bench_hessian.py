"""Benchmark: bottom eigenpairs of the finite-d Hessian, matrix-free Lanczos vs dense eigh (THEORY.md section 7).

Setting: d = 2000, m = 2 (md = 4000), n = 4 d, GeLU, square loss, phase retrieval y = z^2 with z = x[:, 0],
Theta ~ N(0, I/d) entries, no ridge.  Times hessian_bottom(k = 10, method="lanczos") against the dense path
(dense_hessian + numpy.linalg.eigh; build and eigh reported separately) and prints both speed-ups (goal >= 20x over
eigh alone), the difference of the bottom eigenvalue (goal <= 1e-6), eigenvector overlaps and hard-overlap errors
against eigh, the matvec count and the cost of one float32 block product (so that products x cost per product can be
compared with the total).  The first call in a process (page faults, thread start-up) is timed separately.

tol defaults to 1e-8: the final float64 test guarantees |lambda error| <= 10 tol ||H|| = 1.5e-7 < 1e-6 and asks for
residuals ~1e-5, so eigenvectors match eigh to 1 - |<v, v_dense>| ~ 1e-10 and hard overlaps to ~2e-7.  tol = 1e-10
(hessian_bottom's default) overshoots the goal: 187 instead of 164 products, ~25% slower.

Measured numbers live in tables/lanczos_bench.md (written by this script with --out, the default) and the
hand-written tables/lanczos_bench_notes.md (earlier sessions, the alternatives of --compare).

    python benchmarks/bench_hessian.py [--d 2000] [--m 2] [--k 10] [--tol 1e-8] [--block B] [--repeats 5]
                                       [--dense-repeats 1] [--compare] [--no-dense] [--out tables/lanczos_bench.md]
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import theorykit as tk
from theorykit.referee.hessian import BLOCK_SIZE, block_product, dense_hessian, hessian_bottom
from theorykit.report.writer import check_table_writable, now, regenerate_command, table_stem, write_table


def problem(d: int, m: int, delta: float, seed: int):
    rng = np.random.default_rng(seed)
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    y = X[:, 0] ** 2  # phase retrieval, z = x[:, 0]
    theta = rng.standard_normal((d, m)) / np.sqrt(d)
    net = tk.symbolic.Network("gelu", "square", m)
    return X, net.evaluate(X @ theta, y)


def scipy_variants(X, der, k, tol, ref, say=print):
    import scipy.sparse.linalg as sla

    md = X.shape[1] * der.F.shape[1]
    count = [0]

    def mv(v):
        count[0] += 1
        return block_product(X, der, v.reshape(md, 1), 0.0)[:, 0]

    def mm(V):
        count[0] += V.shape[1]
        return block_product(X, der, V, 0.0)

    A = sla.LinearOperator((md, md), matvec=mv, matmat=mm, dtype=float)
    rows = []
    t = time.perf_counter()
    spec = hessian_bottom(X, der, k=k, tol=tol, mixed_precision=False)
    rows.append(("block, float64 only", time.perf_counter() - t, spec.matvecs, spec.eigenvalues[0]))
    count[0] = 0
    t = time.perf_counter()
    w = sla.eigsh(A, k=k, which="SA", tol=tol, return_eigenvectors=True)[0]
    rows.append(("eigsh which=SA", time.perf_counter() - t, count[0], np.sort(w)[0]))
    count[0] = 0
    t = time.perf_counter()
    smax = sla.eigsh(A, k=1, which="LA", tol=1e-3, return_eigenvectors=False)[0] * 1.01
    B = sla.LinearOperator((md, md), matvec=lambda v: smax * v - mv(v), dtype=float)
    w = sla.eigsh(B, k=k, which="LA", tol=tol, return_eigenvectors=True)[0]
    rows.append(("eigsh shifted LA", time.perf_counter() - t, count[0], np.sort(smax - w)[0]))
    count[0] = 0
    t = time.perf_counter()
    rng = np.random.default_rng(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = sla.lobpcg(A, rng.standard_normal((md, k + 6)), largest=False, tol=1e-8, maxiter=300)[0]
    label = "lobpcg block 16" + (" (NOT converged)" if caught else "")
    rows.append((label, time.perf_counter() - t, count[0], np.sort(w)[0]))
    for name, sec, mvs, lam0 in rows:
        say(f"  {name:32s} {sec:8.2f} s  {mvs:5d} matvecs  bottom diff vs dense {abs(lam0 - ref):.2e}")


def chfsi(X, der, k, tol, block=16, degree=8, seed=0):
    """Chebyshev-filtered subspace iteration (ChFSI) with the same fused float32 product, for comparison: spectral
    upper bound from a few Lanczos steps on -H, then filter the block with a degree-p Chebyshev polynomial that damps
    [theta_block, lambda_max], Rayleigh-Ritz, repeat; final float64 Rayleigh-Ritz.  Returns (eigenvalues, matvecs)."""
    from theorykit.referee import hessian as sp

    md = X.shape[1] * der.F.shape[1]
    rng = np.random.default_rng(seed)
    with sp.row_parallel(None) as (pool, limiter):
        op = sp.HessianOperator(X, der, 0.0, True, pool, limiter)
        A = lambda Q: op.apply(Q, single=True)  # noqa: E731
        th, _, rn, mv, scale = sp._block_lanczos(lambda Q: -A(Q), md, 1, 1e-30, 4, max_dim=40, max_matvecs=24,
                                                 rng=rng, rough=True)
        beta = -th[0] + rn[0]  # upper end of the spectrum (Ritz value + residual bound)
        Q = rng.standard_normal((md, block))
        S = op.spike_start(block - 2)
        Q[:, :S.shape[1]] = S
        Q = sp._orthonormalise_against(Q, Q[:, :0])
        AQ = A(Q)
        mv += block
        while True:
            th, Z, AZ, rn = sp._rayleigh_ritz(Q, AQ)
            scale = max(scale, float(np.abs(th).max()), beta)
            if np.all(sp._ritz_converged(th, rn, tol, scale)[:k]) or mv > 5000:
                break
            c, e = (beta + th[-1]) / 2, (beta - th[-1]) / 2  # damp [theta_last, beta]
            Y0, Y1 = Z, (AZ - c * Z) / e
            for _ in range(2, degree + 1):
                Y0, Y1 = Y1, 2 * (A(Y1) - c * Y1) / e - Y0
                mv += block
                nrm = np.linalg.norm(Y1, axis=0)
                Y0, Y1 = Y0 / nrm, Y1 / nrm
            Q = sp._orthonormalise_against(Y1, Y1[:, :0])
            Q = np.hstack([Q, sp._orthonormalise_against(rng.standard_normal((md, block - Q.shape[1])), Q)])
            AQ = A(Q)
            mv += block
        op.X32 = None
        th, _, _, _ = sp._rayleigh_ritz(Z, op.apply(Z))
    return th[:k], mv + block


def product_cost(X, der, b, repeats=5):
    """Median seconds of one fused float32 block product of b vectors (the unit of work of the Krylov phase)."""
    from theorykit.referee import hessian as sp

    md = X.shape[1] * der.F.shape[1]
    Q = np.random.default_rng(0).standard_normal((md, b))
    with sp.row_parallel(None) as (pool, limiter):
        op = sp.HessianOperator(X, der, 0.0, True, pool, limiter)
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            op.apply(Q, single=True)
            ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=2000)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--delta", type=float, default=4.0)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tol", type=float, default=1e-8,
                   help="relative eigenvalue tolerance (default 1e-8: error bound 1e-8 ||H|| << the 1e-6 goal, and "
                        "residuals ~1e-5 so that eigenvectors are right to ~1e-10 in overlap)")
    p.add_argument("--block", type=int, default=None, help="Lanczos block size (default: hessian_bottom's)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--dense-repeats", type=int, default=1, help="eigh timings (about 12 s each)")
    p.add_argument("--compare", action="store_true", help="also time eigsh (SA, shifted LA), lobpcg and ChFSI")
    p.add_argument("--no-dense", action="store_true")
    p.add_argument("--out", default="tables/lanczos_bench.md",
                   help="the record of this run, .md and .csv (stem, or its .md file; '-': none)")
    args = p.parse_args(argv)
    lines, measured = [], {}  # the printed record, and the numbers it measures (quantity -> value)
    stem = None if args.out == "-" else table_stem(args.out)
    if stem:
        check_table_writable(stem)
    t0, started = time.perf_counter(), now()

    def say(*parts):
        text = " ".join(str(x) for x in parts)
        print(text, flush=True)
        lines.append(text)

    try:
        _run(args, say, measured)
    finally:
        if stem and lines:
            import sys

            write_table(stem, [{"quantity": k, "value": v} for k, v in measured.items()], ["quantity", "value"],
                        ["```"] + lines + ["```"], title="Finite-d Hessian: Lanczos vs dense eigh",
                        command=regenerate_command("python benchmarks/bench_hessian.py",
                                                   sys.argv[1:] if argv is None else argv),
                        started=started, wall=time.perf_counter() - t0)


def _run(args, say, measured):

    X, der = problem(args.d, args.m, args.delta, args.seed)
    md = args.d * args.m
    say(f"d = {args.d}, m = {args.m}, md = {md}, n = {X.shape[0]}, k = {args.k}, gelu / square / y = z^2, "
          f"tol = {args.tol:g}, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")

    kw = dict(k=args.k, tol=args.tol, hard_dirs=np.eye(args.d)[:, 0], block_size=args.block)
    t = time.perf_counter()
    hessian_bottom(X, der, **kw)  # first call: page faults, BLAS and thread start-up, the float32 buffer
    t_first = time.perf_counter() - t
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        spec = hessian_bottom(X, der, **kw)
        times.append(time.perf_counter() - t)
    t_lanczos = float(np.median(times))
    measured.update(d=args.d, m=args.m, n=X.shape[0], k=args.k, tol=args.tol, lanczos_median_s=t_lanczos,
                    lanczos_first_call_s=t_first, matvecs=spec.matvecs, max_residual=float(spec.residuals.max()))
    say(f"lanczos (block Krylov, fused float32 products + one float64 Rayleigh-Ritz): median {t_lanczos:.3f} s of "
          f"{args.repeats} runs ({', '.join(f'{x:.3f}' for x in times)}), {spec.matvecs} matvecs, "
          f"max residual {spec.residuals.max():.1e}; first call in the process {t_first:.3f} s")
    b = args.block or BLOCK_SIZE(args.k)
    unit = product_cost(X, der, b)
    measured.update(block=b, block_product_s=unit, lambda_min=float(spec.eigenvalues[0]),
                    hard_weight=float(spec.hard_weight))
    say(f"  one float32 block product of {b} vectors: {unit * 1e3:.1f} ms -> the {spec.matvecs} matvecs cost at "
          f"least {spec.matvecs / b * unit:.3f} s; the rest ({max(t_lanczos - spec.matvecs / b * unit, 0):.3f} s) is "
          "the float32 copy, the float64 check, Rayleigh-Ritz and orthogonalisation")
    say("  bottom eigenvalues:", np.array2string(spec.eigenvalues, precision=6))
    say("  hard overlap^2 (axis 0):", np.array2string(spec.hard_overlap2, precision=4),
          f"hard weight {spec.hard_weight:.4f}")
    if args.no_dense:
        return
    t = time.perf_counter()
    H = dense_hessian(X, der)
    t_build = time.perf_counter() - t
    eighs = []
    for _ in range(args.dense_repeats):
        t = time.perf_counter()
        w, V = np.linalg.eigh(H)
        eighs.append(time.perf_counter() - t)
    t_eigh = float(np.median(eighs))
    t_dense = t_build + t_eigh
    diff = np.abs(spec.eigenvalues - w[: args.k])
    ov = np.abs(np.einsum("kp,pk->k", spec.eigenvectors.reshape(args.k, -1), V[:, : args.k]))
    hard = np.sum(V[:, : args.k].T.reshape(args.k, args.d, args.m)[:, 0, :] ** 2, axis=1)
    measured.update(dense_build_s=t_build, eigh_s=t_eigh, speedup_over_eigh=t_eigh / t_lanczos,
                    speedup_over_dense=t_dense / t_lanczos, lambda_min_dense=float(w[0]),
                    bottom_abs_diff=float(diff[0]), max_abs_diff=float(diff.max()), min_overlap=float(ov.min()),
                    max_hard_overlap2_error=float(np.abs(spec.hard_overlap2 - hard).max()))
    say(f"dense: build {t_build:.2f} s + numpy.linalg.eigh {t_eigh:.2f} s (median of "
          f"{', '.join(f'{x:.2f}' for x in eighs)}) = {t_dense:.2f} s")
    say(f"speed-up over dense eigh alone: {t_eigh / t_lanczos:.1f}x   (over dense build + eigh: "
          f"{t_dense / t_lanczos:.1f}x)   goal >= 20x over eigh")
    say(f"bottom eigenvalue: lanczos {spec.eigenvalues[0]:.12f}, dense {w[0]:.12f}, |diff| = {diff[0]:.2e} "
          "(goal <= 1e-6)")
    say(f"max |diff| over the {args.k} eigenvalues: {diff.max():.2e}; min |<v_lanczos, v_dense>|: {ov.min():.10f}; "
          f"max |hard overlap^2 - dense|: {np.abs(spec.hard_overlap2 - hard).max():.1e}")
    if args.compare:
        say("alternatives (same product):")
        scipy_variants(X, der, args.k, args.tol, w[0], say)
        for block, degree in ((16, 8), (24, 8)):
            t = time.perf_counter()
            lam, mv = chfsi(X, der, args.k, args.tol, block, degree)
            say(f"  {f'ChFSI block {block} degree {degree}':32s} {time.perf_counter() - t:8.2f} s  {mv:5d} matvecs  "
                  f"bottom diff vs dense {abs(lam[0] - w[0]):.2e}")


if __name__ == "__main__":
    main()
