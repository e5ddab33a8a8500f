"""Discrete-time DMFT of full-batch gradient descent (docs/theory.md §3, §3.1 and §3.2).

Split Theta^t = Theta* M_t + Theta_perp^t with M_t = Theta*^T Theta^t (k x m).  All kernels are m x m.

Sample side (one typical sample; z ~ N(0, I_k), eps, y = h(z, eps); w a centred Gaussian process with
E[w^t w^sT] = C_theta(t, s), independent of (z, eps))::

    r^t = M_t^T z + w^t + sum_{s<t} R_theta(t, s) u^s,     u^t = F(r^t, y),   D^t = D(r^t, y)
    J^t_s = dr^t/dw^s = 1{t=s} I + sum_{s<=s'<t} R_theta(t, s') D^s' J^s'_s
    R_u(t, s) = E[D^t J^t_s],   C_u(t, s) = E[u^t u^sT],   E_zu(t) = E[z u^tT]

Parameter side (one coordinate of the complement, x sqrt(d); eta_t the step size at step t, lambda the ridge)::

    theta^{t+1} = (1 - eta_t lambda) theta^t - eta_t sum_{s<=t} R_u(t, s) theta^s - (eta_t / delta) g^t,
    theta^0 ~ N(0, Sigma_0), g ~ GP(0, delta C_u)
    P_0 = I,  P_{t+1} = (1 - eta_t lambda) P_t - eta_t sum_{s<=t} R_u(t, s) P_s
    R_theta(t+1, t) = -(eta_t / delta) I,
    R_theta(t+1, s) = (1 - eta_t lambda) R_theta(t, s) - eta_t sum_{s<s'<=t} R_u(t, s') R_theta(s', s)   (s < t)
    C_theta(t, t') = P_t Sigma_0 P_t'^T + delta sum_{s<t, s'<t'} R_theta(t, s) C_u(s, s') R_theta(t', s')^T
    M_{t+1} = (1 - eta_t lambda) M_t - eta_t E_zu(t)

On the hard subspace E[zeta u^t] = 0 exactly, so when M_0 has no hard component the hard rows of M_t are kept at 0
(instead of carrying Monte-Carlo noise); their finite-d growth is the process C_mu below.
Predictions: Theta^tT Theta^t -> M_t^T M_t + C_theta(t, t); train loss -> E[l(y, f(r^t))];
test loss -> E[l(y, f(M_t^T z + w^t))] (w^t ~ N(0, C_theta(t, t)) is independent of z, so the same paths serve).

Hard-direction process (docs/theory.md §3.2), one per hard latent direction e (zeta = e^T z): the parameter-side
recursion above with R_u, C_u replaced by R_u^zeta(t, s) = E[zeta^2 D^t J^t_s], C_u^zeta(t, s) = E[zeta^2 u^t u^sT];
its C_mu(t) = E[mu^t mu^tT] = d E[Theta^tT e e^T Theta^t] to linear order.  It is computed by pathwise tangents
(:func:`_hard_tangents`), never through estimated R_u^zeta kernels: those estimates (Stein's or sub-batch Jacobians)
enter the recursion as multiplicative noise and blew it up after 20-40 steps.  What remains at long times is not
estimator noise but the law itself: per-path tangents grow exponentially while a path sits where D < 0 (large y:
single-sample negative curvature), so C_mu becomes an average dominated by rare paths (heavy-tailed replicas).

Numerics:

* The latent (z, eps) is integrated by a tensor Gauss-Hermite rule when k + [noisy] <= 2 ("gauss-hermite") and
  only the Gaussian process w is sampled; otherwise (or on request) z is sampled ("monte-carlo").  Paths are the
  pairs (node, w-path); an expectation is sum_n weight_n g_n.
* w^t is drawn conditionally on w^{<t} from an incremental block Cholesky factor of C_theta + jitter I (the same
  jitter at every step, so the factor is that of one fixed positive-definite matrix; nothing is clamped unless the
  Schur complement is numerically indefinite, which is counted in ``settings["cholesky_repairs"]``).
* Responses R_u: Stein's lemma on the whole batch, or Jacobians J propagated on a sub-batch of the paths
  (``response_paths``, memory (T+1)^2 m^2 per path); see :func:`dmft`.
* Standard errors come from independent replicas (``replicas`` >= 2 solves with independent seeds, run in parallel
  processes); every output is the mean over replicas and its standard error is std / sqrt(replicas).
* A step schedule eta_t (array) gives the DMFT of GD with that schedule; :func:`flow_schedule` builds the
  non-uniform grid of the gradient-flow mode (small steps early, doubled later), time tau_t = sum_{s<t} eta_s.
"""
from __future__ import annotations

import math
import os
import time as _time
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from . import defaults
from .errors import TheorykitError

#: |r| or gram entries above this count as divergence
DIVERGENCE_LIMIT = 1e8
#: response="auto" uses Stein's lemma when every step size is at least this, propagated Jacobians otherwise
STEIN_MIN_ETA = 0.25
#: |r| above this excludes a single path (its probability weight is reported)
PATH_LIMIT = 1e3
#: per-sample curvature eta D / delta above this (for UNSTABLE_STEPS consecutive steps) excludes a path
UNSTABLE_BOUND = 4.0
UNSTABLE_STEPS = 1
#: latent nodes with less probability than this may be excluded when their single-path dynamics is unstable
NEGLIGIBLE_NODE = 1e-9
#: total excluded probability weight above which the run counts as diverged
EXCLUDED_LIMIT = 1e-4
#: relative standard error of trace C_mu above which the hard process is flagged unreliable
HARD_RELIABLE_RSE = 0.05
#: hard process: noise drives taken exactly (top eigenvectors of delta C_u^zeta) and random drives for the rest
HARD_RANK = 32
HARD_RESIDUAL = 4
#: default memory budget for the response arrays, bytes per replica
RESPONSE_MEMORY = 1.2e9
#: response="auto" takes direct Jacobians on the whole batch when they fit in RESPONSE_MEMORY and cost at most this
#: many multiply-adds per replica ((T+1)^3 m^3 N / 3)
DIRECT_AUTO_FLOPS = 1e10


# ----------------------------------------------------------------------------------------------- schedules
def flow_schedule(flow_time: float, eta0: float = 0.05, eta_max: float = 1.0, doubling_every: int = 40):
    """Non-uniform grid for the gradient-flow mode: ``doubling_every`` steps of eta0, then of 2 eta0, ... up to
    eta_max, until the flow time sum(eta_t) reaches ``flow_time``.  Returns the step sizes (array).

    The DMFT with a step schedule is the exact DMFT of GD with that schedule; the gradient-flow limit is reached
    as eta0, eta_max -> 0 and is checked by halving them (see ``benchmarks/bench_dmft.py``)."""
    for name, v in (("flow_time", flow_time), ("eta0", eta0), ("eta_max", eta_max)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise TheorykitError(f"{name} must be a positive number, got {v!r}")
    if eta_max < eta0:
        raise TheorykitError(f"eta_max = {eta_max} is below eta0 = {eta0}")
    if not (isinstance(doubling_every, int) and doubling_every >= 1):
        raise TheorykitError(f"doubling_every must be a positive integer, got {doubling_every!r}")
    steps, tau, eta, count = [], 0.0, float(eta0), 0
    while tau < flow_time - 1e-12:
        h = min(eta, flow_time - tau)
        steps.append(h)
        tau += h
        count += 1
        if count == doubling_every and eta < eta_max:
            eta, count = min(2 * eta, eta_max), 0
        if len(steps) > 10 ** 6:
            raise TheorykitError("flow_schedule: more than 10^6 steps; raise eta0 or eta_max")
    return np.array(steps)


# ----------------------------------------------------------------------------------------------- parameter side
class _ParameterSide:
    """The linear Gaussian parameter-side process of docs/theory.md §3 (see the module docstring).

    Arrays (t-major): P (T+1, m, m); R (T+1, T+1, m, m) with R[t, s] = R_theta(t, s) (zero for s >= t);
    C (T+1, T+1, m, m) with C[t, s] = C_theta(t, s).  ``advance(t, Ru, Cu)`` fills time t from the kernels of the
    sample side at times < t.  Used for Theta_perp (kernels R_u, C_u); the hard process uses :func:`_hard_tangents`.
    """

    def __init__(self, T: int, m: int, Sigma0: np.ndarray, etas: np.ndarray, delta: float, ridge: float):
        self.m, self.Sigma0, self.etas, self.delta, self.ridge = m, Sigma0, etas, delta, ridge
        self.P = np.zeros((T + 1, m, m))
        self.R = np.zeros((T + 1, T + 1, m, m))
        self.C = np.zeros((T + 1, T + 1, m, m))

    def advance(self, t: int, Ru: np.ndarray, Cu: np.ndarray):
        m, I = self.m, np.eye(self.m)
        P, R, C = self.P, self.R, self.C
        if t == 0:
            P[0] = I
        else:
            eta, keep = self.etas[t - 1], 1.0 - self.etas[t - 1] * self.ridge
            P[t] = keep * P[t - 1] - eta * np.einsum("sab,sbc->ac", Ru[t - 1, :t], P[:t])
            if t >= 2:
                R[t, :t - 1] = keep * R[t - 1, :t - 1] - eta * np.einsum("pab,psbc->sac", Ru[t - 1, :t],
                                                                            R[:t, :t - 1])
            R[t, t - 1] = -(eta / self.delta) * I
        # C_theta(t, s) for s <= t
        row = np.einsum("ab,scb->sac", P[t] @ self.Sigma0, P[:t + 1])
        if t >= 1:
            B = np.einsum("aij,abjk->bik", R[t, :t], Cu[:t, :t])  # sum_a R(t,a) C_u(a,b), b < t
            row += self.delta * np.einsum("bik,sbjk->sij", B, R[:t + 1, :t])
        C[t, :t + 1] = row
        C[:t + 1, t] = np.swapaxes(row, 1, 2)


# ----------------------------------------------------------------------------------------------- hard process
def _hard_tangents(D, zeta, weight, R_theta, Cu_zeta, etas, delta, ridge, Sigma0, rank=HARD_RANK,
                   residual=HARD_RESIDUAL, rng=None, dtype=np.float32):
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
        the top ``rank`` eigenvectors as drives G = sqrt(lam_j) q_j (exact), and the rest by ``residual`` random
        drives from N(0, remainder) (unbiased Monte Carlo of the truncated part, weight 1/residual each).

    D (S, N, m, m): per-path curvatures D^t (zero on excluded paths); zeta (N,); weight (N,) path probabilities;
    R_theta (>=S, >=S, m, m); Cu_zeta (>=S, >=S, m, m) = E[zeta^2 u^t u^sT]; etas: step sizes.
    Returns (C_mu (S, m, m), info dict: rank used, eigen-mass of the exact part, ``ess`` (S,): the effective fraction
    of paths carrying E[zeta D^t rho^t] of the first tangent, (sum |c_n|)^2 / (N sum c_n^2) for its per-path terms
    c_n -- small values mean a few paths (those whose tangent grew where D < 0) carry C_mu).
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
        r = min(rank, lam.size)
        exact = V[:, :r] * np.sqrt(lam[:r])
        cols.append(exact), wts.append(np.ones(r))
        total = float(lam.sum())
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
    K = np.zeros((S, m, J * N), dtype=dtype)  # K[s, b, (j, n)] = (D^s rho^s)[n, b] of tangent j
    zw = (weight * zeta).astype(float)
    zt = zeta.astype(dtype)
    C = np.zeros((S, m, m))
    C_init = np.zeros((S, m, m))  # the P Sigma_0 P^T part (first m tangents)
    ess = np.zeros(S)
    for t in range(S):
        rho = (x[t][:, :, None] * zt[None, None, :]).astype(dtype)  # (m, J, N)
        if t:
            Rt = R_theta[t, :t].transpose(1, 0, 2).reshape(m, t * m).astype(dtype)
            rho += (Rt @ K[:t].reshape(t * m, J * N)).reshape(m, J, N)
        if m == 1:
            Kt = rho * D[t, :, 0, 0].astype(dtype)[None, None, :]
        else:
            Kt = np.einsum("nab,bjn->ajn", D[t].astype(dtype), rho)
        K[t] = Kt.reshape(m, J * N)
        C[t] = np.einsum("aj,bj,j->ab", x[t], x[t], cw)
        C_init[t] = x[t][:, :m] @ x[t][:, :m].T
        c0 = Kt[0, 0].astype(float) * zw  # per-path contributions to the drift of the first tangent
        ess[t] = float(np.abs(c0).sum() ** 2 / max(float(c0 @ c0), 1e-300)) / N
        if t < S - 1:
            F = Kt.astype(float) @ zw  # (m, J): sum_{s<=t} R_u^zeta(t, s) x^s
            eta = etas[t]
            x[t + 1] = (1.0 - eta * ridge) * x[t] - eta * F - (eta / delta) * Gd[t]
    info["ess"], info["C_init"] = ess, C_init
    return C, info


# ----------------------------------------------------------------------------------------------- latent rule
def _hermite_rule(order: int, dim: int):
    """Tensor Gauss-Hermite rule for N(0, I_dim): nodes (Q, dim), weights (Q,) summing to 1."""
    x, w = np.polynomial.hermite_e.hermegauss(order)
    w = w / w.sum()
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    weights = np.ones(len(nodes))
    for wg in np.meshgrid(*([w] * dim), indexing="ij"):
        weights = weights * wg.ravel()
    return nodes, weights


#: capture_threshold flags its m* as noise-limited when M_T along e has a larger relative s.e. at a bracket end
CAPTURE_NOISE_RSE = 0.25

#: largest normalised error of the latent rule on the link's moments that latent="auto" accepts for Gauss-Hermite
HERMITE_MOMENT_TOL = 1e-3


def _hermite_moment_error(link, order: int) -> float:
    """How well the tensor Gauss-Hermite rule of ``order`` integrates the link: the largest difference, against the
    rule with 8 x order nodes, of E[y^p He_j(z_i)] / sqrt(E[y^2p] j!) over p = 1, 2, j = 0..4 and every latent
    coordinate i.  Exponentially small for smooth links; O(1/order) for a link that jumps in z (sign, Heaviside,
    Piecewise steps), where Gauss-Hermite nodes place the jump arbitrarily (measured: y = sign(|z| - median|z|),
    logistic loss, delta = 8: 32 nodes gave C_theta(100) = 4.26 against 2.38 with Monte-Carlo latents and 2.42 +- 0.05
    for constrained GD at d = 1000)."""
    dim = link.k + (1 if link.noisy else 0)

    def moments(q):
        nodes, w = _hermite_rule(q, dim)
        y = link.response(nodes[:, :link.k], nodes[:, link.k] if link.noisy else None)
        out = []
        for pw in (1, 2):
            yp = y ** pw
            scale = math.sqrt(max(float(w @ yp ** 2), 1e-300))
            for i in range(link.k):
                for j in range(5):
                    he = np.polynomial.hermite_e.hermeval(nodes[:, i], [0] * j + [1])
                    out.append(float(w @ (yp * he)) / (scale * math.sqrt(math.factorial(j))))
        return np.array(out)

    return float(np.max(np.abs(moments(order) - moments(8 * order))))


@dataclass
class _Batch:
    z: np.ndarray       # (N, k)
    y: np.ndarray       # (N,)
    weight: np.ndarray  # (N,) main-batch weights (sum to 1)
    rweight: np.ndarray  # (NR,) response-batch weights (sum to 1) for the first NR paths
    NR: int
    per_node: int       # w-paths per latent node (N for Monte-Carlo latents)


def _make_batch(link, latent: str, order: int, per_node: int, resp_per_node: int, n_mc: int, n_mc_resp: int,
                rng) -> _Batch:
    k = link.k
    if latent == "gauss-hermite":
        dim = k + (1 if link.noisy else 0)
        nodes, w = _hermite_rule(order, dim)
        Q = len(nodes)
        # path n = p * Q + q: the first resp_per_node * Q paths hold every node
        lat = np.tile(nodes, (per_node, 1))
        weight = np.tile(w, per_node) / per_node
        rweight = np.tile(w, resp_per_node) / resp_per_node
        NR = resp_per_node * Q
        P = per_node
    else:
        lat = rng.standard_normal((n_mc, k + (1 if link.noisy else 0)))
        weight = np.full(n_mc, 1.0 / n_mc)
        rweight = np.full(n_mc_resp, 1.0 / n_mc_resp)
        NR = n_mc_resp
        P = n_mc
    z = lat[:, :k]
    eps = lat[:, k] if link.noisy else None
    return _Batch(z=np.ascontiguousarray(z), y=link.response(z, eps), weight=weight, rweight=rweight, NR=NR, per_node=P)


# ----------------------------------------------------------------------------------------------- one solve
def _weighted_quantiles(values: np.ndarray, weights: np.ndarray, qs) -> list:
    order = np.argsort(values)
    v, cw = values[order], np.cumsum(weights[order])
    cw /= cw[-1]
    return [float(v[min(np.searchsorted(cw, q), len(v) - 1)]) for q in qs]


TAIL_LEVELS = (1e-5, 1e-4, 1e-3)


def _driving_normals(N: int, Q: int, T: int, m: int, sampler: str, rng) -> np.ndarray:
    """Standard normals xi (T+1, m, N) driving w (w^t = sum_{s<=t} L(t, s) xi^s), distinct for every path.

    Path n = p Q + q is w-path p of latent node q.  "sobol": one scrambled Sobol sequence of N points in (T+1) m
    dimensions; node q takes the contiguous run of points q P .. q P + P - 1 (P = N / Q; a balanced sub-net when P is
    a power of two; interleaving nodes instead would tie the low bits of n to the node and bias the strata).
    Randomised QMC: each replica scrambles independently, so the replica spread is an honest error.  Measured: 3-8x
    smaller standard errors of Theta^T Theta than i.i.d. paths, and than independent nets per node.  Weak spot:
    moments dominated by |w| >~ 3 (e.g. E[w^6] in C_u for sigma = x^2, y = z^2) have right-skewed replica means, and
    8-16 replicas understated their error (3-5 stated standard errors low); use sampler="random" there.
    "random": i.i.d. normals."""
    if sampler == "random":
        return rng.standard_normal((T + 1, m, N))
    import warnings

    from scipy.special import ndtri
    from scipy.stats import qmc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # balance warning when N is not a power of two
        pts = qmc.Sobol((T + 1) * m, scramble=True, seed=rng).random(N)  # (N, (T+1) m)
    perm = np.arange(N).reshape(Q, N // Q).T.ravel()  # path p Q + q -> point q P + p
    return ndtri(np.clip(pts[perm], 1e-16, 1 - 1e-16)).T.reshape(T + 1, m, N)


def _curvature_range(der, m: int):
    """Smallest and largest eigenvalue of every path's D (closed form for m <= 2)."""
    if m == 1:
        d = der.l2 * der.grad_f[:, 0] ** 2 + der.curv[:, 0]
        return d, d
    Dm = der.D
    if m == 2:
        h = 0.5 * (Dm[:, 0, 0] - Dm[:, 1, 1])
        rad = np.sqrt(h * h + Dm[:, 0, 1] ** 2)
        mid = 0.5 * (Dm[:, 0, 0] + Dm[:, 1, 1])
        return mid - rad, mid + rad
    ev = np.linalg.eigvalsh(Dm)
    return ev[:, 0], ev[:, -1]


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


def _solve_once(net, link, hard_basis, delta, etas, ridge, Sigma0, M0, batch_args, jitter, seed, sampler="sobol",
                response="stein", window=0, progress=None) -> dict:
    """One DMFT solve with one random stream; returns a dict of arrays (see :func:`dmft`)."""
    rng = np.random.default_rng(seed)
    batch = _make_batch(link, *batch_args, rng=rng)
    T = len(etas)
    m, k = net.m, link.k
    kH = hard_basis.shape[1]
    N, NR = len(batch.y), batch.NR
    wt, rwt = batch.weight.copy(), batch.rweight.copy()
    alive = np.ones(N, dtype=bool)
    over = np.zeros(N, dtype=int)
    # only latent nodes of negligible probability may be excluded (outer Gauss-Hermite nodes; every path for
    # Monte-Carlo latents has weight 1/N and is never excluded): elsewhere an unstable path is GD's own divergence
    negligible = batch.weight * batch.per_node < NEGLIGIBLE_NODE
    top_at_divergence = None  # consecutive steps with per-sample curvature eta D / delta > 2
    excluded, excluded_at = 0.0, None
    z, y = batch.z, batch.y
    zeta2 = (z @ hard_basis) ** 2  # (N, kH)

    par = _ParameterSide(T, m, Sigma0, etas, delta, ridge)
    Ru = np.zeros((T + 1, T + 1, m, m))
    Cu = np.zeros((T + 1, T + 1, m, m))
    Cu_h = np.zeros((kH, T + 1, T + 1, m, m))  # E[zeta_j^2 u^t u^sT], the hard process' noise covariance
    kinked_hard = kH > 0 and (bool(net.activation.kinks) or net.loss.derivative_jumps)
    Ru_h = np.zeros((kH, T + 1, T + 1, m, m)) if kinked_hard else None  # R_u^zeta by Stein (kinks only)
    Dh = np.zeros((T + 1, N, m, m), dtype=np.float32) if kH else None  # per-path D^t for the hard tangents
    M = np.zeros((T + 1, k, m))
    M[0] = M0
    Ezu = np.zeros((T + 1, k, m))
    train = np.zeros(T + 1)
    test = np.zeros(T + 1)
    tails = np.zeros((T + 1, 1 + len(TAIL_LEVELS)))
    dtop = np.zeros(T + 1)  # 1 - 1e-4 quantile of the largest eigenvalue of D^t (for the stability hint)
    # history H[s] = (xi^s; u^s), (T+1, 2m, N): the standard normals driving w and the u's, stacked so that each step
    # reads the history twice (one GEMM for w^t and the memory term, one for C_u(t, .) and E[u^t xi^sT])
    H = np.zeros((T + 1, 2 * m, N))
    L = np.zeros(((T + 1) * m, (T + 1) * m), order="F")  # block Cholesky factor of C_theta + jitter I
    K = (np.zeros((T + 1, T + 1, m, NR, m), dtype=np.float32) if response == "direct" else None)
    W = window if response == "stein" else 0
    Kw = np.zeros((max(W, 1), max(W, 1), m, N, m)) if W else None  # recent responses (ring buffer), see below
    # K[s, s', b, n, c] = (D^s' J^s'_s)[n, b, c]
    H[:, :m] = _driving_normals(N, N // batch.per_node, T, m, sampler, rng)
    A = np.zeros((2 * m, (T + 1) * 2 * m))  # coefficient rows: (w^t; memory term) = A[:, :(t+1) 2m] @ H[:t+1]
    P_node = batch.per_node
    Qn = N // P_node  # latent nodes (1 for Monte-Carlo latents)
    pin_hard = kH > 0 and not np.any(hard_basis.T @ M0)
    repairs = 0
    diverged = None
    jit = jitter * max(1.0, float(np.trace(Sigma0)) / m)
    kinks = net.activation.kinks  # where sigma' jumps (docs/theory.md §3.1)
    loss_jumps = net.loss.derivative_jumps
    import scipy.linalg as sla

    for t in range(T + 1):
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
            L[tm:tm + m, tm:tm + m] = np.linalg.cholesky((V * np.maximum(lam, jit)) @ V.T)
            repairs += 1
        # ---- sample side: w^t = sum_{s<=t} L(t, s) xi^s and the memory term sum_{s<t} R_theta(t, s) u^s
        Av = A[:, :(t + 1) * 2 * m].reshape(2 * m, t + 1, 2 * m)
        Av[:m, :, :m] = L[tm:tm + m, :tm + m].reshape(m, t + 1, m)
        if t:
            Av[m:, :t, m:] = par.R[t, :t].transpose(1, 0, 2)
        wm = A[:, :(t + 1) * 2 * m] @ H[:t + 1].reshape((t + 1) * 2 * m, N)  # (2m, N); H[t, m:] is still 0
        base = (M[t].T @ z.T) + wm[:m]  # (m, N): M_t^T z + w^t
        r = base + wm[m:]
        # Single paths at latent nodes of negligible probability (< NEGLIGIBLE_NODE: the outer Gauss-Hermite nodes,
        # y ~ 100, samples no finite-n data set contains) whose own dynamics is unstable -- per-sample curvature
        # eta D / delta > UNSTABLE_BOUND (twice a one-sample GD mode's bound 2), or |r| > PATH_LIMIT x (1 +
        # sqrt(max C_theta(t,t)) + 10 |M_t|) -- are excluded and their probability weight is reported.  Measured:
        # sigma = x^2, y = z^2, eta = 0.05 with 32 nodes blew up through its outer nodes without this (excluded weight
        # 5e-13 with it).  Unstable paths of non-negligible probability are kept: they are GD's own divergence.
        with np.errstate(invalid="ignore", over="ignore"):
            rs = np.where(np.isfinite(r), r, 0.0)
            der = net.evaluate(rs.T, y)
            dmin, dmax = _curvature_range(der, m)
            scale = 1.0 + math.sqrt(max(float(np.max(np.diag(par.C[t, t]))), 0.0)) + 10.0 * float(np.abs(M[t]).max())
            eta_t = etas[min(t, T - 1)] if T else 0.0
            over = np.where(eta_t * dmax / delta > UNSTABLE_BOUND, over + 1, 0)
            bad = (~np.all(np.isfinite(r), axis=0) | (np.max(np.abs(rs), axis=0) > PATH_LIMIT * scale)
                   | ~np.isfinite(dmax) | (over >= UNSTABLE_STEPS)) & negligible
        if np.any(bad & alive):
            new_dead = bad & alive
            excluded += float(wt[new_dead].sum())
            excluded_at = t if excluded_at is None else excluded_at
            alive &= ~new_dead
            wt[new_dead] = 0.0
            rwt[new_dead[:NR]] = 0.0
            if excluded > EXCLUDED_LIMIT:
                diverged = t
                top_at_divergence = _weighted_quantiles(np.where(np.isfinite(dmax), dmax, np.inf),
                                                        batch.weight, [1 - 1e-4])[0]
                break
        if not alive.all():
            H[:t, m:, ~alive] = 0.0
            dmin, dmax = np.where(alive, dmin, 0.0), np.where(alive, dmax, 0.0)
            der = replace(der, **{name: np.where(alive if np.ndim(getattr(der, name)) == 1 else alive[:, None],
                                                  np.broadcast_to(getattr(der, name),
                                                                  (N,) + np.shape(getattr(der, name))[1:]), 0.0)
                                  for name in ("f", "loss", "l1", "l2", "F", "grad_f", "curv")})
        train[t] = float(wt @ der.loss)
        test[t] = float(wt @ net.loss_values(base.T, y))
        H[t, m:] = der.F.T
        Ezu[t] = (z * wt[:, None]).T @ der.F
        # E[c u^t (xi^s; u^s)^T] for c = 1 and c = zeta_j^2, s <= t: one GEMM over the history
        # The Stein row uses u^t centred within each latent node (E[xi^s] = 0 exactly, so subtracting the node mean of
        # u removes the part of the Monte-Carlo error that is the node mean times the sample mean of xi; factor
        # P/(P-1) undoes the centring's 1/P bias)
        cs = [wt] + [wt * zeta2[:, j] for j in range(kH)]
        ut = H[t, m:]
        uc = ut.reshape(m, P_node, Qn)
        uc = ((uc - uc.mean(axis=1, keepdims=True)) * (P_node / max(P_node - 1, 1))).reshape(m, N)
        # with a kink, the hard process' responses R_u^zeta(t, s) also come from Stein's lemma (rows 2 + kH + j)
        hard_stein = kinked_hard and response == "stein"
        V = np.concatenate([ut * c for c in cs] + ([uc * wt] if response == "stein" else [])
                           + ([uc * (wt * zeta2[:, j]) for j in range(kH)] if hard_stein else []))
        E = (V @ H[:t + 1].reshape((t + 1) * 2 * m, N).T).reshape(-1, m, t + 1, 2 * m)
        for j, target in enumerate([Cu] + [Cu_h[i] for i in range(kH)]):
            target[t, :t + 1] = E[j, :, :, m:].transpose(1, 0, 2)
            target[:t + 1, t] = np.swapaxes(target[t, :t + 1], 1, 2)
        # ---- tails of D (smallest eigenvalue per path)
        tails[t, 0] = float(np.min(dmin[wt > 0]))
        tails[t, 1:] = _weighted_quantiles(dmin, wt, TAIL_LEVELS)
        dtop[t] = _weighted_quantiles(dmax, wt, [1 - 1e-4])[0]
        # ---- kinks (docs/theory.md §3.1): D above is the finite-n (almost-sure) curvature; the responses need the
        # Dirac terms of sigma''.  Their equal-time part is exact: averaged over the newest innovation xi^t, whose
        # conditional law given the past is known on every path.  kappa (N, m) is added to curv for the responses.
        Ltt = L[tm:tm + m, tm:tm + m]
        if kinks:
            kappa = _kink_weights(net, kinks, r=rs, xi=H[t, :m], Ltt=Ltt, y=y)
            kappa[~alive] = 0.0
            der = replace(der, curv=der.curv + kappa)
        Dw = der.D if m > 1 else (der.l2 * der.grad_f[:, 0] ** 2 + der.curv[:, 0])[:, None, None]
        Ru[t, t] = np.einsum("nac,n->ac", Dw, wt)  # R_u(t, t) = E[D^t] (J^t_t = I): the whole batch
        if loss_jumps:
            # l' jumps in yhat: the Dirac part sits on a surface f(r) = kink(y); Stein's lemma on the newest innovation
            # needs no location: E[u^t xi^tT] = E[du^t/dr^t] L(t, t) (u centred within latent nodes as below)
            ut_ = H[t, m:]
            uc_ = ut_.reshape(m, P_node, Qn)
            uc_ = ((uc_ - uc_.mean(axis=1, keepdims=True)) * (P_node / max(P_node - 1, 1))).reshape(m, N)
            Ru[t, t] = sla.solve_triangular(Ltt, ((uc_ * wt) @ H[t, :m].T).T, lower=True, trans="T",
                                            check_finite=False).T
        if kinked_hard:
            # R_u^zeta(t, s) = E[zeta^2 du^t/dw^s]: equal time as R_u(t, t) (zeta^2 is a function of z, fixed on a
            # path), older lags by Stein's lemma, E[zeta^2 u^t xi^sT] = sum_{s<=s'<=t} R_u^zeta(t, s') L(s', s)
            for j in range(kH):
                if loss_jumps:
                    Ru_h[j, t, t] = sla.solve_triangular(Ltt, ((uc_ * (wt * zeta2[:, j])) @ H[t, :m].T).T,
                                                         lower=True, trans="T", check_finite=False).T
                else:
                    Ru_h[j, t, t] = np.einsum("nac,n->ac", Dw, wt * zeta2[:, j])
                if t:
                    Gz = E[2 + kH + j, :, :t, :m].reshape(m, tm) - Ru_h[j, t, t] @ L[tm:tm + m, :tm]
                    Ru_h[j, t, :t] = sla.solve_triangular(L[:tm, :tm], Gz.T, lower=True, trans="T",
                                                          check_finite=False).T.reshape(m, t, m).transpose(1, 0, 2)
        if kH:
            Dh[t] = np.where(alive[:, None, None], Dw, 0.0)
        if response == "stein":
            # recent lags t - W <= s < t exactly on the whole batch: J^t_s = sum_{s<=s'<t} R_theta(t, s') K^s'_s with
            # K^s'_s = D^s' J^s'_s kept for the last W steps (ring buffer Kw[s' % W, s % W] of (m, N, m) blocks)
            lo = max(0, t - W)
            g_, gl_, cv_ = der.grad_f.T, der.grad_f.T * der.l2, der.curv.T  # (m, N)
            for s_ in range(lo, t):
                J = np.zeros((m, N, m))
                for sp_ in range(s_, t):
                    J += np.einsum("ab,bnc->anc", par.R[t, sp_], Kw[sp_ % W, s_ % W])
                Kts = gl_[:, :, None] * np.einsum("bn,bnc->nc", g_, J)[None] + cv_[:, :, None] * J  # D^t J^t_s
                Ru[t, s_] = np.einsum("anc,n->ac", Kts, wt)
                Kw[t % W, s_ % W] = Kts
            if W:
                Kw[t % W, t % W] = gl_[:, :, None] * g_.T[None] + cv_[:, :, None] * np.eye(m)[:, None, :]
            if lo:
                # older lags by Stein's lemma on w = L xi (L: the factor actually sampled, of C_theta + jitter I):
                #   E[u^t xi^sT] = sum_{s<=s'<=t} E[D^t J^t_s'] L(s', s),
                # the terms s' >= lo being known, R_u(t, s < lo) solves a triangular system: O(t m N) per step.
                lm = lo * m
                Lsub, Lrest = L[:lm, :lm], L[lm:tm + m, :lm]
                known = Ru[t, lo:t + 1].transpose(1, 0, 2).reshape(m, tm + m - lm)  # (a, (s', b))
                G = E[1 + kH, :, :lo, :m].reshape(m, lm) - known @ Lrest          # (m, lo m)
                row_ = sla.solve_triangular(Lsub, G.T, lower=True, trans="T", check_finite=False).T
                Ru[t, :lo] = row_.reshape(m, lo, m).transpose(1, 0, 2)
        elif response == "direct":
            # responses on the first NR paths: J^t_s = sum_{s<=s'<t} R_theta(t, s') K^s'_s for s < t, J^t_t = I,
            # K^t_s = D^t J^t_s, R_u(t, s) = E[K^t_s].  K[s, s'] (float32) holds K^s'_s as (b, n, c) so that the
            # sum over s' is one contiguous GEMM per s reading only the nonzero triangle: O(t^2 m^3 NR) per step.
            g = der.grad_f[:NR].T          # (m, NR)
            gl = g * der.l2[:NR]
            cv_ = der.curv[:NR].T          # (m, NR)
            if t:
                Rt = par.R[t, :t].transpose(1, 0, 2).reshape(m, tm).astype(np.float32)  # (a, (s', b))
                J = np.empty((t, m, NR, m), dtype=np.float32)
                for s_ in range(t):
                    np.matmul(Rt[:, s_ * m:], K[s_, s_:t].reshape((t - s_) * m, NR * m),
                              out=J[s_].reshape(m, NR * m))
                gJ = np.einsum("bn,sbnc->snc", g.astype(np.float32), J)                   # (s, n, c)
                K[:t, t] = gl[None, :, :, None] * gJ[:, None] + cv_[None, :, :, None] * J
                Ru[t, :t] = np.einsum("sanc,n->sac", K[:t, t], rwt.astype(np.float32))
            K[t, t] = gl[:, :, None] * g.T[None, :, :] + cv_[:, :, None] * np.eye(m)[:, None, :]
        if t < T:
            keep = 1.0 - etas[t] * ridge
            M[t + 1] = keep * M[t] - etas[t] * Ezu[t]
            if pin_hard:  # E[zeta u^t] = 0 exactly on the hard subspace: keep the Monte-Carlo noise out of M
                M[t + 1] -= hard_basis @ (hard_basis.T @ M[t + 1])
        if progress is not None:
            progress(t)

    last = T if diverged is None else diverged - 1
    S = last + 1
    idx = np.arange(S)
    C_mu = np.zeros((S, kH, m, m))
    hard_info = []
    for j in range(kH):
        if kinked_hard:
            # the linear hard process on Stein kernels: the parameter-side recursion with R_u^zeta, C_u^zeta
            ph = _ParameterSide(T, m, Sigma0, etas, delta, ridge)
            C_init = np.zeros((S, m, m))
            for t_ in range(S):
                ph.advance(t_, Ru_h[j], Cu_h[j])
                C_mu[t_, j] = ph.C[t_, t_]
                C_init[t_] = ph.P[t_] @ Sigma0 @ ph.P[t_].T
            hard_info.append({"rank": 0, "residual_drives": 0, "exact_fraction": 1.0, "ess": np.full(S, np.nan),
                              "C_init": C_init})
            continue
        zeta = z @ hard_basis[:, j]
        C_mu[:, j], info = _hard_tangents(Dh[:S], zeta, wt, par.R, Cu_h[j], etas, delta, ridge, Sigma0, rng=rng)
        hard_info.append(info)
    Cdiag = par.C[idx, idx]
    gram = np.einsum("tka,tkb->tab", M[:S], M[:S]) + Cdiag
    out = {
        "M": M[:S], "gram": gram, "train_loss": train[:S], "test_loss": test[:S], "C_theta_tt": Cdiag,
        "Ezu": Ezu[:S], "D_tail": tails[:S],
        "D_top": np.append(dtop[:S], [top_at_divergence] if top_at_divergence is not None else []),
        "C_mu": C_mu, "hard_info": hard_info,
        "C_mu_init": (np.stack([i["C_init"] for i in hard_info], axis=1) if kH else np.zeros((S, 0, m, m))),
        "hard_ess": (hard_info[0]["ess"] if kH else np.zeros(S)),
        "C_theta": par.C[:S, :S], "R_theta": par.R[:S, :S], "C_u": Cu[:S, :S],
        "R_u": Ru[:S, :S],
        "diverged": diverged, "repairs": repairs, "N": N, "NR": NR, "excluded": excluded,
        "excluded_at": excluded_at,
    }
    return out


def _kink_settings(net, response: str, window: int):
    """How the Dirac terms of a kinked activation or loss entered the solve (docs/theory.md §3.1), or None."""
    kinks, jumps = net.activation.kinks, net.loss.derivative_jumps
    if not kinks and not jumps:
        return None
    exact_lags = response == "stein" and not window
    out = {"activation": (kinks.as_dict() if kinks else None), "loss_derivative_jumps": bool(jumps),
           "equal_time": ("R_u(t, t) by Stein's lemma on the newest innovation" if jumps else
                          "R_u(t, t): Dirac terms averaged over the newest innovation (exact per path)"),
           "lags": ("R_u(t, s < t) by Stein's lemma (exact with kinks)" if exact_lags else
                    "R_u(t, s < t) from propagated Jacobians whose earlier Dirac terms are averaged over their "
                    "innovation (an approximation: a jump of u is linearised)"),
           "hard_process": "R_u^zeta(t, s) by Stein's lemma (equal time as R_u(t, t)) and the parameter-side "
                           "recursion instead of pathwise tangents (which cannot carry a jump of u)"}
    out["exact"] = bool(exact_lags)
    return out


# ----------------------------------------------------------------------------------------------- capture
def _hard_basis(lk) -> np.ndarray:
    """(k, kH) orthonormal basis of the link's hard latent subspace (docs/theory.md §2)."""
    from .symbolic.links import analyse_link

    return np.asarray(analyse_link(lk).hard_basis, dtype=float).reshape(lk.k, -1)


def capture_threshold(activation, link, loss="square", width: int = 1, *, delta: float, eta: float, steps: int,
                      lo: float = defaults.CAPTURE_LO, hi: float = defaults.CAPTURE_HI, tol: float = defaults.CAPTURE_TOL,
                      rtol: float = defaults.CAPTURE_RTOL, **kw) -> dict:
    """Smallest initial hard overlap m0 from which the (nonlinear, d -> infinity) DMFT reaches cos^2 > 1/2 on the
    first hard direction by t = steps (m = 1), by bisection on [lo, hi] until hi - lo <= tol or hi <= (1 + rtol) lo.

    Each evaluation is ``dmft(..., M0 = m0 e)`` with e the first hard direction (other arguments in ``kw``, e.g.
    paths, replicas, seed).  cos^2(t) = M_t^2 / (M_t^2 + C_theta(t, t)) along e.  The bracket is checked: hi must
    capture and lo must not.  Midpoints are arithmetic while lo = 0 and geometric after, so a small threshold is
    resolved to a relative precision (what :meth:`DMFTResult.capture_prediction` needs: its P depends on m_star^2).
    Returns {"m_star": midpoint, "bracket": [lo, hi], "evaluations": [(m0, cos2), ...], "M_rel_stderr": the
    replicas' relative s.e. of M_T along e at the bracket ends (the larger), "noise_limited": whether it exceeds
    CAPTURE_NOISE_RSE (then the replicas' Monte-Carlo noise drives the hard overlap and m_star is too large: raise
    paths, or use a link that Gauss-Hermite integrates)}.
    """
    from .simulate import _check_number
    from .symbolic.ingredients import link as make_link

    if width != 1:
        raise TheorykitError("capture_threshold is defined for width m = 1")
    lo = _check_number("lo", lo, lambda v: v >= 0, ">= 0")
    hi = _check_number("hi", hi, lambda v: v > lo, "> lo")
    tol = _check_number("tol", tol, lambda v: v > 0, "> 0")
    rtol = _check_number("rtol", rtol, lambda v: v > 0, "> 0")
    lk = make_link(link)
    hb = _hard_basis(lk)
    if hb.shape[1] == 0:
        raise TheorykitError("this link has no hard direction: nothing to capture")
    e = hb[:, 0]
    evals = []
    rse = {}  # m0 -> relative standard error of M_T along e over replicas

    def captured(m0):
        r = dmft(activation, lk, loss, 1, delta=delta, eta=eta, steps=steps, M0=(m0 * e)[:, None], **kw)
        if r.status != "ok":
            raise TheorykitError(f"the DMFT from m0 = {m0:g} did not reach t = {steps} ({r.diverged_at['hint']})")
        Me = float(e @ r.M[-1, :, 0])
        se = float(np.sqrt(e ** 2 @ r.stderr["M"][-1, :, 0] ** 2))
        c2 = Me ** 2 / (Me ** 2 + float(r.C_theta_tt[-1, 0, 0]))
        evals.append((float(m0), c2))
        rse[float(m0)] = se / max(abs(Me), 1e-300)
        return c2 > 0.5

    def mid(a, b):
        return math.sqrt(a * b) if a > 0 else 0.5 * (a + b)

    if not captured(hi):
        raise TheorykitError(f"m0 = hi = {hi:g} is not captured by t = {steps}: raise hi or steps")
    if lo > 0 and captured(lo):
        raise TheorykitError(f"m0 = lo = {lo:g} is already captured by t = {steps}: lower lo")
    while hi - lo > tol and not (lo > 0 and hi <= (1 + rtol) * lo):
        m = mid(lo, hi)
        lo, hi = (lo, m) if captured(m) else (m, hi)
    # Near m*, M_T along e must be resolved: with Monte-Carlo latents the sampled E[z u] drives the hard overlap of
    # each replica like a finite-d noise (d ~ paths per replica), the replicas capture or not at random and the mean
    # M_T understates the drift (measured: y = sign(|z| - median), logistic, delta = 10, 8192 paths per replica,
    # m0 = 0.0156: M_100 / m0 = 22 +- 45 against the linear 86), so m* comes out too large.
    noise = max(rse.get(lo, 0.0), rse.get(hi, 0.0))
    return {"m_star": mid(lo, hi), "bracket": [lo, hi], "evaluations": evals, "M_rel_stderr": noise,
            "noise_limited": bool(noise > CAPTURE_NOISE_RSE)}


@dataclass
class CapturePrediction:
    """Matched finite-d prediction of :meth:`DMFTResult.capture_prediction` (m = 1, first hard direction).

    probability = P(chi2_1 > d m_star^2 / v) with v = v_eff(t_match); [low, high] is its sensitivity band: the ends of
    the m_star bracket, v_eff +- 2 standard errors (jackknife over replicas), and t_match anywhere in
    [ceil(t_match / 2), t_match].  It is a band of the inputs, not a confidence interval of the heuristic itself.
    noise_limited: capture_threshold's flag (None when m_star was given as a number); True means m_star is unreliable.
    """

    d: int
    probability: float
    low: float
    high: float
    m_star: float
    bracket: tuple
    t_match: int
    v: float
    v_stderr: float
    noise_limited: Optional[bool] = None
    how: str = ("matched: linear hard process (DMFT tangents) up to t_match, then the nonlinear DMFT's capture "
                "threshold m_star (capture_threshold); P = P(chi2_1 > d m_star^2 / v_eff(t_match))")

    def as_dict(self) -> dict:
        return {"d": self.d, "probability": self.probability, "low": self.low, "high": self.high,
                "m_star": self.m_star, "bracket": list(self.bracket), "t_match": self.t_match, "v": self.v,
                "v_stderr": self.v_stderr, "noise_limited": self.noise_limited, "how": self.how}


# ----------------------------------------------------------------------------------------------- result
@dataclass
class DMFTResult:
    """DMFT prediction; T+1 = number of time points reached, k latent dim, m width, kH hard directions.

    t (T+1,), time (T+1,) flow time sum_{s<t} eta_s; M (T+1, k, m); gram (T+1, m, m) = M^T M + C_theta(t, t);
    train_loss, test_loss (T+1,); C_theta_tt (T+1, m, m); C_mu (T+1, kH, m, m) = d E[Theta^T e e^T Theta] per hard
    direction e (docs/theory.md §3.2); D_tail (T+1, 4): min and the 1e-5, 1e-4, 1e-3 quantiles of the smallest eigenvalue of
    D^t; stderr: the same keys -> standard errors over replicas; kernels (if requested): C_theta, R_theta, C_u, R_u
    as (T+1, T+1, m, m) arrays (replica means) with "<name>_stderr"; status "ok" | "diverged"; diverged_at;
    hard_reliable_until: last t before the replicas of tr C_mu disagree by > 5%; hard_ess (T+1,): smallest over
    replicas of the effective fraction of paths carrying the hard drift (see :func:`_hard_tangents`); C_mu_init
    (T+1, kH, m, m): the part of C_mu grown from the initial overlap alone, P_t Sigma_0 P_t^T; v_eff (T+1,), m = 1
    only: C_mu Sigma_0 / C_mu_init on the first hard direction, the variance d Var(mu^t / P_t) of the effective
    initial overlap (ratio of replica means; stderr["v_eff"] by jackknife over replicas); bias (with
    ``bias_check``): {key: estimated finite-path bias of that output, "stderr": {key: its standard error}} for M,
    gram, train_loss, test_loss, C_theta_tt, C_mu.
    """

    status: str
    t: np.ndarray
    time: np.ndarray
    M: np.ndarray
    gram: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    C_theta_tt: np.ndarray
    C_mu: np.ndarray
    D_tail: np.ndarray
    stderr: dict
    kernels: Optional[dict]
    settings: dict
    seconds: float
    diverged_at: Optional[dict] = None
    Ezu: Optional[np.ndarray] = None
    hard_reliable_until: Optional[int] = None
    hard_ess: Optional[np.ndarray] = None
    bias: Optional[dict] = None
    C_mu_init: Optional[np.ndarray] = None
    v_eff: Optional[np.ndarray] = None
    problem: Optional[object] = None  # the theorykit.Problem solved (None if the ingredients have no spec string)

    def success_probability(self, d: int, t=None, samples: int = 20000, seed: int = 0):
        """Predicted probability that GD at dimension d has hard overlap > 1/2 at time t (docs/theory.md §3.2).

        To linear order Theta^T e = mu / sqrt(d) with mu ~ N(0, C_mu(t)) and the complement's Gram C_theta(t, t);
        for m = 1 this is P(chi2_1 > d C_theta(t, t) / C_mu(t)) (exact); for m > 1 the cos^2 between e and the top
        left singular vector of Theta is Monte-Carlo'd over mu (``samples`` draws).  Uses the first hard direction.
        Returns an array over t (all time points if t is None).  Times after ``hard_reliable_until`` rest on a
        C_mu whose replicas disagree by more than 5%: treat them as unreliable (C_mu is then carried by rare paths,
        see ``hard_ess``; more paths push that time later only slowly).  Measured: right in mean and law where it is
        reliable, but GD escapes later; :meth:`capture_probability` is the matched prediction that tracks GD."""
        from scipy.stats import chi2

        if self.C_mu.shape[1] == 0:
            raise TheorykitError("this link has no hard direction: no finite-d hard-overlap prediction")
        d = int(d)
        ts = self.t if t is None else np.atleast_1d(np.asarray(t, dtype=int))
        m = self.gram.shape[1]
        out = []
        rng = np.random.default_rng(seed)
        for s in ts:
            Cm = self.C_mu[s, 0]
            Ct = self.C_theta_tt[s]
            if m == 1:
                ratio = d * Ct[0, 0] / max(Cm[0, 0], 1e-300)
                out.append(float(chi2.sf(ratio, 1)))
                continue
            lam, V = np.linalg.eigh(Cm)
            mu = rng.standard_normal((samples, m)) * np.sqrt(np.maximum(lam, 0)) @ V.T / math.sqrt(d)
            lt, Vt = np.linalg.eigh(Ct)
            half = (Vt * np.sqrt(np.maximum(lt, 0))).T  # rows: complement coordinates, half^T half = C_theta
            Mk = self.M[s]
            ok = 0
            for i in range(samples):
                Th = np.vstack([mu[i][None, :], Mk, half])
                u, _, _ = np.linalg.svd(Th, full_matrices=False)
                ok += u[0, 0] ** 2 > 0.5
            out.append(ok / samples)
        return np.array(out)

    def capture_prediction(self, d: int, capture, t_match: Optional[int] = None) -> CapturePrediction:
        """Matched finite-d prediction (m = 1): P(GD at dimension d captures the hard direction by the horizon).

        The linear process (docs/theory.md §3.2) is trusted up to ``t_match`` (default: ``hard_reliable_until``);
        there mu^t = P_t mu_eff with an effective initial overlap mu_eff ~ N(0, v/d), v = v_eff(t) = d Var(mu^t)/P_t^2
        = C_mu(t) Sigma_0 / C_mu_init(t) (noise-driven growth counted in units of initial overlap).  The nonlinear
        DMFT started from an initial hard overlap m0 grows like P_t m0 in the same linear regime and reaches
        cos^2 > 1/2 by the horizon iff m0 > m_star (:func:`capture_threshold`).  So P = P(chi2_1 > d m_star^2 / v).

        ``capture`` is m_star, or the dict returned by :func:`capture_threshold` (its bracket then enters the band).
        v_eff(t) levels off as the growing mode takes over (measured: GeLU delta = 9, 2.3 at t = 10, 2.5-2.7 for
        t = 15-40; x^2 delta = 6, 1.53 at t = 30, 1.59-1.72 for t = 60-300), so the matching time matters little;
        the band reports how little.  Measured against 96 GD seeds per cell (tables/dmft_vs_sim_part3.md): phase
        retrieval, GeLU and x^2, 21 of 24 cells within max(2 se, 0.1), where the linear chi2 formula is in 3.  Not
        reliable when ``capture["noise_limited"]`` (Monte-Carlo latents: y = sign(|z| - median), logistic loss, 3 of
        12 cells; the linear formula over all t does well there, tables/dmft_vs_sim_part3_sign.md)."""
        from scipy.stats import chi2

        from .simulate import _check_int

        if self.C_mu.shape[1] == 0 or self.gram.shape[1] != 1 or self.v_eff is None:
            raise TheorykitError("capture_prediction needs a hard direction and width m = 1")
        def number(v):
            return isinstance(v, (int, float, np.floating)) and not isinstance(v, bool) and math.isfinite(v)

        noise = capture.get("noise_limited") if isinstance(capture, dict) else None
        m_star = capture.get("m_star") if isinstance(capture, dict) else capture
        if not (number(m_star) and m_star > 0):
            raise TheorykitError(f"m_star must be a positive number, got {m_star!r}")
        m_star = float(m_star)
        bracket = capture.get("bracket", (m_star, m_star)) if isinstance(capture, dict) else (m_star, m_star)
        if not (isinstance(bracket, (list, tuple)) and len(bracket) == 2 and all(number(b) for b in bracket)
                and 0 <= bracket[0] <= m_star <= bracket[1]):
            raise TheorykitError(f"the bracket must be [lo, hi] with 0 <= lo <= m_star <= hi, got {bracket!r}")
        bracket = (float(bracket[0]), float(bracket[1]))
        d = _check_int("d", d, 1)
        tm = self.hard_reliable_until if t_match is None else t_match
        if isinstance(tm, bool) or not isinstance(tm, (int, np.integer)) or not 0 <= tm < len(self.t):
            raise TheorykitError(f"t_match must be a time index in [0, {len(self.t) - 1}], got {t_match!r}")
        tm = int(tm)
        v = np.asarray(self.v_eff, dtype=float)
        se = np.asarray(self.stderr.get("v_eff", np.zeros_like(v)), dtype=float)
        win = slice((tm + 1) // 2, tm + 1)
        v_lo = float(np.min(v[win] - 2 * se[win]))
        v_hi = float(np.max(v[win] + 2 * se[win]))

        def p(m, vv):
            return float(chi2.sf(d * m ** 2 / vv, 1)) if vv > 0 else 0.0

        return CapturePrediction(d=d, probability=p(m_star, float(v[tm])), low=p(bracket[1], v_lo),
                                 high=p(bracket[0], v_hi) if bracket[0] > 0 else 1.0, m_star=m_star,
                                 bracket=bracket, t_match=tm, v=float(v[tm]), v_stderr=float(se[tm]),
                                 noise_limited=noise)

    def capture_probability(self, d: int, m_star, t_match: Optional[int] = None) -> float:
        """The probability of :meth:`capture_prediction` (``m_star`` a number or capture_threshold's dict)."""
        return self.capture_prediction(d, m_star, t_match).probability

    def as_dict(self) -> dict:
        tail = [{"t": int(t), "min": float(r[0]), **{f"q{q:.0e}".replace("e-0", "e-"): float(v)
                                                       for q, v in zip(TAIL_LEVELS, r[1:])}}
                for t, r in zip(self.t, self.D_tail)]
        out = {
            "status": self.status, "t": self.t.tolist(), "time": self.time.tolist(), "M": self.M.tolist(),
            "gram": self.gram.tolist(), "train_loss": self.train_loss.tolist(), "test_loss": self.test_loss.tolist(),
            "stderr": {k: np.asarray(v).tolist() for k, v in self.stderr.items()},
            "hard": {"C_mu": self.C_mu.tolist(), "C_mu_stderr": np.asarray(self.stderr.get("C_mu")).tolist(),
                     "reliable_until": self.hard_reliable_until,
                     "ess": (None if self.hard_ess is None else np.asarray(self.hard_ess).tolist()),
                     "v_eff": (None if self.v_eff is None else np.asarray(self.v_eff).tolist()),
                     "v_eff_stderr": (None if self.v_eff is None else np.asarray(self.stderr["v_eff"]).tolist())},
            "D_tail": tail, "settings": self.settings, "seconds": self.seconds,
            "diverged_at": self.diverged_at,
            "problem": (None if self.problem is None else self.problem.to_dict()),
        }
        if self.kernels is not None:
            out["kernels"] = {k: np.asarray(v).tolist() for k, v in self.kernels.items()}
        if self.bias is not None:
            out["bias"] = {k: ({kk: np.asarray(vv).tolist() for kk, vv in v.items()} if k == "stderr"
                               else np.asarray(v).tolist()) for k, v in self.bias.items()}
        return out


# ----------------------------------------------------------------------------------------------- front door
def _replica_worker(args):
    # one BLAS thread per replica process: the GEMMs here are thin and memory-bound, and oversubscribed OpenBLAS
    # threads made them 30x slower on a 2-core machine (threadpoolctl: the maintained way to set this at run time)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _solve_once(*args)


def _matrix(v, shape, name, default):
    if v is None:
        return default
    a = np.asarray(v, dtype=float)
    if a.size == np.prod(shape):
        a = a.reshape(shape)
    if a.shape != shape or not np.all(np.isfinite(a)):
        raise TheorykitError(f"{name} must be a finite array of shape {shape}, got shape {np.shape(v)}")
    return a


def dmft(activation, link=None, loss="square", width: int = 1, *, a=None, b=None, delta: Optional[float] = None,
         eta=None,
         steps: Optional[int] = None, schedule=None, ridge: float = 0.0, Sigma0=None, M0=None,
         paths: int = defaults.DMFT_PATHS,
         replicas: int = defaults.DMFT_REPLICAS, latent: str = defaults.DMFT_LATENT, order: Optional[int] = None, response_paths: Optional[int] = None,
         jitter: float = defaults.DMFT_JITTER, sampler: str = defaults.DMFT_SAMPLER,
         response: str = defaults.DMFT_RESPONSE, window: int = defaults.DMFT_WINDOW, seed: int = defaults.DMFT_SEED,
         processes: Optional[int] = None, kernels: bool = False, progress: bool = False,
         bias_check="auto") -> DMFTResult:
    """Solve the discrete-time DMFT (docs/theory.md §3) and the hard-direction process (docs/theory.md §3.2).

    activation, loss, width, a, b: as for :class:`theorykit.Network`; link: as for :func:`theorykit.link`.
    delta > 0.  Steps: ``eta`` (> 0) and ``steps`` (>= 0) for constant-step GD, or ``schedule`` (an array of step
    sizes eta_t, e.g. from :func:`flow_schedule`).  ridge >= 0.  Sigma0 (m x m, default I) and M0 (k x m, default 0)
    give the initial law theta^0 ~ N(0, Sigma0), M_0 = M0.
    paths: total number of sample paths over all replicas (default ``defaults.DMFT_PATHS``, the CLI's too);
    replicas (>= 2): independent solves whose spread gives the standard errors.  Two things the spread alone does not
    show: a finite-path bias, because the noise of the estimated R_u enters C_theta quadratically (it is large for
    Stein's estimator, small for direct Jacobians on the whole batch), and the right skew of replicas where rare
    paths carry the result (long times with unbounded-below D, e.g. y = z^2).  Hence the defaults: response="auto"
    takes direct Jacobians on the whole batch whenever they fit (memory RESPONSE_MEMORY, cost DIRECT_AUTO_FLOPS),
    and bias_check="auto" is on whenever Stein's estimator is used, so that the reported standard error includes
    the estimated bias.  latent: "gauss-hermite" (default when k + noisy <= 2; ``order`` nodes per dimension,
    default 32 in 1-D and 16 in 2-D), "monte-carlo" or "auto"; response_paths: paths per replica carrying the
    response functions with response="direct" (default: the whole batch if it fits in RESPONSE_MEMORY, else as many
    as fit); response: "auto", "stein" (R_u from Stein's lemma on the whole batch, O(t) per path per step) or
    "direct" (Jacobians propagated on a response batch, O(t^2)); with a kinked activation or loss only "stein" is
    exact and "auto" chooses it (docs/theory.md §3.1); sampler: "sobol" (scrambled QMC paths) or "random"; window:
    with response "stein", the last ``window`` lags come exactly from per-path Jacobians on the whole batch and only
    older lags from Stein's lemma (0: all by Stein).  ``response`` and ``window`` concern R_u; the hard process C_mu
    uses pathwise tangents on the whole batch (:func:`_hard_tangents`), or Stein kernels with a kink.  jitter:
    relative diagonal jitter of the Cholesky factor; seed: replica r uses SeedSequence(seed).spawn(replicas)[r];
    processes: parallel replicas (default min(replicas, CPUs)); kernels: keep the full two-time kernels.
    bias_check (True, False or "auto"): also solve ``replicas`` more replicas with half the paths each (1.5x the
    cost); ``bias`` = (their mean) - (the reported mean) estimates the finite-path bias of M, gram, the losses,
    C_theta_tt and C_mu if it scales like 1/paths, and their ``stderr`` becomes sqrt(replica stderr^2 + bias^2)
    (the replica part alone in ``bias["replica_stderr"]``).  Returns a :class:`DMFTResult`.
    """
    from .problem import Problem

    if isinstance(activation, Problem):
        # dmft(problem, paths=..., ...): the Problem's fields are the model, delta, ridge, steps and initial law
        pr = activation
        given = [k for k, v in (("link", link), ("a", a), ("b", b), ("delta", delta), ("eta", eta), ("steps", steps),
                                ("schedule", schedule), ("Sigma0", Sigma0), ("M0", M0)) if v is not None]
        if given or loss != "square" or width != 1 or ridge != 0.0:
            raise TheorykitError(f"dmft(problem, ...): {(given or ['loss, width or ridge'])[0]} is part of the "
                                 "Problem; use problem.replace(...)")
        activation, link, loss, width = pr.activation, pr.link, pr.loss, pr.width
        a, b, delta, ridge = pr.a, pr.b, pr.delta, pr.ridge
        eta, steps, schedule = pr.eta, pr.steps, pr.schedule
        Sigma0 = None if pr.Sigma0 is None else pr.Sigma0_matrix
        M0 = None if pr.M0 is None else pr.M0_matrix
    elif link is None or delta is None:
        raise TheorykitError("dmft: give a Problem, or activation, link and delta (keyword form)")
    call = dict(locals())  # the arguments, for the 'auto' response's fallback below
    call.pop("Problem", None), call.pop("pr", None), call.pop("given", None)
    from .simulate import _Progress, _check_int, _check_number
    from .symbolic.ingredients import link as make_link
    from .symbolic.network import Network

    t0 = _time.perf_counter()
    delta = _check_number("delta", delta, lambda v: v > 0, "> 0")
    ridge = _check_number("ridge", ridge, lambda v: v >= 0, ">= 0")
    if schedule is not None:
        if eta is not None or steps is not None:
            raise TheorykitError("give either eta and steps, or a schedule, not both")
        etas = np.asarray(schedule, dtype=float).ravel()
        if etas.size == 0 or not np.all(np.isfinite(etas)) or np.any(etas <= 0):
            raise TheorykitError("the schedule must be a non-empty array of positive step sizes")
    else:
        if eta is None or steps is None:
            raise TheorykitError("give eta and steps (or a schedule)")
        eta = _check_number("eta", eta, lambda v: v > 0, "> 0")
        steps = _check_int("steps", steps, 0)
        etas = np.full(steps, eta)
    paths = _check_int("paths", paths, 2)
    replicas = _check_int("replicas", replicas, 2)
    seed = _check_int("seed", seed, 0)
    if not (isinstance(jitter, (int, float)) and 0 <= jitter < 1e-3):
        raise TheorykitError(f"jitter must be in [0, 1e-3), got {jitter!r}")
    net = Network(activation, loss, width, a=a, b=b)
    lk = make_link(link)
    m, k, T = net.m, lk.k, len(etas)
    Sigma0 = _matrix(Sigma0, (m, m), "Sigma0", np.eye(m))
    if not np.allclose(Sigma0, Sigma0.T) or np.linalg.eigvalsh(Sigma0)[0] < -1e-12:
        raise TheorykitError("Sigma0 must be symmetric positive semi-definite")
    M0 = _matrix(M0, (k, m), "M0", np.zeros((k, m)))
    hard_basis = _hard_basis(lk)
    kinks = net.activation.kinks
    if kinks.discontinuities:
        raise TheorykitError(f"the activation {net.activation.name!r} jumps at x = "
                             f"{', '.join(f'{v:.6g}' for v in kinks.discontinuities)}: its D would carry derivatives "
                             "of Dirac terms, which the DMFT does not handle (use a continuous activation)")

    nlat = k + (1 if lk.noisy else 0)
    latent_auto = None
    if latent == "auto":
        latent = "gauss-hermite" if nlat <= 2 else "monte-carlo"
        if latent == "gauss-hermite":
            q = order or (32 if nlat == 1 else 16)
            err_q = _hermite_moment_error(lk, q)
            latent_auto = f"Gauss-Hermite with {q} nodes per dimension: link moment error {err_q:.1e}"
            if err_q > HERMITE_MOMENT_TOL:
                latent = "monte-carlo"
                latent_auto += (f" > {HERMITE_MOMENT_TOL:g} (the link is not smooth in z): Monte-Carlo latents "
                                "instead")
        else:
            latent_auto = f"Monte-Carlo latents ({nlat} latent dimensions)"
    if latent not in ("gauss-hermite", "monte-carlo"):
        raise TheorykitError(f"latent must be 'auto', 'gauss-hermite' or 'monte-carlo', got {latent!r}")
    if response not in ("auto", "stein", "direct"):
        raise TheorykitError(f"response must be 'auto', 'stein' or 'direct', got {response!r}")
    window = _check_int("window", window, 0)
    auto = response == "auto"
    if auto:
        # Stein's lemma divides by the conditional std of w^s given its past, O(eta): its noise grows like 1/eta^2
        # relative to R_u.  Measured: excellent at eta = 1 (T = 200 at 0.6%); at eta = 0.05 (sigma = x^2) the DMFT
        # blew up at step 27-29 while direct Jacobians ran to t = 300.
        # Stein's noise also biases C_theta (it enters quadratically): on the linear model's exact limit
        # (docs/theory.md §3, theorykit.linear_gd) Stein at 20000 paths had the test loss 9% low, direct Jacobians on
        # the whole batch were within their standard error.  So direct whenever the whole batch fits.
        per_rep = max(1, paths // replicas)
        if latent == "gauss-hermite":
            Q_ = (order or (32 if nlat == 1 else 16)) ** nlat
            n_est = max(1, 1 << int(math.log2(max(per_rep // Q_, 1)))) * Q_
        else:
            n_est = 1 << int(math.log2(max(per_rep, 1)))
        whole = (not window and n_est * (T + 1) ** 2 * m * m * 4 <= RESPONSE_MEMORY
                 and (T + 1) ** 3 / 3 * m ** 3 * n_est <= DIRECT_AUTO_FLOPS)
        response = "direct" if whole or float(np.min(etas)) < STEIN_MIN_ETA else "stein"
        if whole:
            response_paths = None
    kinked = bool(kinks) or net.loss.derivative_jumps
    if kinked:
        # Propagated Jacobians cannot carry a jump of u = F(r, y) (the chain rule through a jump is not defined; with
        # the Dirac terms averaged over their innovation the Gram came out 9.6% high at t = 6 for ReLU, a = (1, -1),
        # delta = 3): Stein's lemma is exact for any kink (docs/theory.md §3.1).
        if not auto and (response == "direct" or window):
            raise TheorykitError(f"response={response!r}{f' with window={window}' if window else ''} cannot carry the "
                                 "Dirac terms of a kinked activation or loss; use response='stein' (or 'auto') "
                                 "with window=0")
        response, window = "stein", 0
    if bias_check == "auto":
        # Stein's noise biases C_theta (quadratically); direct Jacobians on the whole batch are within their error
        bias_check = response == "stein"
    if not isinstance(bias_check, (bool, np.bool_)):
        raise TheorykitError(f"bias_check must be True, False or 'auto', got {bias_check!r}")
    if response == "stein":
        response_paths = 1  # no response batch is propagated
    if sampler not in ("sobol", "random"):
        raise TheorykitError(f"sampler must be 'sobol' or 'random', got {sampler!r}")
    per_replica = max(1, paths // replicas)

    def pow2(v):  # Sobol nets are balanced at powers of two
        return 1 << int(math.log2(max(v, 1))) if sampler == "sobol" else max(v, 1)
    bytes_per_resp = (T + 1) ** 2 * m * m * 4
    resp_cap = max(1, int(RESPONSE_MEMORY // bytes_per_resp))
    if latent == "gauss-hermite":
        if nlat > 3:
            raise TheorykitError(f"Gauss-Hermite in {nlat} latent dimensions is too many nodes; use latent="
                                 f"'monte-carlo'")
        order = order or (32 if nlat == 1 else 16)
        _check_int("order", order, 2)
        Q = order ** nlat
        per_node = pow2(per_replica // Q)
        want = response_paths if response_paths is not None else per_node * Q
        resp_per_node = max(2, pow2(min(per_node, want // Q, resp_cap // Q)))  # two halves: >= 2 per node
        per_node = max(per_node, resp_per_node)
        batch_args = ("gauss-hermite", order, per_node, resp_per_node, 0, 0)
        n_main, n_resp = per_node * Q, resp_per_node * Q
    else:
        n_main = pow2(per_replica)
        n_resp = max(2, pow2(min(n_main, response_paths or n_main, resp_cap)))
        n_main = max(n_main, n_resp)
        batch_args = ("monte-carlo", 0, 0, 0, n_main, n_resp)
    mem = (n_resp * bytes_per_resp if response == "direct" else 0) + n_main * (T + 1) * m * 8 * 3
    if hard_basis.shape[1]:  # per-path D^t and the tangents' history (float32), see _hard_tangents
        mem += n_main * (T + 1) * m * (m + (m + HARD_RANK + HARD_RESIDUAL)) * 4
    procs = processes or min(replicas, os.cpu_count() or 1)
    from .simulate import physical_memory

    phys = physical_memory()
    if phys and mem * procs > 0.6 * phys:
        raise TheorykitError(f"the DMFT would need about {mem * procs / 2**30:.1f} GiB with {procs} parallel "
                             f"replicas (machine: {phys / 2**30:.1f} GiB): lower paths, response_paths or processes")

    root_seq = np.random.SeedSequence(seed)
    seeds = [int(s.generate_state(1)[0]) for s in root_seq.spawn(replicas)]
    jobs = [(net, lk, hard_basis, delta, etas, ridge, Sigma0, M0, batch_args, jitter, s, sampler, response, window)
            for s in seeds]
    if bias_check:
        # as many more replicas with half the paths each (node counts kept, paths per node halved; new seeds)
        if batch_args[0] == "gauss-hermite":
            half = batch_args[:2] + (max(2, batch_args[2] // 2), max(2, batch_args[3] // 2)) + batch_args[4:]
            half = half[:2] + (max(half[2], half[3]),) + half[3:]
        else:
            half = batch_args[:4] + (max(2, batch_args[4] // 2), max(2, min(batch_args[5], batch_args[4] // 2)))
        jobs += [(net, lk, hard_basis, delta, etas, ridge, Sigma0, M0, half, jitter, int(s.generate_state(1)[0]),
                  sampler, response, window) for s in root_seq.spawn(replicas)]
    bar = _Progress(len(jobs)) if progress else None
    results = []
    if procs > 1:
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        with ctx.Pool(procs) as pool:
            for i, res in enumerate(pool.imap(_replica_worker, jobs)):
                results.append(res)
                if bar:
                    bar.update(i + 1)
    else:
        for i, job in enumerate(jobs):
            results.append(_replica_worker(job))
            if bar:
                bar.update(i + 1)
    if bar:
        bar.close(len(jobs))
    halves, results = results[replicas:], results[:replicas]

    S = min(len(r["train_loss"]) for r in results + halves)
    div = [r["diverged"] for r in results + halves if r["diverged"] is not None]

    def stack(key, two_time=False, group=None):
        arr = [r[key][:S, :S] if two_time else r[key][:S] for r in (results if group is None else group)]
        arr = np.stack(arr)
        return arr.mean(axis=0), arr.std(axis=0, ddof=1) / math.sqrt(len(arr))

    keys = ["M", "gram", "train_loss", "test_loss", "C_theta_tt", "C_mu", "C_mu_init", "Ezu"]
    mean, err = {}, {}
    for key in keys:
        mean[key], err[key] = stack(key)
    bias = None
    if bias_check:
        # E[f_N] = f + b/N (the noise of R_u enters C_theta quadratically): the bias of the reported mean is
        # E[f_{N/2}] - E[f_N], estimated by the difference of the two groups' means
        bias = {"stderr": {}}
        for key in ("M", "gram", "train_loss", "test_loss", "C_theta_tt", "C_mu"):
            mh, eh = stack(key, group=halves)
            bias[key] = mh - mean[key]
            bias["stderr"][key] = np.sqrt(eh ** 2 + err[key] ** 2)
        # the reported uncertainty covers the finite-path bias: the estimate enters the standard error in quadrature
        # (replica spread alone: bias["replica_stderr"])
        bias["replica_stderr"] = {key: err[key].copy() for key in bias["stderr"]}
        for key in bias["stderr"]:
            err[key] = np.sqrt(err[key] ** 2 + bias[key] ** 2)
    if hard_basis.shape[1] and m == 1:
        # v_eff = C_mu Sigma_0 / C_mu_init (first hard direction): ratio of replica means, jackknife standard error
        num = np.stack([r["C_mu"][:S, 0, 0, 0] for r in results])
        den = np.stack([r["C_mu_init"][:S, 0, 0, 0] for r in results])
        s0 = float(Sigma0[0, 0])

        def ratio(nu, de):
            return nu * s0 / np.maximum(de, 1e-300)

        mean["v_eff"] = ratio(num.mean(0), den.mean(0))
        R = len(results)  # >= 2 (checked)
        jk = np.stack([ratio(np.delete(num, i, 0).mean(0), np.delete(den, i, 0).mean(0)) for i in range(R)])
        err["v_eff"] = np.sqrt((R - 1) / R * ((jk - jk.mean(0)) ** 2).sum(0))
    tails = np.stack([r["D_tail"][:S] for r in results])
    D_tail = np.column_stack([tails[:, :, 0].min(axis=0), tails[:, :, 1:].mean(axis=0)])
    err["D_tail"] = np.column_stack([np.zeros(S), tails[:, :, 1:].std(axis=0, ddof=1) / math.sqrt(replicas)])
    kern = None
    if kernels:
        kern = {}
        for key in ("C_theta", "R_theta", "C_u", "R_u"):
            kern[key], kern[key + "_stderr"] = stack(key, two_time=True)
    diverged_at = None
    if div:
        step = min(div)
        eta_max = float(np.max(etas))
        dtops = [r["D_top"] for r in results if len(r["D_top"])]
        top = max(float(np.max(d)) for d in dtops) if dtops else float("nan")
        curv = (f"; the 1 - 1e-4 quantile of the per-sample curvature D reached {top:.3g}, so "
                f"eta * D / delta = {eta_max * top / delta:.3g} (GD is stable only if this stays below ~2: "
                f"eta <~ {2 * delta / top:.3g})") if math.isfinite(top) and top > 0 else ""
        stable = math.isfinite(top) and eta_max * top / delta < 2.0
        excl = max(r_["excluded"] for r_ in results)
        if response == "stein" and float(np.min(etas)) < STEIN_MIN_ETA:
            cause = (f": with steps below {STEIN_MIN_ETA} Stein's-lemma responses amplify Monte-Carlo noise (their "
                     f"error grows like 1/eta^2), which is the likely cause; use response='direct' (the 'auto' default)")
        elif stable and excl <= EXCLUDED_LIMIT:
            cause = (f": the per-sample curvature stayed stable, so this is a numerical instability of the "
                     f"{response!r} response estimator, not of GD; try response='direct' (or 'stein' with more paths)")
        else:
            cause = f": GD is unstable, try a smaller eta (e.g. {eta_max / 4:g})"
        what = (f"unstable paths weighing {excl:.2g} > {EXCLUDED_LIMIT:g} were excluded" if excl > EXCLUDED_LIMIT
                else f"C_theta or M above {DIVERGENCE_LIMIT:g}")
        diverged_at = {"step": int(step), "hint": (
            f"the DMFT diverged at step {step} ({what}) with eta = {eta_max:g}{curv}{cause}")}
        if kinked and stable and excl <= EXCLUDED_LIMIT:
            cause += ("; with a kinked activation or loss only Stein's responses are exact (no fallback to 'direct'): "
                      "raise paths, or use larger steps")
        if auto and not kinked and response == "stein" and stable and excl <= EXCLUDED_LIMIT:
            # 'auto' keeps its promise: a numerical blow-up of Stein's responses is re-solved with direct Jacobians
            # (measured: GeLU, y = sign(|z| - median), logistic loss, delta = 8, eta = 1 -- Stein diverged at step
            # 31, direct ran to t = 150)
            res = dmft(**{**call, "response": "direct"})
            res.settings["response_auto"] = (f"'stein' diverged at step {step} with a stable per-sample curvature "
                                             "(a numerical instability of the estimator): re-solved with 'direct'")
            res.seconds = _time.perf_counter() - t0
            return res
    tau = np.concatenate([[0.0], np.cumsum(etas)])[:S]
    # At long times C_mu is an average dominated by rare paths (per-path tangents that grew while D < 0), so replicas
    # scatter and their spread understates the error.  Flag the first time where they disagree by more than 5%.
    reliable = None
    if hard_basis.shape[1]:
        tr = np.einsum("tjaa->t", mean["C_mu"])
        tr_se = np.sqrt(np.einsum("tjaa->t", err["C_mu"] ** 2))
        bad = np.flatnonzero(tr_se > HARD_RELIABLE_RSE * np.abs(tr))
        reliable = int(bad[0]) - 1 if bad.size else S - 1
    settings = {
        "activation": net.activation.name, "link": lk.name, "loss": net.loss.name, "width": m,
        "a": net.a.tolist(), "b": net.b.tolist(), "delta": delta, "ridge": ridge,
        "eta": (float(eta) if schedule is None else None), "steps": T,
        "schedule": (None if schedule is None else etas.tolist()),
        "Sigma0": Sigma0.tolist(), "M0": M0.tolist(), "k": k, "hard_dim": int(hard_basis.shape[1]),
        "hard_basis": hard_basis.tolist(), "latent": latent, "latent_auto": latent_auto,
        "order": (order if latent == "gauss-hermite" else None),
        "replicas": replicas, "paths_per_replica": int(results[0]["N"]),
        "bias_check": (None if not bias_check else f"{replicas} more replicas of {int(halves[0]['N'])} paths each; "
                       "bias = their mean - the reported mean (the finite-path bias if it scales like 1/paths)"),
        "response_paths_per_replica": int(results[0]["NR"]), "paths_total": int(results[0]["N"]) * replicas,
        "excluded_weight": max(r_["excluded"] for r_ in results),
        "excluded_first_step": min((r_["excluded_at"] for r_ in results if r_["excluded_at"] is not None),
                                   default=None),
        "excluded": f"paths with |r| > {PATH_LIMIT:g} x scale (single-sample instability) are dropped; excluded_weight is "
                    f"their largest total probability over replicas (> {EXCLUDED_LIMIT:g}: diverged)",
        "jitter": jitter, "sampler": sampler, "response": response,
        "response_auto": ((f"direct Jacobians on the whole batch when they fit (memory {RESPONSE_MEMORY:g} B, "
                           f"{DIRECT_AUTO_FLOPS:g} multiply-adds per replica), else stein if the smallest step is >= "
                           f"{STEIN_MIN_ETA:g}, else direct on a sub-batch" if not kinked else
                           "stein: the only estimator exact with a kinked activation or loss") if auto else None),
        "kinks": _kink_settings(net, response, window),
        "window": (window if response == "stein" else None), "cholesky_repairs": int(sum(r["repairs"] for r in results)), "seed": seed,
        "processes": procs,
        "stderr": ("std over independent replicas / sqrt(replicas); outputs are replica means" if not bias_check else
                   "sqrt(replica stderr^2 + bias^2): the replica spread and the estimated finite-path bias (bias_check) "
                   "in quadrature; outputs are replica means"),
        "test_loss": "E[l(y, f(M_t^T z + w^t))], w^t ~ N(0, C_theta(t,t)) on the same paths",
        "hard_reliable_until": "last t before the relative stderr of trace C_mu exceeds 5% (beyond it C_mu is "
                               "dominated by rare paths whose tangents grew where D < 0: heavy-tailed replicas)",
        "hard_process": (None if not hard_basis.shape[1] else {
            "method": "pathwise tangents on the whole batch (exact for the sampled paths); noise drives: top "
                      "eigenvectors of delta C_u^zeta exactly, the remainder by random drives",
            "rank": max(i["rank"] for r_ in results for i in r_["hard_info"]),
            "residual_drives": max(i["residual_drives"] for r_ in results for i in r_["hard_info"]),
            "exact_fraction": min(i["exact_fraction"] for r_ in results for i in r_["hard_info"])}),
        "D_tail": "smallest eigenvalue of D^t: min over paths, weighted quantiles 1e-5, 1e-4, 1e-3 "
                  "(replica means) of the quadrature x Monte-Carlo measure",
    }
    try:
        problem = Problem(activation, link, loss, width, a=a, b=b, delta=delta, ridge=ridge,
                          eta=(None if schedule is not None else eta), steps=(None if schedule is not None else steps),
                          schedule=(None if schedule is None else tuple(float(v) for v in etas)), Sigma0=Sigma0,
                          M0=M0)
    except TheorykitError:
        problem = None  # e.g. an ingredient object whose name does not rebuild it
    return DMFTResult(problem=problem,
        status="ok" if not div else "diverged", t=np.arange(S), time=tau, M=mean["M"], gram=mean["gram"],
        train_loss=mean["train_loss"], test_loss=mean["test_loss"], C_theta_tt=mean["C_theta_tt"],
        C_mu=mean["C_mu"], C_mu_init=mean["C_mu_init"], D_tail=D_tail, stderr=err, kernels=kern, settings=settings,
        seconds=_time.perf_counter() - t0, diverged_at=diverged_at, Ezu=mean["Ezu"],
        hard_reliable_until=reliable, bias=bias, v_eff=mean.get("v_eff"),
        hard_ess=(np.min(np.stack([r_["hard_ess"][:S] for r_ in results]), axis=0) if hard_basis.shape[1] else None))
