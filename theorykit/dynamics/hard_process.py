"""The DMFT's hard-direction process at finite d (docs/theory.md §3.2): C_mu(t) = d E[Theta^tT e e^T Theta^t] of the
linear process of one hard direction e, by pathwise tangents (:func:`hard_tangents`).  With a kinked activation or loss
the solver uses Stein kernels and the parameter-side recursion instead (docs/theory.md §3.1).
"""
from __future__ import annotations


import numpy as np

#: hard process: noise drives taken exactly (top eigenvectors of delta C_u^zeta) and random drives for the rest
HARD_RANK = 32
HARD_RESIDUAL = 4
#: ... but no more exact drives than it takes to leave at most this fraction of the trace of delta C_u^zeta to the
#: random drives (measured: 12-16 of 1000 time points at T = 1000 for the bounded setting, 20-30 for phase retrieval)
HARD_RESIDUAL_FRACTION = 1e-4
#: memory budget of the tangents' history per replica, bytes: the tangents are propagated a group at a time, as many
#: as fit (all of them at the default 8192 paths per replica up to T ~ 200)
HARD_MEMORY = 2.56e8
#: with direct Jacobians on the whole batch the hard process runs on their kernels (the tangents' recursion summed
#: over paths); where the dyadic grid's interpolation in s moves P Sigma_0 P^T by more than this (relative, checked
#: against the first m tangents) the replica's hard process is run by pathwise tangents instead
HARD_KERNEL_TOL = 1e-3
#: time steps per block of the tangents' recursion: the sum over the history before a block is one GEMM
HARD_BLOCK = 32


def hard_subspace_basis(lk) -> np.ndarray:
    """(k, kH) orthonormal basis of the link's hard latent subspace (docs/theory.md §2)."""
    from ..symbolic.links import link_subspaces

    return np.asarray(link_subspaces(lk)[1], dtype=float).reshape(lk.k, -1)


def hard_tangents(D, zeta, weight, R_theta, Cu_zeta, etas, delta, ridge, Sigma0, rank=HARD_RANK,
                   residual=HARD_RESIDUAL, rng=None, dtype=np.float32, block=HARD_BLOCK, memory=None,
                   residual_fraction=HARD_RESIDUAL_FRACTION):
    """C_mu(t) = E[mu^t mu^tT] of the linear hard-direction process (docs/theory.md §3.2), by pathwise tangents.

    The process  mu^{t+1} = (1 - eta_t lambda) mu^t - eta_t sum_{s<=t} R_u^zeta(t, s) mu^s - (eta_t / delta) G^t,
    mu^0 ~ N(0, Sigma_0), G ~ GP(0, delta C_u^zeta), is linear in (mu^0, G).  Its kernel is never formed: for a
    deterministic trajectory x, sum_{s<=t} R_u^zeta(t, s) x^s = E[zeta D^t rho^t] with the per-path tangent
        rho^t = zeta x^t + sum_{s<t} R_theta(t, s) D^s rho^s          (since rho^t = sum_s J^t_s zeta x^s),
    so one trajectory costs O(t m^2) per path per step and its Monte-Carlo error does not accumulate over the lags
    (the kernel estimates of R_u^zeta, Stein's or propagated on a sub-batch, act as multiplicative noise in this
    recursion and blew it up after 20-40 steps).  C_mu = sum over tangents of x x^T, with
      * m tangents from x^0 = columns of Sigma_0^(1/2), no drive (the P Sigma_0 P^T part);
      * the noise part from the eigen-expansion delta C_u^zeta = sum_j lam_j q_j q_j^T over the (time, m) index:
        the top eigenvectors as drives G = sqrt(lam_j) q_j (exact) -- at most ``rank``, and no more than leave
        ``residual_fraction`` of the trace to the rest -- and the rest by ``residual`` random drives from
        N(0, remainder) (unbiased Monte Carlo of the truncated part, weight 1/residual each).

    D (S, N, m, m): per-path curvatures D^t (zero on excluded paths); zeta (N,); weight (N,) path probabilities;
    R_theta (>=S, >=S, m, m); Cu_zeta (>=S, >=S, m, m) = E[zeta^2 u^t u^sT]; etas: step sizes.
    Returns (C_mu (S, m, m), info dict: rank used, eigen-mass of the exact part, ``ess`` (S,): the effective fraction
    of paths carrying E[zeta D^t rho^t] of the first tangent, (sum |c_n|)^2 / (N sum c_n^2) for its per-path terms
    c_n -- small values mean a few paths (those whose tangent grew where D < 0) carry C_mu; ``C_init`` (S, m, m) =
    P_t Sigma_0 P_t^T; ``P_half`` (S, m, m) = P_t B and ``Sigma0_half`` B (B B^T = Sigma_0): the propagator of the
    initial overlap, for :func:`effective_overlap_covariance`).

    The recursion is evaluated as written, reorganised for speed and memory: the tangents are independent, so they
    run a group at a time, as many as fit in ``memory`` bytes (default HARD_MEMORY) of history; and time runs in blocks
    of ``block`` steps, the part of the sum over s that lies before a block being one GEMM for the whole block (the
    history is read once per block instead of once per step: the recursion is memory-bound otherwise).
    """
    S, N, m = D.shape[0], D.shape[1], D.shape[2]
    rng = rng if rng is not None else np.random.default_rng(0)
    # drives G^s for s < S-1 (G^s enters mu^{s+1})
    nd = (S - 1) * m
    lam_s, Sig_half = np.linalg.eigh(0.5 * (Sigma0 + Sigma0.T))
    Sig_half = Sig_half * np.sqrt(np.maximum(lam_s, 0.0))
    cols, wts = [], []
    info = {"rank": 0, "residual_drives": 0, "exact_fraction": 1.0}
    if nd:
        A = delta * Cu_zeta[:S - 1, :S - 1].transpose(0, 2, 1, 3).reshape(nd, nd)
        lam, V = np.linalg.eigh(0.5 * (A + A.T))
        lam, V = lam[::-1], V[:, ::-1]
        pos = lam > max(lam[0], 0.0) * 1e-13
        lam, V = lam[pos], V[:, pos]
        total = float(lam.sum())
        left = 1.0 - np.cumsum(lam) / total if total > 0 else np.zeros(lam.size)  # trace left after j + 1 drives
        r = min(rank, lam.size, int(np.argmax(left <= residual_fraction)) + 1 if np.any(left <= residual_fraction)
                else lam.size)
        exact = V[:, :r] * np.sqrt(lam[:r])
        cols.append(exact), wts.append(np.ones(r))
        info.update(rank=int(r), exact_fraction=(float(lam[:r].sum()) / total if total > 0 else 1.0))
        if lam.size > r and residual:
            g = rng.standard_normal((lam.size - r, residual))
            cols.append(V[:, r:] @ (np.sqrt(lam[r:])[:, None] * g)), wts.append(np.full(residual, 1.0 / residual))
            info["residual_drives"] = int(residual)
    drive = np.concatenate(cols, axis=1) if cols else np.zeros((0, 0))  # (nd, Jn)
    Jn = drive.shape[1] if cols else 0
    J = m + Jn
    cw = np.concatenate([np.ones(m)] + wts)  # covariance weight per tangent
    x = np.zeros((S, m, J))
    x[0, :, :m] = Sig_half
    Gd = np.zeros((S, m, J))
    if Jn:
        Gd[:S - 1, :, m:] = drive.reshape(S - 1, m, Jn)
    zw = (weight * zeta).astype(float)
    zt = zeta.astype(dtype)
    ess = np.zeros(S)
    item = np.dtype(dtype).itemsize
    Jg = int(max(1, min(J, (HARD_MEMORY if memory is None else memory) // (S * m * N * item))))
    B = max(1, int(block))
    for g0 in range(0, J, Jg):  # tangents are independent: a group at a time bounds the memory
        js = slice(g0, min(J, g0 + Jg))
        nj = js.stop - js.start
        K = np.zeros((S, m, nj * N), dtype=dtype)  # K[s, b, (j, n)] = (D^s rho^s)[n, b] of tangent j
        for b0 in range(0, S, B):
            b1 = min(S, b0 + B)
            if b0:  # the block's sum over s < b0, one GEMM: K[:b0] is read once per block, not once per step
                Rb = R_theta[b0:b1, :b0].transpose(0, 2, 1, 3).reshape((b1 - b0) * m, b0 * m).astype(dtype)
                far = (Rb @ K[:b0].reshape(b0 * m, nj * N)).reshape(b1 - b0, m, nj, N)
            for t in range(b0, b1):
                rho = (x[t][:, js][:, :, None] * zt[None, None, :]).astype(dtype)  # (m, nj, N)
                if b0:
                    rho += far[t - b0]
                if t > b0:
                    Rt = R_theta[t, b0:t].transpose(1, 0, 2).reshape(m, (t - b0) * m).astype(dtype)
                    rho += (Rt @ K[b0:t].reshape((t - b0) * m, nj * N)).reshape(m, nj, N)
                if m == 1:
                    Kt = rho * D[t, :, 0, 0].astype(dtype)[None, None, :]
                else:  # Kt[a, j, n] = sum_b D^t[n, a, b] rho[b, j, n]: m^2 streaming multiply-adds (einsum is slow)
                    Dt = D[t].astype(dtype)
                    Kt = np.empty_like(rho)
                    for a_ in range(m):
                        Kt[a_] = Dt[None, :, a_, 0] * rho[0]
                        for b_ in range(1, m):
                            Kt[a_] += Dt[None, :, a_, b_] * rho[b_]
                K[t] = Kt.reshape(m, nj * N)
                if g0 == 0:
                    c0 = Kt[0, 0].astype(float) * zw  # per-path contributions to the drift of the first tangent
                    ess[t] = float(np.abs(c0).sum() ** 2 / max(float(c0 @ c0), 1e-300)) / N
                if t < S - 1:
                    F = Kt.astype(float) @ zw  # (m, nj): sum_{s<=t} R_u^zeta(t, s) x^s
                    eta = etas[t]
                    x[t + 1][:, js] = (1.0 - eta * ridge) * x[t][:, js] - eta * F - (eta / delta) * Gd[t][:, js]
        del K
    C = np.einsum("taj,tbj,j->tab", x, x, cw)
    C_init = np.einsum("taj,tbj->tab", x[:, :, :m], x[:, :, :m])  # the P Sigma_0 P^T part (first m tangents)
    A = x[:, :, :m].copy()  # P_t Sigma_0^(1/2): the first m tangents themselves
    info["ess"], info["C_init"] = ess, C_init
    info["P_half"], info["Sigma0_half"] = A, Sig_half
    return C, info


def effective_overlap_covariance(C_mu, P_half, Sigma0_half, C_init) -> np.ndarray:
    """V(t) = P_t^-1 C_mu(t) P_t^-T, the covariance of the effective initial overlap mu_eff = P_t^-1 mu^t (times d;
    docs/theory.md §3.2): the linear hard process mu^t = P_t mu^0 + (noise-driven part) counted in units of initial
    overlap, so that the nonlinear DMFT started from M0 = m0 e u^T grows like P_t m0 u in the same regime.

    C_mu, P_half (= P_t B), C_init (= P_t Sigma_0 P_t^T): (S, m, m), replica means; Sigma0_half: B with B B^T = Sigma_0.
    The propagator is taken as C_init^(1/2) U with U the orthogonal polar factor of P_half (so that its Gram is the
    mean C_init, as for m = 1, where V = C_mu Sigma_0 / C_init exactly).  Returns V (S, m, m), NaN at times where the
    inputs are not finite (the linear process overflowed)."""
    S, m = C_mu.shape[0], C_mu.shape[-1]
    V = np.full((S, m, m), np.nan)
    for t in range(S):
        if not (np.all(np.isfinite(P_half[t])) and np.all(np.isfinite(C_init[t])) and np.all(np.isfinite(C_mu[t]))):
            continue  # the linear process overflowed (fast growth over a long run): V(t) unknown, NaN
        W, s, Zt = np.linalg.svd(P_half[t])
        if not np.all(np.isfinite(s)) or s.min() <= 1e-300:
            continue
        lam, Q = np.linalg.eigh(0.5 * (C_init[t] + C_init[t].T))
        if lam.min() <= 0:
            continue
        A_eff = (Q * np.sqrt(lam)) @ Q.T @ (W @ Zt)  # C_init^(1/2) U, U = W Z^T
        G = Sigma0_half @ np.linalg.inv(A_eff)  # P_t^-1 = B A^-1
        V[t] = G @ C_mu[t] @ G.T
    return V
