"""Planning a DMFT solve: the latent integration rule and its accuracy check, the response estimator, path counts
and memory (docs/theory.md §3, numerics)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .._checks import check_int, physical_memory
from ..errors import TheorykitError
from ..rules import gauss_hermite
from .hard_process import HARD_RANK, HARD_RESIDUAL

#: response="auto" uses Stein's lemma when every step size is at least this, propagated Jacobians otherwise
STEIN_MIN_ETA = 0.25
#: default memory budget for the response arrays, bytes per replica
RESPONSE_MEMORY = 1.2e9
#: fine lags W of the dyadic source grid that fine_lags="auto" takes for long horizons (docs/theory.md §3, numerics:
#: R_u(t, s) interpolated in s with spacing / lag <= 2 / W)
DYADIC_FINE_LAGS = 16


def response_bytes(T: int, m: int, W) -> int:
    """Bytes of direct-Jacobian history per response path: every source (W None) or the dyadic grid at its busiest
    step."""
    from .responses import dyadic_response_floats

    blocks = (T + 1) ** 2 if W is None else dyadic_response_floats(T, W)
    return blocks * m * m * 4


def _resp_flops(T: int, m: int, W) -> float:
    """Multiply-adds per response path of the direct Jacobians to T (every source, or the dyadic grid's storage
    blocks read, :class:`theorykit.dynamics.responses.DyadicSchedule`)."""
    from .responses import dyadic_schedule

    return ((T + 1) ** 3 / 3 if W is None else dyadic_schedule(T, W).reads) * m ** 3


#: response="auto" takes direct Jacobians on the whole batch when they fit in RESPONSE_MEMORY and cost at most this
#: many multiply-adds per replica ((T+1)^3 m^3 N / 3)
DIRECT_AUTO_FLOPS = 1e10


def hermite_rule(order: int, dim: int):
    """Tensor Gauss-Hermite rule for N(0, I_dim) (:func:`theorykit.rules.gauss_hermite`): nodes (Q, dim), weights (Q,)
    summing to 1."""
    r = gauss_hermite(order, dim)
    return r.nodes, r.weights


#: largest normalised error of the latent rule on the link's moments that latent="auto" accepts for a quadrature
HERMITE_MOMENT_TOL = 1e-3


def latent_moment_error(link, order: int, cuts=()) -> float:
    """How well the latent rule of ``order`` (:func:`theorykit.rules.latent_rule`: tensor Gauss-Hermite, or
    Gauss-Legendre between the link's breakpoints ``cuts``) integrates the link: the largest difference, against the
    same rule with min(8 x order, 370) nodes per axis (or piece), of E[y^p He_j(z_i)] / sqrt(E[y^2p] j!) over p = 1, 2,
    j = 0..4 and every latent coordinate i, and of the cross moments E[y^p He_a(z_i) He_b(z_j)] / sqrt(E[y^2p] a! b!),
    a, b = 1, 2, i < j.  Exponentially small for smooth links, and for a link that jumps in z when
    the rule is cut at its jumps; O(1/order) for Gauss-Hermite across a jump (sign, Heaviside, Piecewise steps), where
    its nodes place the jump arbitrarily (y = sign(|z| - median|z|), logistic loss: 32 nodes put C_theta(100) far
    from both Monte-Carlo latents and constrained GD)."""
    from ..rules import HERMITE_MAX_ORDER, latent_rule

    def moments(q):
        rule = latent_rule(link.k, link.noisy, q, cuts)
        nodes, w = rule.nodes, rule.weights
        y = link.response(nodes[:, :link.k], nodes[:, link.k] if link.noisy else None)
        he = [[np.polynomial.hermite_e.hermeval(nodes[:, i], [0] * j + [1]) for j in range(5)]
              for i in range(link.k)]
        out = []
        for pw in (1, 2):
            yp = y ** pw
            scale = math.sqrt(max(float(w @ yp ** 2), 1e-300))
            for i in range(link.k):
                for j in range(5):
                    out.append(float(w @ (yp * he[i][j])) / (scale * math.sqrt(math.factorial(j))))
            # the cross moments E[y^p He_a(z_i) He_b(z_j)], which the hard operator E[y (z z^T - I)] is made of: a
            # link such as sign(z1 z2) has every single-coordinate moment 0 and E[y z1 z2] = 2/pi, which Gauss-Hermite
            # with 16 nodes per axis puts 5% high (it integrates |z1| |z2|, kinked on the axes)
            for i in range(link.k):
                for i2 in range(i + 1, link.k):
                    for a in (1, 2):
                        for b in (1, 2):
                            out.append(float(w @ (yp * he[i][a] * he[i2][b]))
                                       / (scale * math.sqrt(math.factorial(a) * math.factorial(b))))
        return np.array(out)

    ref = min(8 * order, HERMITE_MAX_ORDER)  # the largest usable rule (orders above 46 are checked against 370)
    if ref <= order:
        return 0.0  # nothing finer to compare against: order is the largest usable rule
    return float(np.max(np.abs(moments(order) - moments(ref))))


@dataclass(frozen=True)
class Plan:
    """How one DMFT solve is carried out, decided before any path is drawn: the latent rule (and why, when 'auto'
    chose), the response estimator (and whether 'auto' chose it), the window, whether an ingredient is kinked, the
    bias check, the batch (``batch_args`` for :func:`theorykit.dynamics.sample_side.make_batch`: main and response
    paths per replica), the memory estimate per replica (bytes) and the number of parallel processes."""

    latent: str
    latent_auto: Optional[str]
    order: Optional[int]
    response: str
    auto: bool
    window: int
    kinked: bool
    bias_check: bool
    fine_lags: Optional[int]
    batch_args: tuple
    n_main: int
    n_resp: int
    memory: float
    processes: int


def _latent_size(latent: str, order: int, lk, cuts) -> int:
    """Nodes of the deterministic latent rule that :func:`theorykit.dynamics.sample_side.make_batch` builds
    (:func:`theorykit.rules.latent_rule`; Gauss-Legendre cut at the link's breakpoints ``cuts``)."""
    from ..rules import latent_rule

    return latent_rule(lk.k, lk.noisy, order, cuts if latent == "gauss-legendre" else ()).size


#: below this many path-steps (paths per replica x replicas x (T + 1) x m) the replicas run in this process by default:
#: a pool of forked workers costs more than such a solve (tables/dmft_bench.md)
SERIAL_WORK = 2 ** 17


def make_plan(net, lk, hard_basis, etas, *, paths, replicas, latent, order, response, response_paths, window, sampler,
              bias_check, processes, fine_lags="auto") -> Plan:
    """The :class:`Plan` of a solve (docs/theory.md §3, numerics): latent rule with its accuracy check, response
    estimator ('auto': direct Jacobians on the whole batch when they fit, else Stein for steps >= STEIN_MIN_ETA,
    else direct on a sub-batch; Stein only with a kink), bias check ('auto': on with Stein), batch sizes (powers of
    two for Sobol) and a memory guard (one-line error above 60% of the machine).  fine_lags ('auto', None or an
    int >= 2): direct Jacobians for every source time (None) or on the dyadic grid with that many fine lags
    (:class:`theorykit.dynamics.responses.DyadicJacobians`); 'auto' takes the grid with DYADIC_FINE_LAGS where the
    full Jacobians would not fit on the whole batch and the grid does better."""
    m, k, T = net.m, lk.k, len(etas)
    if fine_lags not in ("auto", None):
        fine_lags = check_int("fine_lags", fine_lags, 2)
    nlat = k + (1 if lk.noisy else 0)
    latent_auto = None
    from ..symbolic.links import format_cuts, link_cuts

    cuts = link_cuts(lk)
    if latent == "auto":
        latent = "gauss-hermite" if nlat <= 2 else "monte-carlo"
        if latent == "gauss-hermite":
            q = order or (32 if nlat == 1 else 16)
            err_q = latent_moment_error(lk, q)
            latent_auto = f"Gauss-Hermite with {q} nodes per dimension: link moment error {err_q:.1e}"
            if err_q > HERMITE_MOMENT_TOL and cuts:
                err_l = latent_moment_error(lk, q, cuts)
                latent_auto += (f" > {HERMITE_MOMENT_TOL:g} (the link is not smooth in z); Gauss-Legendre with {q} "
                                f"nodes on each piece between its breakpoints {format_cuts(cuts)}: error {err_l:.1e}")
                latent = "gauss-legendre" if err_l <= HERMITE_MOMENT_TOL else "monte-carlo"
                if latent == "monte-carlo":
                    latent_auto += f" > {HERMITE_MOMENT_TOL:g}: Monte-Carlo latents instead"
            elif err_q > HERMITE_MOMENT_TOL:
                latent = "monte-carlo"
                latent_auto += (f" > {HERMITE_MOMENT_TOL:g} (the link is not smooth in z, and its breakpoints are "
                                "not known in closed form): Monte-Carlo latents instead")
        else:
            latent_auto = f"Monte-Carlo latents ({nlat} latent dimensions)"
    if latent not in ("gauss-hermite", "gauss-legendre", "monte-carlo"):
        raise TheorykitError(f"latent must be 'auto', 'gauss-hermite', 'gauss-legendre' or 'monte-carlo', got "
                             f"{latent!r}")
    if latent == "gauss-legendre" and not cuts:
        raise TheorykitError("latent='gauss-legendre' needs a link with breakpoints in z known in closed form (a "
                             "single-index link, or a multi-index one that jumps or kinks only on lines z_i = c); "
                             f"this link (k = {lk.k}) has none: use 'gauss-hermite' for a smooth link or 'monte-carlo'")
    if response not in ("auto", "stein", "direct"):
        raise TheorykitError(f"response must be 'auto', 'stein' or 'direct', got {response!r}")
    window = check_int("window", window, 0)
    auto = response == "auto"
    if auto:
        # Stein's lemma divides by the conditional std of w^s given its past, O(eta): its noise grows like 1/eta^2
        # relative to R_u: accurate at eta = 1 (tables/dmft_bench.md); at eta = 0.05 (sigma = x^2) the DMFT blew up
        # within 30 steps while direct Jacobians ran on.
        # Stein's noise also biases C_theta (it enters quadratically): on the linear model's exact limit
        # (docs/theory.md §3, theorykit.linear_gd) Stein's responses put the test loss low by several standard
        # errors, direct Jacobians on the whole batch were within their standard error.  So direct whenever the whole
        # batch fits.
        per_rep = max(1, paths // replicas)
        if latent != "monte-carlo":
            Q_ = _latent_size(latent, order or (32 if nlat == 1 else 16), lk, cuts)
            n_est = max(1, 1 << int(math.log2(max(per_rep // Q_, 1)))) * Q_
        else:
            n_est = 1 << int(math.log2(max(per_rep, 1)))
        def fits(W):  # the whole batch's direct Jacobians, every source (W None) or on the dyadic grid
            return (not window and n_est * response_bytes(T, m, W) <= RESPONSE_MEMORY
                    and _resp_flops(T, m, W) * n_est <= DIRECT_AUTO_FLOPS)
        whole = fits(None if fine_lags == "auto" else fine_lags)
        if not whole and fine_lags == "auto" and fits(DYADIC_FINE_LAGS):
            whole, fine_lags = True, DYADIC_FINE_LAGS
        response = "direct" if whole or float(np.min(etas)) < STEIN_MIN_ETA else "stein"
        if whole:
            response_paths = None
    kinked = net.kinked
    if kinked:
        # Propagated Jacobians cannot carry a jump of u = F(r, y) (the chain rule through a jump is not defined; with
        # the Dirac terms averaged over their innovation the Gram came out high for ReLU,
        # tables/dmft_vs_sim_kink_notes.md): Stein's lemma is exact for any kink (docs/theory.md §3.1).
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
    if response != "direct":
        fine_lags = None
    elif fine_lags == "auto":
        # the dyadic grid where the full Jacobians would leave most of the main batch without responses
        full_cap = RESPONSE_MEMORY // response_bytes(T, m, None)
        fine_lags = (DYADIC_FINE_LAGS if full_cap < per_replica and T > 2 * DYADIC_FINE_LAGS
                     and response_paths is None else None)
    if fine_lags is not None and fine_lags >= T:
        fine_lags = None  # every source stays on the grid: the full estimator
    bytes_per_resp = response_bytes(T, m, fine_lags)
    resp_cap = max(1, int(RESPONSE_MEMORY // bytes_per_resp))
    if fine_lags is not None:
        # the grid's response batch is what the grid would hold without its storage blocks (every source's history in
        # full): the blocks change the cost and the memory, not the estimator's noise
        from .responses import dyadic_source_floats

        resp_cap = min(resp_cap, max(1, int(RESPONSE_MEMORY // (dyadic_source_floats(T, fine_lags) * m * m * 4))))
    if latent != "monte-carlo":
        if nlat > 3:
            raise TheorykitError(f"Gauss-Hermite in {nlat} latent dimensions is too many nodes; use latent="
                                 f"'monte-carlo'")
        order = order or (32 if nlat == 1 else 16)
        check_int("order", order, 2)
        Q = _latent_size(latent, order, lk, cuts)
        per_node = pow2(per_replica // Q)
        want = response_paths if response_paths is not None else per_node * Q
        resp_per_node = max(2, pow2(min(per_node, want // Q, resp_cap // Q)))  # two halves: >= 2 per node
        per_node = max(per_node, resp_per_node)
        batch_args = (latent, order, per_node, resp_per_node, 0, 0)
        n_main, n_resp = per_node * Q, resp_per_node * Q
    else:
        n_main = pow2(per_replica)
        n_resp = max(2, pow2(min(n_main, response_paths or n_main, resp_cap)))
        n_main = max(n_main, n_resp)
        batch_args = ("monte-carlo", 0, 0, 0, n_main, n_resp)
    mem = (n_resp * bytes_per_resp if response == "direct" else 0) + n_main * (T + 1) * m * 8 * 3
    if hard_basis.shape[1]:  # per-path D^t and the tangents' history (float32), see hard_tangents
        mem += n_main * (T + 1) * m * (m + (m + HARD_RANK + HARD_RESIDUAL)) * 4
    # auto: one process per replica up to the cores, except for a solve so small that forking costs more than it
    # saves (the same numbers either way: each replica is one job with its own seed)
    small = n_main * replicas * (T + 1) * m < SERIAL_WORK
    procs = processes or (1 if small else min(replicas, os.cpu_count() or 1))
    phys = physical_memory()
    if phys and mem * procs > 0.6 * phys:
        raise TheorykitError(f"the DMFT would need about {mem * procs / 2**30:.1f} GiB with {procs} parallel "
                             f"replicas (machine: {phys / 2**30:.1f} GiB): lower paths, response_paths or processes")
    return Plan(latent=latent, latent_auto=latent_auto, order=order, response=response, auto=auto, window=window,
                kinked=kinked, bias_check=bool(bias_check), fine_lags=fine_lags, batch_args=batch_args, n_main=n_main,
                n_resp=n_resp,
                memory=mem, processes=procs)
