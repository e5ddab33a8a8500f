"""The finite-d Hessian of the empirical risk and its bottom eigenpairs (THEORY.md sections 4 and 7).

For L(Theta) = (1/n) sum_i loss(y_i, f(Theta^T x_i)) + (ridge/2) ||Theta||_F^2, with Theta in R^{d x m},

    H = (1/n) sum_i D_i (x) x_i x_i^T + ridge I            (md x md),   D_i = D(r_i, y_i),  r_i = Theta^T x_i,
    H V = (1/n) X^T [D_i (X V)_i]_i + ridge V               for V in R^{d x m}: two matmuls and one D_apply.

Vector convention (stated once, here): a vector of length md is a Theta-shaped (d, m) array flattened in C order,
i.e. entry a*m + j is Theta[a, j] (input coordinate a, hidden unit j).  ``dense_hessian`` and the flattened
eigenvectors use this order; eigenvectors are returned reshaped to (d, m) with unit Frobenius norm.

The per-sample D_i come only from :meth:`theorykit.Network.evaluate` (a :class:`theorykit.Derivatives`), through
``derivs.D_apply`` (matvecs) and ``derivs.D`` (dense assembly): there is no second copy of the network's derivatives.

Bottom eigenpairs (``hessian_bottom``, method "lanczos"): a block Krylov method (block Lanczos with full
reorthogonalisation and thick restart by Rayleigh-Ritz; the expansion block is the residual block of the lowest
unconverged Ritz pairs, which spans the same space as the next block-Krylov step).  Why a block method: the matvec
streams the n x d matrix X twice and is memory-bound, so H applied to a block of 16 vectors costs about 1.5-2x one
vector, and the block method needs far fewer passes over X than single-vector Lanczos.  Krylov spaces are shift
invariant, so no spectral shift is needed: Rayleigh-Ritz picks the smallest algebraic Ritz values directly, and
convergence is tested on residuals against ||H|| (ARPACK tests them against |lambda|, which asks for tiny
residuals when the wanted eigenvalues are near zero).  Two accelerations: the start block holds the
single-sample spike vectors x_i (x) u_i (THEORY.md section 5: the negative end of H is made of such spikes), and a
first phase uses float32 products, followed by float64 Lanczos that makes every convergence decision.  Every
returned pair is re-checked with a fresh float64 product.

Measured (benchmarks/bench_hessian.py --compare; d = 2000, m = 2, n = 8000, GeLU, square loss, y = z^2, k = 10,
tol = 1e-10, 2 shared cores): this method 1.2-1.4 s (about 300 vector products); without the float32 phase 1.6 s;
scipy eigsh which="SA" 4.8-6.5 s (111-118 products); eigsh which="LA" on (sigma_max I - H) 8-10 s (about 180
products: no better than "SA", as shift invariance predicts); lobpcg (block 16, no preconditioner) 7.4 s (649
products, and it fails to converge at d = 300); dense_hessian 3.3-3.8 s + numpy.linalg.eigh 10.5-11.5 s.
Bottom eigenvalue vs dense eigh: |diff| ~ 5e-12.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import TheorykitError
from .symbolic.network import Derivatives

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


def _apply_block(X: np.ndarray, derivs: Derivatives, Q: np.ndarray, ridge: float) -> np.ndarray:
    """H Q for Q of shape (md, b) (columns are C-order flattened (d, m) arrays), returned in float64.

    With a float32 X (the first phase of mixed-precision Lanczos) both matmuls run in float32."""
    n, d = X.shape
    md, b = Q.shape
    m = md // d
    R = (X @ Q.astype(X.dtype, copy=False).reshape(d, m * b)).reshape(n, m, b)
    out = np.empty_like(R)
    for c in range(b):  # D_apply is O(n m): the loop is negligible next to the two matmuls
        out[:, :, c] = derivs.D_apply(R[:, :, c])
    HQ = (X.T @ out.reshape(n, m * b)).reshape(md, b).astype(float, copy=False)
    HQ /= n
    if ridge:
        HQ += ridge * Q
    return HQ


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
    for _ in range(2):
        if Q.shape[1]:
            W = W - Q @ (Q.T @ W)
        if W.shape[1] == 0:
            return W
        # rank-revealing step: eigen-decompose the Gram matrix, keep well-conditioned directions
        G = W.T @ W
        s, U = np.linalg.eigh((G + G.T) / 2)
        good = s > drop ** 2 * max(1.0, s.max())
        W = W @ (U[:, good] / np.sqrt(s[good]))
    return W


def _ritz_converged(theta: np.ndarray, rn: np.ndarray, tol: float, scale: float, slack: float = 1.0) -> np.ndarray:
    """Residual test for Ritz pairs: ||r|| <= sqrt(tol) ||H|| and the eigenvalue error bound
    min(||r||, ||r||^2 / gap) <= tol ||H|| (gap = distance to the nearest other Ritz value: Kato-Temple)."""
    th = np.asarray(theta)
    p = len(rn)
    if len(th) > 1:
        dist = np.abs(th[:p, None] - th[None, :])
        dist[np.arange(p), np.arange(p)] = np.inf
        gap = dist.min(axis=1)
    else:
        gap = np.full(p, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(gap > 0, np.minimum(rn, rn ** 2 / np.where(gap > 0, gap, 1.0)), rn)
    return (rn <= slack * np.sqrt(tol) * scale) & (err <= slack * tol * scale)


def _spike_start(X: np.ndarray, derivs: Derivatives, count: int) -> np.ndarray:
    """Start vectors x_i (x) u_i for the samples whose single-sample spike lambda_min(D_i) |x_i|^2 / n is lowest
    (u_i the bottom eigenvector of D_i): the negative end of H is made of such spikes (THEORY.md section 5)."""
    n, d = X.shape
    lam, U = np.linalg.eigh(derivs.D)
    score = lam[:, 0] * np.einsum("ij,ij->i", X, X)
    idx = np.argsort(score)[:count]
    S = X[idx][:, :, None] * U[idx, None, :, 0]  # (count, d, m)
    return S.reshape(len(idx), -1).T


def _block_lanczos(apply, md: int, k: int, tol: float, block: int, max_dim: int, max_matvecs: int, rng,
                   start=None, rough: bool = False):
    """Bottom k eigenpairs of a symmetric operator given by apply((md, b)) -> (md, b).

    Block Krylov space with full reorthogonalisation; each step adds (at most b) residuals of the lowest
    unconverged Ritz pairs; when the basis would exceed max_dim, thick restart onto the lowest Ritz vectors.
    T = Q^T H Q is kept up to date incrementally (one small product per step).  rough=True (the float32 phase):
    stop at convergence or at max_matvecs without raising, and return the lowest max(b, k) Ritz pairs unverified.
    """
    b = min(block, md)
    max_dim = min(max(max_dim, 3 * b + k), md)
    Q = np.empty((md, max_dim))
    AQ = np.empty((md, max_dim))
    T = np.zeros((max_dim, max_dim))
    state = {"cur": 0, "matvecs": 0}

    def add(W):
        cur, c = state["cur"], W.shape[1]
        AW = apply(np.ascontiguousarray(W))
        state["matvecs"] += c
        Q[:, cur:cur + c] = W
        AQ[:, cur:cur + c] = AW
        T[:cur + c, cur:cur + c] = Q[:, :cur + c].T @ AW
        T[cur:cur + c, :cur] = T[:cur, cur:cur + c].T
        state["cur"] = cur + c

    V0 = rng.standard_normal((md, b))
    if start is not None:
        c = min(start.shape[1], b)
        V0[:, :c] = start[:, :c]
    add(_orthonormalise_against(V0, Q[:, :0]))
    scale = np.finfo(float).tiny
    while True:
        cur = state["cur"]
        Tc = T[:cur, :cur]
        theta, S = np.linalg.eigh((Tc + Tc.T) / 2)
        scale = max(scale, float(np.abs(theta).max()))
        p = min(max(b, k), cur)
        Y = Q[:, :cur] @ S[:, :p]
        R = AQ[:, :cur] @ S[:, :p] - Y * theta[:p]
        rn = np.linalg.norm(R, axis=0)
        done = _ritz_converged(theta, rn, tol, scale)
        full = cur >= md
        if rough and ((p >= k and np.all(done[:k])) or full or state["matvecs"] >= max_matvecs):
            return theta[:p], Y, rn, state["matvecs"]
        if (p >= k and np.all(done[:k])) or full:
            # re-check the wanted pairs with a fresh product (guards against drift in the stored AQ)
            Yk = Y[:, :k]
            AYk = apply(np.ascontiguousarray(Yk))
            state["matvecs"] += k
            lam = np.einsum("ij,ij->j", Yk, AYk)
            res = np.linalg.norm(AYk - Yk * lam, axis=0)
            if full or np.all(_ritz_converged(np.concatenate([lam, theta[k:]]), res, tol, scale, slack=10.0)):
                order = np.argsort(lam)
                return lam[order], Yk[:, order], res[order], state["matvecs"]
            if state["matvecs"] >= max_matvecs:
                raise TheorykitError(f"hessian_bottom: Lanczos residuals did not hold up under a fresh product after "
                                     f"{state['matvecs']} matvecs (worst {res.max():.2e} vs ||H|| ~ {scale:.2e}, "
                                     f"tol {tol:.1e}); raise tol or use method='dense'")
            state["cur"] = 0  # drifted: restart from the current Ritz vectors with exact products
            add(_orthonormalise_against(Y, Q[:, :0]))
            continue
        if state["matvecs"] >= max_matvecs:
            raise TheorykitError(f"hessian_bottom: Lanczos did not converge in {state['matvecs']} matvecs "
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


def hessian_bottom(X, derivs: Derivatives, k: int = 10, ridge: float = 0.0, hard_dirs=None, method: str = "lanczos",
                   tol: float = 1e-10, *, block_size: int | None = None, max_matvecs: int | None = None,
                   mixed_precision: bool | None = None, seed: int = 0) -> HessianSpectrum:
    """The k smallest (algebraic) eigenpairs of H, with their overlap with the hard directions.

    method "lanczos": block Lanczos on matrix-free products (module docstring).  tol is the relative accuracy of
    the eigenvalues (as in scipy's eigsh): a wanted pair is converged when its residual r = ||H v - lambda v||
    satisfies r <= sqrt(tol) ||H|| and min(r, r^2 / gap) <= tol ||H|| (gap = distance to the nearest other Ritz
    value, the Kato-Temple bound; ||H|| ~ the largest |Ritz value| seen).  Eigenvector errors are ~ r / gap, so
    overlaps are accurate to ~ sqrt(tol) ||H|| / gap.  The returned residuals come from a fresh product.
    method "dense": scipy eigh of dense_hessian (md <= 6000).
    hard_dirs: (d,) or (d, k_H) with orthonormal columns E; hard_overlap2_j = ||E^T V_j||_F^2.
    block_size (default k + max(6, k // 2)), max_matvecs (default max(5000, 2 md)) and seed (random part of the
    start block) tune the Lanczos run.  The start block holds single-sample spike vectors x_i (x) u_i (lowest
    lambda_min(D_i) |x_i|^2, u_i the bottom eigenvector of D_i; the negative end of H is made of such spikes,
    THEORY.md section 5) and two random vectors.
    mixed_precision (default: on when n d >= 10^6): a first Lanczos phase with float32 products (about 1.5-2x
    faster per product) down to residuals ~1e-4 ||H||, then float64 Lanczos started from those Ritz vectors
    does all the convergence tests above, so the result has full float64 accuracy either way.
    """
    X, n, d, m, ridge = _check(X, derivs, ridge)
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
        b = int(block_size) if block_size is not None else k + max(6, k // 2)
        if b < 1:
            raise TheorykitError(f"block_size must be >= 1, got {block_size!r}")
        mmax = int(max_matvecs) if max_matvecs is not None else max(5000, 2 * md)
        rng = np.random.default_rng(seed)
        mixed = (n * d >= 10 ** 6) if mixed_precision is None else bool(mixed_precision)
        start = _spike_start(X, derivs, max(1, min(b, md) - 2))  # plus >= 2 random columns
        matvecs = 0
        if mixed:
            X32 = X.astype(np.float32)
            _, start, _, matvecs = _block_lanczos(lambda Q: _apply_block(X32, derivs, Q, ridge), md, k, 1e-8, b,
                                                  max_dim=8 * b, max_matvecs=min(mmax, 60 * b), rng=rng, start=start,
                                                  rough=True)
            del X32
        lam, vec, res, mv = _block_lanczos(lambda Q: _apply_block(X, derivs, Q, ridge), md, k, tol, b,
                                           max_dim=8 * b, max_matvecs=mmax, rng=rng, start=start)
        matvecs += mv
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
