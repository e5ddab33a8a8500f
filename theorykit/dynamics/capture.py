"""The capture threshold (docs/theory.md §3.2): the smallest initial hard overlap from which the nonlinear DMFT reaches
cos^2 > 1/2 on a hard direction by the horizon."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .. import defaults
from ..errors import TheorykitError
from .hard_process import hard_subspace_basis

#: capture_threshold flags its m* as noise-limited when M_T along e has a larger relative s.e. at a bracket end
CAPTURE_NOISE_RSE = 0.25


def capture_threshold(activation, link=None, loss="square", width: int = 1, *, delta: Optional[float] = None,
                      eta: Optional[float] = None, steps: Optional[int] = None, lo: float = defaults.CAPTURE_LO, hi: float = defaults.CAPTURE_HI, tol: float = defaults.CAPTURE_TOL,
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

    Also ``capture_threshold(problem, lo=..., **kw)`` with a :class:`theorykit.Problem` (constant steps, m = 1; its
    a, b, ridge and Sigma0 are used, its M0 is what the bisection sets).
    """
    from .._checks import check_number as _check_number
    from ..problem import Problem
    from ..symbolic.ingredients import link as make_link
    from .solver import dmft

    if isinstance(activation, Problem):
        pr = activation
        if link is not None or delta is not None or eta is not None or steps is not None:
            raise TheorykitError("capture_threshold(problem, ...): link, delta, eta and steps are part of the Problem")
        if pr.eta is None:
            raise TheorykitError("capture_threshold needs constant-step GD (a Problem with eta and steps)")
        if pr.M0 is not None:
            raise TheorykitError("capture_threshold sets M0 itself: give a Problem without M0")
        for key, val in (("a", pr.a), ("b", pr.b), ("ridge", pr.ridge if pr.ridge else None),
                         ("Sigma0", None if pr.Sigma0 is None else pr.Sigma0_matrix)):
            if val is not None:
                kw.setdefault(key, val)
        activation, link, loss, width, delta, eta, steps = (pr.activation, pr.link, pr.loss, pr.width, pr.delta,
                                                            pr.eta, pr.steps)
    elif link is None or delta is None or eta is None or steps is None:
        raise TheorykitError("capture_threshold: give a Problem, or activation, link, delta, eta and steps")

    if width != 1:
        raise TheorykitError("capture_threshold is defined for width m = 1")
    lo = _check_number("lo", lo, lambda v: v >= 0, ">= 0")
    hi = _check_number("hi", hi, lambda v: v > lo, "> lo")
    tol = _check_number("tol", tol, lambda v: v > 0, "> 0")
    rtol = _check_number("rtol", rtol, lambda v: v > 0, "> 0")
    lk = make_link(link)
    hb = hard_subspace_basis(lk)
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
