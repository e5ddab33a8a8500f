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



@numba.njit(cache=True)
def mergeable(first: int, size: int, nxt_first: int, nxt_size: int, s: int, t: int, W: int) -> bool:
    """Whether two neighbouring storage blocks of source s, [first, first + size) and the next, merge at the end of
    step t (:class:`theorykit.dynamics.responses.DyadicJacobians`): equal sizes n, aligned on source s (first - s
    divisible by 2n), and both the younger one's newest time at the next step and the older one's first time from
    the source at least W n away (the merged block is then at most 2 / W of its distance from either end)."""
    n = size
    return (nxt_size == n and nxt_first == first + n and (first - s) % (2 * n) == 0
            and t + 1 - (nxt_first + n - 1) >= W * n and first - s >= W * n)


@numba.njit(cache=True, fastmath=True)
def propagate_blocks(Rcum: np.ndarray, s: int, t: int, W: int, first: np.ndarray, size: np.ndarray,
                     slot: np.ndarray, count: int, Kbuf: np.ndarray, g: np.ndarray, gl: np.ndarray, cv: np.ndarray,
                     weights: np.ndarray, vals: np.ndarray) -> int:  # pragma: no cover - compiled
    """Source s of :class:`theorykit.dynamics.responses.DyadicJacobians` at time t: :func:`propagate_source` over the
    storage blocks it holds, K^t_s stored as a new block, then the blocks due to merge (:func:`mergeable`) merged.
    Returns the number of blocks held.

    Rcum (t, m, m): cumulative sums over s' of R_theta(t, s'); the blocks, in order of time: first, size (their
    times s' in [first, first + size)) and slot (their rows (slot, b) in Kbuf, (capacity m, NR m) float32, the mean
    over the block of K^s'_s); slots 0 .. count - 1 are in use.  A block enters the sum as
    (sum_{s' in B} R_theta(t, s')) mean_B K^s'_s.  A merge writes the mean of two blocks (equal sizes) into the older
    one's slot and moves the last slot's rows into the freed one (the sum does not depend on the slots' order)."""
    A = g.shape[0]
    P = count * A
    R = np.zeros((A, P), np.float32)
    tiny = np.float32(TINY32)
    for i in range(count):
        lo = first[i]
        hi = first[i] + size[i] - 1
        for a in range(A):
            for b in range(A):
                v = Rcum[hi, a, b] - (Rcum[lo - 1, a, b] if lo > 0 else 0.0)
                v32 = np.float32(v)
                R[a, slot[i] * A + b] = np.float32(0.0) if abs(v32) < tiny else v32
    propagate_source(R, Kbuf[:P], g, gl, cv, weights, Kbuf[P:P + A], vals)
    first[count] = t
    size[count] = 1
    slot[count] = count
    count += 1
    L = Kbuf.shape[1]
    i = 0
    while i + 1 < count:
        if not mergeable(first[i], size[i], first[i + 1], size[i + 1], s, t, W):
            i += 1
            continue
        sa, sb = slot[i], slot[i + 1]
        for r in range(A):
            x = Kbuf[sa * A + r]
            y = Kbuf[sb * A + r]
            for j in range(L):
                x[j] = np.float32(0.5) * (x[j] + y[j])
        size[i] *= 2
        for k in range(i + 1, count - 1):  # the block list closes up
            first[k] = first[k + 1]
            size[k] = size[k + 1]
            slot[k] = slot[k + 1]
        count -= 1
        if sb != count:  # the last slot's rows move into the freed slot
            for r in range(A):
                Kbuf[sb * A + r, :] = Kbuf[count * A + r, :]
            for k in range(count):
                if slot[k] == count:
                    slot[k] = sb
        i = max(i - 1, 0)  # the merged block may merge again with its neighbours
    return count
