"""Classic spectral methods at finite d (the referee of docs/theory.md §6): the data matrix
M_n = (1/n) X^T diag(T(y)) X, its top eigenpairs, and a finite-d check of a link and preprocessing.  The simulator's
spectral initialisation uses the same data matrix.  With a matrix preprocessing (T(y) symmetric k x k) the data matrix
M_n = (1/n) sum_i T(y_i) (x) x_i x_i^T acts on V in R^{d x k} as (1/n) X^T [row i: T(y_i) (X V)_i]."""
from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh

from .._checks import check_number
from ..errors import TheorykitError
from ..symbolic.ingredients import (Preprocessing, link as make_link, matrix_preprocessing,
                                    preprocessing as make_preprocessing)

__all__ = ["data_matrix", "top_eigenpairs", "finite_d_top", "finite_d_spectrum", "matrix_data_operator",
           "finite_d_matrix_spectrum"]

#: rows per block when the dense data matrix is accumulated (no (n, d) temporary)
BLOCK_ROWS = 1024


def _T_values(y, T, delta):
    if callable(T) and not isinstance(T, (str, Preprocessing)):
        Z = np.asarray(T(np.asarray(y, dtype=float)), dtype=float)
    else:
        Z = make_preprocessing(T)(y, delta)
    if not np.all(np.isfinite(Z)):
        raise TheorykitError("T(y) is not finite at some samples")
    return Z


def data_matrix(X, y, T, delta=None, operator: bool = False):
    """M_n = (1/n) X^T diag(T(y)) X: dense (d, d) array, or a scipy LinearOperator when ``operator``.

    T: a preprocessing (string or :class:`Preprocessing`, evaluated at ``delta``) or a callable y -> T(y)."""
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    Z = _T_values(y, T, delta if delta is not None else n / d)
    if not operator:
        A = np.zeros((d, d))
        for s in range(0, n, BLOCK_ROWS):
            Xb = X[s:s + BLOCK_ROWS]
            A += (Xb * Z[s:s + BLOCK_ROWS, None]).T @ Xb
        A *= 1.0 / n
        return A
    def mv(v):
        return X.T @ (Z * (X @ np.asarray(v).ravel())) / n

    return LinearOperator((d, d), matvec=mv, rmatvec=mv, dtype=float)


def top_eigenpairs(X, y, T, delta=None, k: int = 1, tol: float = 1e-10, seed: int = 0):
    """The k largest eigenvalues (descending) and eigenvectors (d, k) of M_n, by scipy eigsh (Lanczos)."""
    op = data_matrix(X, y, T, delta, operator=True)
    v0 = np.random.default_rng(seed).standard_normal(op.shape[0])
    vals, vecs = eigsh(op, k=k, which="LA", tol=tol, v0=v0)
    order = np.argsort(vals)[::-1]
    return vals[order], vecs[:, order]


def finite_d_spectrum(link, T, delta, d: int, top: int = 1, seed: int = 0, tol: float = 1e-7):
    """Finite-d check of a link with k latent directions: x ~ N(0, I_d), n = round(delta d), latent z = x[:, :k].
    Returns (the ``top`` largest eigenvalues (top,), descending; each eigenvector's squared overlap with the latent
    subspace span(e_1..e_k) (top,); the latent parts (top, k)).  eigsh tolerance ``tol``."""
    L = make_link(link)
    delta = check_number("delta", delta, lambda v: v > 0, "> 0")
    n = int(round(delta * d))
    if not (1 <= top < d and L.k < d):
        raise TheorykitError(f"finite_d_spectrum: need 1 <= top < d and k < d (top = {top}, k = {L.k}, d = {d})")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    eps = rng.standard_normal(n) if L.noisy else None
    y = L.response(X[:, :L.k], eps)
    vals, vecs = top_eigenpairs(X, y, T, delta, k=top, tol=tol, seed=seed)
    lat = vecs[:L.k, :].T
    return vals, np.sum(lat ** 2, axis=1), lat


def finite_d_top(link, T, delta, d: int, seed: int = 0, tol: float = 1e-7):
    """Finite-d check: (top eigenvalue, overlap^2 of the top eigenvector with the latent subspace; e_1 for k = 1)
    (:func:`finite_d_spectrum` with top = 1)."""
    vals, ov, _ = finite_d_spectrum(link, T, delta, d, 1, seed, tol)
    return float(vals[0]), float(ov[0])


def matrix_data_operator(X, y, T, k: int, delta=None) -> LinearOperator:
    """M_n = (1/n) sum_i T(y_i) (x) x_i x_i^T as a LinearOperator on vec(V), V (d, k) row-major.  T: a k x k nested
    list of expressions in y and delta, or a callable (y, delta) -> (N, k, k) (symmetric; checked)."""
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    Tv = matrix_preprocessing(T, k)(np.asarray(y, dtype=float), delta if delta is not None else n / d)

    def mv(v):
        R = X @ np.asarray(v, dtype=float).reshape(d, k)
        return (X.T @ np.einsum("nab,nb->na", Tv, R) / n).ravel()

    return LinearOperator((d * k, d * k), matvec=mv, rmatvec=mv, dtype=float)


def finite_d_matrix_spectrum(link, T, delta, d: int, top: int = 1, seed: int = 0, tol: float = 1e-7):
    """Finite-d check of a matrix preprocessing: x ~ N(0, I_d), n = round(delta d), latent z = x[:, :k].  Returns
    (the ``top`` largest eigenvalues of M_n (top,), descending; each unit eigenvector's squared overlap with the
    latent subspace, ||V[:k]||_F^2 (top,); the latent parts V[:k] (top, k, k)), by scipy eigsh (tolerance ``tol``)."""
    L = make_link(link)
    delta = check_number("delta", delta, lambda v: v > 0, "> 0")
    n = int(round(delta * d))
    if not (1 <= top < d and L.k < d):
        raise TheorykitError(f"finite_d_matrix_spectrum: need 1 <= top < d and k < d (top = {top}, k = {L.k}, "
                             f"d = {d})")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    eps = rng.standard_normal(n) if L.noisy else None
    y = L.response(X[:, :L.k], eps)
    op = matrix_data_operator(X, y, T, L.k, delta)
    vals, vecs = eigsh(op, k=top, which="LA", tol=tol, v0=rng.standard_normal(d * L.k))
    order = np.argsort(vals)[::-1]
    V = vecs[:, order].T.reshape(top, d, L.k)
    lat = V[:, :L.k, :]
    return vals[order], np.sum(lat ** 2, axis=(1, 2)), lat
