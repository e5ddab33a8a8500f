"""Benchmark: bottom eigenpairs of the finite-d Hessian, matrix-free Lanczos vs dense eigh (THEORY.md section 7).

Setting: d = 2000, m = 2 (md = 4000), n = 4 d, GeLU, square loss, phase retrieval y = z^2 with z = x[:, 0],
Theta ~ N(0, I/d) entries, no ridge.  Times hessian_bottom(k = 10, method="lanczos") against the dense path
(dense_hessian + numpy.linalg.eigh; build and eigh reported separately) and prints the speed-up (goal >= 20x) and
the difference of the bottom eigenvalue (goal <= 1e-6).  With --compare it also times the block method without
the float32 phase, scipy's eigsh on a LinearOperator (which="SA", the baseline; which="LA" on sigma_max I - H, the
shifted variant) and lobpcg (block 16, no preconditioner).

    python benchmarks/bench_hessian.py [--d 2000] [--m 2] [--k 10] [--seed 0] [--repeats 3] [--compare] [--no-dense]
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import theorykit as tk
from theorykit.spectrum import _apply_block, dense_hessian, hessian_bottom


def problem(d: int, m: int, delta: float, seed: int):
    rng = np.random.default_rng(seed)
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    y = X[:, 0] ** 2  # phase retrieval, z = x[:, 0]
    theta = rng.standard_normal((d, m)) / np.sqrt(d)
    net = tk.Network("gelu", "square", m)
    return X, net.evaluate(X @ theta, y)


def scipy_variants(X, der, k, tol, ref):
    import scipy.sparse.linalg as sla

    md = X.shape[1] * der.F.shape[1]
    count = [0]

    def mv(v):
        count[0] += 1
        return _apply_block(X, der, v.reshape(md, 1), 0.0)[:, 0]

    def mm(V):
        count[0] += V.shape[1]
        return _apply_block(X, der, V, 0.0)

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
        print(f"  {name:32s} {sec:8.2f} s  {mvs:5d} matvecs  bottom diff vs dense {abs(lam0 - ref):.2e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=2000)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--delta", type=float, default=4.0)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compare", action="store_true", help="also time scipy eigsh (SA, shifted LA) and lobpcg")
    p.add_argument("--no-dense", action="store_true")
    args = p.parse_args(argv)

    X, der = problem(args.d, args.m, args.delta, args.seed)
    md = args.d * args.m
    print(f"d = {args.d}, m = {args.m}, md = {md}, n = {X.shape[0]}, k = {args.k}, gelu / square / y = z^2")

    times = []
    for _ in range(args.repeats):  # the first call includes one-time costs (page faults, BLAS start-up)
        t = time.perf_counter()
        spec = hessian_bottom(X, der, k=args.k, tol=args.tol, hard_dirs=np.eye(args.d)[:, 0])
        times.append(time.perf_counter() - t)
    t_lanczos = float(np.median(times))
    print(f"lanczos (block, mixed precision): median {t_lanczos:.2f} s of {args.repeats} runs "
          f"({', '.join(f'{x:.2f}' for x in times)}), {spec.matvecs} matvecs, max residual {spec.residuals.max():.1e}")
    print("  bottom eigenvalues:", np.array2string(spec.eigenvalues, precision=6))
    print("  hard overlap^2 (axis 0):", np.array2string(spec.hard_overlap2, precision=4),
          f"hard weight {spec.hard_weight:.4f}")
    if args.no_dense:
        return
    t = time.perf_counter()
    H = dense_hessian(X, der)
    t_build = time.perf_counter() - t
    t = time.perf_counter()
    w, V = np.linalg.eigh(H)
    t_eigh = time.perf_counter() - t
    t_dense = t_build + t_eigh
    diff = np.abs(spec.eigenvalues - w[: args.k])
    ov = np.abs(np.einsum("kp,pk->k", spec.eigenvectors.reshape(args.k, -1), V[:, : args.k]))
    print(f"dense: build {t_build:.2f} s + numpy.linalg.eigh {t_eigh:.2f} s = {t_dense:.2f} s")
    print(f"speed-up (dense build + eigh) / lanczos: {t_dense / t_lanczos:.1f}x   "
          f"(eigh alone: {t_eigh / t_lanczos:.1f}x)")
    print(f"bottom eigenvalue: lanczos {spec.eigenvalues[0]:.12f}, dense {w[0]:.12f}, |diff| = {diff[0]:.2e}")
    print(f"max |diff| over the {args.k} eigenvalues: {diff.max():.2e}; min |<v_lanczos, v_dense>|: {ov.min():.10f}")
    if args.compare:
        print("scipy alternatives (same matvec):")
        scipy_variants(X, der, args.k, args.tol, w[0])


if __name__ == "__main__":
    main()
