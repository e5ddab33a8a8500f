"""Compiled per-path linear algebra of the stationary state's proximal descent
(:meth:`theorykit.dynamics.stationary._Prox._descend`): for width m <= 2 every per-sample Hessian is an explicit 2 x 2
(or 1 x 1) matrix, so the Newton step, its safeguard and the objective are computed in one pass over the paths instead
of a dozen NumPy passes over (N, m, m) arrays.  The network's values (loss, F, D) come from NumPy (the user's
expressions); only what follows them is compiled."""
from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, error_model="numpy")  # a degenerate trial point gives inf / NaN (as NumPy), not an exception
def newton_step(r, omega, loss, F, D, Ci, C, tol, step, convex, small, phi):  # pragma: no cover - compiled
    """Per path n (r, omega, F (N, m); loss (N,); D (N, m, m); Ci = C^{-1}, C (m, m)):

    grad = (r - omega) Ci + F, H = Ci + D;  step = H^{-1} grad where H is positive definite (convex), else C grad;
    small: max|step| <= tol (1 + max|omega|);  phi = (r - omega)^T Ci (r - omega) / 2 + loss.
    Outputs written to step (N, m), convex, small (N,) bool, phi (N,)."""
    N, m = r.shape
    for n in range(N):
        if m == 1:
            d0 = r[n, 0] - omega[n, 0]
            g0 = d0 * Ci[0, 0] + F[n, 0]
            h = Ci[0, 0] + D[n, 0, 0]
            cv = h > 0.0
            s0 = g0 / h if cv else C[0, 0] * g0
            step[n, 0] = s0
            convex[n] = cv
            small[n] = abs(s0) <= tol * (1.0 + abs(omega[n, 0]))
            phi[n] = 0.5 * Ci[0, 0] * d0 ** 2 + loss[n]
        else:
            d0 = r[n, 0] - omega[n, 0]
            d1 = r[n, 1] - omega[n, 1]
            g0 = d0 * Ci[0, 0] + d1 * Ci[1, 0] + F[n, 0]
            g1 = d0 * Ci[0, 1] + d1 * Ci[1, 1] + F[n, 1]
            a = Ci[0, 0] + D[n, 0, 0]
            b = Ci[0, 1] + D[n, 0, 1]
            e = Ci[1, 0] + D[n, 1, 0]
            d = Ci[1, 1] + D[n, 1, 1]
            # the smaller eigenvalue of H (as theorykit.rules.sym_eigvals: from the upper triangle)
            lam = 0.5 * (a + d) - math.sqrt(0.25 * (a - d) ** 2 + b * b)
            cv = lam > 0.0
            if cv:
                det = a * d - b * e
                s0 = (d * g0 - b * g1) / det
                s1 = (a * g1 - e * g0) / det
            else:
                s0 = g0 * C[0, 0] + g1 * C[1, 0]
                s1 = g0 * C[0, 1] + g1 * C[1, 1]
            step[n, 0] = s0
            step[n, 1] = s1
            convex[n] = cv
            small[n] = max(abs(s0), abs(s1)) <= tol * (1.0 + max(abs(omega[n, 0]), abs(omega[n, 1])))
            phi[n] = 0.5 * (d0 * (Ci[0, 0] * d0 + Ci[1, 0] * d1) + d1 * (Ci[0, 1] * d0 + Ci[1, 1] * d1)) + loss[n]


def step_arrays(r: np.ndarray, omega: np.ndarray, loss, F, D, Ci: np.ndarray, C: np.ndarray, tol: float) -> tuple:
    """(step (N, m), convex (N,), small (N,), phi (N,)) of :func:`newton_step` for width m <= 2."""
    N, m = r.shape
    step = np.empty((N, m))
    convex = np.empty(N, np.bool_)
    small = np.empty(N, np.bool_)
    phi = np.empty(N)
    newton_step(np.ascontiguousarray(r, dtype=float), np.ascontiguousarray(omega, dtype=float),
                np.ascontiguousarray(loss, dtype=float), np.ascontiguousarray(F, dtype=float),
                np.ascontiguousarray(D, dtype=float), np.ascontiguousarray(Ci, dtype=float),
                np.ascontiguousarray(C, dtype=float), float(tol), step, convex, small, phi)
    return step, convex, small, phi
