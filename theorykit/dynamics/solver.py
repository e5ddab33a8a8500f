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
  only the Gaussian process w is sampled; a link that jumps or kinks in z (Gauss-Hermite straddles the jump) by
  Gauss-Legendre on the pieces between its breakpoints ("gauss-legendre", :func:`theorykit.rules.latent_rule`: a
  single-index link, or a multi-index one kinked only on lines z_i = c, cut on each axis);
  otherwise (or on request) z is sampled ("monte-carlo").  Paths are the
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
import os as _os
import time as _time
from dataclasses import dataclass, replace
from typing import Any, Optional, cast

import numpy as np

from .. import defaults
from ..errors import TheorykitError
from .hard_process import HARD_KERNEL_TOL, hard_subspace_basis
from .numerics import DMFTNumerics
from .plan import DIRECT_AUTO_FLOPS, RESPONSE_MEMORY, STEIN_MIN_ETA, Plan, make_plan
from .result import DMFTResult
from .sample_side import (DIVERGENCE_LIMIT, NEGLIGIBLE_NODE, PATH_LIMIT, unstable_bound,
                          excluded_limit, solve_once)

#: relative standard error of trace C_mu above which the hard process is flagged unreliable
HARD_RELIABLE_RSE = 0.05


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


def _matrix(v, shape, name, default):
    if v is None:
        return default
    a = np.asarray(v, dtype=float)
    if a.size == np.prod(shape):
        a = a.reshape(shape)
    if a.shape != shape or not np.all(np.isfinite(a)):
        raise TheorykitError(f"{name} must be a finite array of shape {shape}, got shape {np.shape(v)}")
    return a


def _check_kernel_memory(T: int, m: int, k: int = 1, procs: int = 1):
    """Refuse up front a DMFT whose two-time kernels cannot fit: each solving process holds about 6 + 2k arrays of
    (T+1)^2 m^2 float64 (C, R on both sides, the hard process' covariances, the Cholesky factor)."""
    from .._checks import MEMORY_FRACTION, fmt_bytes, physical_memory

    need = (6 + 2 * k) * float(T + 1) ** 2 * m * m * 8 * max(procs, 1)
    phys = physical_memory()
    if phys is not None and need > MEMORY_FRACTION * phys:
        raise TheorykitError(f"the DMFT's two-time kernels for T = {T} steps (m = {m}) would need about "
                             f"{fmt_bytes(need)} with {procs} parallel replica(s) (allowed "
                             f"{fmt_bytes(MEMORY_FRACTION * phys)}): lower steps")


@dataclass(frozen=True)
class _Given:
    """The learning problem as :func:`dmft` was given it (keywords, or a Problem's fields), not yet checked."""

    activation: Any
    link: Any
    loss: Any
    width: Any
    a: Any
    b: Any
    delta: Any
    eta: Any
    steps: Any
    schedule: Any
    ridge: Any
    Sigma0: Any
    M0: Any


@dataclass(frozen=True, eq=False)
class _Setup:
    """The checked problem of one solve: the network and link, delta, ridge, eta and steps as checked (eta None with
    a schedule), the step sizes etas, the initial law (Sigma0, M0; the spectral start's with init='spectral'), the
    hard subspace's basis and the spectral prefix (None for a random start)."""

    given: _Given
    net: Any  # a theorykit.symbolic.network.Network
    lk: Any  # a theorykit.symbolic.ingredients.Link
    delta: float
    ridge: float
    eta: Optional[float]
    steps: Optional[int]
    etas: np.ndarray
    Sigma0: np.ndarray
    M0: np.ndarray
    hard_basis: np.ndarray
    prefix: Optional[dict]

    @property
    def m(self) -> int:
        return self.net.m

    @property
    def k(self) -> int:
        return self.lk.k

    @property
    def T(self) -> int:
        return len(self.etas)


def _step_sizes(given: _Given):
    """delta, ridge, eta, steps and the step sizes etas, checked (eta and steps None with a schedule)."""
    from .._checks import check_int, check_number

    delta = check_number("delta", given.delta, lambda v: v > 0, "> 0")
    ridge = check_number("ridge", given.ridge, lambda v: v >= 0, ">= 0")
    eta, steps = given.eta, given.steps
    if given.schedule is not None:
        if eta is not None or steps is not None:
            raise TheorykitError("give either eta and steps, or a schedule, not both")
        etas = np.asarray(given.schedule, dtype=float).ravel()
        if etas.size == 0 or not np.all(np.isfinite(etas)) or np.any(etas <= 0):
            raise TheorykitError("the schedule must be a non-empty array of positive step sizes")
    else:
        if eta is None or steps is None:
            raise TheorykitError("give eta and steps (or a schedule)")
        eta = check_number("eta", eta, lambda v: v > 0, "> 0")
        steps = check_int("steps", steps, 0)
        _check_kernel_memory(steps, 1)  # before np.full: 10^12 steps must not allocate
        etas = np.full(steps, eta)
    return delta, ridge, eta, steps, etas


def _setup(given: _Given, num: DMFTNumerics, delta, ridge, eta, steps, etas) -> _Setup:
    """The network, link and initial law of a solve with checked numerics ``num``, and the memory of its kernels."""
    from ..symbolic.ingredients import link as make_link
    from ..symbolic.network import Network

    net = Network(given.activation, given.loss, given.width, a=given.a, b=given.b)
    lk = make_link(given.link)
    m, k, T = net.m, lk.k, len(etas)
    if T == 0 and num.response == "auto" and (num.paths // num.replicas) * m * m * 4 > RESPONSE_MEMORY:
        # T = 0 with so many paths that auto cannot take the whole batch: it would choose by the step sizes (none)
        raise TheorykitError("with steps = 0 and this many paths, choose response='direct' or 'stein' explicitly "
                             "(or lower paths)")
    procs = num.processes
    _check_kernel_memory(T, m, k, min(num.replicas, procs if isinstance(procs, int) and procs > 0
                                      else (_os.cpu_count() or 1)))
    prefix, Sigma0, M0 = None, given.Sigma0, given.M0
    if num.init == "spectral":
        # the spectral start, exactly: the DMFT of the normalised power iteration that builds the top eigenvector of
        # (1/n) sum T(y_i) x_i x_i^T from a small overlap spectral_m0, then GD (docs/theory.md §3.3)
        if m != 1 or k != 1:
            raise TheorykitError("init='spectral' is implemented for width m = 1 and a single-index link")
        if M0 is not None or Sigma0 is not None:
            raise TheorykitError("init='spectral' sets the initial law itself: drop M0 and Sigma0")
        from ..symbolic.ingredients import preprocessing as make_preprocessing

        Tpre = make_preprocessing(num.spectral_T or "(y-1)/(y+sqrt(2*delta)-1)")
        prefix = {"steps": num.spectral_steps, "T": Tpre, "eta": num.spectral_eta}
        M0, Sigma0 = [[num.spectral_m0]], [[1.0 - num.spectral_m0 ** 2]]
    Sigma0 = _matrix(Sigma0, (m, m), "Sigma0", np.eye(m))
    if not np.allclose(Sigma0, Sigma0.T) or np.linalg.eigvalsh(Sigma0)[0] < -1e-12:
        raise TheorykitError("Sigma0 must be symmetric positive semi-definite")
    M0 = _matrix(M0, (k, m), "M0", np.zeros((k, m)))
    # no hard process from a spectral start
    hard_basis = hard_subspace_basis(lk) if prefix is None else np.zeros((k, 0))
    kinks = net.activation.kinks
    if kinks.discontinuities:
        raise TheorykitError(f"the activation {net.activation.name!r} jumps at x = "
                             f"{', '.join(f'{v:.6g}' for v in kinks.discontinuities)}: its D would carry derivatives "
                             "of Dirac terms, which the DMFT does not handle (use a continuous activation)")
    return _Setup(given, net, lk, delta, ridge, eta, steps, etas, Sigma0, M0, hard_basis, prefix)


def _prepare(given: _Given, raw: DMFTNumerics):
    """Check the problem and the numerics and plan the solve: (setup, checked numerics, plan)."""
    delta, ridge, eta, steps, etas = _step_sizes(given)
    num = raw.checked(len(etas))
    setup = _setup(given, num, delta, ridge, eta, steps, etas)
    # the plan sees the whole run: the spectral prefix's steps, then GD's
    prefix = setup.prefix
    run_etas = etas if prefix is None else np.concatenate([np.full(prefix["steps"], prefix["eta"]), etas])
    plan = make_plan(setup.net, setup.lk, setup.hard_basis, run_etas, paths=num.paths, replicas=num.replicas,
                     latent=num.latent, order=num.order, response=num.response, response_paths=num.response_paths,
                     window=num.window, sampler=num.sampler, bias_check=num.bias_check, processes=num.processes,
                     fine_lags=num.fine_lags)
    if num.horizon is not None:
        _check_kernel_memory(num.horizon, setup.m, setup.k, 1)  # the innovations are drawn to the horizon
    return setup, num, plan


@dataclass(frozen=True, eq=False)
class ReplicaJob:
    """One replica solve: the arguments of :func:`theorykit.dynamics.sample_side.solve_once` (without a progress bar),
    sent to a worker process."""

    net: object
    link: object
    hard_basis: np.ndarray
    delta: float
    etas: np.ndarray
    ridge: float
    Sigma0: np.ndarray
    M0: np.ndarray
    batch_args: tuple
    jitter: float
    seed: int
    sampler: str
    response: str
    window: int
    keep_law_at: tuple
    exclude: object
    prefix: Optional[dict]
    horizon: Optional[int]
    hard_process: bool
    fine_lags: Optional[int]
    reach: Optional[int] = None
    mirror: bool = False
    stop_overlap: Optional[tuple] = None

    def solve(self) -> dict:
        return solve_once(self.net, self.link, self.hard_basis, self.delta, self.etas, self.ridge, self.Sigma0,
                          self.M0, self.batch_args, self.jitter, self.seed, sampler=self.sampler,
                          response=self.response, window=self.window, progress=None, keep_law_at=self.keep_law_at,
                          exclude=self.exclude, prefix=self.prefix, horizon=self.horizon,
                          hard_process=self.hard_process, fine_lags=self.fine_lags, reach=self.reach,
                          mirror=self.mirror, stop_overlap=self.stop_overlap)


def _half_batch(batch_args: tuple) -> tuple:
    """The bias check's batch (:func:`theorykit.dynamics.sample_side.make_batch` arguments): node counts kept, paths
    per node halved (at least 2 each)."""
    if batch_args[0] != "monte-carlo":
        half = batch_args[:2] + (max(2, batch_args[2] // 2), max(2, batch_args[3] // 2)) + batch_args[4:]
        return half[:2] + (max(half[2], half[3]),) + half[3:]
    return batch_args[:4] + (max(2, batch_args[4] // 2), max(2, min(batch_args[5], batch_args[4] // 2)))


def _reach(setup: _Setup, num: DMFTNumerics) -> Optional[int]:
    """The finite sample size n whose latent tail the solve truncates: n = max(1, round(delta d)) with d, reach as
    given, or None (the d -> infinity DMFT)."""
    if num.d is not None:
        return max(1, int(round(setup.delta * num.d)))
    return num.reach


def _replica_jobs(setup: _Setup, num: DMFTNumerics, plan: Plan) -> list:
    """The replicas' jobs: ``replicas`` solves with seeds SeedSequence(seed).spawn(replicas), then with the bias check
    as many more with half the paths each (new seeds)."""
    root_seq = np.random.SeedSequence(num.seed)
    seeds = [int(s.generate_state(1)[0]) for s in root_seq.spawn(num.replicas)]
    base = ReplicaJob(setup.net, setup.lk, setup.hard_basis, setup.delta, setup.etas, setup.ridge, setup.Sigma0,
                      setup.M0, plan.batch_args, num.jitter, 0, num.sampler, plan.response, plan.window,
                      num.keep_law_at, None, setup.prefix, num.horizon, num.hard_process, plan.fine_lags,
                      _reach(setup, num), num.mirror, num.stop_overlap)
    jobs = [replace(base, seed=s, exclude=(None if num.exclude is None else num.exclude[i]))
            for i, s in enumerate(seeds)]
    if plan.bias_check:
        half = replace(base, batch_args=_half_batch(plan.batch_args), keep_law_at=(), horizon=None)
        jobs += [replace(half, seed=int(s.generate_state(1)[0])) for s in root_seq.spawn(num.replicas)]
    return jobs


def _replica_worker(job: ReplicaJob) -> dict:
    # one BLAS thread per replica process: the GEMMs here are thin and memory-bound, and oversubscribed OpenBLAS
    # threads made them 30x slower on a 2-core machine (threadpoolctl: the maintained way to set this at run time)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return job.solve()


def _preload_for_workers() -> None:
    """Load in the parent what every replica solve loads lazily (scipy.stats.qmc for the Sobol' draw, threadpoolctl,
    the compiled u-history kernel), so that forked workers inherit it: otherwise every solve's fresh workers pay the
    imports and the cache loading again, and lose them when they exit (measured: tables/dmft_bench.md)."""
    import scipy.special  # noqa: F401
    import scipy.stats.qmc  # noqa: F401
    import threadpoolctl  # noqa: F401

    from ._history import history_kernel, propagate_blocks, propagate_source

    z = np.zeros((1, 1))
    history_kernel(z, z.copy(), z.copy(), z.copy(), z.copy(), True)  # loads the cached float64 / C-order overload
    z32 = np.zeros((1, 1), dtype=np.float32)
    propagate_source(z32, z32, z32, z32, z32, z32, z32.copy(), np.zeros((1, 1, 1)))  # and the Jacobians' kernel
    i64 = np.zeros(2, dtype=np.int64)  # and the dyadic grid's, on storage blocks
    propagate_blocks(np.zeros((1, 1, 1)), 0, 1, 16, i64, i64.copy(), i64.copy(), 0, np.zeros((2, 1), np.float32),
                     z32, z32, z32, z32, np.zeros((1, 1, 1)))


def _run_replicas(jobs: list, procs: int, progress: bool, checking: int, abandon=None) -> Optional[list]:
    """Every job's result, in order, on ``procs`` processes (forked); ``checking``: how many of the jobs are the bias
    check's (for the progress bar).  abandon(index, result): True stops the other jobs and returns None (the solve
    is to be redone another way)."""
    from .._checks import Progress

    # the bar counts replica solves (one job each; with the bias check, half of them have half the paths)
    bar = Progress(len(jobs), label="dmft", unit=("replica solves" if not checking else
                                                   f"replica solves ({checking} of them the bias check)")) \
        if progress else None
    import multiprocessing as mp

    results = []
    if procs > 1 and mp.current_process().daemon:
        procs = 1  # a daemonic worker (a Dask worker, a pool's) may not fork: serially, with the same numbers
    if procs > 1:
        _preload_for_workers()
        ctx = mp.get_context("fork")
        with ctx.Pool(procs) as pool:  # leaving the block terminates the workers still running
            for i, res in enumerate(pool.imap(_replica_worker, jobs)):
                if abandon is not None and abandon(i, res):
                    if bar:
                        bar.close(i + 1)
                    return None
                results.append(res)
                if bar:
                    bar.update(i + 1)
    else:
        for i, job in enumerate(jobs):
            results.append(_replica_worker(job))
            if abandon is not None and abandon(i, results[-1]):
                if bar:
                    bar.close(i + 1)
                return None
            if bar:
                bar.update(i + 1)
    if bar:
        bar.close(len(jobs))
    return results


def _replica_mean(group: list, key: str, S: int, two_time: bool = False):
    """Mean over the replicas in ``group`` of their ``key`` (to S steps) and its standard error std / sqrt(replicas)."""
    arr = np.stack([r[key][:S, :S] if two_time else r[key][:S] for r in group])
    with np.errstate(invalid="ignore", over="ignore"):  # an overflowed hard process (inf): NaN spread, no warning
        return arr.mean(axis=0), arr.std(axis=0, ddof=1) / math.sqrt(len(arr))


def _effective_overlap(results: list, S: int):
    """V_eff = P_t^-1 C_mu P_t^-T (first hard direction), the covariance of the effective initial overlap
    (hard_process.effective_overlap_covariance; m = 1: C_mu Sigma_0 / C_mu_init), from the replica means, and its
    jackknife standard error over replicas."""
    from .hard_process import effective_overlap_covariance

    parts = [np.stack([r[key][:S, 0] if key in ("C_mu", "C_mu_init") else r[key][:S] for r in results])
             for key in ("C_mu", "P_half", "C_mu_init")]
    B = results[0]["Sigma0_half"]

    def veff(idx):
        return effective_overlap_covariance(*(q[idx].mean(0) for q in parts[:2]), B, parts[2][idx].mean(0))

    R = len(results)  # >= 2 (checked)
    with np.errstate(over="ignore", invalid="ignore"):  # NaN where the linear process overflowed
        jk = np.stack([veff(np.delete(np.arange(R), i)) for i in range(R)])
        return veff(np.arange(R)), np.sqrt((R - 1) / R * ((jk - jk.mean(0)) ** 2).sum(0))


def _aggregate(results: list, halves: list, S: int, setup: _Setup, num: DMFTNumerics, plan: Plan) -> dict:
    """The replicas' means (``mean``) and standard errors (``stderr``) to S steps, the bias check's ``bias`` (None
    without it), the curvature tail ``D_tail``, the two-time ``kernels`` (None unless kept) and the first time the
    hard process is unreliable (``hard_reliable_until``, None without one)."""
    keys = ["M", "gram", "train_loss", "test_loss", "C_theta_tt", "C_mu", "C_mu_init", "Ezu"]
    mean, err = {}, {}
    for key in keys:
        mean[key], err[key] = _replica_mean(results, key, S)
    bias: Optional[dict[str, Any]] = None
    if plan.bias_check:
        # E[f_N] = f + b/N (the noise of R_u enters C_theta quadratically): the bias of the reported mean is
        # E[f_{N/2}] - E[f_N], estimated by the difference of the two groups' means
        bias = {"stderr": {}}
        for key in ("M", "gram", "train_loss", "test_loss", "C_theta_tt", "C_mu"):
            mh, eh = _replica_mean(halves, key, S)
            bias[key] = mh - mean[key]
            bias["stderr"][key] = np.sqrt(eh ** 2 + err[key] ** 2)
        # the reported uncertainty covers the finite-path bias: the estimate enters the standard error in quadrature
        # (replica spread alone: bias["replica_stderr"])
        bias["replica_stderr"] = {key: err[key].copy() for key in bias["stderr"]}
        for key in bias["stderr"]:
            err[key] = np.sqrt(err[key] ** 2 + bias[key] ** 2)
    hard = bool(setup.hard_basis.shape[1] and num.hard_process)
    if hard:
        mean["V_eff"], err["V_eff"] = _effective_overlap(results, S)
        if setup.m == 1:
            mean["v_eff"], err["v_eff"] = mean["V_eff"][:, 0, 0], err["V_eff"][:, 0, 0]
    tails = np.stack([r["D_tail"][:S] for r in results])
    D_tail = np.column_stack([tails[:, :, 0].min(axis=0), tails[:, :, 1:].mean(axis=0)])
    err["D_tail"] = np.column_stack([np.zeros(S), tails[:, :, 1:].std(axis=0, ddof=1) / math.sqrt(num.replicas)])
    kern = None
    if num.kernels:
        kern = {}
        for key in ("C_theta", "R_theta", "C_u", "R_u"):
            kern[key], kern[key + "_stderr"] = _replica_mean(results, key, S, two_time=True)
    # At long times C_mu is an average dominated by rare paths (per-path tangents that grew while D < 0), so replicas
    # scatter and their spread understates the error.  Flag the first time where they disagree by more than 5%.
    reliable = None
    if hard:
        tr = np.einsum("tjaa->t", mean["C_mu"])
        tr_se = np.sqrt(np.einsum("tjaa->t", err["C_mu"] ** 2))
        bad = np.flatnonzero(tr_se > HARD_RELIABLE_RSE * np.abs(tr))
        reliable = int(bad[0]) - 1 if bad.size else S - 1
    return {"mean": mean, "stderr": err, "bias": bias, "D_tail": D_tail, "kernels": kern,
            "hard_reliable_until": reliable}


@dataclass(frozen=True)
class Divergence:
    """Where a solve diverged (``step``), the hint, and whether the per-sample curvature stayed stable with no more
    than EXCLUDED_LIMIT of the paths excluded (``numerical``: an instability of the response estimator, not of GD)."""

    step: int
    hint: str
    numerical: bool


def _diagnose_divergence(results: list, halves: list, etas: np.ndarray, delta: float,
                         response: str, reach: Optional[int] = None) -> Optional[Divergence]:
    """The first step at which a replica (or a bias-check replica) diverged, and why, or None if none did."""
    div = [r["diverged"] for r in results + halves if r["diverged"] is not None]
    if not div:
        return None
    step = min(div)
    eta_max = float(np.max(etas))
    # the per-sample curvature before the blow-up: each replica's quantiles up to two steps before the first
    # divergence (its last entries, and the one appended at its own divergence, are the blow-up itself)
    dtops = [np.asarray(r["D_top"], dtype=float)[:max(1, step - 2)] for r in results if len(r["D_top"])]
    top = max(float(np.max(d)) for d in dtops) if dtops else float("nan")
    curv = (f"; before the blow-up the 1 - 1e-4 quantile of the per-sample curvature D reached {top:.3g}, so "
            f"eta * D / delta = {eta_max * top / delta:.3g} (GD is stable only if this stays below ~2: "
            f"eta <~ {2 * delta / top:.3g})") if math.isfinite(top) and top > 0 else ""
    stable = math.isfinite(top) and eta_max * top / delta < 2.0
    excl = max(r_["excluded"] for r_ in results)
    limit = excluded_limit(reach)
    if response == "stein" and float(np.min(etas)) < STEIN_MIN_ETA:
        cause = (f": with steps below {STEIN_MIN_ETA} Stein's-lemma responses amplify Monte-Carlo noise (their "
                 f"error grows like 1/eta^2), which is the likely cause; use response='direct' (the 'auto' default)")
    elif stable and excl <= limit:
        cause = (f": the per-sample curvature stayed stable, so this is a numerical instability of the "
                 f"{response!r} response estimator, not of GD; try "
                 + ("more paths, or response='stein' with more paths" if response == "direct" else
                    "response='direct' (or 'stein' with more paths)"))
    else:
        cause = (f": GD is unstable or beyond its edge of stability (per-sample steps overshoot where eta D / delta > "
                 f"2; GD may also oscillate there without diverging, which the DMFT does not follow reliably: "
                 f"`theorykit hessian --t {max(step - 1, 0)} --d D` gives eta lambda_+), try a smaller eta (e.g. "
                 f"{eta_max / 4:g})")
    what = (f"unstable paths weighing {excl:.2g} > {limit:g} were excluded" if excl > limit
            else f"C_theta or M above {DIVERGENCE_LIMIT:g}")
    if reach is not None:
        what += f"; paths beyond the latent 1/n quantile (n = {reach}) truncated"
    return Divergence(int(step), f"the DMFT diverged at step {step} ({what}) with eta = {eta_max:g}{curv}{cause}",
                      bool(stable and excl <= limit))


_HARD_ROUTES = {
    "pathwise tangents": "pathwise tangents on the whole batch (exact for the sampled paths); noise drives: top "
                         "eigenvectors of delta C_u^zeta exactly, the remainder by random drives",
    "jacobian kernels": "the parameter-side recursion on R_u^zeta, C_u^zeta, R_u^zeta from the propagated Jacobians "
                        "on the whole batch (the tangents' recursion summed over paths; on the dyadic grid its "
                        f"interpolation in s is checked against the first tangents: above {HARD_KERNEL_TOL:g} "
                        "relative, pathwise tangents instead)",
    "stein kernels": "the parameter-side recursion on R_u^zeta, C_u^zeta, R_u^zeta by Stein's lemma (a kinked "
                     "activation or loss)",
}


def _hard_method(results: list) -> str:
    """The hard process' method text: the routes the replicas took (hard_info[*]['route'])."""
    routes = sorted({i["route"] for r_ in results for i in r_["hard_info"]})
    return "; ".join(f"{route}: {_HARD_ROUTES[route]}" for route in routes)


def solve_method(setup: _Setup, num: DMFTNumerics, plan: Plan, results: list, halves: list) -> dict:
    """How a solve was carried out, in words (:attr:`DMFTResult.method`): the latent rule and response estimator
    that 'auto' chose, the exclusion of unstable paths, the standard errors, the test loss, the hard process, the
    curvature tail, kinks, the response sources and the bias check."""
    hard_dim, response, fine_lags = setup.hard_basis.shape[1], plan.response, plan.fine_lags
    return {
        "latent_auto": plan.latent_auto,
        "response_auto": ((f"direct Jacobians on the whole batch when they fit (memory {RESPONSE_MEMORY:g} B, "
                           f"{DIRECT_AUTO_FLOPS:g} multiply-adds per replica), else stein if the smallest step is >= "
                           f"{STEIN_MIN_ETA:g}, else direct on a sub-batch" if not plan.kinked else
                           "stein: the only estimator exact with a kinked activation or loss") if plan.auto else None),
        "excluded": (f"paths whose single-sample dynamics is unstable (eta D / delta > "
                     f"{unstable_bound(_reach(setup, num)):g}, or |r| > "
                     f"{PATH_LIMIT:g} x scale) are dropped where "
                     + (f"their latent node has probability < {NEGLIGIBLE_NODE:g}" if _reach(setup, num) is None else
                        f"they lie beyond the latent 1/n quantile (n = {_reach(setup, num)}: a sample of n points "
                        "holds none of them)")
                     + f"; excluded_weight is their largest total probability over replicas (> "
                       f"{excluded_limit(_reach(setup, num)):g}: diverged)"),
        "stderr": ("std over independent replicas / sqrt(replicas); outputs are replica means" if not plan.bias_check
                   else "sqrt(replica stderr^2 + bias^2): the replica spread and the estimated finite-path bias "
                        "(bias_check) in quadrature; outputs are replica means"),
        "test_loss": "E[l(y, f(M_t^T z + w^t))], w^t ~ N(0, C_theta(t,t)) on the same paths",
        "hard_reliable_until": "last t before the relative stderr of trace C_mu exceeds 5% (beyond it C_mu is "
                               "dominated by rare paths whose tangents grew where D < 0: heavy-tailed replicas)",
        "hard_process": (None if not hard_dim else "not solved (hard_process=False)" if not num.hard_process else {
            "method": _hard_method(results),
            "routes": {route: sum(i["route"] == route for r_ in results for i in r_["hard_info"])
                       for route in sorted({i["route"] for r_ in results for i in r_["hard_info"]})},
            "tangent_check": max((i["tangent_check"] for r_ in results for i in r_["hard_info"]
                                  if i["tangent_check"] is not None), default=None),
            "rank": max(i["rank"] for r_ in results for i in r_["hard_info"]),
            "residual_drives": max(i["residual_drives"] for r_ in results for i in r_["hard_info"]),
            "exact_fraction": min(i["exact_fraction"] for r_ in results for i in r_["hard_info"])}),
        "D_tail": "smallest eigenvalue of D^t: min over paths, weighted quantiles 1e-5, 1e-4, 1e-3 "
                  "(replica means) of the quadrature x Monte-Carlo measure",
        "kinks": _kink_settings(setup.net, response, plan.window),
        "response_sources": (None if response != "direct" else "every source time s" if fine_lags is None else
                             f"dyadic source grid: every s at lags < {fine_lags}, every 2^j-th s at lags in "
                             f"[2^(j-1), 2^j) x {fine_lags}; R_u(t, s) linearly interpolated in s between them"),
        "bias_check": (None if not plan.bias_check else
                       f"{num.replicas} more replicas of {int(halves[0]['N'])} paths each; "
                       "bias = their mean - the reported mean (the finite-path bias if it scales like 1/paths)"),
    }


def _solve_settings(setup: _Setup, num: DMFTNumerics, plan: Plan, results: list, kinked: bool) -> dict:
    """The numbers and choices of a solve (:attr:`DMFTResult.settings`); the prose is :func:`solve_method`'s."""
    prefix, hard_dim, schedule = setup.prefix, int(setup.hard_basis.shape[1]), setup.given.schedule
    overlaps = [r_["prefix_overlap"] for r_ in results] if prefix is not None else None
    return {
        "init": num.init,
        "spectral_start": (None if prefix is None else {
            "T": str(prefix["T"].expr), "steps": num.spectral_steps, "eta": num.spectral_eta, "m0": num.spectral_m0,
            "overlap": float(np.mean(cast(list, overlaps))),  # a list when there is a prefix
            "overlap_stderr": float(np.std(cast(list, overlaps), ddof=1) / math.sqrt(len(results))),
        }),
        "activation": setup.net.activation.name, "link": setup.lk.name, "loss": setup.net.loss.name, "width": setup.m,
        "a": setup.net.a.tolist(), "b": setup.net.b.tolist(), "delta": setup.delta, "ridge": setup.ridge,
        "eta": (float(cast(float, setup.eta)) if schedule is None else None),  # eta is set without a schedule
        "steps": setup.T,
        "schedule": (None if schedule is None else setup.etas.tolist()),
        "Sigma0": setup.Sigma0.tolist(), "M0": setup.M0.tolist(), "k": setup.k, "hard_dim": hard_dim,
        "hard_basis": setup.hard_basis.tolist(), "latent": plan.latent,
        "order": (plan.order if plan.latent != "monte-carlo" else None),
        "replicas": num.replicas, "paths_per_replica": int(results[0]["N"]), "bias_check": bool(plan.bias_check),
        "response_paths_per_replica": int(results[0]["NR"]), "paths_total": int(results[0]["N"]) * num.replicas,
        "excluded_weight": max(r_["excluded"] for r_ in results),
        "excluded_first_step": min((r_["excluded_at"] for r_ in results if r_["excluded_at"] is not None),
                                   default=None),
        "jitter": num.jitter, "sampler": num.sampler, "response": plan.response,
        "window": (plan.window if plan.response == "stein" else None), "fine_lags": plan.fine_lags,
        "cholesky_repairs": int(sum(r["repairs"] for r in results)), "seed": num.seed,
        "horizon": num.horizon, "hard_process_solved": bool(num.hard_process and hard_dim),
        "processes": plan.processes, "kinked": kinked,
        "stopped_at": [r_.get("stopped_at") for r_ in results],
        "truncation": (None if _reach(setup, num) is None else {
            "n": _reach(setup, num), "d": num.d,
            "latent_radius": _finite_or_none(min(float(r_["reach_radius"]) for r_ in results))}),
    }


def _finite_or_none(v: float) -> Optional[float]:
    return v if math.isfinite(v) else None


def _problem(setup: _Setup):
    """The solved Problem, or None when an ingredient cannot be rebuilt from its name."""
    from ..problem import Problem

    g, sched = setup.given, setup.given.schedule is not None
    try:
        return Problem(g.activation, g.link, g.loss, g.width, a=g.a, b=g.b, delta=setup.delta, ridge=setup.ridge,
                       eta=(None if sched else setup.eta), steps=(None if sched else setup.steps),
                       schedule=(tuple(float(v) for v in setup.etas) if sched else None),
                       # Problem takes any matrix-like Sigma0 and M0 and stores them as tuples of tuples
                       Sigma0=setup.Sigma0, M0=setup.M0)  # type: ignore[arg-type]
    except TheorykitError:
        return None  # e.g. an ingredient object whose name does not rebuild it


def _laws(setup: _Setup, num: DMFTNumerics, plan: Plan, results: list):
    """The kept path laws (keep_law_at: :class:`PathLaw` by time), or None."""
    if not num.keep_law_at:
        return None
    from .result import PathLaw

    latent = plan.latent + ({"gauss-hermite": f" ({plan.order} nodes per dimension)",
                             "gauss-legendre": f" ({plan.order} nodes per piece)"}.get(plan.latent, ""))
    return {t_: PathLaw.combine(t_, [r_["laws"][t_] for r_ in results], setup.hard_basis, latent)
            for t_ in num.keep_law_at if all(t_ in r_["laws"] for r_ in results)}


def dmft(activation, link=None, loss="square", width: int = 1, *, a=None, b=None, delta: Optional[float] = None,
         eta=None, steps: Optional[int] = None, schedule=None, ridge: float = 0.0, Sigma0=None, M0=None,
         paths: int = defaults.DMFT_PATHS, replicas: int = defaults.DMFT_REPLICAS, latent: str = defaults.DMFT_LATENT,
         order: Optional[int] = None, response_paths: Optional[int] = None, jitter: float = defaults.DMFT_JITTER,
         sampler: str = defaults.DMFT_SAMPLER, response: str = defaults.DMFT_RESPONSE,
         window: int = defaults.DMFT_WINDOW, seed: int = defaults.DMFT_SEED, processes: Optional[int] = None,
         kernels: bool = False, progress: bool = False, bias_check="auto", keep_law_at=(), exclude=None,
         init: str = "random", spectral_T=None, spectral_steps: int = 100, spectral_eta: float = 1.0,
         spectral_m0: float = 1e-2, horizon: Optional[int] = None, hard_process: bool = True,
         fine_lags="auto", d: Optional[int] = None, mirror: bool = False, stop_overlap=None) -> DMFTResult:
    """Solve the discrete-time DMFT (docs/theory.md §3) and the hard-direction process (docs/theory.md §3.2).

    The d -> infinity limit of full-batch GD for t = O(1) steps: the sample side r^t = M_t^T z + w^t +
    sum_{s<t} R_theta(t, s) u^s, u^t = F(r^t, y), the parameter side theta^{t+1} = (1 - eta_t ridge) theta^t -
    eta_t sum_{s<=t} R_u(t, s) theta^s - (eta_t/delta) g^t and M_{t+1} = (1 - eta_t ridge) M_t - eta_t E[z u^t^T],
    solved forward in t (docs/theory.md §3; kinks: §3.1; the hard process mu^t: §3.2; ``init="spectral"``: §3.3).

    Parameters
    ----------
    activation, loss, width, a, b
        As for :class:`theorykit.Network`; or a :class:`theorykit.Problem` as the first argument (Problem form).
    link
        As for :func:`theorykit.link`.
    delta : float
        delta > 0.
    eta, steps, schedule
        Steps: ``eta`` (> 0) and ``steps`` (>= 0) for constant-step GD, or ``schedule`` (an array of step sizes
        eta_t, e.g. from :func:`flow_schedule`).
    ridge : float
        ridge >= 0.
    Sigma0, M0
        Sigma0 (m x m, default I) and M0 (k x m, default 0) give the initial law theta^0 ~ N(0, Sigma0), M_0 = M0.
    paths : int
        Total number of sample paths over all replicas (default ``defaults.DMFT_PATHS``, the CLI's too).
    replicas : int
        (>= 2): independent solves whose spread gives the standard errors.  Two things the spread alone does not
        show: a finite-path bias, because the noise of the estimated R_u enters C_theta quadratically (it is large
        for Stein's estimator, small for direct Jacobians on the whole batch), and the right skew of replicas where
        rare paths carry the result (long times with unbounded-below D, e.g. y = z^2).  Hence the defaults:
        response="auto" takes direct Jacobians on the whole batch whenever they fit (memory RESPONSE_MEMORY, cost
        DIRECT_AUTO_FLOPS), and bias_check="auto" is on whenever Stein's estimator is used, so that the reported
        standard error includes the estimated bias.
    latent : str
        "gauss-hermite" (default when k + noisy <= 2; ``order`` nodes per dimension, default 32 in 1-D and 16 in
        2-D), "gauss-legendre" (a link with breakpoints in z, single-index or kinked only on lines z_i = c:
        ``order`` nodes on each piece between them, per axis; "auto" takes it when Gauss-Hermite misses the link's
        moments and it does not), "monte-carlo" or "auto".
    order : int, optional
        Nodes of the latent rule (see ``latent``).
    response_paths : int, optional
        Paths per replica carrying the response functions with response="direct" (default: the whole batch if it
        fits in RESPONSE_MEMORY, else as many as fit).
    jitter : float
        Relative diagonal jitter of the Cholesky factor.
    sampler : str
        "sobol" (scrambled QMC paths) or "random".
    response : str
        "auto", "stein" (R_u from Stein's lemma on the whole batch, O(t) per path per step) or "direct" (Jacobians
        propagated on a response batch, O(t^2)); with a kinked activation or loss only "stein" is exact and "auto"
        chooses it (docs/theory.md §3.1).
    window : int
        With response "stein", the last ``window`` lags come exactly from per-path Jacobians on the whole batch and
        only older lags from Stein's lemma (0: all by Stein).  ``response`` and ``window`` concern R_u; the hard
        process C_mu uses pathwise tangents on the whole batch (:func:`hard_tangents`), or Stein kernels with a kink.
    seed : int
        Replica r uses SeedSequence(seed).spawn(replicas)[r].
    processes : int, optional
        Parallel replicas (default min(replicas, CPUs)).
    kernels : bool
        Keep the full two-time kernels.
    progress : bool
        Draw a progress bar on stderr.
    bias_check : bool or "auto"
        (True, False or "auto"): also solve ``replicas`` more replicas with half the paths each (1.5x the cost);
        ``bias`` = (their mean) - (the reported mean) estimates the finite-path bias of M, gram, the losses,
        C_theta_tt and C_mu if it scales like 1/paths, and their ``stderr`` becomes sqrt(replica stderr^2 + bias^2)
        (the replica part alone in ``bias["replica_stderr"]``).
    keep_law_at : sequence of int
        Times t at which the law of one sample (a ``PathLaw``, docs/theory.md §3) is kept in ``laws``.
    exclude
        Paths to exclude, as recorded by an earlier solve (``excluded_masks``; used by :func:`dmft_scan`).
    init, spectral_T, spectral_steps, spectral_eta, spectral_m0
        ``init="spectral"`` starts GD from the top eigenvector of the preprocessed data matrix, run as a power
        iteration inside the DMFT (docs/theory.md §3.3; width m = 1 and single-index links).
    horizon : int, optional
        (>= steps): draw the Gaussian innovations for ``horizon`` steps and use the first ``steps``, so that the
        solve is exactly the first ``steps`` steps of the solve to ``horizon`` with the same seed and choices (a
        prefix; default: the solve's own steps).
    hard_process : bool
        False skips the hard-direction process (about a fifth of a long solve; C_mu empty, no finite-d capture
        prediction) for callers that only need the easy dynamics and the laws (the threshold search).
    fine_lags : "auto", None or int
        (an int W >= 2), with response="direct": None propagates the Jacobians of every source time s (cost
        (T+1)^3 m^3 / 3 and memory (T+1)^2 m^2 floats per response path); W only those of a dyadic grid of sources
        (all s at lags < W, every 2^j-th s at lags in [2^(j-1) W, 2^j W)) with R_u(t, s) linearly interpolated in s
        between them (about 0.375 W T^2 m^3 and T W log2(T/W) / 2 m^2 floats: docs/theory.md §3, numerics); "auto"
        takes W = DYADIC_FINE_LAGS where the full Jacobians would not fit on the whole batch.
    d : int, optional
        The dimension of a finite problem (n = delta d samples): paths beyond the latent 1/n quantile whose
        single-sample dynamics is unstable are excluded, as a sample of n points holds none of them (the 1/n
        truncation of :func:`theorykit.rules.below_quantile`, as the Hessian theory's with d);
        ``settings["truncation"]`` records n and the latent radius beyond which paths may go.  Without d (the
        d -> infinity DMFT) a divergence is checked by re-solving with the latent tail truncated at n = DMFT_REACH
        (``theorykit.defaults``) up to twice its step: if that passes it, the divergence is driven by paths no sample
        of realistic size holds, and the status is "unreliable" (not a GD instability) with the reason in
        ``diverged_at``.
    mirror : bool
        Latent nodes that are mirror images along the first hard direction e (z -> z - 2 (z.e) e) share their
        driving normals (antithetic paths; docs/theory.md §3, numerics).  For a link even along e the Monte-Carlo
        part of the hard overlap's drift E[(z.e) F] then vanishes exactly at M.e = 0, so that a small initial hard
        overlap grows without the O(1/sqrt(paths)) noise floor that independent paths give it (the median start of
        :func:`theorykit.thresholds.finite_d_midpoint` uses it).  Needs a deterministic latent rule whose node set
        the reflection maps to itself (one-line error otherwise).
    stop_overlap : (e, level, hold), optional
        A replica stops once cos^2 between the latent unit vector e (k numbers) and the top left singular vector of
        its Theta -- (v^T M_t^T e)^2 / lam, (lam, v) the top eigenpair of M_t^T M_t + C_theta(t, t) -- has been at
        least ``level`` for ``hold`` consecutive steps: the capture runs' shortcut (a captured run's later steps
        are not needed).  The solve then has fewer than T + 1 time points (the shortest replica's), status "ok",
        and ``settings["stopped_at"]`` lists each replica's last step (None where it ran to T).

    Returns
    -------
    DMFTResult
        Replica means, with T + 1 time points reached, k latent dimensions, m the width and kH hard directions:
        ``status`` ("ok"; "diverged", with ``diverged_at``: GD's instability; or "unreliable", with ``diverged_at``:
        the DMFT diverged through paths beyond the latent 1/n quantile of n = DMFT_REACH samples), ``t`` (T+1,),
        ``M`` (T+1, k, m), ``gram`` (T+1, m, m) = M^T M + C_theta(t, t), ``train_loss`` and ``test_loss`` (T+1,),
        ``C_theta_tt`` (T+1, m, m), ``C_mu`` (T+1, kH, m, m), ``D_tail`` (T+1, 4), ``stderr`` (the same keys ->
        standard errors over replicas), ``kernels`` (with ``kernels=True``), ``settings``.

    Raises
    ------
    TheorykitError
        Bad inputs (one line); a kinked ingredient with an explicit ``response="direct"`` or ``window``, or an
        activation that is itself discontinuous, is refused.

    Examples
    --------
    >>> import theorykit as tk
    >>> p = tk.Problem("gelu", "phase-retrieval", delta=2, eta=0.5, steps=5)
    >>> r = tk.dmft(p, paths=1024, replicas=2, processes=1)
    >>> r.status, r.M.shape, r.gram.shape, r.C_mu.shape
    ('ok', (6, 1, 1), (6, 1, 1), (6, 1, 1, 1))
    """
    t0 = _time.perf_counter()
    from ..problem import problem_or_keywords

    # dmft(problem, ...) or the keyword form, as given (checked by _prepare)
    given = _Given(**problem_or_keywords("dmft", activation, required=("link", "delta"),
                                         unset=dict(loss="square", width=1, ridge=0.0), link=link, loss=loss,
                                         width=width, a=a, b=b, delta=delta, eta=eta, steps=steps,
                                         schedule=schedule, ridge=ridge, Sigma0=Sigma0, M0=M0)[1])
    numerics = DMFTNumerics(paths=paths, replicas=replicas, latent=latent, order=order, response_paths=response_paths,
                            jitter=jitter, sampler=sampler, response=response, window=window, seed=seed,
                            processes=processes, kernels=kernels, progress=progress, bias_check=bias_check,
                            keep_law_at=keep_law_at, exclude=exclude, init=init, spectral_T=spectral_T,
                            spectral_steps=spectral_steps, spectral_eta=spectral_eta, spectral_m0=spectral_m0,
                            horizon=horizon, hard_process=hard_process, fine_lags=fine_lags, d=d, mirror=mirror,
                            stop_overlap=stop_overlap)
    return _solve(given, numerics, t0)


def _rare_paths(given: _Given, raw: DMFTNumerics, setup: _Setup, plan: Plan, step: int) -> Optional[dict]:
    """Whether a divergence at ``step`` of the d -> infinity DMFT is driven by paths beyond the latent 1/n quantile
    of n = DMFT_REACH samples: the same solve (same paths: the innovations drawn to the same horizon) with those paths
    truncated (excluded where unstable), to twice the step.  If it passes the step, having excluded some weight, the
    divergence is the DMFT's, not GD's: returns {"hint", "n", "weight", "latent_radius", "first_step",
    "truncated_reaches", "truncated_diverged_at"}; else None (GD's own instability)."""
    upto = min(setup.T, 2 * step)
    if step < 1 or upto <= step:
        return None
    n = defaults.DMFT_REACH
    probe = replace(raw, reach=n, horizon=(raw.horizon if raw.horizon is not None else setup.T), keep_law_at=(),
                    kernels=False, progress=False, hard_process=False, response=plan.response,
                    latent=plan.latent, order=plan.order)
    try:
        r = _solve(replace(given, eta=None, steps=None, schedule=setup.etas[:upto]), probe, _time.perf_counter())
    except TheorykitError:
        return None
    weight = float(r.settings["excluded_weight"])
    reached = None if r.diverged_at is None else int(r.diverged_at["step"])
    if (reached is not None and reached <= step) or not weight > 0:
        return None
    radius = r.settings["truncation"]["latent_radius"]
    where = f"latent radius >= {radius:.3g}" if radius is not None else "the latent tail"
    after = (f"it reaches step {upto} (checked to twice the step)" if reached is None else
             f"it diverges at step {reached} instead")
    hint = (f"DMFT unreliable: driven by paths beyond the 1/n quantile at step {step} (n = {n}: {where}, weight "
            f"{weight:.2g}, unstable as single samples; a sample of n points holds none of them); with them truncated "
            f"{after} -- not a GD instability: give d (--d) for the DMFT of n = delta d samples")
    return {"hint": hint, "n": n, "weight": weight, "latent_radius": radius,
            "first_step": r.settings["excluded_first_step"], "truncated_reaches": upto if reached is None else reached,
            "truncated_diverged_at": reached}


def _redo_direct(given: _Given, raw: DMFTNumerics, step: int, t0: float, where: str = "") -> DMFTResult:
    """'auto' keeps its promise: a numerical blow-up of Stein's responses (at ``step``) is re-solved with direct
    Jacobians (seen with GeLU, y = sign(|z| - median), logistic loss, delta = 8, eta = 1); seconds counted from t0."""
    res = _solve(given, replace(raw, response="direct"), _time.perf_counter())
    # a solve always sets method
    cast(dict, res.method)["response_auto"] = (f"'stein' diverged at step {step}{' ' + where if where else ''} with a "
                                               "stable per-sample curvature (a numerical instability of the "
                                               "estimator): re-solved with 'direct'")
    return replace(res, seconds=_time.perf_counter() - t0)


def _solve(given: _Given, raw: DMFTNumerics, t0: float) -> DMFTResult:
    """:func:`dmft`'s steps: check and plan, run the replicas, aggregate them, diagnose a divergence (response='auto'
    re-solves a numerical blow-up of Stein's responses with direct Jacobians), describe the solve."""
    from .._checks import loss_undefined_at_start

    setup, num, plan = _prepare(given, raw)
    R = num.replicas
    redo = plan.auto and not plan.kinked and plan.response == "stein"
    blowup: list = []

    def abandon(i: int, res: dict) -> bool:
        # 'auto' re-solves a numerical blow-up of Stein's responses with direct Jacobians (below): the first main
        # replica that shows one decides it, and the others stop (they would be thrown away)
        if not redo or i >= R:
            return False
        d = _diagnose_divergence([res], [], setup.etas, setup.delta, plan.response, _reach(setup, num))
        if d is not None and d.numerical:
            blowup.append(d.step)
        return bool(blowup)

    results = _run_replicas(_replica_jobs(setup, num, plan), plan.processes, num.progress, R if plan.bias_check else 0,
                            abandon=abandon)
    if results is None:
        return _redo_direct(given, raw, blowup[0], t0, "in a replica; the other replicas were stopped")
    halves, results = results[R:], results[:R]
    # a loss that is NaN (or infinite) at t = 0 is undefined at the initial point, not a divergence
    err = loss_undefined_at_start(setup.net.loss, [r_["train_loss"][0] for r_ in results + halves
                                                   if len(r_["train_loss"])])
    if err is not None:
        raise err
    S = min(len(r["train_loss"]) for r in results + halves)
    diverged = _diagnose_divergence(results, halves, setup.etas, setup.delta, plan.response, _reach(setup, num))
    if S == 0 and diverged is not None:  # nothing to report: the initial state itself is beyond the limits
        raise TheorykitError(f"the DMFT cannot start: {diverged.hint}")
    agg = _aggregate(results, halves, S, setup, num, plan)
    if diverged and diverged.numerical and redo:
        return _redo_direct(given, raw, diverged.step, t0)
    method = solve_method(setup, num, plan, results, halves)
    mean, hard = agg["mean"], setup.hard_basis.shape[1]
    status = "ok" if diverged is None else "diverged"
    diverged_at = None if diverged is None else {"step": diverged.step, "hint": diverged.hint}
    # a numerical blow-up of the Jacobian responses is checked too: tail paths on a bounded oscillation (2 < eta D /
    # delta < 4, kept by the d -> infinity DMFT) have Jacobians growing like |1 - eta D / delta|^lag (§3 numerics)
    if diverged is not None and _reach(setup, num) is None:
        rare = _rare_paths(given, raw, setup, plan, diverged.step)
        if rare is not None:
            status, diverged_at = "unreliable", {"step": diverged.step, "hint": rare.pop("hint"), "rare_paths": rare}
    return DMFTResult(
        problem=_problem(setup), method=method, laws=_laws(setup, num, plan, results),
        excluded_masks=[r_["excluded_mask"] for r_ in results], status=status,
        t=np.arange(S), time=np.concatenate([[0.0], np.cumsum(setup.etas)])[:S], M=mean["M"], gram=mean["gram"],
        train_loss=mean["train_loss"], test_loss=mean["test_loss"], C_theta_tt=mean["C_theta_tt"],
        C_mu=mean["C_mu"], C_mu_init=mean["C_mu_init"], D_tail=agg["D_tail"], stderr=agg["stderr"],
        kernels=agg["kernels"], settings=_solve_settings(setup, num, plan, results, method["kinks"] is not None),
        seconds=_time.perf_counter() - t0, diverged_at=diverged_at, Ezu=mean["Ezu"],
        hard_reliable_until=agg["hard_reliable_until"], bias=agg["bias"], v_eff=mean.get("v_eff"),
        V_eff=mean.get("V_eff"),
        per_replica={key: np.stack([r_[key][:S] for r_ in results]) for key in ("M", "C_theta_tt")},
        hard_ess=(np.min(np.stack([r_["hard_ess"][:S] for r_ in results]), axis=0) if hard else None))
