"""The capture threshold (docs/theory.md §3.2): the smallest initial hard overlap from which the nonlinear DMFT reaches
cos^2 > 1/2 on a hard direction by the horizon; the matched finite-d prediction against delta built on it
(:func:`finite_d_curve`); m*(t) on a ladder and its growth rate (the dynamical criterion)."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .. import defaults
from ..errors import DivergenceError, TheorykitError
from .hard_process import hard_subspace_basis

#: capture_threshold flags its m* as noise-limited when M_T along e has a larger relative s.e. at a bracket end
CAPTURE_NOISE_RSE = 0.25


class NotCaptured(TheorykitError):
    """capture_threshold: even the largest initial overlap tried (``hi``) is not captured by the horizon, so m* > hi
    and every capture probability is at most the one at m* = hi."""

    def __init__(self, hi: float, steps: int):
        self.hi, self.steps = float(hi), int(steps)
        super().__init__(f"m0 = hi = {hi:g} is not captured by t = {steps}: raise hi or steps")


def _cos2(M, C_theta_tt, e):
    """cos^2 between the hard direction e and the top left singular vector of Theta (what GD's success counts,
    theorykit/referee/gd.py): Theta^T e = M^T e and Theta^T Theta = M^T M + C_theta, so cos^2 = (v^T M^T e)^2 / lam
    with (lam, v) the top eigenpair of the Gram.  M (..., k, m), C_theta_tt (..., m, m) -> (...).  Width 1:
    M_e^2 / (|M|^2 + C_theta)."""
    M = np.asarray(M, dtype=float)
    Me = np.einsum("...km,k->...m", M, e)
    G = np.einsum("...ka,...kb->...ab", M, M) + np.asarray(C_theta_tt, dtype=float)
    if G.shape[-1] == 1:
        return Me[..., 0] ** 2 / G[..., 0, 0]
    bad = ~np.isfinite(G).all(axis=(-2, -1))
    lam, vec = np.linalg.eigh(np.where(bad[..., None, None], 0.0, 0.5 * (G + np.swapaxes(G, -1, -2))))
    proj = np.einsum("...m,...m->...", vec[..., :, -1], Me)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = proj ** 2 / lam[..., -1]
    return np.where(bad, np.nan, out)


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
    from ..problem import FIELDS, problem_or_keywords
    from ..symbolic.ingredients import link as make_link
    from .solver import dmft

    # capture_threshold(problem, ...) or the keyword form (the Problem's fields in kw count as given too)
    pr, f = problem_or_keywords("capture_threshold", activation, required=("link", "delta", "eta", "steps"),
                                unset=dict(loss="square", width=1), link=link, loss=loss, width=width, delta=delta,
                                eta=eta, steps=steps, **{k: v for k, v in kw.items() if k in FIELDS})
    if pr is not None:
        if pr.eta is None:
            raise TheorykitError("capture_threshold needs constant-step GD (a Problem with eta and steps)")
        if pr.M0 is not None:
            raise TheorykitError("capture_threshold sets M0 itself: give a Problem without M0")
        kw.update({key: f[key] for key in ("a", "b", "Sigma0") if f[key] is not None})
        if f["ridge"]:
            kw["ridge"] = f["ridge"]
    activation, link, loss, width, delta, eta, steps = (f["activation"], f["link"], f["loss"], f["width"],
                                                        f["delta"], f["eta"], f["steps"])

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
        c2 = float(_cos2(r.M[-1], r.C_theta_tt[-1], e))
        evals.append((float(m0), c2))
        rse[float(m0)] = se / max(abs(Me), 1e-300)
        return c2 > 0.5

    def mid(a, b):
        return math.sqrt(a * b) if a > 0 else 0.5 * (a + b)

    if not captured(hi):
        raise NotCaptured(hi, steps)
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



def finite_d_curve(problem, deltas, d: int, *, paths: int, replicas: int, progress: bool = False) -> list:
    """The DMFT's matched finite-d capture prediction (docs/theory.md §3.2, m = 1) against delta: for each delta of
    ``deltas``, P(GD at dimension ``d`` captures the hard direction by the horizon ``problem.steps``) with its band,
    from ``dmft(problem at delta, paths, replicas)`` and :func:`capture_threshold` (same paths and replicas), through
    :meth:`DMFTResult.capture_prediction`.  What ``theorykit table``'s finite_d column and ``theorykit plot success
    --predict`` both draw on.

    Returns one dict per delta (in the given order): {delta, probability, low, high, m_star, noise_limited (m_star
    unreliable: see capture_threshold), t_match, v, how (the method, the same for every delta), error}; a delta
    whose DMFT or capture threshold fails keeps its one-line ``error`` (probability, low and high NaN) and the others
    go on.  Raises for width m != 1 or a link without a hard direction (no delta has a prediction then)."""
    from .._checks import Progress, check_int as _check_int
    from ..problem import Problem
    from .solver import dmft

    if not isinstance(problem, Problem):
        raise TheorykitError(f"finite_d_curve takes a theorykit.Problem, got {type(problem).__name__}")
    if problem.m != 1:
        raise TheorykitError(f"the matched capture prediction is for width m = 1 (got m = {problem.m})")
    if hard_subspace_basis(problem.link_obj).shape[1] == 0:
        raise TheorykitError("this link has no hard direction: nothing to capture")
    d = _check_int("d", d, 1)
    T = problem.steps
    how = (f"DMFT matched capture prediction (docs/theory.md §3.2) at d = {d} by T = {T}, {paths} paths in {replicas} "
           f"replicas (capture threshold m_star by bisection on the nonlinear DMFT, same paths)")
    bar = Progress(len(deltas), label="finite-d prediction", unit="deltas") if progress else None
    out = []
    for i, dl in enumerate(deltas):
        pr = problem.replace(delta=float(dl))
        point = {"delta": float(dl), "probability": math.nan, "low": math.nan, "high": math.nan, "m_star": math.nan,
                 "noise_limited": None, "t_match": None, "v": math.nan, "error": ""}
        try:
            r = dmft(pr, paths=paths, replicas=replicas, bias_check=False)
            if r.status != "ok":
                raise TheorykitError(f"the DMFT did not reach t = {T} ({r.diverged_at['hint']})")
            c = r.capture_prediction(d, capture_threshold(pr, paths=paths, replicas=replicas))
            point.update({k: v for k, v in c.as_dict().items() if k in point})
        except TheorykitError as e:
            point["error"] = str(e).splitlines()[0] if str(e) else "error"
        point["how"] = how
        out.append(point)
        if bar:
            bar.update(i + 1)
    if bar:
        bar.close(len(out))
    return out


#: default ladder of initial hard overlaps for capture_curve: geometric from LADDER_LO to LADDER_HI
LADDER_LO, LADDER_HI, LADDER_POINTS = 1e-4, 0.5, 14


def capture_curve(problem, T: int, m0s=None, *, direction=None, on_solve=None, **dmft_options) -> dict:
    """m*(t) for every t <= T, the smallest initial hard overlap that the nonlinear DMFT captures (cos^2 > 1/2 on
    the first hard direction) by time t (docs/theory.md §5, "The dynamical criterion"), from one DMFT run per rung
    of a ladder of initial overlaps m0 (each to T, M0 = m0 e u^T; ``m0s``, default LADDER_POINTS geometric values in
    [LADDER_LO, LADDER_HI]) -- every t from the same runs.  u = ``direction``, a unit m-vector (the direction of the
    neurons' initial overlaps; default (1,) for m = 1, required for m >= 2), so m0 is the length of the overlap
    vector along the ray u.  cos^2(t): between e and the top left singular vector of Theta (:func:`_cos2`).  At
    each t, m*(t) is the geometric interpolation between the ladder's last rung below 1/2 and the first at or above
    (None where even the top rung has not captured, or the bottom already has: m* is outside the ladder).

    problem: a :class:`theorykit.Problem` with constant steps and no M0; ``dmft_options``: paths, replicas,
    seed, ... (common to every rung: common random numbers).  Returns {"t", "m_star" (list, None outside the
    ladder), "m0s", "cos2" (rungs x (T+1)), "m_star_replicas" (the same curve on each DMFT replica's own M and
    C_theta: growth_rate's standard error), "method"}.  on_solve: called after each rung's solve (a progress
    bar's hook)."""
    from .._checks import check_int as _check_int
    from ..problem import Problem
    from .solver import dmft

    if not isinstance(problem, Problem):
        raise TheorykitError(f"capture_curve takes a theorykit.Problem, got {type(problem).__name__}")
    if problem.M0 is not None:
        raise TheorykitError("capture_curve sets M0 itself (the ladder): give a Problem without M0")
    m = problem.m
    if direction is None:
        if m != 1:
            raise TheorykitError(f"capture_curve at width m = {m} needs direction=, the unit m-vector of the initial "
                                 "overlaps")
        direction = (1.0,)
    try:
        u = np.asarray(direction, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise TheorykitError(f"direction must be a list of {m} numbers, got {direction!r}") from None
    if u.size != m or not np.all(np.isfinite(u)) or not np.linalg.norm(u) > 0:
        raise TheorykitError(f"direction must be a non-zero vector of {m} finite numbers, got {direction!r}")
    u = u / np.linalg.norm(u)
    if problem.schedule is not None:
        raise TheorykitError("capture_curve needs constant-step GD (a Problem with eta and steps)")
    T = _check_int("T", T, 1)
    hb = hard_subspace_basis(problem.link_obj)
    if hb.shape[1] == 0:
        raise TheorykitError("this link has no hard direction: nothing to capture")
    e = hb[:, 0]
    if m0s is None:
        m0s = np.geomspace(LADDER_LO, LADDER_HI, LADDER_POINTS)
    try:
        m0s = np.asarray(sorted(float(v) for v in m0s))
    except (TypeError, ValueError):
        raise TheorykitError(f"m0s must be a list of numbers in (0, 1), got {m0s!r}") from None
    if len(m0s) < 2 or not np.all((m0s > 0) & (m0s < 1)) or len(set(m0s)) != len(m0s):
        raise TheorykitError(f"m0s must be >= 2 distinct numbers in (0, 1), got {list(m0s)}")
    # only M and C_theta are read: the linear hard process (pathwise tangents) is not needed
    opts = {"bias_check": False, "hard_process": False, **dmft_options}
    cos2 = np.full((len(m0s), T + 1), np.nan)
    rep = None  # (replicas, rungs, T+1): each replica's own cos^2 (its own M and C_theta)
    for i, m0 in enumerate(m0s):
        r = dmft(problem.replace(steps=T, M0=(m0 * np.outer(e, u)).tolist()), **opts)
        S = len(r.test_loss)
        cos2[i, :S] = _cos2(r.M, r.C_theta_tt, e)
        if r.status != "ok":
            raise DivergenceError(f"the DMFT from m0 = {m0:g} stopped at step {S - 1} ({r.diverged_at['hint']})")
        c_rep = _cos2(r.per_replica["M"], r.per_replica["C_theta_tt"], e)  # (R, S)
        if rep is None:
            rep = np.full((len(c_rep), len(m0s), T + 1), np.nan)
        rep[:, i, :S] = c_rep
        if on_solve is not None:
            on_solve()
    lm = np.log(m0s)
    return {"t": list(range(T + 1)), "m_star": _m_star(cos2, lm), "m0s": m0s.tolist(), "cos2": cos2,
            "m_star_replicas": [_m_star(c, lm) for c in rep],
            "direction": u.tolist(),
            "method": f"nonlinear DMFT from M0 = m0 e u^T (u = {np.round(u, 4).tolist()}) on a ladder of {len(m0s)} "
                      f"m0 in [{m0s[0]:g}, {m0s[-1]:g}], one run each to T = {T}; m*(t) by geometric interpolation "
                      "of cos^2(t) = 1/2 between rungs"}


def _m_star(cos2: np.ndarray, lm: np.ndarray) -> list:
    """m*(t) from cos^2 (rungs x times) on the ladder ln m0 = lm (see :func:`capture_curve`)."""
    out = []
    for t in range(cos2.shape[1]):
        c = cos2[:, t]
        above = np.flatnonzero(c >= 0.5)
        if not above.size or above[0] == 0:
            out.append(None)
            continue
        j = int(above[0])
        f = (0.5 - c[j - 1]) / (c[j] - c[j - 1])
        out.append(float(math.exp(lm[j - 1] + f * (lm[j] - lm[j - 1]))))
    return out


def _slope(m_star: list, t1: int, t2: int):
    ts = [t for t in range(max(t1, 0), min(t2, len(m_star) - 1) + 1) if m_star[t] is not None]
    if len(ts) < 3:
        return None, ts, math.nan
    x = np.asarray(ts, float)
    y = np.log([m_star[t] for t in ts])
    A = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    res = y - A @ coef
    dof = len(x) - 2
    fit_se = math.sqrt(float(res @ res) / dof / float(((x - x.mean()) ** 2).sum())) if dof > 0 else math.nan
    return float(-coef[1]), ts, fit_se


def growth_rate(curve: dict, t_range) -> dict:
    """gamma = -d ln m*/dT fitted over t in ``t_range`` = (t1, t2) on :func:`capture_curve`'s m*(t) (least squares
    on ln m*).  Standard error: the spread of the same fit on each DMFT replica's own m*(t) (its own M and C_theta),
    / sqrt(replicas), over the replicas whose m* is inside the ladder at >= 3 times of the range (at least 2; ``how``
    says how many); else the fit's residual error (how straight ln m* is, not the Monte-Carlo error; ``how`` says which).
    Needs m* inside the ladder at >= 3 times of the range.  gamma > 0: ever smaller kicks are captured as the
    horizon grows (the hard direction is dynamically unstable); gamma <= 0: they are not."""
    t1, t2 = (int(v) for v in t_range)
    g, ts, fit_se = _slope(curve["m_star"], t1, t2)
    if g is None:
        raise TheorykitError(f"m*(t) is inside the ladder at {len(ts)} time(s) of [{t1}, {t2}] (need 3): widen the "
                             "ladder m0s or move the range")
    per = [_slope(m, t1, t2)[0] for m in curve.get("m_star_replicas") or []]
    ok = [v for v in per if v is not None]
    if len(ok) >= 2:
        se = float(np.std(ok, ddof=1) / math.sqrt(len(ok)))
        how = (f"least squares of ln m*(t) on t; stderr from the same fit on each DMFT replica's own m*(t), spread / "
               f"sqrt(replicas), over {len(ok)} of {len(per)} replicas"
               + ("" if len(ok) == len(per) else " (the others' m* left the ladder on the range)"))
    else:
        se = fit_se
        how = ("least squares of ln m*(t) on t; stderr from the residuals (straightness of ln m*), not the DMFT's "
               "Monte-Carlo error (the replicas' own m* left the ladder)")
    return {"value": g, "stderr": se, "t_range": [ts[0], ts[-1]], "points": len(ts), "fit_stderr": fit_se,
            "per_replica": per, "how": how}
