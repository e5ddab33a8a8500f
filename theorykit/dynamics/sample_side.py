"""The DMFT's sample side (docs/theory.md §3): one typical sample's pre-activations r^t = M_t^T z + w^t + sum_{s<t}
R_theta(t, s) u^s along sampled paths of the Gaussian field w, the responses R_u (Stein's lemma or propagated
Jacobians), C_u, the losses and the tails of D; :func:`solve_once` runs one replica forward in time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import TheorykitError
from ..symbolic.network import Derivatives
from .hard_process import HARD_KERNEL_TOL, hard_tangents
from .parameter_side import ParameterSide
from ..rules import below_quantile, monte_carlo_normal, round_significant, sobol_normal, weighted_quantiles
from .responses import DyadicJacobians, direct_lags, node_centred, stein_equal_time, stein_lags, window_lags

#: |r| or gram entries above this count as divergence
DIVERGENCE_LIMIT = 1e8
#: |r| above this excludes a single path (its probability weight is reported)
PATH_LIMIT = 1e3
#: per-sample curvature eta D / delta above this (for UNSTABLE_STEPS consecutive steps) excludes a path of negligible
#: probability (twice a one-sample GD mode's bound 2: numerical hygiene on the outer quadrature nodes)
UNSTABLE_BOUND = 4.0
#: the same bound for a path beyond the latent 1/n quantile of a finite sample (d given): the one-sample mode's own
#: bound.  Kept while 2 < eta D / delta < 4, such a path oscillates with u bounded while its Jacobians grow like
#: |1 - eta D / delta|^lag, and through them a negligible weight can dominate R_u (docs/theory.md §3, numerics)
REACH_UNSTABLE_BOUND = 2.0
UNSTABLE_STEPS = 1
#: latent nodes with less probability than this may be excluded when their single-path dynamics is unstable
NEGLIGIBLE_NODE = 1e-9
#: total excluded probability weight above which the run counts as diverged
EXCLUDED_LIMIT = 1e-4
#: significant digits to which latent radii are compared (the mirrored nodes +-z of a rule are one tie group)
RADIUS_DIGITS = 9


def unstable_bound(reach=None) -> float:
    """The per-sample curvature eta D / delta above which an excludable path is dropped: REACH_UNSTABLE_BOUND with a
    finite-sample reach n, else UNSTABLE_BOUND."""
    return UNSTABLE_BOUND if reach is None else REACH_UNSTABLE_BOUND


def excluded_limit(reach=None) -> float:
    """The excluded weight above which a solve counts as diverged: EXCLUDED_LIMIT, or with a finite-sample reach n
    (paths beyond the latent 1/n quantile excludable, at most 1/n of the weight) max(EXCLUDED_LIMIT, 1/n), which
    the excludable paths never exceed."""
    return EXCLUDED_LIMIT if reach is None else max(EXCLUDED_LIMIT, 1.0 / reach)


def beyond_reach(batch: "Batch", reach=None):
    """(mask, radius): the paths a sample of ``reach`` points holds none of -- beyond the 1/reach quantile of the
    latent tail, whole quadrature nodes at a time (:func:`theorykit.rules.below_quantile` on -|(z, eps)|), and the
    smallest latent radius among them (inf if none); without a reach, the latent nodes of negligible probability
    (< NEGLIGIBLE_NODE; Monte-Carlo latents: none)."""
    if reach is None:
        mask = batch.weight * batch.per_node < NEGLIGIBLE_NODE
    else:
        mask = below_quantile(-round_significant(batch.radius, RADIUS_DIGITS), batch.weight, reach,
                              whole_ties=True).mask
    return mask, (float(batch.radius[mask].min()) if mask.any() else math.inf)


@dataclass
class Batch:
    z: np.ndarray       # (N, k)
    y: np.ndarray       # (N,)
    weight: np.ndarray  # (N,) main-batch weights (sum to 1)
    rweight: np.ndarray  # (NR,) response-batch weights (sum to 1) for the first NR paths
    NR: int
    per_node: int       # w-paths per latent node (N for Monte-Carlo latents)
    radius: np.ndarray  # (N,) latent norm |(z, eps)| of each path (the latent tail a finite sample truncates)


def make_batch(link, latent: str, order: int, per_node: int, resp_per_node: int, n_mc: int, n_mc_resp: int,
                rng) -> Batch:
    k = link.k
    if latent in ("gauss-hermite", "gauss-legendre"):
        from ..rules import latent_rule
        from ..symbolic.links import link_cuts

        rule = latent_rule(k, link.noisy, order, link_cuts(link) if latent == "gauss-legendre" else ())
        nodes, w = rule.nodes, rule.weights
        Q = len(nodes)
        # path n = p * Q + q: the first resp_per_node * Q paths hold every node
        lat = np.tile(nodes, (per_node, 1))
        weight = np.tile(w, per_node) / per_node
        rweight = np.tile(w, resp_per_node) / resp_per_node
        NR = resp_per_node * Q
        P = per_node
    else:
        mc = monte_carlo_normal(n_mc, k + (1 if link.noisy else 0), rng)
        lat, weight = mc.nodes, mc.weights
        rweight = np.full(n_mc_resp, 1.0 / n_mc_resp)
        NR = n_mc_resp
        P = n_mc
    z = lat[:, :k]
    eps = lat[:, k] if link.noisy else None
    return Batch(z=np.ascontiguousarray(z), y=link.response(z, eps), weight=weight, rweight=rweight, NR=NR, per_node=P,
                 radius=np.linalg.norm(lat, axis=1))


def mirror_pairs(batch: "Batch", e: np.ndarray) -> np.ndarray:
    """(pairs, 2) latent node indices (q, q'), q < q', with node q' the mirror image of node q along the unit vector
    e of latent space (z -> z - 2 (z.e) e; a noise coordinate unchanged).  Nodes on the mirror are their own image and
    in no pair.  One-line error when the batch is Monte-Carlo or its node set is not mapped to itself."""
    Q = len(batch.z) // batch.per_node
    if batch.per_node == len(batch.z) or Q < 2:
        raise TheorykitError("mirror needs a deterministic latent rule (gauss-hermite or gauss-legendre), not "
                             "Monte-Carlo latents")
    z = batch.z[:Q]  # path n = p Q + q: the first Q paths hold every node
    zr = z - 2.0 * np.outer(z @ e, e)
    y = batch.y[:Q]
    scale = 1e-9 * max(1.0, float(np.abs(z).max()))
    pairs = []
    for q in range(Q):
        hit = np.flatnonzero((np.abs(z - zr[q]).max(axis=1) <= scale) & (batch.weight[:Q] == batch.weight[q]))
        if len(hit) != 1:
            raise TheorykitError("mirror needs a latent rule whose nodes the reflection along the hard direction maps "
                                 "to nodes of the same weight; this one does not")
        if hit[0] > q:
            if not np.isclose(y[q], y[hit[0]], rtol=1e-9, atol=1e-12):
                raise TheorykitError("mirror needs a link even along the hard direction (y(z) = y(mirror of z))")
            pairs.append((q, int(hit[0])))
    return np.array(pairs, dtype=int).reshape(-1, 2)


def share_mirrored(H: np.ndarray, batch: "Batch", hard_basis: np.ndarray) -> None:
    """Give the paths of each mirrored node the driving normals of its image (in place; H (T+1, m, N), path n =
    p Q + q): antithetic pairs along the first hard direction (:func:`mirror_pairs`)."""
    if hard_basis.shape[1] == 0:
        raise TheorykitError("mirror needs a link with a hard direction")
    pairs = mirror_pairs(batch, hard_basis[:, 0])
    Q = len(batch.z) // batch.per_node
    base = np.arange(batch.per_node)[:, None] * Q
    H[..., (base + pairs[:, 1]).ravel()] = H[..., (base + pairs[:, 0]).ravel()]


TAIL_LEVELS = (1e-5, 1e-4, 1e-3)
#: storage and GEMM precision of the driving normals xi (the u's stay float64: C_u must stay positive semidefinite to
#: far below the jitter of C_theta's Cholesky factor, and with u in float32 the bounded setting's DMFT diverged at
#: step 80).  w^t = sum_s L(t, s) xi^s needs only relative precision: rounding ~1e-7, against Monte-Carlo ~1e-3.
XI_DTYPE = np.float32


def history_pass(U: np.ndarray, t: int, Vu: np.ndarray, R_next) -> tuple:
    """One read of the u-history U[:t+1] ((T+1, m, N)) for two products: E = Vu U^T over s <= t ((rows, (t+1) m),
    Vu (rows, N): the weighted u^t rows of C_u(t, .)) and the next step's memory term R_next U ((m, N), R_next
    (m, (t+1) m) = R_theta(t+1, s) for s <= t; None at the last step).  Row by row (numba,
    :mod:`theorykit.dynamics._history`): each row is read from memory once and used for both products."""
    from ._history import history_kernel

    m, N = U.shape[1], U.shape[2]
    Ut = U[:t + 1].reshape((t + 1) * m, N)
    E = np.empty((Vu.shape[0], (t + 1) * m))
    mem = np.empty((m, N))
    R = np.ascontiguousarray(R_next, dtype=float) if R_next is not None else np.zeros((m, (t + 1) * m))
    history_kernel(Ut, np.ascontiguousarray(Vu, dtype=float), R, E, mem, R_next is not None)
    return E, (mem if R_next is not None else None)


def driving_normals(N: int, Q: int, T: int, m: int, sampler: str, rng) -> np.ndarray:
    """Standard normals xi (T+1, m, N) driving w (w^t = sum_{s<=t} L(t, s) xi^s), distinct for every path.

    Path n = p Q + q is w-path p of latent node q.  "sobol": one scrambled Sobol sequence of N points in (T+1) m
    dimensions; node q takes the contiguous run of points q P .. q P + P - 1 (P = N / Q; a balanced sub-net when P is
    a power of two; interleaving nodes instead would tie the low bits of n to the node and bias the strata).
    Randomised QMC: each replica scrambles independently, so the replica spread is an honest error.  Its standard
    errors of Theta^T Theta are smaller than those of i.i.d. paths and of independent nets per node
    (tables/dmft_bench.md).  Weak spot: moments dominated by |w| >~ 3 (e.g. E[w^6] in C_u for sigma = x^2, y = z^2)
    have right-skewed replica means, and few replicas understate their error; use sampler="random" there.
    "random": i.i.d. normals."""
    if sampler == "random":
        return rng.standard_normal((T + 1, m, N))
    xi = sobol_normal(N, (T + 1) * m, rng).nodes  # (N, (T+1) m), theorykit.rules
    perm = np.arange(N).reshape(Q, N // Q).T.ravel()  # path p Q + q -> point q P + p
    return xi[perm].T.reshape(T + 1, m, N)


def _kink_weights(net, kinks, r: np.ndarray, xi: np.ndarray, Ltt: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Equal-time Dirac terms of D^t on every path, averaged over the newest innovation (docs/theory.md §3.1).

    sigma'' has the Dirac terms J_k delta(x - x_k) at its kinks, so D(r, y) has
    diag_j (a_j / m) l'(y, f(r)) sum_k J_k delta(r_j + b_j - x_k).  Given the past, r^t = c + L(t, t) xi^t with
    xi^t ~ N(0, I_m), so r^t ~ N(c, Sigma), Sigma = L(t, t) L(t, t)^T, and
        E[l'(y, f(r)) delta(r_j - v) | past] = phi((v - c_j) / s_j) / s_j * E[l'(y, f(r)) | r_j = v, past],
    s_j^2 = Sigma_jj, v = x_k - b_j.  The conditional expectation is estimated by the path's own sample moved onto
    the kink, r' = r - Sigma[:, j] / Sigma_jj (r_j - v), which has exactly the conditional law (Gaussian regression;
    for m = 1, r' = v).  r, xi (m, N); returns kappa (N, m) with kappa[n, j] the path's weight of delta terms."""
    m, N = r.shape
    Sig = Ltt @ Ltt.T
    c = r - Ltt @ xi
    out = np.zeros((N, m))
    for j in range(m):
        s2 = float(Sig[j, j])
        if not s2 > 1e-24:
            raise TheorykitError("the innovation of a pre-activation vanishes (Sigma0 or C_theta singular along it): "
                                 "the DMFT cannot resolve the kink of the activation there; give Sigma0 positive "
                                 "definite")
        sd = math.sqrt(s2)
        beta = Sig[:, j] / s2
        for xk, Jk in zip(kinks.points, kinks.jumps):
            v = xk - float(net.b[j])
            dens = np.exp(-0.5 * ((v - c[j]) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
            rk = r - beta[:, None] * (r[j] - v)[None, :]
            rk[j] = v
            l1 = net.loss.numpy(y, net.output(rk.T))[1]
            out[:, j] += (float(net.a[j]) * Jk / m) * dens * l1
    return out


def _hard_by_kernels(Ru_h, Cu_h, S: int, T: int, m: int, Sigma0, etas, delta, ridge) -> tuple:
    """C_mu (S, m, m) of one hard direction by the parameter-side recursion on its kernels R_u^zeta, C_u^zeta
    ((T+1, T+1, m, m); docs/theory.md §3.2), with the info dict of :func:`hard_tangents` (no drives, ess NaN)."""
    ph = ParameterSide(T, m, Sigma0, etas, delta, ridge)
    C = np.zeros((S, m, m))
    C_init = np.zeros((S, m, m))
    P_half = np.zeros((S, m, m))
    lam_s, B = np.linalg.eigh(0.5 * (Sigma0 + Sigma0.T))
    B = B * np.sqrt(np.maximum(lam_s, 0.0))
    for t in range(S):
        ph.advance(t, Ru_h, Cu_h)
        C[t] = ph.C[t, t]
        C_init[t] = ph.P[t] @ Sigma0 @ ph.P[t].T
        P_half[t] = ph.P[t] @ B
    return C, {"rank": 0, "residual_drives": 0, "exact_fraction": 1.0, "ess": np.full(S, np.nan), "C_init": C_init,
               "P_half": P_half, "Sigma0_half": B, "tangent_check": None}


def overlap_cos2(M, C_theta_tt, e):
    """cos^2 between the hard direction e and the top left singular vector of Theta (what GD's success counts,
    theorykit/referee/gd.py): Theta^T e = M^T e and Theta^T Theta = M^T M + C_theta, so cos^2 = (v^T M^T e)^2 / lam
    with (lam, v) the top eigenpair of the Gram.  M (..., k, m), C_theta_tt (..., m, m) -> (...).  Width 1:
    M_e^2 / (|M|^2 + C_theta)."""
    M = np.asarray(M, dtype=float)
    Me = np.einsum("...km,k->...m", M, np.asarray(e, dtype=float))
    G = np.einsum("...ka,...kb->...ab", M, M) + np.asarray(C_theta_tt, dtype=float)
    if G.shape[-1] == 1:
        return Me[..., 0] ** 2 / G[..., 0, 0]
    bad = ~np.isfinite(G).all(axis=(-2, -1))
    lam, vec = np.linalg.eigh(np.where(bad[..., None, None], 0.0, 0.5 * (G + np.swapaxes(G, -1, -2))))
    proj = np.einsum("...m,...m->...", vec[..., :, -1], Me)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = proj ** 2 / lam[..., -1]
    return np.where(bad, np.nan, out)


def solve_once(net, link, hard_basis, delta, etas, ridge, Sigma0, M0, batch_args, jitter, seed, sampler="sobol",
                response="stein", window=0, progress=None, keep_law_at=(), exclude=None, prefix=None,
                horizon=None, hard_process=True, fine_lags=None, reach=None, mirror=False, stop_overlap=None) -> dict:
    """One DMFT solve with one random stream; returns a dict of arrays (see :func:`dmft`).

    keep_law_at: times t at which the path sample (r^t, y, z, D^t) is kept (``out["laws"][t]``; D as the finite-n
    Hessian sees it, excluded paths kept and marked); exclude: a boolean mask of paths excluded from t = 0 (the scan
    mode's common exclusion); ``out["excluded_mask"]`` is the mask of every path excluded by the end.

    prefix: {"steps": K, "T": a Preprocessing T(y, delta), "eta": eta_p} runs K steps of the normalised power
    iteration theta <- (theta + eta_p (1/n) sum_i T(y_i) x_i x_i^T theta) / norm before the GD steps (docs/theory.md
    §3.3: the spectral start): u = -T(y) r, D = -T(y), theta rescaled to unit norm after every step.  The outputs
    start at the end of the prefix (t = 0 is the spectral start), with its memory kept in the kernels.

    horizon: the driving normals are drawn for max(T, horizon) GD steps and the first T + 1 used, so that a solve to
    T <= horizon is exactly the first T steps of the solve to horizon with the same seed (the threshold search
    refines each t with solves to t only).  hard_process=False skips the hard-direction process (C_mu stays empty;
    the laws keep zeta).  fine_lags: with response="direct", None propagates the Jacobians of every source time, an
    int W only those of the dyadic source grid (:class:`theorykit.dynamics.responses.DyadicJacobians`).

    reach: the size n of a finite sample; paths beyond the latent 1/n quantile (:func:`beyond_reach`) may then be
    excluded when their single-sample dynamics is unstable, as a sample of n points holds none of them (default: only
    the latent nodes of probability < NEGLIGIBLE_NODE).  ``out["reach_radius"]``: the smallest latent radius among the
    excludable paths.

    stop_overlap: (e, level, hold) stops the solve after step t once cos^2 between e and the top left singular vector
    of Theta (from M_t and C_theta(t, t)) has been >= level for hold consecutive steps (``out["stopped_at"]`` = t)."""
    rng = np.random.default_rng(seed)
    batch = make_batch(link, *batch_args, rng=rng)
    Kp = 0  # spectral prefix steps
    if prefix is not None:
        Kp = int(prefix["steps"])
        Ty = np.asarray(prefix["T"](batch.y, delta), dtype=float)
        n_gd = len(etas)
        etas = np.concatenate([np.full(Kp, float(prefix["eta"])), np.asarray(etas, dtype=float)])
        ridge = np.concatenate([np.zeros(Kp), np.full(n_gd, float(ridge))])
        keep_law_at = [int(v) + Kp for v in keep_law_at]
    T = len(etas)
    ridges = np.broadcast_to(np.asarray(ridge, dtype=float), (T,))
    m, k = net.m, link.k
    kH = hard_basis.shape[1] if hard_process else 0  # hard directions carrying the hard process
    N, NR = len(batch.y), batch.NR
    wt, rwt = batch.weight.copy(), batch.rweight.copy()
    alive = np.ones(N, dtype=bool)
    over = np.zeros(N, dtype=int)
    # only latent nodes of negligible probability may be excluded (outer Gauss-Hermite nodes; every path for
    # Monte-Carlo latents has weight 1/N and is never excluded), or with a reach n the latent tail beyond the 1/n
    # quantile: elsewhere an unstable path is GD's own divergence
    negligible, reach_radius = beyond_reach(batch, reach)
    limit, bound = excluded_limit(reach), unstable_bound(reach)
    top_at_divergence = None  # consecutive steps with per-sample curvature eta D / delta > 2
    excluded, excluded_at = 0.0, None
    if exclude is not None:
        exclude = np.asarray(exclude, dtype=bool)
        if exclude.shape != (N,):
            raise TheorykitError(f"exclude must be a boolean mask of the {N} paths, got shape {exclude.shape}")
        if exclude.any():
            excluded = float(wt[exclude].sum())
            excluded_at = 0
            alive &= ~exclude
            wt[exclude] = 0.0
            rwt[exclude[:NR]] = 0.0
    keep_law_at = set(int(v) for v in keep_law_at)
    laws = {}
    z, y = batch.z, batch.y
    zeta2 = (z @ hard_basis) ** 2  # (N, kH)

    par = ParameterSide(T, m, Sigma0, etas, delta, ridge)
    Ru = np.zeros((T + 1, T + 1, m, m))
    Cu = np.zeros((T + 1, T + 1, m, m))
    Cu_h = np.zeros((kH, T + 1, T + 1, m, m))  # E[zeta_j^2 u^t u^sT], the hard process' noise covariance
    kinked_hard = kH > 0 and net.kinked
    # the hard process' kernel R_u^zeta(t, s) = E[zeta^2 D^t J^t_s]: by Stein with a kink; from the propagated
    # Jacobians when they cover the whole batch (then the parameter-side recursion on (R_u^zeta, C_u^zeta) is the
    # pathwise tangents' recursion summed over paths, docs/theory.md §3.2); else pathwise tangents
    kernel_hard = kH > 0 and not kinked_hard and response == "direct" and NR == N and prefix is None
    Ru_h = np.zeros((kH, T + 1, T + 1, m, m)) if kinked_hard or kernel_hard else None
    Dh = np.zeros((T + 1, N, m, m), dtype=np.float32) if kH else None  # per-path D^t for the hard tangents
    M = np.zeros((T + 1, k, m))
    M[0] = M0
    Ezu = np.zeros((T + 1, k, m))
    train = np.zeros(T + 1)
    test = np.zeros(T + 1)
    tails = np.zeros((T + 1, 1 + len(TAIL_LEVELS)))
    dtop = np.zeros(T + 1)  # 1 - 1e-4 quantile of the largest eigenvalue of D^t (for the stability hint)
    # history: Xi[s] = xi^s (T+1, m, N), the standard normals driving w (XI_DTYPE), and U[s] = u^s (T+1, m, N).
    # Per step: one GEMM over Xi for w^t (and one for Stein's E[u^t xi^sT]), and one pass over U for C_u(t, .) and the
    # next step's memory term sum_{s<=t} R_theta(t+1, s) u^s (R_theta(t+1, .) needs only R_u(t, .): history_pass)
    Xi = np.zeros((T + 1, m, N), dtype=XI_DTYPE)
    U = np.zeros((T + 1, m, N))
    mem = np.zeros((m, N))  # the memory term of the current step
    L = np.zeros(((T + 1) * m, (T + 1) * m), order="F")  # block Cholesky factor of C_theta + jitter I
    dyadic = DyadicJacobians(T, m, NR, fine_lags) if response == "direct" and fine_lags else None
    K = (np.zeros((T + 1, T + 1, m, NR, m), dtype=np.float32) if response == "direct" and dyadic is None else None)
    W = window if response == "stein" else 0
    Kw = np.zeros((max(W, 1), max(W, 1), m, N, m)) if W else None  # recent responses (ring buffer), see below
    # K[s, s', b, n, c] = (D^s' J^s'_s)[n, b, c]
    T_draw = T if horizon is None else max(T, int(horizon) + Kp)
    Xi[:] = driving_normals(N, N // batch.per_node, T_draw, m, sampler, rng)[:T + 1]
    if mirror:
        share_mirrored(Xi, batch, hard_basis)
    P_node = batch.per_node
    Qn = N // P_node  # latent nodes (1 for Monte-Carlo latents)
    pin_hard = hard_basis.shape[1] > 0 and not np.any(hard_basis.T @ M0)
    repairs = 0
    diverged = None
    stopped_at, held = None, 0
    jit = jitter * max(1.0, float(np.trace(Sigma0)) / m)
    kinks = net.activation.kinks  # where sigma' jumps (docs/theory.md §3.1)
    loss_jumps = net.loss.derivative_jumps
    import scipy.linalg as sla

    for t in range(T + 1):
        par.advance(t, Ru, Cu)
        if 1 <= t <= Kp:  # spectral prefix: the step t-1 -> t rescaled so that |theta^t| = 1 (Theta^T Theta -> 1)
            par.scale[t - 1] = 1.0 / math.sqrt(float(M[t][:, 0] @ M[t][:, 0] + par.C[t, t][0, 0]))
            M[t] *= par.scale[t - 1]
            mem *= par.scale[t - 1]  # R_theta(t, .) scales with the whole step
            par.advance(t, Ru, Cu)
        Ct = par.C[t, :t + 1]  # (t+1, m, m)
        if not np.all(np.isfinite(Ct)) or np.max(np.abs(Ct)) > DIVERGENCE_LIMIT or \
                np.max(np.abs(M[t])) > DIVERGENCE_LIMIT:
            diverged = t
            break
        # ---- incremental block Cholesky: row t of L
        tm = t * m
        row = Ct.transpose(1, 0, 2).reshape(m, (t + 1) * m)  # C_theta(t, s) for s <= t as (m, (t+1)m)
        if t:
            Lt = sla.solve_triangular(L[:tm, :tm], row[:, :tm].T, lower=True, check_finite=False).T
            L[tm:tm + m, :tm] = Lt
            S = row[:, tm:] - Lt @ Lt.T
        else:
            S = row[:, :m].copy()
        S = 0.5 * (S + S.T) + jit * np.eye(m)
        try:
            L[tm:tm + m, tm:tm + m] = np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            lam, V = np.linalg.eigh(S)
            # eigenvalues clipped to a floor relative to the block's scale (clipping to jit alone can leave the
            # rounded product not positive definite at width m >= 3)
            floor = max(jit, 1e-12 * float(np.max(np.abs(lam))))
            try:
                L[tm:tm + m, tm:tm + m] = np.linalg.cholesky((V * np.maximum(lam, floor)) @ V.T + floor * np.eye(m))
            except np.linalg.LinAlgError:  # not a covariance any more (overflowed history): the run has diverged
                diverged = t
                break
            repairs += 1
        # ---- sample side: w^t = sum_{s<=t} L(t, s) xi^s; the memory term sum_{s<t} R_theta(t, s) u^s is ``mem``
        w = (L[tm:tm + m, :tm + m].astype(XI_DTYPE) @ Xi[:t + 1].reshape((t + 1) * m, N)).astype(float)
        base = (M[t].T @ z.T) + w  # (m, N): M_t^T z + w^t
        r = base + mem
        # Single paths at latent nodes of negligible probability (< NEGLIGIBLE_NODE: the outer Gauss-Hermite nodes,
        # y ~ 100, samples no finite-n data set contains) whose own dynamics is unstable -- per-sample curvature
        # eta D / delta > unstable_bound(reach) (twice a one-sample GD mode's bound 2; with a reach, 2 itself), or
        # |r| > PATH_LIMIT x (1 + sqrt(max C_theta(t,t)) + 10 |M_t|) -- are excluded and their probability weight is
        # reported (without this, sigma = x^2, y = z^2, eta = 0.05 with 32 nodes blew up through its outer nodes).
        # With a reach n, the excludable paths are those beyond the latent 1/n quantile instead (a sample of n points
        # holds none of them).
        # Unstable paths of non-negligible probability are kept: they are GD's own divergence.
        with np.errstate(invalid="ignore", over="ignore"):
            rs = np.where(np.isfinite(r), r, 0.0)
            der = net.evaluate(rs.T, y)
            dmin, dmax = der.eigen_range()
            if t < Kp:  # spectral prefix: u = -T(y) r, D = -T(y) (the network's losses are still reported)
                l1 = -Ty * rs[0]
                der = Derivatives(f=der.f, loss=der.loss, l1=l1, l2=np.zeros(N), F=l1[:, None],
                                  grad_f=np.ones((N, 1)), curv=-Ty[:, None])
                dmin = dmax = -Ty
            if t in keep_law_at:  # before any zeroing of excluded paths: D as the finite-n Hessian sees it
                laws[t] = {"r": rs.T.copy(), "D": (der.D if m > 1 else dmin[:, None, None].copy())}
            scale = 1.0 + math.sqrt(max(float(np.max(np.diag(par.C[t, t]))), 0.0)) + 10.0 * float(np.abs(M[t]).max())
            eta_t = etas[min(t, T - 1)] if T else 0.0
            over = np.where(eta_t * dmax / delta > bound, over + 1, 0)
            bad = (~np.all(np.isfinite(r), axis=0) | (np.max(np.abs(rs), axis=0) > PATH_LIMIT * scale)
                   | ~np.isfinite(dmax) | (over >= UNSTABLE_STEPS)) & negligible
        if np.any(bad & alive):
            new_dead = bad & alive
            excluded += float(wt[new_dead].sum())
            excluded_at = t if excluded_at is None else excluded_at
            alive &= ~new_dead
            wt[new_dead] = 0.0
            rwt[new_dead[:NR]] = 0.0
            if excluded > limit:
                diverged = t
                top_at_divergence = weighted_quantiles(np.where(np.isfinite(dmax), dmax, np.inf),
                                                        batch.weight, [1 - 1e-4])[0]
                break
        if not alive.all():
            U[:t, :, ~alive] = 0.0
            dmin, dmax = np.where(alive, dmin, 0.0), np.where(alive, dmax, 0.0)
            der = replace(der, **{name: np.where(alive if np.ndim(getattr(der, name)) == 1 else alive[:, None],
                                                  np.broadcast_to(getattr(der, name),
                                                                  (N,) + np.shape(getattr(der, name))[1:]), 0.0)
                                  for name in ("f", "loss", "l1", "l2", "F", "grad_f", "curv")})
        if t in laws:
            laws[t]["excluded"] = ~alive  # paths excluded up to and including this step
        train[t] = float(wt @ der.loss)
        test[t] = float(wt @ net.loss_values(base.T, y))
        U[t] = der.F.T
        Ezu[t] = (z * wt[:, None]).T @ der.F
        # E[c u^t u^sT] for c = 1 and c = zeta_j^2 (C_u and C_u^zeta, s <= t) come from the pass over U below, once
        # R_u(t, .) is known; Stein's E[c u^t xi^sT] from one GEMM over Xi here.  The Stein rows use u^t centred within
        # each latent node (E[xi^s] = 0 exactly, so subtracting the node mean of u removes the part of the
        # Monte-Carlo error that is the node mean times the sample mean of xi; factor P/(P-1) undoes the centring's
        # 1/P bias).
        cs = [wt] + [wt * zeta2[:, j] for j in range(kH)]
        ut = U[t]
        # with a kink, the hard process' responses R_u^zeta(t, s) also come from Stein's lemma (rows 1 + j)
        hard_stein = kinked_hard and response == "stein"
        if response == "stein":
            uc = node_centred(ut, P_node, Qn)
            Vx = np.concatenate([uc * wt] + ([uc * (wt * zeta2[:, j]) for j in range(kH)] if hard_stein else []))
            Ex = (Vx.astype(XI_DTYPE) @ Xi[:t + 1].reshape((t + 1) * m, N).T).astype(float).reshape(-1, m, t + 1, m)
        # ---- tails of D (smallest eigenvalue per path)
        tails[t, 0] = float(np.min(dmin[wt > 0]))
        tails[t, 1:] = weighted_quantiles(dmin, wt, TAIL_LEVELS)
        dtop[t] = weighted_quantiles(dmax, wt, [1 - 1e-4])[0]
        # ---- kinks (docs/theory.md §3.1): D above is the finite-n (almost-sure) curvature; the responses need the
        # Dirac terms of sigma''.  Their equal-time part is exact: averaged over the newest innovation xi^t, whose
        # conditional law given the past is known on every path.  kappa (N, m) is added to curv for the responses.
        Ltt = L[tm:tm + m, tm:tm + m]
        if kinks and t >= Kp:
            kappa = _kink_weights(net, kinks, r=rs, xi=Xi[t], Ltt=Ltt, y=y)
            kappa[~alive] = 0.0
            der = replace(der, curv=der.curv + kappa)
        Dw = der.D if m > 1 else (der.l2 * der.grad_f[:, 0] ** 2 + der.curv[:, 0])[:, None, None]
        Ru[t, t] = np.einsum("nac,n->ac", Dw, wt)  # R_u(t, t) = E[D^t] (J^t_t = I): the whole batch
        if loss_jumps:
            # l' jumps in yhat: the Dirac part sits on a surface f(r) = kink(y); Stein's lemma on the newest innovation
            # needs no location (u centred within latent nodes as below)
            uc_ = node_centred(U[t], P_node, Qn)
            Ru[t, t] = stein_equal_time(uc_ * wt, Xi[t], Ltt)
        if Ru_h is not None:
            # R_u^zeta(t, s) = E[zeta^2 du^t/dw^s]: equal time as R_u(t, t) (zeta^2 is a function of z, fixed on a
            # path; J^t_t = I); with a kink, older lags by Stein's lemma, E[zeta^2 u^t xi^sT] = sum_{s<=s'<=t}
            # R_u^zeta(t, s') L(s', s), else from the propagated Jacobians below
            for j in range(kH):
                if kinked_hard and loss_jumps:
                    Ru_h[j, t, t] = stein_equal_time(uc_ * (wt * zeta2[:, j]), Xi[t], Ltt)
                else:
                    Ru_h[j, t, t] = np.einsum("nac,n->ac", Dw, wt * zeta2[:, j])
                if kinked_hard and t:
                    Ru_h[j, t, :t] = stein_lags(Ex[1 + j, :, :t], Ru_h[j, t, t:t + 1], L, t, t, m)
        if kH:
            Dh[t] = np.where(alive[:, None, None], Dw, 0.0)
        hard_kernels = (Ru_h, (rwt[:, None] * zeta2[:NR]).T) if kernel_hard else None
        if response == "stein":
            lo = max(0, t - W)
            if W:  # recent lags t - W <= s < t exactly, from per-path Jacobians on the whole batch
                window_lags(Ru, Kw, W, t, lo, par.R, der, wt, m, N)
            if lo:  # older lags by Stein's lemma on w = L xi
                Ru[t, :lo] = stein_lags(Ex[0, :, :lo], Ru[t, lo:t + 1], L, t, lo, m)
        elif dyadic is not None:
            dyadic.step(Ru, t, par.R, der, rwt, hard=hard_kernels)
        elif response == "direct":
            direct_lags(Ru, K, t, par.R, der, rwt, m, NR, hard=hard_kernels)
        # ---- C_u(t, .), C_u^zeta(t, .) and the next step's memory term: one pass over the u-history
        R_next = None
        if t < T:
            par.advance_response(t + 1, Ru)
            R_next = par.R[t + 1, :t + 1].transpose(1, 0, 2).reshape(m, (t + 1) * m)
        Eu, mem = history_pass(U, t, np.concatenate([ut * c for c in cs]), R_next)
        Eu = Eu.reshape(-1, m, t + 1, m)
        for j, target in enumerate([Cu] + [Cu_h[i] for i in range(kH)]):
            target[t, :t + 1] = Eu[j].transpose(1, 0, 2)
            target[:t + 1, t] = np.swapaxes(target[t, :t + 1], 1, 2)
        if t < T:
            keep = 1.0 - etas[t] * ridges[t]
            M[t + 1] = keep * M[t] - etas[t] * Ezu[t]
            if pin_hard:  # E[zeta u^t] = 0 exactly on the hard subspace: keep the Monte-Carlo noise out of M
                M[t + 1] -= hard_basis @ (hard_basis.T @ M[t + 1])
        if progress is not None:
            progress(t)
        if stop_overlap is not None and t < T:
            held = held + 1 if overlap_cos2(M[t], par.C[t, t], stop_overlap[0]) >= stop_overlap[1] else 0
            if held >= stop_overlap[2]:
                stopped_at = t
                break

    dyadic = K = Kw = None  # the responses' histories are done with: free them before the hard process allocates
    last = (T if stopped_at is None else stopped_at) if diverged is None else diverged - 1
    S = last + 1
    idx = np.arange(S)
    C_mu = np.zeros((S, kH, m, m))
    hard_info = []
    for j in range(kH if S else 0):  # S = 0: diverged at the first step, nothing to propagate
        zeta = z @ hard_basis[:, j]
        info, check = None, None
        if kinked_hard or kernel_hard:
            with np.errstate(over="ignore", invalid="ignore"):  # a fast-growing linear process may overflow: NaN
                C_j, info = _hard_by_kernels(Ru_h[j], Cu_h[j], S, T, m, Sigma0, etas, delta, ridge)
            info["route"] = "stein kernels" if kinked_hard else "jacobian kernels"
            if kernel_hard:
                # the first m pathwise tangents (no drives): the paths' effective sample size, and P Sigma_0 P^T
                # again, which differs from the kernels' only by the dyadic grid's interpolation in s (and rounding)
                with np.errstate(over="ignore", invalid="ignore"):
                    C_tan, tan = hard_tangents(Dh[:S], zeta, wt, par.R, Cu_h[j], etas, delta, ridge, Sigma0, rank=0,
                                               residual=0, rng=rng)
                    scale = np.maximum(np.abs(np.einsum("tii->t", info["C_init"])), 1e-300)
                    check = float(np.max(np.max(np.abs(C_tan - info["C_init"]), axis=(1, 2)) / scale))
                info.update(ess=tan["ess"], tangent_check=check)
                if not check <= HARD_KERNEL_TOL:  # the interpolation shows (or NaN): pathwise tangents instead
                    info = None
        if info is None:
            with np.errstate(over="ignore", invalid="ignore"):  # a fast-growing linear process may overflow: NaN
                C_j, info = hard_tangents(Dh[:S], zeta, wt, par.R, Cu_h[j], etas, delta, ridge, Sigma0, rng=rng)
            info = dict(info, route="pathwise tangents", tangent_check=check)
        C_mu[:, j] = C_j
        hard_info.append(info)
    Cdiag = par.C[idx, idx]
    gram = np.einsum("tka,tkb->tab", M[:S], M[:S]) + Cdiag
    out = {
        "M": M[:S], "gram": gram, "train_loss": train[:S], "test_loss": test[:S], "C_theta_tt": Cdiag,
        "Ezu": Ezu[:S], "D_tail": tails[:S],
        "D_top": np.append(dtop[:S], [top_at_divergence] if top_at_divergence is not None else []),
        "C_mu": C_mu, "hard_info": hard_info,
        "C_mu_init": (np.stack([i["C_init"] for i in hard_info], axis=1) if hard_info else np.zeros((S, kH, m, m))),
        "P_half": (hard_info[0]["P_half"] if hard_info else np.zeros((S, m, m))),
        "Sigma0_half": (hard_info[0]["Sigma0_half"] if hard_info else np.eye(m)),
        "hard_ess": (hard_info[0]["ess"] if hard_info else np.zeros(S)),
        "C_theta": par.C[:S, :S], "R_theta": par.R[:S, :S], "C_u": Cu[:S, :S],
        "R_u": Ru[:S, :S],
        "diverged": diverged, "stopped_at": stopped_at, "repairs": repairs, "N": N, "NR": NR, "excluded": excluded,
        "excluded_at": excluded_at, "excluded_mask": ~alive, "reach_radius": reach_radius,
        "laws": {t_: dict(v, weight=batch.weight, z=z, y=y) for t_, v in laws.items()},
    }
    if Kp:  # the outputs start at the spectral start (the end of the prefix)
        if S <= Kp:
            raise TheorykitError(f"the DMFT diverged during the spectral prefix (step {diverged})")
        for key in ("M", "gram", "train_loss", "test_loss", "C_theta_tt", "Ezu", "D_tail", "C_mu", "C_mu_init",
                    "hard_ess", "P_half"):
            out[key] = out[key][Kp:]
        out["D_top"] = out["D_top"][Kp:]
        for key in ("C_theta", "R_theta", "C_u", "R_u"):
            out[key] = out[key][Kp:, Kp:]
        out["diverged"] = None if diverged is None else diverged - Kp
        out["excluded_at"] = None if excluded_at is None else max(excluded_at - Kp, 0)
        out["laws"] = {t_ - Kp: v for t_, v in laws.items()}
        out["laws"] = {t_: dict(v, weight=batch.weight, z=z, y=y) for t_, v in out["laws"].items()}
        out["prefix_overlap"] = float(M[Kp, 0, 0])  # M at the spectral start (|theta| = 1): the cosine with e
    return out
