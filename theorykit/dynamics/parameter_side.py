"""The DMFT's parameter side: the linear Gaussian process of one coordinate of the complement (docs/theory.md §3).

    theta^{t+1} = (1 - eta_t lambda) theta^t - eta_t sum_{s<=t} R_u(t, s) theta^s - (eta_t / delta) g^t,
    theta^0 ~ N(0, Sigma_0), g ~ GP(0, delta C_u),

solved in closed form by the kernels P_t, R_theta(t, s), C_theta(t, s) (see :class:`ParameterSide`).  The hard process
with Stein kernels (a kinked ingredient) runs the same recursion with R_u^zeta, C_u^zeta.
"""
from __future__ import annotations

import numpy as np


class ParameterSide:
    """The linear Gaussian parameter-side process of docs/theory.md §3 (see the module docstring).

    Arrays (t-major): P (T+1, m, m); R (T+1, T+1, m, m) with R[t, s] = R_theta(t, s) (zero for s >= t);
    C (T+1, T+1, m, m) with C[t, s] = C_theta(t, s).  ``advance(t, Ru, Cu)`` fills time t from the kernels of the
    sample side at times < t; ``advance_response(t, Ru)`` fills only P_t and R_theta(t, .), which need R_u alone
    (the sample side computes its next memory term before C_u(t, .) is known).  Used for Theta_perp (kernels R_u,
    C_u), and for the hard process on its kernels (else :func:`hard_tangents`).
    """

    def __init__(self, T: int, m: int, Sigma0: np.ndarray, etas: np.ndarray, delta: float, ridge):
        """ridge: a number, or one per step (the spectral prefix has none); ``scale[t]`` (default 1) multiplies the
        whole step t -> t+1 (the prefix normalises theta every step: theta^{t+1} = scale_t (keep theta^t - eta ...))."""
        self.m, self.Sigma0, self.etas, self.delta = m, Sigma0, etas, delta
        self.ridges = np.broadcast_to(np.asarray(ridge, dtype=float), (len(etas),))
        self.scale = np.ones(len(etas))
        self.P = np.zeros((T + 1, m, m))
        self.R = np.zeros((T + 1, T + 1, m, m))
        self.C = np.zeros((T + 1, T + 1, m, m))
        self._responded = None  # (t, scale) of the last advance_response

    def advance_response(self, t: int, Ru: np.ndarray):
        """P_t and R_theta(t, s), s < t, from R_u at times < t (and the step's scale)."""
        key = (t, float(self.scale[t - 1]) if t else 1.0)
        if self._responded == key:
            return
        self._responded = key
        I = np.eye(self.m)
        P, R = self.P, self.R
        if t == 0:
            P[0] = I
        else:
            eta, keep = self.etas[t - 1], 1.0 - self.etas[t - 1] * self.ridges[t - 1]
            if self.scale[t - 1] != 1.0:
                eta, keep = eta * self.scale[t - 1], keep * self.scale[t - 1]
            P[t] = keep * P[t - 1] - eta * np.tensordot(Ru[t - 1, :t], P[:t], axes=([0, 2], [0, 1]))
            if t >= 2 and self.m == 1:  # the same product on the (t, t) planes in place (tensordot copies R's slice)
                R[t, :t - 1, 0, 0] = keep * R[t - 1, :t - 1, 0, 0] - eta * (Ru[t - 1, :t, 0, 0] @ R[:t, :t - 1, 0, 0])
            elif t >= 2:
                # sum_p R_u(t-1, p) R_theta(p, s): one BLAS product (a, (p b)) x ((p b), (s c)) -> (a, s, c)
                RR = np.tensordot(Ru[t - 1, :t], R[:t, :t - 1], axes=([0, 2], [0, 2]))
                R[t, :t - 1] = keep * R[t - 1, :t - 1] - eta * RR.transpose(1, 0, 2)
            R[t, t - 1] = -(eta / self.delta) * I

    def advance(self, t: int, Ru: np.ndarray, Cu: np.ndarray):
        """Time t: P_t, R_theta(t, .) (:meth:`advance_response`, not repeated) and C_theta(t, s) for s <= t."""
        self.advance_response(t, Ru)
        P, R, C = self.P, self.R, self.C
        # C_theta(t, s) for s <= t
        row = np.tensordot(P[:t + 1], P[t] @ self.Sigma0, axes=([2], [1])).transpose(0, 2, 1)
        if t >= 1 and self.m == 1:  # as below on the (t, t) planes, without tensordot's copies
            B1 = R[t, :t, 0, 0] @ Cu[:t, :t, 0, 0]
            row[:, 0, 0] += self.delta * (R[:t + 1, :t, 0, 0] @ B1)
        elif t >= 1:
            # B(b) = sum_a R(t, a) C_u(a, b), b < t, as (i, b, k); then sum_b B(b) R(s, b)^T
            B = np.tensordot(R[t, :t], Cu[:t, :t], axes=([0, 2], [0, 2]))
            row = row + self.delta * np.tensordot(B, R[:t + 1, :t], axes=([1, 2], [1, 3])).transpose(1, 0, 2)
        C[t, :t + 1] = row
        C[:t + 1, t] = np.swapaxes(row, 1, 2)
