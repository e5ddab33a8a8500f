"""The DMFT's response estimators (docs/theory.md §3, numerics; §3.1 for kinks): R_u(t, s) = E[du^t/dw^s].

* Stein's lemma on the sampled field w = L xi: E[u^t xi^sT] = sum_{s<=s'<=t} R_u(t, s') L(s', s).  It needs no
  derivative of u, so it is exact for kinked ingredients; its noise grows as the innovations L(s, s) shrink
  (:func:`stein_lags`, and :func:`stein_equal_time` for s = t).
* Per-path Jacobians J^t_s = sum_{s<=s'<t} R_theta(t, s') D^s' J^s'_s on the whole batch for the last W lags
  (:func:`window_lags`), or on a response sub-batch for every lag (:func:`direct_lags`), or for long horizons on a
  dyadic grid of source times with R_u interpolated in s between them (:class:`DyadicJacobians`).

Each function advances one time t in place (or returns the block it computes); the sample side calls them.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla


def node_centred(u: np.ndarray, per_node: int, nodes: int) -> np.ndarray:
    """u (m, N) centred within each latent node (path n = p nodes + q), times P/(P-1) to undo the centring's 1/P bias.
    E[xi] = 0 exactly, so subtracting the node mean removes the part of the Stein estimate's Monte-Carlo error that
    is the node mean times the sample mean of xi."""
    m, N = u.shape
    uc = u.reshape(m, per_node, nodes)
    return ((uc - uc.mean(axis=1, keepdims=True)) * (per_node / max(per_node - 1, 1))).reshape(m, N)


def stein_equal_time(weighted_u: np.ndarray, xi_t: np.ndarray, Ltt: np.ndarray) -> np.ndarray:
    """R(t, t) from the newest innovation: E[c u^t xi^tT] = R(t, t) L(t, t) (c a weight independent of w, such as
    zeta^2), with ``weighted_u`` = c u^t times the path weights, (m, N); xi_t (m, N); returns (m, m)."""
    return sla.solve_triangular(Ltt, (weighted_u @ xi_t.T).T, lower=True, trans="T", check_finite=False).T


def stein_lags(E_u_xi: np.ndarray, known: np.ndarray, L: np.ndarray, t: int, lo: int, m: int) -> np.ndarray:
    """R(t, s) for s < lo from E[c u^t xi^sT] (``E_u_xi`` (m, lo, m) over s < lo) and the known R(t, s'), s' = lo..t
    (``known`` (t + 1 - lo, m, m)): sum_{s<=s'<=t} R(t, s') L(s', s) = E[c u^t xi^sT] is triangular in s.
    O(t m^2) per path-free solve; returns (lo, m, m)."""
    tm, lm = t * m, lo * m
    Lsub, Lrest = L[:lm, :lm], L[lm:tm + m, :lm]
    G = E_u_xi.reshape(m, lm) - known.transpose(1, 0, 2).reshape(m, tm + m - lm) @ Lrest  # (m, lo m)
    row = sla.solve_triangular(Lsub, G.T, lower=True, trans="T", check_finite=False).T
    return row.reshape(m, lo, m).transpose(1, 0, 2)


def window_lags(Ru, Kw, W: int, t: int, lo: int, R_theta, der, wt, m: int, N: int) -> None:
    """R_u(t, s) for lo <= s < t exactly on the whole batch: J^t_s = sum_{s<=s'<t} R_theta(t, s') K^s'_s with
    K^s'_s = D^s' J^s'_s kept for the last W steps (ring buffer Kw[s' % W, s % W] of (m, N, m) blocks); fills
    Ru[t, lo:t] and the ring buffer's row t."""
    g_, gl_, cv_ = der.grad_f.T, der.grad_f.T * der.l2, der.curv.T  # (m, N)
    for s_ in range(lo, t):
        J = np.zeros((m, N, m))
        for sp_ in range(s_, t):
            J += np.einsum("ab,bnc->anc", R_theta[t, sp_], Kw[sp_ % W, s_ % W])
        Kts = gl_[:, :, None] * np.einsum("bn,bnc->nc", g_, J)[None] + cv_[:, :, None] * J  # D^t J^t_s
        Ru[t, s_] = np.einsum("anc,n->ac", Kts, wt)
        Kw[t % W, s_ % W] = Kts
    Kw[t % W, t % W] = gl_[:, :, None] * g_.T[None] + cv_[:, :, None] * np.eye(m)[:, None, :]


def direct_lags(Ru, K, t: int, R_theta, der, rwt, m: int, NR: int, hard=None) -> None:
    """R_u(t, s) for s < t on the first NR paths: J^t_s = sum_{s<=s'<t} R_theta(t, s') K^s'_s, J^t_t = I,
    K^t_s = D^t J^t_s, R_u(t, s) = E[K^t_s].  K[s, s'] (float32) holds K^s'_s as (b, n, c) so that the sum over s'
    is one streaming pass per s (:func:`theorykit.dynamics._history.propagate_source`) reading only the nonzero
    triangle: O(t^2 m^3 NR) per step.  Fills Ru[t, :t] and K[:, t].  hard = (Ru_h (kH, T+1, T+1, m, m), weights
    (kH, NR)): also R_u^zeta_j(t, s) = E[zeta_j^2 K^t_s] from the same Jacobians (weights rwt zeta_j^2), for the hard
    process' kernels."""
    from ._history import column_copies, propagate_source  # numba: loaded on first use

    tm = t * m
    g = der.grad_f[:NR].T          # (m, NR)
    gl = g * der.l2[:NR]
    cv_ = der.curv[:NR].T          # (m, NR)
    if t:
        Rt = _flushed32(R_theta[t, :t].transpose(1, 0, 2).reshape(m, tm))  # (a, (s', b))
        wts = column_copies(_stacked_weights(rwt, hard), m)
        vals = np.zeros((t, len(wts), m, m))
        g32, gl32, cv32 = (column_copies(v, m) for v in (g, gl, cv_))
        for s_ in range(t):
            propagate_source(np.ascontiguousarray(Rt[:, s_ * m:]), K[s_, s_:t].reshape((t - s_) * m, NR * m),
                             g32, gl32, cv32, wts, K[s_, t].reshape(m, NR * m), vals[s_])
        Ru[t, :t] = vals[:, 0]
        if hard is not None:
            for j in range(len(hard[1])):
                hard[0][j, t, :t] = vals[:, 1 + j]
    K[t, t] = _flushed32(gl[:, :, None] * g.T[None, :, :] + cv_[:, :, None] * np.eye(m)[:, None, :])


def _flushed32(a: np.ndarray) -> np.ndarray:
    """a as float32 with the values below the smallest normal float32 set to 0 (subnormal operands are slow, and so
    small a response changes nothing: :data:`theorykit.dynamics._history.TINY32`)."""
    out = np.array(a, dtype=np.float32)
    out[np.abs(out) < np.finfo(np.float32).tiny] = 0.0
    return out


def _stacked_weights(rwt, hard) -> np.ndarray:
    """The response weights (NR,) and the hard kernels' (kH, NR), stacked as float32 (targets, NR)."""
    rows = [np.asarray(rwt)] + ([] if hard is None else [np.asarray(w) for w in hard[1]])
    return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


def dyadic_drop_lag(s: int, W: int) -> float:
    """The lag t - s at which source time s leaves the dyadic grid of :class:`DyadicJacobians`: W 2^v with 2^v the
    largest power of two dividing s (s = 0 never leaves)."""
    if s == 0:
        return math.inf
    return W * (s & -s)


@dataclass(frozen=True)
class DyadicSchedule:
    """The bookkeeping of :class:`DyadicJacobians` to T with W fine lags, fixed before any path is drawn.

    A source's stored history K^s'_s (s <= s' < t) is kept in storage blocks of times s' of one parity, merged two
    by two (:func:`theorykit.dynamics._history.merge_plan`) so that a block spans at most 2 / W of its distance from
    the source and from t.  The blocks depend only on the lag t - s, so one source to T describes them all.

    held[L]: blocks a source holds at lag L (its history s' in [s, s + L)); length[s]: how many steps source s stays
    on the grid; capacity[s]: its buffer, in blocks; live_peak: the most blocks held by all sources together at one
    step; reads: blocks read by all propagations to T (per response path; m^3 multiply-adds each)."""

    T: int
    W: int
    held: np.ndarray
    length: tuple
    capacity: tuple
    live_peak: int
    reads: int


@functools.lru_cache(maxsize=16)
def dyadic_schedule(T: int, W: int) -> DyadicSchedule:
    """The :class:`DyadicSchedule` to T with W fine lags (a dry run of one source's block list with the compiled
    kernel's own rule, :func:`theorykit.dynamics._history.merge_plan`)."""
    from ._history import merge_plan

    length = [int(min(dyadic_drop_lag(s, W), T + 1 - s)) for s in range(T + 1)]
    held = np.zeros(T + 1, dtype=np.int64)
    first, size, slot = (np.zeros(T + 2, dtype=np.int64) for _ in range(3))
    ops = np.empty((T + 2, 3), dtype=np.int64)
    count = 0
    for t in range(T + 1):
        held[t] = count
        first[count], size[count], slot[count] = t, 1, count
        count, _ = merge_plan(first, size, slot, count + 1, 0, t, W, ops)
    capacity = tuple(int(held[1:length[s]].max(initial=0)) + 1 for s in range(T + 1))
    cap = np.asarray(capacity)
    reads, live_peak = 0, 0
    for t in range(T + 1):
        src = np.arange(t + 1)
        alive = src[t - src < np.asarray(length[:t + 1])]
        reads += int(held[t - alive].sum())
        live_peak = max(live_peak, int(cap[alive].sum()))
    return DyadicSchedule(T, W, held, tuple(length), capacity, live_peak, reads)


def dyadic_source_floats(T: int, W: int) -> int:
    """(b, n, c) blocks per response path that every source's history would take on the grid without storage blocks:
    sum_s min(drop lag, T + 1 - s) (about T W (log2(T / W) + 2) / 2; the response batch is sized by it,
    :func:`theorykit.dynamics.plan.make_plan`)."""
    return int(sum(dyadic_schedule(T, W).length))


def dyadic_response_floats(T: int, W: int) -> int:
    """Stored (b, n, c) blocks per response path of :class:`DyadicJacobians` to T at the busiest step: the sum of the
    live sources' buffers (:class:`DyadicSchedule` capacity)."""
    return dyadic_schedule(T, W).live_peak


class DyadicJacobians:
    """Direct Jacobian responses on a dyadic grid of source times, with the old history stored in dyadic blocks
    (docs/theory.md §3, numerics: long times).

    J^t_s = sum_{s<=s'<t} R_theta(t, s') K^s'_s is propagated, on the response batch, for the source times s that are
    *active* at t: every s with lag t - s < W, and at lags in [2^(j-1) W, 2^j W) only the s divisible by 2^j (s = 0
    always).  A source leaves the grid once and for all at lag W 2^v (:func:`dyadic_drop_lag`), so the set at t is a
    subset of the set at t - 1 plus t: about W + (W/2) log2(t / W) sources instead of t.  R_u(t, s) is linearly
    interpolated in s between the active sources, with a relative spacing (spacing / lag) of at most 2 / W.

    The sum over s' runs over storage blocks (:class:`DyadicSchedule`): a block B of times s' of one parity (a path
    whose Jacobian alternates in sign, 1 - eta D / delta < 0, is smooth within it), spanning at most 2 / W of its
    distance from the source and from t, holds the mean of K^s'_s over B, and enters as
    (sum_{s' in B} R_theta(t, s')) mean_B K^s'_s.  The error of that product is the covariance of R_theta(t, .) and
    K^.(s) over B: second order in the block's relative size where both are smooth in s', as the interpolation in s.
    Cost per step sum_{active s} (blocks held) m^3 NR (:class:`DyadicSchedule` reads); memory
    :func:`dyadic_response_floats` m^2 NR float32.  With W > T no block merges and every source stays active: the
    full direct estimator (:func:`direct_lags`), to rounding.
    """

    def __init__(self, T: int, m: int, NR: int, W: int):
        self.T, self.m, self.NR, self.W = T, m, NR, int(W)
        self.schedule = dyadic_schedule(T, self.W)
        self.length = self.schedule.length
        self.K = [None] * (T + 1)  # K[s]: float32 (capacity m, NR m), rows (slot, b) of the blocks source s holds
        self.blocks = [None] * (T + 1)  # blocks[s]: (first, size, slot) int64 arrays, in order of time
        self.count = [0] * (T + 1)
        self.active = []

    def step(self, Ru, t: int, R_theta, der, rwt, hard=None) -> None:
        """Fill Ru[t, :t] (on the active sources, interpolated in s elsewhere), start source t and merge the storage
        blocks due at t; hard as in :func:`direct_lags` (the hard kernels on the same grid, interpolated alike)."""
        from ._history import column_copies, propagate_blocks  # numba: loaded on first use

        m, NR = self.m, self.NR
        keep = [s for s in self.active if t - s < self.length[s]]
        for s in self.active:
            if t - s >= self.length[s]:
                self.K[s] = self.blocks[s] = None  # left the grid: its history is no longer needed
        self.active = keep
        g = der.grad_f[:NR].T          # (m, NR)
        gl = g * der.l2[:NR]
        cv_ = der.curv[:NR].T
        if keep:
            Rcum = np.empty((t, m, m))  # cumulative sums of R_theta(t, s') over s' of one parity (the blocks')
            Rcum[0::2] = np.cumsum(R_theta[t, 0:t:2], axis=0)
            Rcum[1::2] = np.cumsum(R_theta[t, 1:t:2], axis=0)
            wts = column_copies(_stacked_weights(rwt, hard), m)
            vals_all = np.zeros((len(keep), len(wts), m, m))
            g32, gl32, cv32 = (column_copies(v, m) for v in (g, gl, cv_))
            for i, s in enumerate(keep):
                first, size, slot = self.blocks[s]
                self.count[s] = propagate_blocks(Rcum, s, t, self.W, first, size, slot, self.count[s], self.K[s],
                                                 g32, gl32, cv32, wts, vals_all[i])
            src = np.asarray(keep)
            off = np.setdiff1d(np.arange(t), src, assume_unique=True) if len(keep) < t else None
            targets = [Ru] + ([] if hard is None else list(hard[0]))
            for q, target in enumerate(targets):
                vals = vals_all[:, q]
                target[t, src] = vals
                if off is not None:  # the sources off the grid: linear interpolation in s (s = 0, t - 1 are on it)
                    for a in range(m):
                        for c in range(m):
                            target[t, off, a, c] = np.interp(off, src, vals[:, a, c])
        cap = self.schedule.capacity[t]
        self.K[t] = np.empty((cap * m, NR * m), dtype=np.float32)
        self.K[t][:m] = _flushed32(gl[:, :, None] * g.T[None, :, :]
                                   + cv_[:, :, None] * np.eye(m)[:, None, :]).reshape(m, NR * m)
        self.blocks[t] = (np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64))
        self.blocks[t][0][0], self.blocks[t][1][0] = t, 1
        self.count[t] = 1
        self.active.append(t)
