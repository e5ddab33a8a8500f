"""The sample side's pass over the u-history (:func:`theorykit.dynamics.sample_side.history_pass`), compiled by numba:
each history row is read once, from memory, and used for both products while it is in cache."""
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
