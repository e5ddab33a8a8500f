"""Memory-bound kernels of the DMFT, compiled by numba: the sample side's pass over the u-history
(:func:`theorykit.dynamics.sample_side.history_pass`), each history row read once from memory and used for both
products while it is in cache; and the propagation of the direct Jacobian responses
(:mod:`theorykit.dynamics.responses`), a product with m output rows that streams the stored Jacobian history once."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, fastmath=True)
def history_kernel(Ut: np.ndarray, V: np.ndarray, R: np.ndarray, E: np.ndarray, mem: np.ndarray,
                   with_mem: bool) -> None:  # pragma: no cover - compiled
    """E[r, s] = sum_n V[r, n] Ut[s, n] for every row s of Ut; with_mem: mem[i, n] = sum_s R[i, s] Ut[s, n]."""
    rows, N = Ut.shape
    nr = V.shape[0]
    m = mem.shape[0]
    if with_mem:
        for i in range(m):
            for n in range(N):
                mem[i, n] = 0.0
    for s in range(rows):
        for r in range(nr):
            acc = 0.0
            for n in range(N):
                acc += V[r, n] * Ut[s, n]
            E[r, s] = acc
        if with_mem:
            for i in range(m):
                c = R[i, s]
                for n in range(N):
                    mem[i, n] += c * Ut[s, n]


#: the smallest normal float32: a stored Jacobian below it is set to 0.  Subnormal operands take a slow path in the
#: multiply-adds, so a history holding a few of them is read several times slower (measured in
#: tables/finite_d_wide_bench_notes.md), and values below 1e-38 of Jacobians of order 1 change nothing.
TINY32 = np.float32(np.finfo(np.float32).tiny)

#: floats of the Jacobian kept in the accumulator of :func:`propagate_source` (m rows of 8192 / m float32 stay in cache
#: while the stored history streams past)
ROWS_CHUNK = 8192


@numba.njit(cache=True, fastmath=True)
def propagate_source(R: np.ndarray, Kh: np.ndarray, g: np.ndarray, gl: np.ndarray, cv: np.ndarray,
                     weights: np.ndarray, Kout: np.ndarray, vals: np.ndarray) -> None:  # pragma: no cover - compiled
    """One source s of the direct Jacobian responses at time t (docs/theory.md §3, numerics), fused:

    J^t_s = R Kh, with R (m, P) = R_theta(t, s') over s' in [s, t) as (a, (s', b)) and Kh (P, NR m) the stored
    K^s'_s as ((s', b), (n, c)); then K^t_s = D^t J^t_s per path, D^t = gl g^T + diag(cv), written to Kout
    (m, NR m); and vals[q, a, c] += sum_n weights[q, n] K^t_s[a, n, c] (vals (targets, m, m), float64).  g, gl, cv
    (m, NR m) and weights (targets, NR m) are given per column (n, c), each path's value repeated m times
    (:func:`column_copies`), so that every loop runs over contiguous columns.

    Kh is read once, in chunks of :data:`ROWS_CHUNK` / m columns, two rows per pass, with the chunk's m rows of J
    accumulated in cache: the rate of one streaming read (a BLAS GEMM with m = 1..8 rows packs Kh first and was
    slower; tables/finite_d_wide_bench_notes.md)."""
    A, P = R.shape
    L = Kh.shape[1]
    Q = weights.shape[0]
    chunk = max(ROWS_CHUNK // (A * A), 1) * A  # whole paths per chunk
    acc = np.empty((A, chunk), np.float32)
    gJ = np.empty(chunk, np.float32)
    sums = np.zeros((Q, A, chunk))
    for c0 in range(0, L, chunk):
        w = min(chunk, L - c0)
        acc[:, :w] = 0.0
        p = 0
        while p + 1 < P:  # 1-d slices: LLVM vectorises the inner loop over them (2-d indexing it did not)
            K0 = Kh[p, c0:c0 + w]
            K1 = Kh[p + 1, c0:c0 + w]
            for a in range(A):
                r0 = R[a, p]
                r1 = R[a, p + 1]
                ac = acc[a]
                for j in range(w):
                    ac[j] += r0 * K0[j] + r1 * K1[j]
            p += 2
        if p < P:
            K0 = Kh[p, c0:c0 + w]
            for a in range(A):
                r0 = R[a, p]
                ac = acc[a]
                for j in range(w):
                    ac[j] += r0 * K0[j]
        for j in range(w):  # D^t J per column (n, c), on the per-column copies of g, gl, cv: vectorised
            gj = np.float32(0.0)
            for b in range(A):
                gj += g[b, c0 + j] * acc[b, j]
            gJ[j] = gj
        for a in range(A):
            ko = Kout[a, c0:c0 + w]
            ga = gl[a, c0:c0 + w]
            ca = cv[a, c0:c0 + w]
            ac = acc[a]
            for j in range(w):
                v = ga[j] * gJ[j] + ca[j] * ac[j]
                ko[j] = 0.0 if abs(v) < TINY32 else v  # subnormals flushed (TINY32)
            for q in range(Q):
                wq = weights[q, c0:c0 + w]
                sq = sums[q, a]
                for j in range(w):
                    sq[j] += wq[j] * ko[j]
    for q in range(Q):  # column j of a chunk is (n, c = j mod m): chunks hold whole paths
        for a in range(A):
            for j in range(chunk):
                vals[q, a, j % A] += sums[q, a, j]


def column_copies(v: np.ndarray, m: int) -> np.ndarray:
    """(rows, NR) -> (rows, NR m) float32, each path's value repeated for its m columns (n, c) (for
    :func:`propagate_source`)."""
    return np.ascontiguousarray(np.repeat(np.asarray(v, dtype=np.float32), m, axis=1))
