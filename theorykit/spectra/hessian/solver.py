"""The bulk's matrix equation for S(z) (docs/theory.md §4): the m x m generalised Marchenko-Pastur law.

For z in C^+ (and, below the bulk, on the real axis) the m x m matrix S(z) solves

    F(S) = S^{-1} + z I - E[g(D, S)] = 0,     g(D, S) = (I + D S / delta)^{-1} D   (symmetric),

with E over the :class:`~theorykit.spectra.hessian.law.HessianLaw`.  :class:`Core` evaluates F, its Jacobian on the
m(m+1)/2 entries of the symmetric S, dF[E] = -S^{-1} E S^{-1} + E[g E g]/delta (the Newton step of the density and of
the real curve), the hard block Phi(S) = E[(zeta zeta^T) (x) g(D, S)] (kH m x kH m) and the domain test S > 0,
I + S^{1/2} D S^{1/2}/delta > 0 for every D of the law, vectorised over a batch of S.
"""
from __future__ import annotations

import numpy as np

from .law import HessianLaw

__all__ = ["Core", "batched_inv", "batched_mm"]


def batched_inv(A: np.ndarray) -> np.ndarray:
    """Batched inverse of (..., m, m), explicit for m <= 2."""
    m = A.shape[-1]
    if m == 1:
        return 1.0 / A
    if m == 2:
        a, b, c, d = A[..., 0, 0], A[..., 0, 1], A[..., 1, 0], A[..., 1, 1]
        det = a * d - b * c
        out = np.empty_like(A)
        out[..., 0, 0] = d / det
        out[..., 0, 1] = -b / det
        out[..., 1, 0] = -c / det
        out[..., 1, 1] = a / det
        return out
    return np.linalg.inv(A)


def batched_mm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Batched product of (..., m, m) arrays (broadcasting), explicit for m <= 2."""
    m = A.shape[-1]
    if m == 1:
        return A * B
    if m == 2:
        A0, A1 = A[..., :, 0:1], A[..., :, 1:2]
        return A0 * B[..., 0:1, :] + A1 * B[..., 1:2, :]
    return np.matmul(A, B)


def _sym_basis(m: int):
    """The pairs (a, b), a <= b, and the basis E_ab = e_a e_b^T + e_b e_a^T (a < b) or e_a e_a^T."""
    pairs = [(a, b) for a in range(m) for b in range(a, m)]
    E = np.zeros((len(pairs), m, m))
    for j, (a, b) in enumerate(pairs):
        E[j, a, b] = 1.0
        E[j, b, a] = 1.0
    return pairs, E


class Core:
    """F, its Jacobian, Phi and the domain test for one law, vectorised over a leading batch of S (L, m, m).

    g is built explicitly for m <= 2 (for m = 2, g = (D + det(D) adj(S)/delta) / det(I + D S/delta), adj being
    linear for 2 x 2 matrices), by batched inverses for m > 2; every expectation is a GEMM against the weights."""

    def __init__(self, law: HessianLaw):
        self.law = law
        self.w = law.weights
        self.D = law.D
        self.m = m = law.m
        self.delta = law.delta
        self.pairs, self.E = _sym_basis(m)
        self.iu = (np.array([a for a, _ in self.pairs]), np.array([b for _, b in self.pairs]))
        self.diag = np.array([a == b for a, b in self.pairs], dtype=float)
        if m == 2:
            self.d0, self.d1, self.d2 = law.D[:, 0, 0], law.D[:, 0, 1], law.D[:, 1, 1]
            self.detD = self.d0 * self.d2 - self.d1 * self.d1
            self._Q = np.stack([np.ones_like(self.d0), self.d0, self.d1, self.d2, self.detD])  # (5, N)
            self._Qc = self._Q.astype(complex)
        kH = law.kH
        # (N, kH^2)
        self.wzz = self.w[:, None] * np.einsum("na,nb->nab", law.zeta, law.zeta).reshape(len(self.w), kH * kH)

    def g(self, S: np.ndarray) -> np.ndarray:
        """g = (I + D S/delta)^{-1} D in entries-major layout (L, m*m, N) (entry p*m + q of g_n at [:, p*m+q, n])."""
        dl, m = self.delta, self.m
        L = S.shape[0]
        if m == 1:
            s = S[:, 0, 0][:, None]
            d = self.D[None, :, 0, 0]
            return (d / (1.0 + d * s / dl))[:, None, :]
        if m == 2:
            s0, s1, s2 = S[:, 0, 0], S[:, 0, 1], S[:, 1, 1]
            one = np.ones_like(s0)
            # rows of Q: 1, d0, d1, d2, det D; columns: a, num00, num01, num11 for each S of the batch
            coef = np.zeros((L, 4, 5), dtype=S.dtype)
            coef[:, 0] = np.stack([one, s0 / dl, 2 * s1 / dl, s2 / dl, (s0 * s2 - s1 * s1) / (dl * dl)], -1)
            coef[:, 1, 1], coef[:, 1, 4] = one, s2 / dl
            coef[:, 2, 2], coef[:, 2, 4] = one, -s1 / dl
            coef[:, 3, 3], coef[:, 3, 4] = one, s0 / dl
            Q = self._Q if S.dtype == float else self._Qc
            V = np.matmul(coef, Q)  # (L, 4, N)
            inv_a = 1.0 / V[:, 0]
            G = np.empty((L, 4, V.shape[2]), dtype=V.dtype)
            np.multiply(V[:, 1], inv_a, out=G[:, 0])
            np.multiply(V[:, 2], inv_a, out=G[:, 1])
            G[:, 2] = G[:, 1]
            np.multiply(V[:, 3], inv_a, out=G[:, 3])
            return G
        A = np.eye(m) + np.matmul(self.D[None], S[:, None]) / dl
        g = np.matmul(np.linalg.inv(A), self.D[None])  # (L, N, m, m)
        return np.ascontiguousarray(np.moveaxis(g.reshape(L, -1, m * m), 1, 2))

    @staticmethod
    def blocks(G, m):
        """(L, m*m, N) -> (L, N, m, m) view."""
        L, _, N = G.shape
        return np.moveaxis(G.reshape(L, m, m, N), 3, 1)

    def Eg(self, g):
        L = g.shape[0]
        return (g @ self.w).reshape(L, self.m, self.m)

    def F(self, S, z, g):
        return batched_inv(S) + z[:, None, None] * np.eye(self.m) - self.Eg(g)

    def jac(self, S, g):
        """(L, p, p): column j = upper entries of dF[E_j] = -S^{-1} E_j S^{-1} + E[g E_j g]/delta."""
        Si = batched_inv(S)
        L, m, p = S.shape[0], self.m, len(self.pairs)
        G2 = np.matmul(g * self.w, np.swapaxes(g, 1, 2)).reshape(L, m, m, m, m)  # E[g_pr g_sq]
        J = np.empty((L, p, p), dtype=np.result_type(S, g))
        for j in range(p):
            Ej = self.E[j]
            col = -batched_mm(batched_mm(Si, Ej), Si) + np.einsum("lprsq,rs->lpq", G2, Ej) / self.delta
            J[:, :, j] = col[:, self.iu[0], self.iu[1]]
        return J

    def vec(self, M):
        return M[..., self.iu[0], self.iu[1]]

    def mat(self, v):
        M = np.zeros(v.shape[:-1] + (self.m, self.m), dtype=v.dtype)
        M[..., self.iu[0], self.iu[1]] = v
        M[..., self.iu[1], self.iu[0]] = v
        return M

    def Phi(self, g):
        """(L, kH m, kH m) = E[(zeta zeta^T) (x) g]."""
        L, m, kH = g.shape[0], self.m, self.law.kH
        P = np.matmul(g, self.wzz).reshape(L, m, m, kH, kH)  # [l, p, q, a, b]
        return P.transpose(0, 3, 1, 4, 2).reshape(L, kH * m, kH * m)

    def in_domain(self, S: np.ndarray) -> bool:
        """S > 0 and I + S^{1/2} D S^{1/2}/delta > 0 for every D (one real S (m, m))."""
        dl = self.delta
        if self.m == 1:
            s = S[0, 0]
            return bool(s > 0 and (1.0 + self.D[:, 0, 0] * s / dl).min() > 0)
        if self.m == 2:
            s0, s1, s2 = S[0, 0], S[0, 1], S[1, 1]
            det = s0 * s2 - s1 * s1
            if not (s0 > 0 and det > 0):
                return False
            # det(I + D S/delta) > 0 and tr(I + D S/delta) > 0, as one (2, 5) x (5, N) product over the rows of Q
            coef = np.array([[1.0, s0 / dl, 2 * s1 / dl, s2 / dl, det / (dl * dl)],
                             [2.0, s0 / dl, 2 * s1 / dl, s2 / dl, 0.0]])
            return bool((coef @ self._Q).min() > 0)
        ev, U = np.linalg.eigh(S)
        if ev[0] <= 0:
            return False
        R = (U * np.sqrt(ev)) @ U.T
        M = np.matmul(np.matmul(R[None], self.D), R[None]) / dl
        return bool(np.linalg.eigvalsh(M)[:, 0].min() > -1.0)
