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
def merge_plan(first: np.ndarray, size: np.ndarray, slot: np.ndarray, count: int, s: int, t: int, W: int,
               ops: np.ndarray) -> tuple:  # pragma: no cover - compiled
    """The storage blocks of source s (:class:`theorykit.dynamics.responses.DyadicJacobians`) due to merge at the end
    of step t, applied to the block list (first, size, slot; in order of first, ``count`` in use) and written to
    ``ops`` (rows (into, from, moved): the data of slot ``from`` merges into slot ``into``, then slot ``moved`` (the
    last in use) moves into the freed slot ``from`` unless they are the same).  Returns (count, number of ops).

    A block of size n holds the times s' = first, first + 2, ..., first + 2(n - 1): one parity, so that a path whose
    Jacobian alternates in sign from step to step (1 - eta D / delta < 0) is smooth within each block.  Two blocks of
    one parity merge when they are neighbours in it (the next starts at first + 2n), of equal size n, aligned on the
    source (first - s = parity mod 4n), and both the younger one's newest time at the next step and the older one's
    first time from the source at least 2 W n away: the merged block spans at most 2 / W of its distance from t and
    from the source."""
    nops = 0
    i = 0
    while i < count:
        n = size[i]
        j = i + 1
        while j < count and (first[j] - first[i]) % 2 != 0:
            j += 1  # the next block of the same parity
        if (j < count and size[j] == n and first[j] == first[i] + 2 * n and (first[i] - s) % (4 * n) < 2
                and t + 1 - (first[j] + 2 * (n - 1)) >= 2 * W * n and first[i] - s >= 2 * W * n):
            size[i] = 2 * n
            freed = slot[j]
            last = count - 1
            ops[nops, 0] = slot[i]
            ops[nops, 1] = freed
            ops[nops, 2] = last
            nops += 1
            for k in range(j, count - 1):  # the block list closes up
                first[k] = first[k + 1]
                size[k] = size[k + 1]
                slot[k] = slot[k + 1]
            count -= 1
            if freed != last:  # the last slot's data moves into the freed one
                for k in range(count):
                    if slot[k] == last:
                        slot[k] = freed
            i = max(i - 2, 0)  # the merged block may merge again
        else:
            i += 1
    return count, nops


@numba.njit(cache=True, fastmath=True)
def propagate_blocks(Rcum: np.ndarray, s: int, t: int, W: int, first: np.ndarray, size: np.ndarray,
                     slot: np.ndarray, count: int, Kbuf: np.ndarray, g: np.ndarray, gl: np.ndarray, cv: np.ndarray,
                     weights: np.ndarray, vals: np.ndarray) -> int:  # pragma: no cover - compiled
    """Source s of :class:`theorykit.dynamics.responses.DyadicJacobians` at time t: :func:`propagate_source` over the
    storage blocks it holds, K^t_s stored as a new block, then the blocks due to merge (:func:`merge_plan`) merged.
    Returns the number of blocks held.

    Rcum (t, m, m): the cumulative sums of R_theta(t, s') over s' of one parity (Rcum[s'] = R_theta(t, s') +
    Rcum[s' - 2]); the blocks, in order of time: first, size (the times first + 2i, i < size) and slot (their rows
    (slot, b) in Kbuf, (capacity m, NR m) float32, the mean over the block of K^s'_s); slots 0 .. count - 1 are in
    use.  A block enters the sum as (sum_{s' in B} R_theta(t, s')) mean_B K^s'_s.  A merge writes the mean of two
    blocks (equal sizes) into the older one's slot and moves the last slot's rows into the freed one (the sum does not
    depend on the slots' order)."""
    A = g.shape[0]
    P = count * A
    R = np.zeros((A, P), np.float32)
    tiny = np.float32(TINY32)
    for i in range(count):
        lo = first[i]
        hi = first[i] + 2 * (size[i] - 1)
        for a in range(A):
            for b in range(A):
                v = Rcum[hi, a, b] - (Rcum[lo - 2, a, b] if lo >= 2 else 0.0)
                v32 = np.float32(v)
                R[a, slot[i] * A + b] = np.float32(0.0) if abs(v32) < tiny else v32
    propagate_source(R, Kbuf[:P], g, gl, cv, weights, Kbuf[P:P + A], vals)
    first[count] = t
    size[count] = 1
    slot[count] = count
    count += 1
    ops = np.empty((count, 3), np.int64)
    count, nops = merge_plan(first, size, slot, count, s, t, W, ops)
    L = Kbuf.shape[1]
    for k in range(nops):
        into, frm, moved = ops[k, 0], ops[k, 1], ops[k, 2]
        for r in range(A):
            x = Kbuf[into * A + r]
            y = Kbuf[frm * A + r]
            for j in range(L):
                x[j] = np.float32(0.5) * (x[j] + y[j])
        if frm != moved:
            for r in range(A):
                Kbuf[frm * A + r, :] = Kbuf[moved * A + r, :]
    return count
