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
  only the Gaussian process w is sampled; a single-index link that jumps in z (Gauss-Hermite straddles the jump) by
  Gauss-Legendre on the pieces between its breakpoints ("gauss-legendre", :func:`theorykit.rules.latent_rule`);
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
from typing import Optional

import numpy as np

from .. import defaults
from ..errors import TheorykitError
from .hard_process import hard_subspace_basis
from .plan import DIRECT_AUTO_FLOPS, RESPONSE_MEMORY, STEIN_MIN_ETA, make_plan
from .result import DMFTResult
from .sample_side import DIVERGENCE_LIMIT, EXCLUDED_LIMIT, PATH_LIMIT, solve_once

#: relative standard error of trace C_mu above which the hard process is flagged unreliable
HARD_RELIABLE_RSE = 0.05


#: keys of the solve's description that are prose (DMFTResult.method), not settings
METHOD_KEYS = ("latent_auto", "response_auto", "excluded", "stderr", "test_loss", "hard_reliable_until", "hard_process",
               "D_tail", "kinks", "response_sources")


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


def _replica_worker(args):
    # one BLAS thread per replica process: the GEMMs here are thin and memory-bound, and oversubscribed OpenBLAS
    # threads made them 30x slower on a 2-core machine (threadpoolctl: the maintained way to set this at run time)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return solve_once(*args)


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


#: a replica averages over its own paths: fewer than this is no average (and thousands of one-path replicas cost
#: thousands of solves for nothing)
MIN_PATHS_PER_REPLICA = 2


def dmft(activation, link=None, loss="square", width: int = 1, *, a=None, b=None, delta: Optional[float] = None,
         eta=None,
         steps: Optional[int] = None, schedule=None, ridge: float = 0.0, Sigma0=None, M0=None,
         paths: int = defaults.DMFT_PATHS,
         replicas: int = defaults.DMFT_REPLICAS, latent: str = defaults.DMFT_LATENT, order: Optional[int] = None, response_paths: Optional[int] = None,
         jitter: float = defaults.DMFT_JITTER, sampler: str = defaults.DMFT_SAMPLER,
         response: str = defaults.DMFT_RESPONSE, window: int = defaults.DMFT_WINDOW, seed: int = defaults.DMFT_SEED,
         processes: Optional[int] = None, kernels: bool = False, progress: bool = False,
         bias_check="auto", keep_law_at=(), exclude=None, init: str = "random", spectral_T=None,
         spectral_steps: int = 100, spectral_eta: float = 1.0, spectral_m0: float = 1e-2,
         horizon: Optional[int] = None, hard_process: bool = True, fine_lags="auto") -> DMFTResult:
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
    default 32 in 1-D and 16 in 2-D), "gauss-legendre" (a single-index link with breakpoints in z: ``order`` nodes on
    each piece between them; "auto" takes it when Gauss-Hermite misses the link's moments and it does not),
    "monte-carlo" or "auto"; response_paths: paths per replica carrying the
    response functions with response="direct" (default: the whole batch if it fits in RESPONSE_MEMORY, else as many
    as fit); response: "auto", "stein" (R_u from Stein's lemma on the whole batch, O(t) per path per step) or
    "direct" (Jacobians propagated on a response batch, O(t^2)); with a kinked activation or loss only "stein" is
    exact and "auto" chooses it (docs/theory.md §3.1); sampler: "sobol" (scrambled QMC paths) or "random"; window:
    with response "stein", the last ``window`` lags come exactly from per-path Jacobians on the whole batch and only
    older lags from Stein's lemma (0: all by Stein).  ``response`` and ``window`` concern R_u; the hard process C_mu
    uses pathwise tangents on the whole batch (:func:`hard_tangents`), or Stein kernels with a kink.  jitter:
    relative diagonal jitter of the Cholesky factor; seed: replica r uses SeedSequence(seed).spawn(replicas)[r];
    processes: parallel replicas (default min(replicas, CPUs)); kernels: keep the full two-time kernels.
    bias_check (True, False or "auto"): also solve ``replicas`` more replicas with half the paths each (1.5x the
    cost); ``bias`` = (their mean) - (the reported mean) estimates the finite-path bias of M, gram, the losses,
    C_theta_tt and C_mu if it scales like 1/paths, and their ``stderr`` becomes sqrt(replica stderr^2 + bias^2)
    (the replica part alone in ``bias["replica_stderr"]``).  horizon (>= steps): draw the Gaussian innovations for
    ``horizon`` steps and use the first ``steps``, so that the solve is exactly the first ``steps`` steps of the solve
    to ``horizon`` with the same seed and choices (a prefix; default: the solve's own steps).  hard_process=False
    skips the hard-direction process (about a fifth of a long solve; C_mu empty, no finite-d capture prediction) for
    callers that only need the easy dynamics and the laws (the threshold search).  fine_lags ("auto", None or an
    int W >= 2), with response="direct": None propagates the Jacobians of every source time s (cost (T+1)^3 m^3 / 3
    and memory (T+1)^2 m^2 floats per response path); W only those of a dyadic grid of sources (all s at lags < W,
    every 2^j-th s at lags in [2^(j-1) W, 2^j W)) with R_u(t, s) linearly interpolated in s between them (about
    0.375 W T^2 m^3 and T W log2(T/W) / 2 m^2 floats: docs/theory.md §3, numerics); "auto" takes W =
    DYADIC_FINE_LAGS where the full Jacobians would not fit on the whole batch.  Returns a :class:`DMFTResult`.
    """
    from ..problem import Problem

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
    from .._checks import Progress as _Progress, check_int as _check_int, check_number as _check_number, \
        loss_undefined_at_start as _loss_undefined_at_start
    from ..symbolic.ingredients import link as make_link
    from ..symbolic.network import Network

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
        _check_kernel_memory(steps, 1)  # before np.full: 10^12 steps must not allocate
        etas = np.full(steps, eta)
    paths = _check_int("paths", paths, 2)
    replicas = _check_int("replicas", replicas, 2)
    if paths // replicas < MIN_PATHS_PER_REPLICA:  # paths is the total over replicas
        raise TheorykitError(f"paths = {paths} over replicas = {replicas} leaves {paths // replicas} path(s) per "
                             f"replica (at least {MIN_PATHS_PER_REPLICA}): raise paths or lower replicas")
    seed = _check_int("seed", seed, 0)
    if not (isinstance(jitter, (int, float)) and 0 <= jitter < 1e-3):
        raise TheorykitError(f"jitter must be in [0, 1e-3), got {jitter!r}")
    if order is not None:
        order = _check_int("order", order, 1, 1000)
    net = Network(activation, loss, width, a=a, b=b)
    lk = make_link(link)
    m, k, T = net.m, lk.k, len(etas)
    if T == 0 and response == "auto" and (paths // replicas) * m * m * 4 > RESPONSE_MEMORY:
        # T = 0 with so many paths that auto cannot take the whole batch: it would choose by the step sizes (none)
        raise TheorykitError("with steps = 0 and this many paths, choose response='direct' or 'stein' explicitly "
                             "(or lower paths)")
    _check_kernel_memory(T, m, k, min(replicas, processes if isinstance(processes, int) and processes > 0
                                           else (_os.cpu_count() or 1)))
    prefix = None
    if init not in ("random", "spectral"):
        raise TheorykitError(f"init must be 'random' or 'spectral', got {init!r}")
    if init == "spectral":
        # the spectral start, exactly: the DMFT of the normalised power iteration that builds the top eigenvector of
        # (1/n) sum T(y_i) x_i x_i^T from a small overlap spectral_m0, then GD (docs/theory.md §3.3)
        if m != 1 or k != 1:
            raise TheorykitError("init='spectral' is implemented for width m = 1 and a single-index link")
        if M0 is not None or Sigma0 is not None:
            raise TheorykitError("init='spectral' sets the initial law itself: drop M0 and Sigma0")
        from ..symbolic.ingredients import preprocessing as make_preprocessing

        spectral_steps = _check_int("spectral_steps", spectral_steps, 1)
        spectral_eta = _check_number("spectral_eta", spectral_eta, lambda v: v > 0, "> 0")
        spectral_m0 = _check_number("spectral_m0", spectral_m0, lambda v: 0 < v < 1, "in (0, 1)")
        Tpre = make_preprocessing(spectral_T or "(y-1)/(y+sqrt(2*delta)-1)")
        prefix = {"steps": spectral_steps, "T": Tpre, "eta": spectral_eta}
        M0, Sigma0 = [[spectral_m0]], [[1.0 - spectral_m0 ** 2]]
    Sigma0 = _matrix(Sigma0, (m, m), "Sigma0", np.eye(m))
    if not np.allclose(Sigma0, Sigma0.T) or np.linalg.eigvalsh(Sigma0)[0] < -1e-12:
        raise TheorykitError("Sigma0 must be symmetric positive semi-definite")
    M0 = _matrix(M0, (k, m), "M0", np.zeros((k, m)))
    hard_basis = hard_subspace_basis(lk) if prefix is None else np.zeros((k, 0))  # no hard process from a spectral start
    kinks = net.activation.kinks
    if kinks.discontinuities:
        raise TheorykitError(f"the activation {net.activation.name!r} jumps at x = "
                             f"{', '.join(f'{v:.6g}' for v in kinks.discontinuities)}: its D would carry derivatives "
                             "of Dirac terms, which the DMFT does not handle (use a continuous activation)")

    plan = make_plan(net, lk, hard_basis, (etas if prefix is None else np.concatenate([np.full(spectral_steps, spectral_eta), etas])), paths=paths, replicas=replicas, latent=latent, order=order,
                     response=response, response_paths=response_paths, window=window, sampler=sampler,
                     bias_check=bias_check, processes=processes, fine_lags=fine_lags)
    latent, latent_auto, order, response, auto = plan.latent, plan.latent_auto, plan.order, plan.response, plan.auto
    window, kinked, bias_check, batch_args, procs = (plan.window, plan.kinked, plan.bias_check, plan.batch_args,
                                                     plan.processes)

    root_seq = np.random.SeedSequence(seed)
    seeds = [int(s.generate_state(1)[0]) for s in root_seq.spawn(replicas)]
    try:
        keep_law_at = sorted({int(v) for v in np.atleast_1d(np.asarray(keep_law_at if keep_law_at is not None else (),
                                                                         dtype=float))})
    except (TypeError, ValueError):
        raise TheorykitError(f"keep_law_at must be a list of time indices, got {keep_law_at!r}") from None
    if any(v < 0 or v > T for v in keep_law_at):
        raise TheorykitError(f"keep_law_at: times must lie in 0..{T}, got {keep_law_at}")
    if exclude is not None and (len(exclude) != replicas):
        raise TheorykitError(f"exclude must hold one path mask per replica ({replicas}), got {len(exclude)}")
    if not isinstance(hard_process, bool):
        raise TheorykitError(f"hard_process must be True or False, got {hard_process!r}")
    if horizon is not None:
        horizon = _check_int("horizon", horizon, T)
        _check_kernel_memory(horizon, m, k, 1)  # the innovations are drawn to the horizon
    jobs = [(net, lk, hard_basis, delta, etas, ridge, Sigma0, M0, batch_args, jitter, s, sampler, response, window,
             None, keep_law_at, (None if exclude is None else exclude[i]), prefix, horizon, hard_process, plan.fine_lags)
            for i, s in enumerate(seeds)]
    if bias_check:
        # as many more replicas with half the paths each (node counts kept, paths per node halved; new seeds)
        if batch_args[0] != "monte-carlo":
            half = batch_args[:2] + (max(2, batch_args[2] // 2), max(2, batch_args[3] // 2)) + batch_args[4:]
            half = half[:2] + (max(half[2], half[3]),) + half[3:]
        else:
            half = batch_args[:4] + (max(2, batch_args[4] // 2), max(2, min(batch_args[5], batch_args[4] // 2)))
        jobs += [(net, lk, hard_basis, delta, etas, ridge, Sigma0, M0, half, jitter, int(s.generate_state(1)[0]),
                  sampler, response, window, None, (), None, prefix, None, hard_process, plan.fine_lags)
                 for s in root_seq.spawn(replicas)]
    # the bar counts replica solves (one job each; with the bias check, half of them have half the paths)
    bar = _Progress(len(jobs), label="dmft", unit=("replica solves" if not bias_check else
                                                    f"replica solves ({replicas} of them the bias check)")) \
        if progress else None
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
    # a loss that is NaN (or infinite) at t = 0 is undefined at the initial point, not a divergence (issue 11)
    err = _loss_undefined_at_start(net.loss, [r_["train_loss"][0] for r_ in results + halves
                                              if len(r_["train_loss"])])
    if err is not None:
        raise err

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
    if hard_basis.shape[1] and hard_process:
        # V_eff = P_t^-1 C_mu P_t^-T (first hard direction), the covariance of the effective initial overlap
        # (hard_process.effective_overlap_covariance; m = 1: C_mu Sigma_0 / C_mu_init): from the replica means,
        # jackknife standard error over replicas; v_eff = V_eff[:, 0, 0] for m = 1
        from .hard_process import effective_overlap_covariance

        parts = [np.stack([r[key][:S, 0] if key in ("C_mu", "C_mu_init") else r[key][:S] for r in results])
                 for key in ("C_mu", "P_half", "C_mu_init")]
        B = results[0]["Sigma0_half"]

        def veff(idx):
            return effective_overlap_covariance(*(q[idx].mean(0) for q in parts[:2]), B, parts[2][idx].mean(0))

        R = len(results)  # >= 2 (checked)
        mean["V_eff"] = veff(np.arange(R))
        jk = np.stack([veff(np.delete(np.arange(R), i)) for i in range(R)])
        err["V_eff"] = np.sqrt((R - 1) / R * ((jk - jk.mean(0)) ** 2).sum(0))
        if m == 1:
            mean["v_eff"], err["v_eff"] = mean["V_eff"][:, 0, 0], err["V_eff"][:, 0, 0]
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
            res.method["response_auto"] = (f"'stein' diverged at step {step} with a stable per-sample curvature "
                                             "(a numerical instability of the estimator): re-solved with 'direct'")
            res.seconds = _time.perf_counter() - t0
            return res
    tau = np.concatenate([[0.0], np.cumsum(etas)])[:S]
    # At long times C_mu is an average dominated by rare paths (per-path tangents that grew while D < 0), so replicas
    # scatter and their spread understates the error.  Flag the first time where they disagree by more than 5%.
    reliable = None
    if hard_basis.shape[1] and hard_process:
        tr = np.einsum("tjaa->t", mean["C_mu"])
        tr_se = np.sqrt(np.einsum("tjaa->t", err["C_mu"] ** 2))
        bad = np.flatnonzero(tr_se > HARD_RELIABLE_RSE * np.abs(tr))
        reliable = int(bad[0]) - 1 if bad.size else S - 1
    settings = {
        "init": init,
        "spectral_start": (None if prefix is None else {
            "T": str(prefix["T"].expr), "steps": spectral_steps, "eta": spectral_eta, "m0": spectral_m0,
            "overlap": float(np.mean([r_["prefix_overlap"] for r_ in results])),
            "overlap_stderr": float(np.std([r_["prefix_overlap"] for r_ in results], ddof=1) / math.sqrt(len(results))),
            }),
        "activation": net.activation.name, "link": lk.name, "loss": net.loss.name, "width": m,
        "a": net.a.tolist(), "b": net.b.tolist(), "delta": delta, "ridge": ridge,
        "eta": (float(eta) if schedule is None else None), "steps": T,
        "schedule": (None if schedule is None else etas.tolist()),
        "Sigma0": Sigma0.tolist(), "M0": M0.tolist(), "k": k, "hard_dim": int(hard_basis.shape[1]),
        "hard_basis": hard_basis.tolist(), "latent": latent, "latent_auto": latent_auto,
        "order": (order if latent != "monte-carlo" else None),
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
        "window": (window if response == "stein" else None), "fine_lags": plan.fine_lags,
        "response_sources": (None if response != "direct" else "every source time s" if plan.fine_lags is None else
                             f"dyadic source grid: every s at lags < {plan.fine_lags}, every 2^j-th s at lags in "
                             f"[2^(j-1), 2^j) x {plan.fine_lags}; R_u(t, s) linearly interpolated in s between them"), "cholesky_repairs": int(sum(r["repairs"] for r in results)), "seed": seed,
        "horizon": horizon, "hard_process_solved": bool(hard_process and hard_basis.shape[1]),
        "processes": procs,
        "stderr": ("std over independent replicas / sqrt(replicas); outputs are replica means" if not bias_check else
                   "sqrt(replica stderr^2 + bias^2): the replica spread and the estimated finite-path bias (bias_check) "
                   "in quadrature; outputs are replica means"),
        "test_loss": "E[l(y, f(M_t^T z + w^t))], w^t ~ N(0, C_theta(t,t)) on the same paths",
        "hard_reliable_until": "last t before the relative stderr of trace C_mu exceeds 5% (beyond it C_mu is "
                               "dominated by rare paths whose tangents grew where D < 0: heavy-tailed replicas)",
        "hard_process": (None if not hard_basis.shape[1] else "not solved (hard_process=False)" if not hard_process
                         else {
            "method": "pathwise tangents on the whole batch (exact for the sampled paths); noise drives: top "
                      "eigenvectors of delta C_u^zeta exactly, the remainder by random drives",
            "rank": max(i["rank"] for r_ in results for i in r_["hard_info"]),
            "residual_drives": max(i["residual_drives"] for r_ in results for i in r_["hard_info"]),
            "exact_fraction": min(i["exact_fraction"] for r_ in results for i in r_["hard_info"])}),
        "D_tail": "smallest eigenvalue of D^t: min over paths, weighted quantiles 1e-5, 1e-4, 1e-3 "
                  "(replica means) of the quadrature x Monte-Carlo measure",
    }
    # prose about how it was solved goes in ``method``; ``settings`` keeps the numbers and choices
    method = {k: settings.pop(k) for k in METHOD_KEYS}
    method["bias_check"], settings["bias_check"] = settings["bias_check"], bool(bias_check)
    settings["kinked"] = method["kinks"] is not None
    try:
        problem = Problem(activation, link, loss, width, a=a, b=b, delta=delta, ridge=ridge,
                          eta=(None if schedule is not None else eta), steps=(None if schedule is not None else steps),
                          schedule=(None if schedule is None else tuple(float(v) for v in etas)), Sigma0=Sigma0,
                          M0=M0)
    except TheorykitError:
        problem = None  # e.g. an ingredient object whose name does not rebuild it
    laws = None
    if keep_law_at:
        from .result import PathLaw

        laws = {t_: PathLaw.combine(t_, [r_["laws"][t_] for r_ in results], hard_basis,
                                    latent + ({"gauss-hermite": f" ({order} nodes per dimension)",
                                               "gauss-legendre": f" ({order} nodes per piece)"}.get(latent, "")))
                for t_ in keep_law_at if all(t_ in r_["laws"] for r_ in results)}
    return DMFTResult(problem=problem, method=method, laws=laws, excluded_masks=[r_["excluded_mask"] for r_ in results],
        status="ok" if not div else "diverged", t=np.arange(S), time=tau, M=mean["M"], gram=mean["gram"],
        train_loss=mean["train_loss"], test_loss=mean["test_loss"], C_theta_tt=mean["C_theta_tt"],
        C_mu=mean["C_mu"], C_mu_init=mean["C_mu_init"], D_tail=D_tail, stderr=err, kernels=kern, settings=settings,
        seconds=_time.perf_counter() - t0, diverged_at=diverged_at, Ezu=mean["Ezu"],
        hard_reliable_until=reliable, bias=bias, v_eff=mean.get("v_eff"), V_eff=mean.get("V_eff"),
        per_replica={key: np.stack([r_[key][:S] for r_ in results]) for key in ("M", "C_theta_tt")},
        hard_ess=(np.min(np.stack([r_["hard_ess"][:S] for r_ in results]), axis=0) if hard_basis.shape[1] else None))
