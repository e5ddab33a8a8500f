"""The finite-d Hessian of the empirical risk and its bottom eigenpairs (docs/theory.md §4 and §7).

For L(Theta) = (1/n) sum_i loss(y_i, f(Theta^T x_i)) + (ridge/2) ||Theta||_F^2, with Theta in R^{d x m},

    H = (1/n) sum_i D_i (x) x_i x_i^T + ridge I            (md x md),   D_i = D(r_i, y_i),  r_i = Theta^T x_i,
    H V = (1/n) X^T [D_i (X V)_i]_i + ridge V               for V in R^{d x m}: two matmuls and D_i per sample.

Vector convention (stated once, here): a vector of length md is a Theta-shaped (d, m) array flattened in C order,
i.e. entry a*m + j is Theta[a, j] (input coordinate a, hidden unit j).  ``dense_hessian`` and the flattened
eigenvectors use this order; eigenvectors are returned reshaped to (d, m) with unit Frobenius norm.

The per-sample D_i come only from :meth:`theorykit.Network.evaluate` (a :class:`theorykit.Derivatives`), through
``derivs.D_apply`` (single products) and ``derivs.D`` (block products and dense assembly): there is no second copy of
the network's derivatives.

Bottom eigenpairs (``hessian_bottom``, method "lanczos"): a block Krylov method (block Lanczos with full
reorthogonalisation and thick restart by Rayleigh-Ritz; the expansion block is the residual block of the lowest
unconverged Ritz pairs, which spans the same space as the next block-Krylov step).  Krylov spaces are shift
invariant, so no spectral shift is needed: Rayleigh-Ritz picks the smallest algebraic Ritz values directly, and
convergence is tested on residuals against ||H|| (ARPACK tests them against |lambda|, which asks for tiny
residuals when the wanted eigenvalues are near zero).  What makes it fast:

* the product: H Q for a block Q of b vectors is fused over row chunks of X (R = X_c Q, R_i <- D_i R_i,
  acc += X_c^T R while X_c is in cache), so one block product streams X from memory once; the chunks are split
  between threads that each run single-threaded BLAS (multi-threaded BLAS on small chunks synchronises in every call
  and collapses when the cores are shared);
* precision: the Krylov phase uses float32 products (float32 copy of X made in the same chunked pass that computes
  |x_i|^2 and checks finiteness), then ONE float64 product on the lowest Ritz vectors, a float64 Rayleigh-Ritz and
  the convergence test on float64 residuals.  float32 products carry errors ~1e-7 ||H||: if tol asks for more
  (tol < TOL32), float64 Lanczos continues from there;
* the start block (3k + 2 columns, wider than the later blocks of max(k, 8)) holds the single-sample spike vectors
  x_i (x) u_i (docs/theory.md §4: the negative end of H is made of such spikes); they carry most of each of the
  bottom eigenvectors in the benchmark problem.

Speed against numpy.linalg.eigh of the dense Hessian, and the alternatives tried (scipy eigsh, lobpcg,
Chebyshev-filtered subspace iteration, which needs more products than block Lanczos because the Krylov space of the
same dimension contains the best polynomial filter for every Ritz vector): ``python benchmarks/bench_hessian.py``,
tables/lanczos_bench.md and its notes.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.linalg import eigh as scipy_eigh

from ..errors import TheorykitError
from ..symbolic.network import Derivatives, eigen_range

__all__ = ["HessianSpectrum", "hessian_matvec", "dense_hessian", "hessian_bottom", "DENSE_MAX"]

#: the largest md that ``dense_hessian`` accepts (an md x md float64 matrix: 288 MB at md = 6000).
DENSE_MAX = 6000


@dataclass(frozen=True)
class HessianSpectrum:
    """Bottom k eigenpairs of the Hessian.

    eigenvalues (k,) ascending; eigenvectors (k, d, m), unit Frobenius norm, Theta-shaped;
    hard_overlap2 (k,) = ||hard_dirs^T V_j||_F^2 (zeros without hard_dirs); hard_weight = their sum;
    method "lanczos" or "dense"; matvecs = number of Hessian-vector products (a block of b vectors counts b);
    residuals (k,) = ||H v_j - lambda_j v_j|| from a fresh product (zeros for "dense").
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    hard_overlap2: np.ndarray
    hard_weight: float
    method: str
    matvecs: int
    residuals: np.ndarray


# ---------------------------------------------------------------------------------------------- validation
def _check(X, derivs, ridge, check_x: bool = True) -> tuple[np.ndarray, int, int, int, float]:
    if not isinstance(derivs, Derivatives):
        raise TheorykitError("derivs must be a theorykit.Derivatives (from Network.evaluate), "
                             f"got {type(derivs).__name__}")
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise TheorykitError(f"X must be a 2-d array (n, d), got shape {X.shape}")
    n, d = X.shape
    F = np.asarray(derivs.F)
    if F.ndim != 2 or F.shape[0] != n:
        raise TheorykitError(f"derivs were evaluated at {F.shape[0] if F.ndim else '?'} samples but X has n = {n} rows")
    m = F.shape[1]
    if not all(np.all(np.isfinite(a)) for a in (derivs.l2, derivs.grad_f, derivs.curv)):
        raise TheorykitError("derivs contain non-finite values (overflow in the loss or activation derivatives?)")
    if check_x and not np.all(np.isfinite(X)):  # O(n d): skipped by hessian_matvec, which is called in loops
        raise TheorykitError("X contains non-finite values")
    try:
        ridge = float(ridge)
    except (TypeError, ValueError):
        raise TheorykitError(f"ridge must be a real number, got {ridge!r}") from None
    if not np.isfinite(ridge):
        raise TheorykitError(f"ridge must be finite, got {ridge}")
    return X, n, d, m, ridge


def block_product(X: np.ndarray, derivs: Derivatives, Q: np.ndarray, ridge: float) -> np.ndarray:
    """H Q for Q of shape (md, b) (columns are C-order flattened (d, m) arrays), returned in float64.

    Two full matmuls (reference implementation, used by the benchmark's scipy baselines);
    ``HessianOperator.apply`` is the fused, chunked version that hessian_bottom uses.  With a float32 X both matmuls
    run in float32."""
    n, d = X.shape
    md, b = Q.shape
    m = md // d
    R = (X @ Q.astype(X.dtype, copy=False).reshape(d, m * b)).reshape(n, m, b)
    out = np.matmul(derivs.D.astype(X.dtype, copy=False), R)  # D_i (m x m) applied to the b columns of sample i
    HQ = (X.T @ out.reshape(n, m * b)).reshape(md, b).astype(float, copy=False)
    HQ /= n
    if ridge:
        HQ += ridge * Q
    return HQ


def BLOCK_SIZE(k: int) -> int:
    """Default Lanczos block size for k wanted pairs.  b = k (at least 8): the expansion block holds the residuals of
    the lowest unconverged Ritz pairs, and extra columns beyond k cost products without saving steps (benchmark:
    b = 10 and b = 16 both take 14 steps, 163 vs 242 products)."""
    return max(k, 8)


def FIRST_BLOCK(k: int) -> int:
    """Default size of the first block (spike vectors plus 2 random): wider than the later blocks because one wide
    product costs little more than a narrow one (X is streamed once either way) and the spikes are good start
    vectors; 3k + 2 saved 2 of 18 passes over X in the benchmark (24 columns: 18 passes, 32: 16, 40: 16)."""
    return 3 * k + 2


#: the Lanczos basis holds at most MAX_DIM_BLOCKS blocks (and Q, HQ at most BASIS_BYTES) before a thick restart
MAX_DIM_BLOCKS = 24
BASIS_BYTES = 2 ** 28
#: the float32 phase stops at max(tol, TOL32): float32 products carry errors ~1e-7 ||H||, so smaller residuals need
#: float64 products
TOL32 = 1e-10
class LanczosNotConverged(TheorykitError):
    """Block Lanczos used its product budget without meeting the convergence test (the input was fine)."""


#: the float32 phase also stops when its worst wanted residual has not halved in this many block steps
ROUGH_STALL = 40

#: bytes of X per row chunk in the fused product: the chunk is read from memory once and re-read from cache
CHUNK_BYTES = 2 ** 21


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@contextmanager
def row_parallel(threads: Optional[int]):
    """A pool of ``threads`` Python threads for the fused products, each running single-threaded BLAS on its own row
    range (threadpoolctl limits BLAS to one thread: ``limiter()``).  Independent row ranges need no
    synchronisation until the final sum, unlike multi-threaded BLAS on small chunks, which synchronises its threads
    in every call and slows down badly when the cores are shared.  Yields (pool, limiter) or (None, None) when there
    is one thread or threadpoolctl is missing (then BLAS threads as usual); pool.threads is the number of threads."""
    threads = _cpu_count() if threads is None else int(threads)
    if threads <= 1:
        yield None, None
        return
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        yield None, None
        return
    controller = ThreadpoolController()
    with ThreadPoolExecutor(threads, thread_name_prefix="theorykit-hessian") as pool:
        pool.threads = threads
        yield pool, (lambda: controller.limit(limits=1, user_api="blas"))


#: float32 copies of X up to this size are kept for the next call with the same shape (the simulator calls
#: hessian_bottom at every checkpoint): a fresh 64 MB array costs ~20 ms of page faults and zeroing, ~4% of a call
BUFFER_CACHE_BYTES = 2 ** 29
_buffer_cache: dict = {}
_buffer_lock = threading.Lock()


def _take_buffer(shape) -> np.ndarray:
    """An uninitialised float32 array of this shape, from the cache when one is there (taken out of it while in use,
    so concurrent calls never share one)."""
    with _buffer_lock:
        buf = _buffer_cache.pop(tuple(shape), None)
    return buf if buf is not None else np.empty(shape, dtype=np.float32)


def _return_buffer(buf: np.ndarray):
    if buf.nbytes <= BUFFER_CACHE_BYTES:
        with _buffer_lock:
            _buffer_cache.clear()  # keep one buffer at most
            _buffer_cache[buf.shape] = buf


class HessianOperator:
    """Block products with H, fused over row chunks of X (one pass over X per block instead of two).

    For each chunk X_c of rows: R = X_c Q, R_i <- D_i R_i, acc += X_c^T R (computed transposed); the chunk
    (CHUNK_BYTES) is still in cache for the second matmul, so the product streams X from memory once.  With a thread
    pool (``row_parallel``) each thread takes a contiguous range of rows with its own accumulator.  ``single=True``
    products use a float32 copy of X and D (about 2x faster: half the bytes and twice the SIMD width), accumulated in
    float32 and returned in float64.  The float32 copy is made in the same chunked pass that computes the row norms
    |x_i|^2 (for the spike start) and checks that X is finite.
    """

    def __init__(self, X: np.ndarray, derivs: Derivatives, ridge: float, mixed: bool, pool=None, limiter=None):
        self.X, self.ridge = X, ridge
        self.n, self.d = X.shape
        self.D = derivs.D  # (n, m, m), from the network's derivatives
        self.m = self.D.shape[1]
        self.DT = np.ascontiguousarray(self.D.transpose(1, 2, 0))  # (m, m, n): D[:, j, l] contiguous per chunk
        self.X32 = self.DT32 = None
        self.pool, self.limiter = pool, limiter
        n, d = self.n, self.d
        rn = None
        with np.errstate(over="ignore", invalid="ignore"):
            if mixed:
                X32 = _take_buffer((n, d))
                rn = np.empty(n)

                def prepare(lo, hi):
                    for s in range(lo, hi, self._rows(4)):
                        e = min(s + self._rows(4), hi)
                        c = X32[s:e]
                        np.copyto(c, X[s:e], casting="same_kind")
                        rn[s:e] = np.einsum("ij,ij->i", c, c)

                self._map(prepare)
                if np.all(np.isfinite(rn)):
                    self.X32, self.DT32 = X32, self.DT.astype(np.float32)
                else:  # non-finite X, or entries beyond the float32 range: check, then stay in float64
                    _return_buffer(X32)
                    rn = None
            if rn is None:
                rn = np.einsum("ij,ij->i", X, X)
        if not np.all(np.isfinite(rn)) and not np.all(np.isfinite(X)):  # |x_i|^2 finite => x_i finite
            raise TheorykitError("X contains non-finite values")
        self.row_norm2 = rn

    @property
    def single(self) -> bool:
        return self.X32 is not None

    def release_single(self):
        """Drop the float32 copy (its memory goes back to the buffer cache)."""
        if self.X32 is not None:
            _return_buffer(self.X32)
        self.X32 = self.DT32 = None

    def _rows(self, itemsize: int) -> int:
        return max(16, CHUNK_BYTES // (itemsize * max(self.d, 1)))

    def _map(self, part):
        """[part(lo, hi) for the row ranges of the pool's threads] (one range without a pool)."""
        n = self.n
        if self.pool is None or n < 2 * self._rows(4):
            return [part(0, n)]
        w = self.pool.threads
        edges = [round(i * n / w) for i in range(w + 1)]
        with self.limiter():
            futures = [self.pool.submit(part, lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
            return [f.result() for f in futures]

    def apply(self, Q: np.ndarray, single: bool = False) -> np.ndarray:
        """H Q for Q (md, b), in float64 (single: float32 products).

        Computed transposed, (H Q)^T = sum_c [D (X_c Q)]^T X_c: with b ~ 10 columns, OpenBLAS runs the wide-output
        forms Q^T X_c^T and R^T X_c faster than X_c Q and X_c^T R (float32, 1 thread)."""
        d, m = self.d, self.m
        md, b = Q.shape
        X, DT = (self.X32, self.DT32) if single else (self.X, self.DT)
        QT = np.ascontiguousarray(np.asarray(Q, dtype=X.dtype).reshape(d, m * b).T)  # (m b, d), row j b + c
        cs = self._rows(X.dtype.itemsize)

        def part(lo, hi):
            accT = np.zeros((m * b, d), dtype=X.dtype)
            for s in range(lo, hi, cs):
                e = min(s + cs, hi)
                Xc = X[s:e]
                RT = (QT @ Xc.T).reshape(m, b, e - s)  # RT[l, c, i] = (X_c Q)_{i, l b + c}
                RT = np.einsum("jli,lci->jci", DT[:, :, s:e], RT)  # D_i applied per sample
                accT += RT.reshape(m * b, e - s) @ Xc
            return accT

        parts = self._map(part)
        HQT = parts[0].astype(float)
        for p in parts[1:]:
            HQT += p
        HQ = np.ascontiguousarray(HQT.T).reshape(md, b)
        HQ /= self.n
        if self.ridge:
            HQ += self.ridge * Q
        return HQ

    def spike_start(self, count: int) -> np.ndarray:
        """Start vectors x_i (x) u_i for the samples whose single-sample spike lambda_min(D_i) |x_i|^2 / n is lowest
        (u_i the bottom eigenvector of D_i): the negative end of H is made of such spikes (docs/theory.md §4)."""
        D = self.D
        lam_min = eigen_range(D)[0]  # closed form for m <= 2 (~20x faster than batched 2 x 2 eigh)
        idx = np.argsort(lam_min * self.row_norm2)[:count]
        U = np.linalg.eigh(D[idx])[1][:, :, 0]  # bottom eigenvectors u_i of the selected samples only
        S = self.X[idx][:, :, None] * U[:, None, :]  # (count, d, m)
        return S.reshape(len(idx), -1).T


# ---------------------------------------------------------------------------------------------- public API
def hessian_matvec(X, derivs: Derivatives, V, ridge: float = 0.0) -> np.ndarray:
    """H V = (1/n) X^T [D_i (X V)_i] + ridge V for V of shape (d, m) (or its C-order flattening); returns (d, m).

    X (n, d) are the inputs, derivs = Network.evaluate(X @ Theta, y).  Cost O(n d m).
    """
    X, n, d, m, ridge = _check(X, derivs, ridge, check_x=False)
    V = np.asarray(V, dtype=float)
    if V.shape not in ((d, m), (d * m,)):
        raise TheorykitError(f"V must have shape (d, m) = ({d}, {m}) or ({d * m},), got {V.shape}")
    V = V.reshape(d, m)
    out = X.T @ derivs.D_apply(X @ V)
    out /= n
    if ridge:
        out += ridge * V
    return out


def dense_hessian(X, derivs: Derivatives, ridge: float = 0.0) -> np.ndarray:
    """The md x md Hessian (C-order (d, m) index a*m + j), for small-md cross-checks (refuses md > 6000).

    Built from the m(m+1)/2 symmetric blocks B_jk = (1/n) X^T diag(D_jk) X, each by two rank-updates (dsyrk) on the
    samples with positive and negative weight: n d^2 flops per block.
    """
    X, n, d, m, ridge = _check(X, derivs, ridge)
    md = d * m
    if md > DENSE_MAX:
        raise TheorykitError(f"dense_hessian: md = {md} > {DENSE_MAX} (use hessian_matvec / hessian_bottom)")
    from scipy.linalg.blas import dsyrk

    D = derivs.D  # (n, m, m)
    H = np.zeros((d, m, d, m))
    Xf = np.asfortranarray(X)
    for j in range(m):
        for k in range(j, m):
            w = D[:, j, k] / n
            B = np.zeros((d, d), order="F")
            for sel, sgn in ((w > 0, 1.0), (w < 0, -1.0)):
                if np.any(sel):
                    A = np.asfortranarray(Xf[sel] * np.sqrt(np.abs(w[sel]))[:, None])
                    B = dsyrk(sgn, A, beta=1.0, c=B, trans=1, lower=0, overwrite_c=1)
            B = np.triu(B)
            B += np.triu(B, 1).T
            H[:, j, :, k] = B
            if k != j:
                H[:, k, :, j] = B
    H = H.reshape(md, md)
    if ridge:
        H[np.diag_indices(md)] += ridge
    return H


def _hard_overlap2(vecs: np.ndarray, hard_dirs, d: int) -> np.ndarray:
    """||E^T V_j||_F^2 for unit (k, d, m) eigenvectors; E (d, kH) with orthonormal columns."""
    k = vecs.shape[0]
    if hard_dirs is None:
        return np.zeros(k)
    E = np.asarray(hard_dirs, dtype=float)
    if E.ndim == 1:
        E = E[:, None]
    if E.ndim != 2 or E.shape[0] != d:
        raise TheorykitError(f"hard_dirs must have shape (d,) or (d, k_H) with d = {d}, got {np.shape(hard_dirs)}")
    if E.shape[1] == 0:  # no hard direction
        return np.zeros(k)
    if not np.all(np.isfinite(E)) or not np.allclose(E.T @ E, np.eye(E.shape[1]), atol=1e-8):
        raise TheorykitError("hard_dirs must have orthonormal columns (e.g. the hard columns of Theta*)")
    P = np.einsum("ah,kam->khm", E, vecs)
    return np.einsum("khm,khm->k", P, P)


def _orthonormalise_against(W: np.ndarray, Q: np.ndarray, drop: float = 1e-8) -> np.ndarray:
    """Columns of W made orthonormal and orthogonal to span(Q) (two Gram-Schmidt passes), dropping dependent ones."""
    norms0 = np.linalg.norm(W, axis=0)
    keep = norms0 > 0
    W = W[:, keep] / norms0[keep]
    for sweep in range(2):
        if Q.shape[1]:
            W = W - Q @ (Q.T @ W)
        if W.shape[1] == 0:
            return W
        # rank-revealing step: eigen-decompose the Gram matrix, keep well-conditioned directions
        G = W.T @ W
        s, U = np.linalg.eigh((G + G.T) / 2)
        good = s > drop ** 2 * max(1.0, s.max())
        W = W @ (U[:, good] / np.sqrt(s[good]))
        if sweep == 0 and good.all() and s.min() > 1e-4 * max(1.0, s.max()):
            # little cancellation (W was nearly orthogonal to span(Q), as Ritz residuals are, and well conditioned):
            # rounding errors along span(Q) were amplified by at most 1/sqrt(s_min) = 100, so the columns are
            # orthogonal to span(Q) to ~1e-14 and a second sweep ("twice is enough") would not change them
            break
    return W


def _ritz_converged(theta: np.ndarray, rn: np.ndarray, tol: float, scale: float, slack: float = 1.0) -> np.ndarray:
    """Residual test for Ritz pairs: ||r|| <= sqrt(tol) ||H|| and the eigenvalue error bound
    min(||r||, ||R_c||^2 / gap_c) <= tol ||H|| (Kato-Temple for clusters): Ritz values whose residual balls overlap
    form a cluster c (a degenerate eigenvalue, e.g. the kernel of a singular Hessian, gives Ritz values closer than
    their residuals), ||R_c|| is the cluster's block residual (the root sum of squares of its residuals) and gap_c
    the distance from the cluster to the nearest Ritz value outside it."""
    th = np.asarray(theta, dtype=float)
    p = len(rn)
    r_all = np.zeros(len(th))
    r_all[:p] = rn
    order = np.argsort(th, kind="stable")
    label = np.empty(len(th), int)
    c = 0
    for j, i in enumerate(order):
        if j and th[i] - th[order[j - 1]] > r_all[i] + r_all[order[j - 1]]:
            c += 1
        label[i] = c
    err = np.asarray(rn, dtype=float).copy()
    for lab in np.unique(label[:p]):
        inside = label == lab
        outside = th[~inside]
        if not len(outside):
            continue
        gap = float(np.min(np.abs(outside[:, None] - th[inside][None, :])))
        R2 = float(np.sum(r_all[inside] ** 2))
        mine = np.flatnonzero(inside[:p])
        err[mine] = np.minimum(err[mine], R2 / gap)
    return (rn <= slack * np.sqrt(tol) * scale) & (err <= slack * tol * scale)


def _rayleigh_ritz(Y: np.ndarray, AY: np.ndarray):
    """Rayleigh-Ritz on span(Y) (orthonormal columns) from the products AY = H Y: (theta, Z, AZ, ||AZ - Z theta||)."""
    T = Y.T @ AY
    theta, S = np.linalg.eigh((T + T.T) / 2)
    Z, AZ = Y @ S, AY @ S
    return theta, Z, AZ, np.linalg.norm(AZ - Z * theta, axis=0)


def _block_lanczos(apply, md: int, k: int, tol: float, block: int, max_dim: int, max_matvecs: int, rng,
                   start=None, known=None, rough: bool = False, scale: float = 0.0, first: int | None = None):
    """Bottom k eigenpairs of a symmetric operator given by apply((md, b)) -> (md, b).

    Block Krylov space with full reorthogonalisation; each step adds (at most b) residuals of the lowest
    unconverged Ritz pairs; when the basis would exceed max_dim, thick restart onto the lowest Ritz vectors.
    T = Q^T H Q is kept up to date incrementally (one small product per step).  The first block is ``known`` =
    (Q0, H Q0) (orthonormal Q0, products already computed) or else ``start`` completed with random columns to
    ``first`` columns (default b; a wider first block is cheaper per vector).
    rough=True (the float32 phase): stop at convergence or at max_matvecs without raising, and return the lowest
    max(b, k) Ritz pairs unverified.  Returns (theta, Y, residual norms, matvecs, scale) where scale ~ ||H|| is the
    largest |Ritz value| seen.
    """
    b = min(block, md)
    max_dim = min(max(max_dim, 3 * b + k, (first or 0) + b), md)
    Q = np.empty((md, max_dim), order="F")  # column-major: the active basis Q[:, :cur] is one contiguous block
    AQ = np.empty((md, max_dim), order="F")
    T = np.zeros((max_dim, max_dim))
    state = {"cur": 0, "matvecs": 0}

    def add(W, AW=None):
        cur, c = state["cur"], W.shape[1]
        if AW is None:
            AW = apply(np.ascontiguousarray(W))
            state["matvecs"] += c
        Q[:, cur:cur + c] = W
        AQ[:, cur:cur + c] = AW
        T[:cur + c, cur:cur + c] = Q[:, :cur + c].T @ AW
        T[cur:cur + c, :cur] = T[:cur, cur:cur + c].T
        state["cur"] = cur + c

    if known is not None:
        add(*known)
    else:
        f = min(max(first or b, b), md)
        V0 = rng.standard_normal((md, f))
        if start is not None:
            c = min(start.shape[1], f)
            V0[:, :c] = start[:, :c]
        add(_orthonormalise_against(V0, Q[:, :0]))
    scale = max(scale, np.finfo(float).tiny)
    keep_max = max(2 * b, k + b)  # the Ritz vectors kept at a thick restart
    while True:
        cur = state["cur"]
        Tc = (T[:cur, :cur] + T[:cur, :cur].T) / 2
        if cur <= 2 * keep_max or scale <= np.finfo(float).tiny:
            theta, S = np.linalg.eigh(Tc)
            scale = max(scale, float(np.abs(theta).max()))
        else:  # only the lowest Ritz pairs are used; the extreme Ritz values grow outwards (interlacing), so the
            # scale seen so far (or |theta_min|) is at most a slight underestimate: a stricter test, never looser
            theta, S = scipy_eigh(Tc, subset_by_index=[0, keep_max - 1], driver="evr")
            scale = max(scale, float(abs(theta[0])))
        p = min(max(b, k), cur)
        Y = Q[:, :cur] @ S[:, :p]
        R = AQ[:, :cur] @ S[:, :p] - Y * theta[:p]
        rn = np.linalg.norm(R, axis=0)
        done = _ritz_converged(theta, rn, tol, scale)
        full = cur >= md
        if rough:
            worst = float(rn[:k].max())
            hist = state.setdefault("worst", [])
            hist.append(worst)
            # stagnation: float32 products stop the residuals from falling further (no halving in ROUGH_STALL steps)
            stalled = len(hist) > ROUGH_STALL and min(hist[-ROUGH_STALL:]) > 0.5 * min(hist[:-ROUGH_STALL])
            if (p >= k and np.all(done[:k])) or full or state["matvecs"] >= max_matvecs or stalled:
                return theta[:p], Y, rn, state["matvecs"], scale
        if (p >= k and np.all(done[:k])) or full:
            # re-check the wanted pairs with a fresh product (guards against drift in the stored AQ)
            Yk = Y[:, :k]
            AYk = apply(np.ascontiguousarray(Yk))
            state["matvecs"] += k
            lam = np.einsum("ij,ij->j", Yk, AYk)
            res = np.linalg.norm(AYk - Yk * lam, axis=0)
            if full or np.all(_ritz_converged(np.concatenate([lam, theta[k:]]), res, tol, scale, slack=10.0)):
                order = np.argsort(lam)
                return lam[order], Yk[:, order], res[order], state["matvecs"], scale
            if state["matvecs"] >= max_matvecs:
                raise TheorykitError(f"hessian_bottom: Lanczos residuals did not hold up under a fresh product after "
                                     f"{state['matvecs']} matvecs (worst {res.max():.2e} vs ||H|| ~ {scale:.2e}, "
                                     f"tol {tol:.1e}); raise tol or use method='dense'")
            state["cur"] = 0  # drifted: restart from the current Ritz vectors with exact products
            add(_orthonormalise_against(Y, Q[:, :0]))
            continue
        if state["matvecs"] >= max_matvecs:
            raise LanczosNotConverged(f"hessian_bottom: Lanczos did not converge in {state['matvecs']} matvecs "
                                 f"(worst residual {rn[:k].max():.2e} vs ||H|| ~ {scale:.2e}, tol {tol:.1e}); "
                                 "raise max_matvecs or tol, or use method='dense'")
        W = R[:, np.flatnonzero(~done)[:b]]  # at most b new directions per step, lowest unconverged first
        if cur + W.shape[1] > max_dim:  # thick restart: keep the lowest Ritz vectors
            keep = min(max(2 * b, k + b), cur, max_dim - W.shape[1])
            Q[:, :keep] = Q[:, :cur] @ S[:, :keep]
            AQ[:, :keep] = AQ[:, :cur] @ S[:, :keep]
            T[:keep, :keep] = np.diag(theta[:keep])
            state["cur"] = cur = keep
        W = _orthonormalise_against(W, Q[:, :cur])[:, : md - cur]
        if W.shape[1] == 0:  # invariant subspace found: continue with random directions
            W = _orthonormalise_against(rng.standard_normal((md, min(b, md - cur))), Q[:, :cur])
            if W.shape[1] == 0:
                raise TheorykitError("hessian_bottom: Lanczos basis lost orthogonality; use method='dense'")
        add(W)


def _lanczos(X, derivs, ridge, k, tol, b, mmax, mixed, seed, pool, limiter):
    """The "lanczos" method of hessian_bottom: (eigenvalues, vectors (md, k), residuals, matvecs)."""
    md = X.shape[1] * np.asarray(derivs.F).shape[1]
    rng = np.random.default_rng(seed)
    # one chunked pass: row norms, finiteness, float32 copy
    op = HessianOperator(X, derivs, ridge, mixed, pool, limiter)
    first = min(max(b, FIRST_BLOCK(k)), md)
    start = op.spike_start(max(1, first - 2))  # plus >= 2 random columns
    max_dim = max(min(MAX_DIM_BLOCKS * b, BASIS_BYTES // (16 * md)), 3 * b + k, first + b)
    if not op.single:
        lam, vec, res, matvecs, _ = _block_lanczos(op.apply, md, k, tol, b, max_dim=max_dim, max_matvecs=mmax,
                                                   rng=rng, start=start, first=first)
        return lam, vec, res, matvecs
    # float32 Krylov does all the work; then ONE float64 product on the lowest Ritz vectors, Rayleigh-Ritz in
    # float64 and the convergence test on those float64 residuals
    # at most half the budget: where float32 cannot meet the test (a bottom cluster closer than float32's ~1e-7 ||H||
    # allows, e.g. gaps of 5e-5 ||H||), float64 Lanczos must still have room to finish from the float32 Ritz vectors
    _, Y, _, matvecs, scale = _block_lanczos(lambda Q: op.apply(Q, single=True), md, k, max(tol, TOL32), b,
                                             max_dim=max_dim, max_matvecs=max(mmax // 2, 1), rng=rng, start=start,
                                             rough=True, first=first)
    op.release_single()  # the float32 copy is not needed any more
    Y = _orthonormalise_against(Y, Y[:, :0])
    AY = op.apply(Y)
    matvecs += Y.shape[1]
    theta, Z, AZ, rn = _rayleigh_ritz(Y, AY)
    scale = max(scale, float(np.abs(theta).max()))
    if Z.shape[1] >= k and np.all(_ritz_converged(theta, rn, tol, scale, slack=10.0)[:k]):
        return theta[:k], Z[:, :k], rn[:k], matvecs
    # below the float32 floor (tol < ~1e-10) or not converged: float64 Lanczos from here
    lam, vec, res, mv, _ = _block_lanczos(op.apply, md, k, tol, b, max_dim=max_dim,
                                          max_matvecs=max(mmax - matvecs, 1), rng=rng, known=(Z, AZ), scale=scale)
    return lam, vec, res, matvecs + mv


def hessian_bottom(X, derivs: Derivatives, k: int = 10, ridge: float = 0.0, hard_dirs=None, method: str = "lanczos",
                   tol: float = 1e-10, *, block_size: int | None = None, max_matvecs: int | None = None,
                   mixed_precision: bool | None = None, seed: int = 0, threads: int | None = None) -> HessianSpectrum:
    """The k smallest (algebraic) eigenpairs of H, with their overlap with the hard directions.

    method "lanczos": block Lanczos on matrix-free products (module docstring).  tol is the relative accuracy of
    the eigenvalues (as in scipy's eigsh): a wanted pair is converged when its residual r = ||H v - lambda v||
    satisfies r <= sqrt(tol) ||H|| and min(r, r^2 / gap) <= tol ||H|| (gap = distance to the nearest other Ritz
    value, the Kato-Temple bound; ||H|| ~ the largest |Ritz value| seen).  Eigenvector errors are ~ r / gap, so
    overlaps are accurate to ~ sqrt(tol) ||H|| / gap.  The returned residuals come from a fresh product.
    method "dense": scipy eigh of dense_hessian (md <= 6000).
    hard_dirs: (d,) or (d, k_H) with orthonormal columns E; hard_overlap2_j = ||E^T V_j||_F^2.
    block_size (default max(k, 8)), max_matvecs (default max(5000, 2 md)) and seed (random part of the
    start block) tune the Lanczos run.  The start block holds single-sample spike vectors x_i (x) u_i (lowest
    lambda_min(D_i) |x_i|^2, u_i the bottom eigenvector of D_i; the negative end of H is made of such spikes,
    docs/theory.md §4) and two random vectors, 3k + 2 columns in all.
    mixed_precision (default: on when n d >= 10^6): the Krylov phase uses float32 products (about 2x faster) down to
    the tolerance, then one float64 product on the lowest Ritz vectors, a float64 Rayleigh-Ritz and the convergence
    test above on float64 residuals (float64 Lanczos continues if it fails, e.g. for tol < 1e-10, below float32's
    reach), so the result has full float64 accuracy either way.
    threads (default: the usable cores): threads for the fused block products, each running single-threaded BLAS on
    its own rows (small problems run in one of them); threadpoolctl limits BLAS to one thread (process-wide) while the
    Lanczos run lasts: multi-threaded BLAS on these small operations collapses when the cores are shared.
    threads=1 keeps BLAS's own threading.
    """
    X, n, d, m, ridge = _check(X, derivs, ridge, check_x=(method != "lanczos"))
    md = d * m
    if not isinstance(k, (int, np.integer)) or k < 1 or k > md:
        raise TheorykitError(f"k must be an integer in 1..md = {md}, got {k!r}")
    k = int(k)
    try:
        tol = float(tol)
    except (TypeError, ValueError):
        raise TheorykitError(f"tol must be a positive number, got {tol!r}") from None
    if not (tol > 0 and np.isfinite(tol)):
        raise TheorykitError(f"tol must be a positive number, got {tol!r}")
    if hard_dirs is not None:  # validate before the expensive part
        _hard_overlap2(np.zeros((1, d, m)), hard_dirs, d)
    if method == "dense":
        from scipy.linalg import eigh

        H = dense_hessian(X, derivs, ridge)
        lam, vec = eigh(H, subset_by_index=[0, k - 1])
        res = np.zeros(k)
        matvecs = 0
    elif method == "lanczos":
        b = int(block_size) if block_size is not None else BLOCK_SIZE(k)
        if b < 1:
            raise TheorykitError(f"block_size must be >= 1, got {block_size!r}")
        mmax = int(max_matvecs) if max_matvecs is not None else max(5000, 2 * md)
        mixed = (n * d >= 10 ** 6) if mixed_precision is None else bool(mixed_precision)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer))
                                    or threads < 1):
            raise TheorykitError(f"threads must be an integer >= 1 or None, got {threads!r}")
        with row_parallel(threads) as (pool, limiter):
            # BLAS single-threaded throughout (the small basis operations too): under shared cores, multi-threaded
            # BLAS spin-waits in every call
            with (limiter() if limiter is not None else nullcontext()):
                lam, vec, res, matvecs = _lanczos(X, derivs, ridge, k, tol, b, mmax, mixed, seed, pool, limiter)
    else:
        raise TheorykitError(f"method must be 'lanczos' or 'dense', got {method!r}")
    if not np.all(np.isfinite(lam)):
        raise TheorykitError("hessian_bottom: non-finite eigenvalues (are the derivatives finite?)")
    vecs = np.ascontiguousarray(vec.T).reshape(k, d, m)
    vecs /= np.linalg.norm(vecs.reshape(k, -1), axis=1)[:, None, None]
    ov = _hard_overlap2(vecs, hard_dirs, d)
    return HessianSpectrum(eigenvalues=np.asarray(lam, dtype=float), eigenvectors=vecs, hard_overlap2=ov,
                           hard_weight=float(ov.sum()), method=method, matvecs=int(matvecs),
                           residuals=np.asarray(res, dtype=float))
