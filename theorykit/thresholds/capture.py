"""Capture (docs/theory.md §3.2 and §5): the one module behind every finite-d answer.

GD at dimension d starts with a hard overlap of order 1/sqrt(d); it escapes by the horizon T when that overlap, grown
first by the linear hard process and then by the nonlinear dynamics, reaches cos^2 > 1/2 on a hard direction.  The
nonlinear d -> infinity DMFT started from an initial hard overlap m0 gives the capture threshold m*(T): the smallest
m0 captured by T.  Matching the two regimes gives the finite-d prediction

    P(capture by t) = P(|B g| / sqrt(d) > m*(t; direction of B g)),   g ~ N(0, I_m),  B B^T = V_eff(min(t, t_match)),

with V_eff the covariance of the effective initial overlap vector (the linear process's noise counted in units of an
initial overlap).  For m = 1 this is P(chi2_1 > d m*(t)^2 / v_eff).

* :func:`capture_threshold` -- m*(T) at one horizon by bisection (one DMFT run per step);
* :func:`capture_curve` -- m*(t) for every t <= T from one ladder of DMFT runs along a ray of overlap directions;
* :func:`growth_rate` -- gamma = -d ln m*/dT on a window (the dynamical criterion, :mod:`.dynamical`);
* :func:`capture_probabilities` -- the one matched probability, with its one band (the replicas' m* and V_eff +- 2
  standard errors);
* :func:`finite_d` -- the question "P(GD succeeds by t at d)" for a list of delta and d: probabilities, the midpoint
  delta_1/2(d, T) and escape times.  ``theorykit threshold --horizon``, ``table``'s finite_d column and ``plot
  success --predict`` all call it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from .. import defaults
from .._checks import Progress, check_deltas, check_int
from ..dynamics import dmft
from ..dynamics.hard_process import hard_subspace_basis
from ..dynamics.sample_side import overlap_cos2  # noqa: F401  (re-exported: the capture criterion)
from ..dynamics.solver import HARD_RELIABLE_RSE
from ..errors import DivergenceError, TheorykitError
from ..rules import crossing, crossing_index, first_passage, interpolation_error, secant_root
from .directions import anchor_directions, neuron_classes

#: capture_threshold flags its m* as noise-limited when M_T along e has a larger relative s.e. at a bracket end
CAPTURE_NOISE_RSE = 0.25


class NotCaptured(TheorykitError):
    """capture_threshold: even the largest initial overlap tried (``hi``) is not captured by the horizon, so m* > hi
    and every capture probability is at most the one at m* = hi."""

    def __init__(self, hi: float, steps: int):
        self.hi, self.steps = float(hi), int(steps)
        super().__init__(f"m0 = hi = {hi:g} is not captured by t = {steps}: raise hi or steps")


@dataclass(frozen=True)
class CaptureThreshold:
    """m*(T) by bisection (:func:`capture_threshold`).  m_star: the bracket's midpoint; bracket (lo, hi): lo not
    captured, hi captured; evaluations: ((m0, cos^2 at T), ...) in order; M_rel_stderr: the replicas' relative
    standard error of M_T along e at the bracket's ends (the larger); noise_limited: M_rel_stderr >
    CAPTURE_NOISE_RSE (m_star then unreliable: the replicas' noise drives the hard overlap)."""

    m_star: float
    bracket: tuple
    evaluations: tuple
    M_rel_stderr: float
    noise_limited: bool

    def as_dict(self) -> dict:
        return {"m_star": self.m_star, "bracket": list(self.bracket),
                "evaluations": [list(e) for e in self.evaluations],
                "M_rel_stderr": self.M_rel_stderr, "noise_limited": self.noise_limited}


@dataclass(frozen=True)
class CaptureCurve:
    """m*(t) for every t <= T along one ray of initial-overlap directions (:func:`capture_curve`).

    t (T+1,); m_star: T+1 entries, None where m* is outside the ladder; m0s (rungs,): the ladder; cos2 (rungs, T+1):
    cos^2 of each rung's run; m_star_replicas: the same curve on each DMFT replica's own M and C_theta (replicas
    lists of T+1); direction (m,): the ray u; method: how it was computed."""

    t: tuple
    m_star: tuple
    m0s: tuple
    cos2: np.ndarray
    m_star_replicas: tuple = ()
    direction: tuple = (1.0,)
    method: str = ""

    def as_dict(self) -> dict:
        return {"t": list(self.t), "m_star": list(self.m_star), "m0s": list(self.m0s),
                "cos2": np.asarray(self.cos2).tolist(), "m_star_replicas": [list(r) for r in self.m_star_replicas],
                "direction": list(self.direction), "method": self.method}


@dataclass(frozen=True)
class GrowthRate:
    """gamma = -d ln m*/dT on a window (:func:`growth_rate`): value, stderr (how: which error), t_range (first and
    last t used), points, fit_stderr (the residuals' error), per_replica (each replica's own fit; None where its m*
    left the ladder)."""

    value: float
    stderr: float
    t_range: tuple
    points: int
    fit_stderr: float
    per_replica: tuple
    how: str

    def as_dict(self) -> dict:
        return {"value": self.value, "stderr": self.stderr, "t_range": list(self.t_range), "points": self.points,
                "fit_stderr": self.fit_stderr, "per_replica": list(self.per_replica), "how": self.how}


def capture_threshold(activation, link=None, loss="square", width: int = 1, *, delta: Optional[float] = None,
                      eta: Optional[float] = None, steps: Optional[int] = None, lo: float = defaults.CAPTURE_LO,
                      hi: float = defaults.CAPTURE_HI, tol: float = defaults.CAPTURE_TOL,
                      rtol: float = defaults.CAPTURE_RTOL, **kw) -> CaptureThreshold:
    """Smallest initial hard overlap m0 from which the (nonlinear, d -> infinity) DMFT reaches cos^2 > 1/2 on the
    first hard direction by t = steps (m = 1), by bisection on [lo, hi] until hi - lo <= tol or hi <= (1 + rtol) lo.

    Each evaluation is ``dmft(..., M0 = m0 e)`` with e the first hard direction (other arguments in ``kw``, e.g.
    paths, replicas, seed).  cos^2(t) = M_t^2 / (M_t^2 + C_theta(t, t)) along e.  The bracket is checked: hi must
    capture and lo must not.  Midpoints are arithmetic while lo = 0 and geometric after, so a small threshold is
    resolved to a relative precision (a finite-d probability built on it depends on m_star^2).
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
        c2 = float(overlap_cos2(r.M[-1], r.C_theta_tt[-1], e))
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
    # M_T understates the drift (seen with y = sign(|z| - median), logistic loss: tables/archive/
    # dmft_vs_sim_part3_sign_notes.md), so m* comes out too large.
    noise = max(rse.get(lo, 0.0), rse.get(hi, 0.0))
    return CaptureThreshold(m_star=mid(lo, hi), bracket=(lo, hi), evaluations=tuple(evals), M_rel_stderr=noise,
                            noise_limited=bool(noise > CAPTURE_NOISE_RSE))


#: default ladder of initial hard overlaps for capture_curve: geometric from LADDER_LO to LADDER_HI
LADDER_LO, LADDER_HI, LADDER_POINTS = 1e-4, 0.5, 14
#: capture_curve(search="bracket"): the factor of each step in m0 while the bracket of m*(T) is sought
BRACKET_FACTOR = 4.0
#: (level, steps): a bracket-search run stops once cos^2 >= level has held that many steps on a replica (kept when
#: every replica has cos^2 >= 1/2 by then)
CAPTURE_STOP = (0.9, 3)


def capture_curve(problem, T: int, m0s=None, *, direction=None, refine: int = 0, on_solve=None,
                  search: str = "ladder", guess: Optional[float] = None, step: float = BRACKET_FACTOR,
                  stop_captured: bool = True, **dmft_options) -> CaptureCurve:
    """m*(t) for every t <= T, the smallest initial hard overlap that the nonlinear DMFT captures (cos^2 > 1/2 on
    the first hard direction) by time t (docs/theory.md §5, "The dynamical criterion"), from one DMFT run per rung
    of a ladder of initial overlaps m0 (each to T, M0 = m0 e u^T; ``m0s``, default LADDER_POINTS geometric values in
    [LADDER_LO, LADDER_HI]) -- every t from the same runs.  u = ``direction``, a unit m-vector (the direction of the
    neurons' initial overlaps; default (1,) for m = 1, required for m >= 2), so m0 is the length of the overlap
    vector along the ray u.  cos^2(t): between e and the top left singular vector of Theta (:func:`cos2`).  At
    each t, m*(t) is the geometric interpolation between the ladder's last rung below 1/2 and the first at or above
    (None where even the top rung has not captured, or the bottom already has: m* is outside the ladder).

    problem: a :class:`theorykit.Problem` with constant steps and no M0; ``dmft_options``: paths, replicas,
    seed, ... (common to every rung: common random numbers); ``paths`` not given: the DMFT's default, raised for a
    kinked activation or loss to replicas x KINKED_REPLICA_PATHS (Stein responses' noise biases C_theta upwards and,
    from a small overlap, decides capture: docs/theory.md §5, "the median start").  Returns {"t", "m_star" (list,
    None outside the ladder), "m0s", "cos2" (rungs x (T+1)), "m_star_replicas" (the same curve on each DMFT
    replica's own M and C_theta: growth_rate's standard error), "method"}.  refine: after the ladder, that many more
    rungs, each the geometric midpoint of the bracket where cos^2(T) crosses 1/2 (a bisection for m*(T); the new
    rungs join the ladder, so m*(t) is finest at t = T); with refine > 0 the top rung runs first, and where it
    never reaches cos^2 = 1/2 up to T the ray is not laddered further (a smaller overlap along it is taken not to
    capture either).  on_solve: called after each rung's solve (a progress bar's hook).

    search="bracket" runs only the rungs that locate m*(T): from ``guess`` (default the top of ``m0s``; e.g. m*(T) at
    a neighbouring delta) it steps down while the run captures by T, or up while it does not, within [min m0s,
    max m0s], by a factor ``step`` first (default BRACKET_FACTOR; a smaller one for a close guess), each later step
    the square of the one before, up to BRACKET_FACTOR; then it bisects the bracket (in ln m0) until it is no wider
    than a factor BRACKET_FACTOR^(1/2^refine), at most ``refine`` times -- so a close guess with step = that factor
    needs two runs, and the default reaches the same resolution as ``refine`` bisections of a factor-BRACKET_FACTOR
    bracket.  m*(t) for t < T then rests on those rungs alone (coarser than the ladder's); the finite-d prediction
    at width >= 3 reads t = T.  With ``stop_captured`` (default) a bracket run stops at the first replica whose
    cos^2 has been at least CAPTURE_STOP[0] for CAPTURE_STOP[1] steps, if every replica's cos^2 is then >= 1/2 (a
    captured run's cos^2 rises on: the later cos^2 is taken as the last one); otherwise it is run again to T."""
    from ..problem import Problem

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
    T = check_int("T", T, 1)
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
    rungs = len(m0s)
    refine = check_int("refine", refine, 0, 20)
    # only M and C_theta are read: the linear hard process (pathwise tangents) is not needed
    opts = {"bias_check": False, "hard_process": False, **dmft_options}
    replicas = opts.get("replicas") or defaults.DMFT_REPLICAS
    if opts.get("paths") is None:  # a kinked problem: at least KINKED_REPLICA_PATHS per replica (docstring)
        opts["paths"] = max(defaults.DMFT_PATHS, _kinked_floor(problem, replicas))
    # the bracket search reads cos^2(T) only: a run stops once captured (CAPTURE_STOP)
    stop: dict[str, Any] = ({"stop_overlap": (e.tolist(), *CAPTURE_STOP)} if search == "bracket" and stop_captured
                            else {})
    runs: dict[float, tuple] = {}  # m0 -> (cos^2 (T+1,), each replica's own cos^2 (R, T+1))

    def run(m0: float) -> None:
        pr = problem.replace(steps=T, M0=(m0 * np.outer(e, u)).tolist())
        r = dmft(pr, **opts, **stop)
        S = len(r.test_loss)
        c_rep = overlap_cos2(r.per_replica["M"], r.per_replica["C_theta_tt"], e)  # type: ignore[index]  # (R, S)
        if r.status == "ok" and S <= T and not np.all(c_rep[:, -1] >= 0.5):
            r = dmft(pr, **opts)  # a replica stopped early, another had not captured by then: the whole run
            S = len(r.test_loss)
            c_rep = overlap_cos2(r.per_replica["M"], r.per_replica["C_theta_tt"], e)  # type: ignore[index]
        c = np.full(T + 1, np.nan)
        c[:S] = overlap_cos2(r.M, r.C_theta_tt, e)
        if r.status != "ok":
            # a diverged result has diverged_at; every solve has per_replica
            raise DivergenceError(f"the DMFT from m0 = {m0:g} stopped at step {S - 1} "
                                  f"({r.diverged_at['hint']})")  # type: ignore[index]
        rr = np.full((len(c_rep), T + 1), np.nan)
        rr[:, :S] = c_rep
        if S <= T:  # stopped once captured (cos^2 >= CAPTURE_STOP[0] held): the later cos^2 taken as the last one
            c[S:] = c[S - 1]
            rr[:, S:] = rr[:, S - 1:S]
        runs[float(m0)] = (c, rr)
        if on_solve is not None:
            on_solve()

    if search not in ("ladder", "bracket"):
        raise TheorykitError(f"search must be 'ladder' or 'bracket', got {search!r}")
    if search == "bracket":
        if not (isinstance(step, (int, float)) and math.isfinite(step) and step > 1):
            raise TheorykitError(f"step must be a number > 1 (the bracket search's first factor), got {step!r}")
        lo, hi = float(m0s[0]), float(m0s[-1])
        x = hi if guess is None or not math.isfinite(guess) else min(max(float(guess), lo), hi)
        run(x)

        def captured(v: float) -> bool:
            return bool(runs[v][0][T] >= 0.5)

        up = not captured(x)
        f = min(float(step), BRACKET_FACTOR)
        while (x < hi if up else x > lo) and captured(x) != up:
            x = min(x * f, hi) if up else max(x / f, lo)
            run(x)
            f = min(f * f, BRACKET_FACTOR)
    else:
        order = list(m0s[::-1]) if refine else list(m0s)
        run(float(order[0]))
        if not (refine and np.nanmax(runs[float(order[0])][0]) < 0.5):
            for m0 in order[1:]:
                run(float(m0))
    width = BRACKET_FACTOR ** (0.5 ** refine) * (1 + 1e-9)  # the bracket search's target resolution
    for _ in range(refine):  # bisection of the bracket of cos^2(T) = 1/2 in ln m0
        xs = sorted(runs)
        above = [i for i, x in enumerate(xs) if runs[x][0][T] >= 0.5]
        if not above or above[0] == 0:
            break  # m*(T) is outside the ladder: nothing to refine
        j = above[0]
        if search == "bracket" and xs[j] <= width * xs[j - 1]:
            break  # already as fine as the search's resolution
        run(math.sqrt(xs[j - 1] * xs[j]))
    m0s = np.asarray(sorted(runs))
    cos2 = np.stack([runs[x][0] for x in m0s])
    rep = np.stack([runs[x][1] for x in m0s], axis=1)  # (replicas, rungs, T+1)
    lm = np.log(m0s)
    if search == "bracket":
        ladder = (f"{len(m0s)} rungs in [{m0s[0]:g}, {m0s[-1]:g}] that bracket cos^2(T) = 1/2 (steps of a factor "
                  f"{min(max(float(step), 1.0), BRACKET_FACTOR):.3g} squared each time up to {BRACKET_FACTOR:g} from "
                  f"{'the top' if guess is None else f'a guess {guess:g}'}, then bisections to a factor "
                  f"{BRACKET_FACTOR ** (0.5 ** refine):.3g})")
    else:
        added = (f" and {len(m0s) - rungs} bisection rung(s) for cos^2(T) = 1/2" if len(m0s) > rungs else
                 " (only the top rung run: it never captures)" if len(m0s) == 1 < rungs else "")
        ladder = f"a ladder of {rungs} m0 in [{m0s[0]:g}, {m0s[-1]:g}]{added}"
    return CaptureCurve(t=tuple(range(T + 1)), m_star=tuple(_m_star(cos2, lm)), m0s=tuple(m0s.tolist()), cos2=cos2,
                        m_star_replicas=tuple(tuple(_m_star(c, lm)) for c in rep),
                        direction=tuple(u.tolist()),
                        method=f"nonlinear DMFT from M0 = m0 e u^T (u = {np.round(u, 4).tolist()}) on "
                               f"{ladder}, one run each to T = {T} ({opts['paths']} paths in {replicas} replicas); "
                               "m*(t) by "
                               "geometric interpolation of cos^2(t) = 1/2 between rungs")


def _m_star(cos2: np.ndarray, lm: np.ndarray) -> list:
    """m*(t) from cos^2 (rungs x times) on the ladder ln m0 = lm (see :func:`capture_curve`)."""
    out: list[Optional[float]] = []
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


def _slope(m_star: Sequence, t1: int, t2: int):
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


def growth_rate(curve: CaptureCurve, t_range) -> GrowthRate:
    """gamma = -d ln m*/dT fitted over t in ``t_range`` = (t1, t2) on :func:`capture_curve`'s m*(t) (least squares
    on ln m*).  Standard error: the spread of the same fit on each DMFT replica's own m*(t) (its own M and C_theta),
    / sqrt(replicas), over the replicas whose m* is inside the ladder at >= 3 times of the range (at least 2; ``how``
    says how many); else the fit's residual error (how straight ln m* is, not the Monte-Carlo error; ``how`` says
    which). Needs m* inside the ladder at >= 3 times of the range.  gamma > 0: ever smaller kicks are captured as the
    horizon grows (the hard direction is dynamically unstable); gamma <= 0: they are not."""
    t1, t2 = (int(v) for v in t_range)
    g, ts, fit_se = _slope(curve.m_star, t1, t2)
    if g is None:
        raise TheorykitError(f"m*(t) is inside the ladder at {len(ts)} time(s) of [{t1}, {t2}] (need 3): widen the "
                             "ladder m0s or move the range")
    per = [_slope(m, t1, t2)[0] for m in curve.m_star_replicas]
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
    return GrowthRate(value=g, stderr=se, t_range=(ts[0], ts[-1]), points=len(ts), fit_stderr=fit_se,
                      per_replica=tuple(per), how=how)
# ------------------------------------------------------------------------------------------------ finite d
#: the finite-d ladder of initial hard overlaps (geometric; the 1/sqrt(d) scale of a random start lies inside for
#: d in 10 .. 10^5, and adjacent rungs are a factor 1.45 apart, so the interpolated m* is close to a bisection's)
FINITE_D_LADDER = (2e-3, 0.5, 16)
#: at width m >= 3 (several anchors, each run costs more): capture_curve's bracket search between the ends of
#: FINITE_D_WIDE_LADDER (steps of BRACKET_FACTOR from m*(horizon) at the nearest delta already solved, or from the
#: top), then FINITE_D_WIDE_REFINE bisections (a bracket of a factor 4^(1/4) = 1.41)
FINITE_D_WIDE_LADDER, FINITE_D_WIDE_REFINE = (2e-3, 0.5, 6), 2
#: at width m >= 3 the ladders' DMFT runs use FINITE_D_WIDE_LADDER_REPLICAS replicas of the same total paths: replicas
#: of fewer than FINITE_D_WIDE_REPLICA_PATHS paths overfit now and then from the pair direction at width 4
#: (docs/theory.md §5, "Any width"; tables/finite_d_wide_notes.md)
FINITE_D_WIDE_LADDER_REPLICAS, FINITE_D_WIDE_REPLICA_PATHS = 2, 8192
#: at width m >= 3 (a smooth network) every DMFT run uses direct Jacobian responses: Stein's, the default where the
#: whole batch's Jacobians do not fit, bias the capture runs into overfitting at width 4 (docs/theory.md §5, "Any
#: width", Responses; tables/finite_d_wide_notes.md)
FINITE_D_WIDE_RESPONSE = "direct"
#: the V_eff run goes first to min(horizon, FINITE_D_VEFF_FIRST) steps (the same random numbers as a run to the
#: horizon), and to the horizon only when V_eff is still known to 5% at its end (t_match is usually earlier)
FINITE_D_VEFF_FIRST = 48
#: finite_d's root finding stops when the bracket of P(capture) = 1/2 is narrower than FINITE_D_REFINE_TOL of delta,
#: or when the midpoint's interpolation error is below FINITE_D_BAND_FRACTION of its band's width (the replicas'
#: spread already makes it that uncertain; ends beyond the deltas solved counted at the last delta)
FINITE_D_REFINE_TOL, FINITE_D_BAND_FRACTION = 0.01, 0.1
#: replicas' relative spread of m*(horizon) above which a delta's prediction is flagged noise-limited
FINITE_D_NOISE_RSE = 0.25


@dataclass(frozen=True)
class FiniteD:
    """Finite-d answers from the DMFT (docs/theory.md §5, "At your d and horizon"; any width): for each delta and d, the
    probability that GD at dimension d has captured the hard direction (cos^2 > 1/2) by time t, for every t up to the
    horizon, with its band; the midpoint delta_1/2(d, horizon) and the escape time t_1/2(delta, d) read off it.

    deltas: the grid with the root finding's deltas (sorted); probability, low, high: (deltas, ds, horizon + 1) arrays;
    midpoints: [{d, horizon, midpoint, band [lo, hi], interpolation_error, note}]; escape_time: [{delta, d, t, band
    [early, late], note}] (t is None when P stays below 1/2 up to the horizon); per_delta: [{delta, v, v_stderr (m = 1;
    NaN for m = 2), V (V_eff at t_match, m x m), t_match, m_star (at the horizon, first ray), rays [{direction, m_star,
    m_star_spread}], m_star_spread (the replicas' relative spread, largest over the rays), noise_limited, error}];
    method: how it was computed."""

    deltas: tuple
    ds: tuple
    horizon: int
    probability: np.ndarray
    low: np.ndarray
    high: np.ndarray
    midpoints: tuple
    escape_time: tuple
    per_delta: tuple
    method: str

    def as_dict(self) -> dict:
        return {"deltas": list(self.deltas), "d": list(self.ds), "horizon": self.horizon,
                "finite_d": list(self.midpoints), "escape_time": list(self.escape_time),
                "per_delta": list(self.per_delta), "method": self.method}

    def curve(self, delta: float, d: int) -> dict:
        """{t, probability, low, high} (lists over t = 0 .. horizon) at one delta and d of the grid."""
        i, j = self.deltas.index(float(delta)), self.ds.index(int(d))
        return {"t": list(range(self.horizon + 1)), "probability": self.probability[i, j].tolist(),
                "low": self.low[i, j].tolist(), "high": self.high[i, j].tolist()}


#: rays of initial-overlap directions per delta at width m = 2, on the circle's fundamental domain under the problem's
#: symmetries (e -> -e for a link even along e; the exchange of two neurons with equal a, b and Sigma0)
FINITE_D_RAYS = 5
#: directions of the standard normal on the circle averaged over for P at m = 2 (a periodic trapezoid rule)
_CIRCLE_POINTS = 720
#: 1/m* stands in for "always captured" (below the ladder) when rays are interpolated; "never captured" (above it) is 0
_S_ALWAYS = 1e12


def symmetries(problem) -> tuple:
    """(flip, swap): GD's law is invariant under e -> -e when the link is even along the first hard direction e
    (checked at 512 random latent points and noises, to 1e-12), and under exchanging the neurons when m = 2 with
    equal second-layer weights, equal biases and an exchangeable Sigma0."""
    lk = problem.link_obj
    e = hard_subspace_basis(lk)[:, 0]
    rng = np.random.default_rng(0)
    z = rng.standard_normal((512, lk.k))
    eps = rng.standard_normal(512)
    try:
        y, y_flip = lk.response(z, eps), lk.response(z - 2 * np.outer(z @ e, e), eps)
        flip = bool(np.allclose(y, y_flip, rtol=1e-12, atol=1e-12))
    except TheorykitError:
        flip = False
    swap = False
    if problem.m == 2:
        a, b, S = problem.a_vector, problem.b_vector, problem.Sigma0_matrix
        swap = bool(a[0] == a[1] and b[0] == b[1] and S[0, 0] == S[1, 1])
    return flip, swap


def ray_angles(m: int, flip: bool, swap: bool, rays: int) -> np.ndarray:
    """Angles of the rays M0 = r e (cos a, sin a) computed per delta (m = 2; for m = 1, a in {0, pi} are the signs):
    evenly spread over the circle's fundamental domain under the symmetries, its ends included when they are mirror
    lines."""
    if m == 1:
        return np.array([0.0] if flip else [0.0, math.pi])
    if flip and swap:
        return np.linspace(math.pi / 4, 3 * math.pi / 4, rays)
    if swap:
        return np.linspace(math.pi / 4, 5 * math.pi / 4, rays)
    return np.linspace(0.0, math.pi if flip else 2 * math.pi, rays, endpoint=False)


def _orbit(angle: float, flip: bool, swap: bool) -> list:
    out = [angle]
    if flip:
        out.append(angle + math.pi)
    if swap:
        out.append(math.pi / 2 - angle)
    if flip and swap:
        out.append(3 * math.pi / 2 - angle)
    return [v % (2 * math.pi) for v in out]


def _ray_star(curve: CaptureCurve, t: int) -> tuple:
    """(1/m*, 1/ its smallest and 1/ its largest over the replicas) of one ray at time t: the capture strength, which
    is interpolated between rays (0 on a ray that never captures, where m* grows like 1/|angle - its angle|).  Outside
    the ladder: never captured gives 0 with the band up to the top rung's 1/m0; captured from the bottom rung gives
    _S_ALWAYS with the band down to the bottom rung's 1/m0."""
    m0s = curve.m0s
    cos2 = np.asarray(curve.cos2, dtype=float)[:, t]
    ms = curve.m_star[t]
    if ms is None:
        if np.all(cos2 < 0.5) or np.isnan(cos2).any():
            return 0.0, 1.0 / m0s[-1], 0.0
        return _S_ALWAYS, _S_ALWAYS, 1.0 / m0s[0]
    reps = [r[t] for r in curve.m_star_replicas if r[t] is not None] + [ms]
    return 1.0 / ms, 1.0 / min(reps), 1.0 / max(reps)


def capture_probabilities(rays: list, flip: bool, swap: bool, V: np.ndarray, V_se: np.ndarray, t_match: int,
                           d: int, classes: Optional[tuple] = None) -> tuple:
    """(P, low, high) over t from the capture ladders of the rays (docs/theory.md §3.2 and §5, the matched prediction
    with the horizon t).  The effective initial overlap vector is mu_eff = B g / sqrt(d), g ~ N(0, I_m), B B^T =
    V = V_eff(min(t, t_match)); it is captured by t iff its length exceeds m*(t) on its ray.  With g = rho w (w
    uniform on the sphere, rho^2 ~ chi2_m): P(t) = mean over w of P(chi2_m > d m*(t; B w)^2 / |B w|^2), over w =
    +-1 (m = 1: P(chi2_1 > d m*^2 / v)) or _CIRCLE_POINTS evenly spaced directions (m = 2; the capture strength
    1/m* interpolated linearly in the angle between the rays and their images under the symmetries, 0 on a ray that
    never captures), or m >= 3: SPHERE_POINTS scrambled-Sobol' directions, the strength interpolated from the rays
    (anchors: each curve's ``direction``) as a quadratic gauge sqrt(q^T G q) fitted to them plus the remainder
    interpolated piecewise linearly on the cones of the hull of their orbit images
    (:class:`theorykit.thresholds.directions.StrengthInterpolant`) under the group of ``flip`` and ``classes`` (the
    exchangeable neurons; default: none).  The band takes every ray's
    smallest and largest m*(t) over the replicas and V scaled by 1 -+ 2 relative standard errors (Frobenius)."""
    from scipy.stats import chi2

    from .directions import StrengthInterpolant, sphere_directions

    rays = [(float(a), c) for a, c in rays]
    m = V.shape[-1]
    T = np.asarray(rays[0][1].cos2).shape[1] - 1
    if m >= 3:
        group: tuple = tuple((j,) for j in range(m)) if classes is None else classes
        anchors = np.asarray([c.direction for _, c in rays], dtype=float)
        W = sphere_directions(m)
        interp = StrengthInterpolant(anchors, flip, group, always=_S_ALWAYS * (1 - 1e-9))
        at_k: dict = {}  # k -> the directions Bw/|Bw| prepared for interp (B changes only up to t_match)
    else:
        psi = np.array([0.0, math.pi]) if m == 1 else np.linspace(0, 2 * math.pi, _CIRCLE_POINTS, endpoint=False)
    P, lo, hi = np.zeros(T + 1), np.zeros(T + 1), np.zeros(T + 1)
    for t in range(T + 1):
        k = min(t, t_match)
        Vk = 0.5 * (V[k] + V[k].T)
        lam, Q = np.linalg.eigh(Vk)
        if not np.all(np.isfinite(lam)) or lam.min() <= 0:
            P[t], lo[t], hi[t] = math.nan, math.nan, math.nan
            continue
        rse = float(np.linalg.norm(V_se[k]) / np.linalg.norm(Vk))
        B = Q * np.sqrt(lam)
        if m >= 3:
            w = W
        else:
            w = np.cos(psi)[:, None] if m == 1 else np.column_stack([np.cos(psi), np.sin(psi)])
        Bw = w @ B.T
        scale2 = (Bw ** 2).sum(1)
        if m >= 3:
            q = Bw / np.sqrt(scale2)[:, None]
            if k not in at_k:
                at_k[k] = interp.prepare(q)
        else:
            phi = np.where(Bw[:, 0] >= 0, 0.0, math.pi) if m == 1 else np.arctan2(Bw[:, 1], Bw[:, 0]) % (2 * math.pi)
        stars = [_ray_star(c, t) for _, c in rays]
        out = []
        for which, fac in ((0, 1.0), (2, max(1.0 - 2 * rse, 1e-12)), (1, 1.0 + 2 * rse)):
            if m >= 3:
                ss = [st[which] for st in stars]
                strength = interp.evaluate(at_k[k], ss)
            else:
                xs, ys = [], []
                for (angle, _), st in zip(rays, stars):
                    for a in _orbit(angle, flip, swap):
                        xs.append(a)
                        ys.append(st[which])
                order = np.argsort(xs)
                strength = np.interp(phi, np.asarray(xs)[order], np.asarray(ys)[order], period=2 * math.pi)
            with np.errstate(divide="ignore"):
                r2 = np.where(strength >= _S_ALWAYS * (1 - 1e-9), 0.0, 1.0 / strength ** 2)
            out.append(float(np.mean(chi2.sf(d * r2 / (fac * scale2), m))))
        P[t], lo[t], hi[t] = out
    return P, lo, hi


def check_dims(ds) -> tuple:
    """The dimensions d >= 1 of a finite-d question, sorted and distinct (at least one)."""
    try:
        dims = tuple(sorted({check_int("d", v, 1) for v in ds}))
    except TypeError:
        raise TheorykitError(f"ds must be a list of integers d >= 1, got {ds!r}") from None
    if not dims:
        raise TheorykitError("ds must hold at least one dimension d")
    return dims


def matching_time(V: np.ndarray, V_se: np.ndarray, rse: float = HARD_RELIABLE_RSE) -> int:
    """t_match: the last t before the relative standard error of V_eff(t) (Frobenius norms; (T+1, m, m) arrays)
    exceeds ``rse`` (docs/theory.md §3.2, "Matched prediction").  V_eff is the ratio of C_mu to the growth of the
    initial overlap, in which the rare paths that make C_mu itself unreliable (``hard_reliable_until``) largely
    cancel; noise keeps entering the hard overlap while it is linear, so the latest reliable V_eff is the one to
    match."""
    num = np.sqrt((np.asarray(V_se, dtype=float) ** 2).sum(axis=(-2, -1)))
    den = np.sqrt((np.asarray(V, dtype=float) ** 2).sum(axis=(-2, -1)))
    bad = np.flatnonzero(~(num <= rse * den))
    return max(int(bad[0]) - 1, 0) if bad.size else len(den) - 1


def _never_captured(m0s, H: int, u, above: float) -> CaptureCurve:
    """The curve of a ray not run at this delta: it never captured by H from the top rung at ``above`` >= this delta
    (capture is taken to be monotone in delta, as in m0); cos^2 NaN, so its capture strength is 0."""
    return CaptureCurve(t=tuple(range(H + 1)), m_star=(None,) * (H + 1), m0s=(float(max(m0s)),),
                        cos2=np.full((1, H + 1), np.nan), direction=tuple(u),
                        method=f"not run: from the top rung m0 = {float(max(m0s)):g} it never captured by t = {H} at "
                               f"delta = {above:g} >= this delta (capture taken to be monotone in delta)")


def _ray_guess(at: dict, i: int, dl: float) -> Optional[float]:
    """m*(horizon) of ray i at delta ``dl`` guessed from the deltas already solved (``at``: delta -> (info, ...)):
    interpolated linearly in (ln delta, ln m*) between the nearest solved deltas on either side where the ray
    captured, else the nearest such delta's value; None where it captured at none."""
    pts = sorted((x, q[0]["rays"][i]["m_star"]) for x, q in at.items()
                 if not q[0]["error"] and q[0]["rays"][i]["m_star"] is not None)
    if not pts:
        return None
    below = [p for p in pts if p[0] <= dl]
    above = [p for p in pts if p[0] >= dl]
    if below and above and above[0][0] > below[-1][0]:
        (x0, m0), (x1, m1) = below[-1], above[0]
        w = math.log(dl / x0) / math.log(x1 / x0)
        return float(math.exp((1 - w) * math.log(m0) + w * math.log(m1)))
    return float(min(pts, key=lambda p: abs(math.log(p[0] / dl)))[1])


def _next_grid_delta(grid: tuple, at: dict, n_dims: int, H: int) -> Optional[float]:
    """The next delta of ``grid`` (sorted) to solve when the grid is searched by bisection (finite_d's
    scan="bisect"): for each d and each of P, its band's high and low end (in that order), the crossing of 1/2 at
    the horizon is located over the grid's indices (P taken as monotone in delta) -- by bisection between the
    nearest solved deltas whose values straddle 1/2; where none do, one grid step beyond the solved deltas (the
    band's ends, which lie near P's crossing, and P after the first delta) or by bisection towards the grid's end
    (P after that); None when every crossing is bracketed by adjacent grid deltas (or lies beyond the grid's
    ends)."""
    n = len(grid)
    solved = [k for k, x in enumerate(grid) if x in at and not at[x][0]["error"]]
    failed = {k for k, x in enumerate(grid) if x in at and at[x][0]["error"]}
    if not solved:
        free = [k for k in range(n) if k not in failed]
        return grid[free[len(free) // 2]] if free else None
    for j in range(n_dims):
        for which in (1, 3, 2):
            ks = [k for k in solved if math.isfinite(float(at[grid[k]][which][j, H]))]
            if not ks:
                continue
            v = [float(at[grid[k]][which][j, H]) - 0.5 for k in ks]
            i = crossing_index(v, 0.0)
            step = False  # one grid step beyond the solved deltas instead of bisection
            if i is not None:
                a, b = ks[i], ks[i + 1]
            else:
                step = which != 1 or len(solved) == 1
                a, b = (-1, ks[0]) if v[0] >= 0 else (ks[-1], n)  # the crossing below / above every solved delta
            inside = [k for k in range(a + 1, b) if k not in failed and k not in solved]
            if inside:
                return grid[(inside[-1] if b == ks[0] else inside[0]) if step else inside[len(inside) // 2]]
    return None


class _Settled(Exception):
    """finite_d's root finding has refined the midpoint enough (its interpolation error against the band)."""


def _crossings(at: dict, j: int, H: int) -> tuple:
    """(midpoint, band's low end, band's high end, interpolation error) at the j-th d from the deltas solved so far
    (``at``: delta -> (info, P, LO, HI)): where P(capture by H), its high and its low curve cross 1/2 (None where one
    does not cross on the deltas solved), and :func:`theorykit.rules.interpolation_error` of the midpoint (NaN
    without a third point)."""
    xs = sorted(x for x in at if not at[x][0]["error"])
    m, a, b = (crossing(xs, [float(at[x][w][j, H]) for x in xs]) for w in (1, 3, 2))
    err = math.nan
    y = [float(at[x][1][j, H]) - 0.5 for x in xs]
    k = crossing_index(y, 0.0)
    if m is not None and k is not None:
        err = interpolation_error(m, (xs[k], y[k]), (xs[k + 1], y[k + 1]), list(zip(xs, y)))
    return m, a, b, err


def _finite_d_at(problem, dl: float, H: int, dims: tuple, rays_u: list, m0s, sym: tuple, ladder_refine: int,
                 ladder: dict, opts: dict, tick, guesses=None, never=None) -> tuple:
    """One delta of :func:`finite_d`: (info, P, LO, HI) with P, LO, HI of shape (len(dims), H + 1) (NaN and the
    error in info when the DMFT diverges).  ladder: the ladders' DMFT options over ``opts`` (paths, replicas) and
    capture_curve's search; guesses: per ray, m*(H) at a neighbouring delta (the bracket search's start) or None;
    never: per ray, a larger delta at which its top rung never captured (the ray is not run here) or None."""
    pr = problem.replace(delta=dl, steps=H)
    info: dict[str, Any] = {"delta": dl, "v": math.nan, "v_stderr": math.nan, "V": None, "t_match": None,
                            "m_star": None, "rays": [], "m_star_spread": math.nan, "noise_limited": None, "error": ""}
    P, LO, HI = (np.full((len(dims), H + 1), np.nan) for _ in range(3))
    try:
        T1 = min(H, FINITE_D_VEFF_FIRST)
        r = dmft(pr.replace(steps=T1), bias_check=False, horizon=H, **opts)
        if r.status == "ok" and T1 < H and matching_time(np.asarray(r.V_eff, dtype=float),
                                                         np.asarray(r.stderr["V_eff"], dtype=float)) >= T1:
            r = dmft(pr, bias_check=False, **opts)  # V_eff is still reliable at T1: the run to the horizon
            T1 = H
        if tick:
            tick()
        if r.status != "ok":
            raise DivergenceError(f"the DMFT did not reach t = {T1} "
                                  f"({r.diverged_at['hint']})")  # type: ignore[index]  # set when diverged
        lopts = dict(opts, **ladder)
        # a guess from the deltas already solved starts the bracket search with the search's final resolution
        fine = BRACKET_FACTOR ** (0.5 ** ladder_refine)
        curves = [(ang, _never_captured(m0s, H, u, never[i]) if never is not None and never[i] is not None else
                   capture_curve(pr, H, m0s, direction=u, refine=ladder_refine, on_solve=tick,
                                 guess=None if guesses is None else guesses[i],
                                 step=BRACKET_FACTOR if guesses is None or guesses[i] is None else fine, **lopts))
                  for i, (ang, u) in enumerate(rays_u)]
    except DivergenceError as err:
        info["error"] = str(err).splitlines()[0]
        return info, P, LO, HI
    V = np.asarray(r.V_eff, dtype=float)
    V_se = np.asarray(r.stderr["V_eff"], dtype=float)
    tm = matching_time(V, V_se)
    spreads, ray_info = [], []
    for i, (ang, c) in enumerate(curves):
        ms = c.m_star[H]
        reps = [q[H] for q in c.m_star_replicas if q[H] is not None]
        spreads.append(float(np.std(reps, ddof=1) / np.mean(reps)) if len(reps) > 1 else math.nan)
        top = np.asarray(c.cos2, dtype=float)[-1]
        ray_info.append({"direction": list(c.direction), "m_star": ms, "m_star_spread": spreads[-1],
                         "never": bool(ms is None and not np.nanmax(top, initial=0.0) >= 0.5),
                         "run": never is None or never[i] is None})
    finite = [v for v in spreads if math.isfinite(v)]
    spread = max(finite) if finite else math.nan
    info.update(v=float(V[tm, 0, 0]) if problem.m == 1 else math.nan,
                v_stderr=float(V_se[tm, 0, 0]) if problem.m == 1 else math.nan, V=V[tm].tolist(),
                t_match=tm, m_star=ray_info[0]["m_star"], rays=ray_info, m_star_spread=spread,
                noise_limited=bool(spread > FINITE_D_NOISE_RSE) if math.isfinite(spread) else None)
    flip, swap, classes = sym
    for j, d in enumerate(dims):
        P[j], LO[j], HI[j] = capture_probabilities(curves, flip, swap, V, V_se, tm, d, classes=classes)
    return info, P, LO, HI


def finite_d_paths(problem, replicas: int = defaults.THRESHOLD_REPLICAS, paths: Optional[int] = None) -> int:
    """The DMFT paths (total over ``replicas``) of the finite-d answer's runs (:func:`finite_d`,
    :func:`theorykit.thresholds.finite_d_midpoint`): ``paths`` when given, else THRESHOLD_PATHS, raised for a kinked
    activation or loss to ``replicas`` x KINKED_REPLICA_PATHS (Stein responses' noise biases C_theta upwards, which
    shortens the time over which V_eff is known and, from a small overlap, decides capture)."""
    return paths if paths is not None else max(defaults.THRESHOLD_PATHS, _kinked_floor(problem, replicas))


def _kinked_floor(problem, replicas: int) -> int:
    """The fewest paths ``replicas`` replicas of a capture run may hold: replicas x KINKED_REPLICA_PATHS for a kinked
    activation or loss (Stein responses), else 0."""
    return int(replicas) * defaults.KINKED_REPLICA_PATHS if problem.network.kinked else 0


def finite_d(problem, deltas, ds, horizon: int, *, paths: Optional[int] = None,
             replicas: int = defaults.THRESHOLD_REPLICAS, seed: int = defaults.DMFT_SEED, m0s=None,
             rays: int = FINITE_D_RAYS, refine: int = 3, ladder_refine: Optional[int] = None,
             ladder_paths: Optional[int] = None, ladder_replicas: Optional[int] = None, scan: str = "grid",
             progress: bool = False) -> FiniteD:
    """What GD at dimension d does by a horizon, from the DMFT (any width m).

    P(capture by t) = P(mu_eff beyond m* on its ray), mu_eff ~ N(0, V_eff(min(t, t_match)) / d); for m = 1,
    P(chi2_1 > d m*(t)^2 / v_eff) (docs/theory.md §5, "At your d and horizon", and the matched prediction of
    docs/theory.md §3.2).

    Per delta of ``deltas``: one DMFT run with the linear hard process (V_eff(t), the covariance of the effective
    initial overlap vector, and the time ``hard_reliable_until`` up to which the linear process is trusted), and for
    each ray u of initial-overlap directions a ladder of nonlinear DMFT runs from M0 = m0 e u^T (``m0s``, default
    FINITE_D_LADDER), each to ``horizon`` (:func:`theorykit.thresholds.capture_curve`: m*(t; u) for every t at once).
    m = 1: u = +1 (and -1 unless the link is even along e).  m = 2: ``rays`` angles on the fundamental domain of the
    circle under the problem's symmetries (:func:`symmetries`).  m >= 3: ``rays`` anchor directions spread over the
    sphere's fundamental domain under the flip and the exchange of equal neurons
    (:func:`theorykit.thresholds.directions.anchor_directions`), each with the rungs that bracket m*(horizon)
    (capture_curve's search="bracket" between the ends of FINITE_D_WIDE_LADDER, from m*(horizon) at the nearest delta
    already solved, and ``ladder_refine`` bisections; a ray whose top rung never captured at a larger delta already
    solved is not run, the deltas being solved from the largest down), the capture strength 1/m* interpolated
    between them.  Then for every d of ``ds`` and t <= horizon
    P(capture by t) as above (see :func:`capture_probabilities`).  Read off it: the midpoint delta_1/2(d, horizon)
    where P crosses 1/2 along the deltas, found by root finding (``refine``; band: where the band's ends cross, widened
    by the last bracket's interpolation error, :func:`theorykit.rules.interpolation_error`), and the escape time
    t_1/2(delta, d), the first t with P >= 1/2 (band: the first t where the high and the low end reach 1/2).  A delta
    whose DMFT diverges (GD itself does) keeps its error and P = NaN; the others go on.

    Parameters
    ----------
    problem : Problem
        A :class:`theorykit.Problem` with constant steps, no M0 (its delta and steps are replaced).
    deltas : sequence of float
        The sample ratios.
    ds : sequence of int
        The dimensions d >= 1.
    horizon : int
        The horizon T >= 1.
    paths, replicas, seed : int
        The DMFT's; ``paths`` None: :func:`finite_d_paths` (more for a kinked activation or loss).
    m0s : sequence of float, optional
        The ladder of initial overlaps (default FINITE_D_LADDER; m >= 3: FINITE_D_WIDE_LADDER).
    rays : int
        Directions for m >= 2 (>= 2): rays on the circle (m = 2) or anchors on the sphere (m >= 3).
    ladder_refine : int, optional
        Bisection rungs per ladder where cos^2(horizon) crosses 1/2 (default 0 for m <= 2, FINITE_D_WIDE_REFINE
        for m >= 3).
    ladder_paths : int, optional
        Paths of the ladders' DMFT runs (default ``paths``; a kinked activation or loss at least ``ladder_replicas``
        x KINKED_REPLICA_PATHS: Stein responses' noise biases C_theta upwards, which decides capture near m*).
    ladder_replicas : int, optional
        Replicas of the ladders' DMFT runs (default ``replicas``; m >= 3: FINITE_D_WIDE_LADDER_REPLICAS, so that each
        holds >= FINITE_D_WIDE_REPLICA_PATHS paths at the default paths; fewer are noted in ``method``).
    scan : {"grid", "bisect"}
        "grid" solves every delta of ``deltas`` (from the largest down); "bisect" only those that locate, for each d,
        where P(capture by the horizon) and its band's ends cross 1/2: a bisection over the grid's indices (P taken
        as monotone in delta), with single grid steps beyond the solved deltas for the band's ends and P's second
        delta (:func:`_next_grid_delta`), so about log2(len(deltas)) + 1 deltas instead of all, 3 for a threshold
        near the grid's middle; the others are not in the result.
    refine : int
        Root-finding steps per d after the grid (0..20): a safeguarded secant on P(capture by the horizon) = 1/2 in
        the grid's bracket, each step a new delta (its DMFT and ladder), until the bracket is narrower than
        FINITE_D_REFINE_TOL of delta or the midpoint's interpolation error is below FINITE_D_BAND_FRACTION of the
        band's width.  The new deltas join ``deltas`` (sorted) and every array.
    progress : bool
        Draw a progress bar on stderr.

    Returns
    -------
    FiniteD
        ``probability``, ``low``, ``high`` ((deltas, ds, horizon + 1) arrays), ``midpoints`` ([{d, horizon,
        midpoint, band, note}]), ``escape_time`` ([{delta, d, t, band, note}]), ``per_delta`` and ``method``.

    Raises
    ------
    TheorykitError
        Not a Problem; a schedule or an M0; a link with no hard direction; bad deltas, ds, horizon or rays.

    Examples
    --------
    >>> import theorykit as tk
    >>> pp = tk.Problem("gelu", "phase-retrieval", delta=8.0, eta=1.0, steps=10)
    >>> fd = tk.finite_d(pp, [4.0, 16.0], [100], 10, paths=1024, replicas=2, m0s=[0.01, 0.05, 0.2, 0.5])
    >>> fd.probability.shape[1:], [m["d"] for m in fd.midpoints], len(fd.deltas) >= 2
    ((1, 11), [100], True)
    """
    from ..problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"finite_d takes a theorykit.Problem, got {type(problem).__name__}")
    if problem.schedule is not None or problem.M0 is not None:
        raise TheorykitError("finite_d needs constant-step GD from a random start (a Problem with eta, without M0)")
    if hard_subspace_basis(problem.link_obj).shape[1] == 0:
        raise TheorykitError("this link has no hard direction: nothing to capture")
    grid = tuple(sorted(float(v) for v in check_deltas(deltas, at_least=1)))
    dims = check_dims(ds)
    H = check_int("horizon", horizon, 1)
    paths = finite_d_paths(problem, replicas, None if paths is None else check_int("paths", paths, 2))
    rays = check_int("rays", rays, 2)
    refine = check_int("refine", refine, 0, 20)
    if scan not in ("grid", "bisect"):
        raise TheorykitError(f"scan must be 'grid' or 'bisect', got {scan!r}")
    wide = problem.m >= 3
    if ladder_refine is None:
        ladder_refine = FINITE_D_WIDE_REFINE if wide else 0
    ladder_refine = check_int("ladder_refine", ladder_refine, 0, 20)
    if ladder_replicas is None:
        ladder_replicas = min(FINITE_D_WIDE_LADDER_REPLICAS, replicas) if wide else replicas
    ladder_replicas = check_int("ladder_replicas", ladder_replicas, 2)
    if ladder_paths is None:
        ladder_paths = max(paths, _kinked_floor(problem, ladder_replicas))
    ladder = {"paths": ladder_paths, "replicas": ladder_replicas, "search": "bracket" if wide else "ladder"}
    if m0s is None:
        lo_, hi_, k_ = FINITE_D_WIDE_LADDER if wide else FINITE_D_LADDER
        m0s = np.geomspace(lo_, hi_, k_)
    rungs = len(list(m0s))
    flip, swap = symmetries(problem)
    classes = neuron_classes(problem)
    if wide:
        rays_u = [(float(i), u.tolist()) for i, u in enumerate(anchor_directions(problem.m, flip, classes, rays))]
    else:
        rays_u = [(float(a), [math.cos(a)] if problem.m == 1 else [math.cos(a), math.sin(a)])
                  for a in ray_angles(problem.m, flip, swap, rays)]
    per_ray = 3 + ladder_refine if wide else rungs + ladder_refine  # wide: about 3 rungs to bracket m*
    scanned = len(grid) if scan == "grid" else min(len(grid), math.ceil(math.log2(len(grid))) + 2)
    bar = (Progress((scanned + refine * len(dims)) * (len(rays_u) * per_ray + 1),
                    label="finite-d prediction", unit="DMFT solves") if progress else None)
    tick = bar.tick if bar else None

    opts: dict[str, Any] = dict(paths=paths, replicas=replicas, seed=seed)
    if wide and not problem.network.kinked:
        opts["response"] = FINITE_D_WIDE_RESPONSE
    at: dict[float, tuple] = {}  # delta -> (info, P, LO, HI), each (len(dims), H + 1)

    def solve(dl: float) -> None:
        done = [x for x in at if not at[x][0]["error"]]
        guesses = never = None
        if wide and done:  # the bracket search starts from m*(horizon) guessed from the deltas already solved
            guesses = [_ray_guess(at, i, dl) for i in range(len(rays_u))]
            # a ray whose top rung never captured at a larger delta is not run (capture is monotone in delta)
            never = [next((x for x in sorted(done) if x >= dl and at[x][0]["rays"][i]["never"]
                           and at[x][0]["rays"][i]["run"]), None) for i in range(len(rays_u))]
        at[dl] = _finite_d_at(problem, dl, H, dims, rays_u, m0s, (flip, swap, classes), ladder_refine, ladder,
                              opts, tick, guesses, never)

    try:
        if scan == "bisect":
            while (nxt := _next_grid_delta(grid, at, len(dims), H)) is not None:
                solve(nxt)
        else:
            # from the largest delta down: at width >= 3 a ray that never captured at a larger delta is not run at a
            # smaller one, so the deltas below the crossing cost little more than their V_eff run
            for dl in sorted(grid, reverse=True):
                solve(dl)
        for j in range(len(dims)):  # root finding on P(capture by H) = 1/2 at each d (P is smooth in delta)
            xs = sorted(x for x in at if not at[x][0]["error"])
            ys = [float(at[x][1][j, H]) - 0.5 for x in xs]
            i = crossing_index(ys, 0.0)
            if refine and i is not None and min(abs(ys[i]), abs(ys[i + 1])) > 0:

                def f(x: float, j: int = j) -> float:
                    solve(x)
                    if at[x][0]["error"]:
                        raise DivergenceError(at[x][0]["error"])
                    m, lo_, hi_, err = _crossings(at, j, H)
                    ok = [v for v in at if not at[v][0]["error"]]  # a band's end beyond them: counted at the last
                    width = (max(ok) if hi_ is None else hi_) - (min(ok) if lo_ is None else lo_)
                    if m is not None and math.isfinite(err) and err <= FINITE_D_BAND_FRACTION * width:
                        raise _Settled  # the interpolation's error is already small against the band
                    return float(at[x][1][j, H]) - 0.5

                try:
                    secant_root(f, xs[i], xs[i + 1], f_lo=ys[i], f_hi=ys[i + 1], tol=FINITE_D_REFINE_TOL * xs[i + 1],
                                max_evaluations=refine)
                except (TheorykitError, _Settled):
                    pass  # a failed delta keeps its error (per_delta) or its NaN P; the midpoint comes from the rest
    finally:
        if bar:
            bar.close()
    deltas = tuple(sorted(at))
    P = np.stack([at[x][1] for x in deltas])
    LO = np.stack([at[x][2] for x in deltas])
    HI = np.stack([at[x][3] for x in deltas])
    per = [at[x][0] for x in deltas]
    mids, esc = [], []
    ok = [i for i, q in enumerate(per) if not q["error"]]
    for j, d in enumerate(dims):
        x = [deltas[i] for i in ok]
        m, a, b, err = _crossings(at, j, H)
        widen = err if math.isfinite(err) else 0.0
        note = "" if m is not None else "P does not cross 1/2 on the delta grid at this horizon: widen the deltas"
        if m is not None and x:
            ends = [f"its low end lies below the grid's smallest delta {x[0]:g} (the band's high P is above 1/2 there)"
                    if a is None else "",
                    f"its high end lies above the grid's largest delta {x[-1]:g} (the band's low P stays below 1/2)"
                    if b is None else ""]
            if any(ends):
                note = "band: " + "; ".join(e for e in ends if e) + " (NaN: widen the deltas)"
        mids.append({"d": d, "horizon": H, "midpoint": math.nan if m is None else m,
                     "band": [math.nan if a is None else a - widen, math.nan if b is None else b + widen],
                     "interpolation_error": err, "note": note})
        for i in ok:
            t, early, late = (first_passage(arr[i, j]) for arr in (P, HI, LO))
            esc.append({"delta": deltas[i], "d": d, "t": t, "band": [early, late],
                        "note": "" if t is not None else f"P(capture) < 1/2 up to the horizon {H}"})
    exchange = swap or (wide and any(len(c) > 1 for c in classes))
    sym = ", ".join(n for n, on in (("e -> -e", flip), ("neuron exchange", exchange)) if on) or "none"
    method = (f"per delta: one DMFT run with the linear hard process for V_eff, and per ray u of initial-overlap "
              f"directions ({len(rays_u)} ray(s); symmetries used: {sym}) "
              + (f"the nonlinear DMFT runs from M0 = m0 e u^T that bracket m*(T; u) (m0 in [{float(min(m0s)):g}, "
                 f"{float(max(m0s)):g}], from the top in steps of a factor {BRACKET_FACTOR:g}, or from m*(T; u) "
                 "interpolated between the deltas already solved in steps of a factor "
                 f"{BRACKET_FACTOR ** (0.5 ** ladder_refine):.3g} squared each time; then bisections to a bracket of "
                 f"a factor {BRACKET_FACTOR ** (0.5 ** ladder_refine):.3g}; a ray whose top rung never "
                 "captured at a larger delta is not run, capture being taken as monotone in delta)" if wide else
                 f"a ladder of {rungs} nonlinear DMFT runs from M0 = m0 e u^T (m0 in [{float(min(m0s)):g}, "
                 f"{float(max(m0s)):g}], geometric"
                 + (f", and {ladder_refine} bisection rung(s) at cos^2(T) = 1/2" if ladder_refine else "") + ")")
              + f" to t = {H}"
              + (f" (a run stops once cos^2 >= {CAPTURE_STOP[0]:g} has held {CAPTURE_STOP[1]} steps on a replica "
                 "and is >= 1/2 on all: captured)" if wide else "")
              + ", m*(t; u) by geometric interpolation of cos^2 = 1/2"
              + ("; the capture strength 1/m* between the anchor rays on the sphere: a quadratic gauge "
                 "sqrt(u^T G u) fitted to them (where they determine one) plus the rest interpolated piecewise "
                 "linearly on the cones of the hull of their orbit images (inverse-distance weights where the hull "
                 "fails)" if wide else "")
              + f"; {paths} paths in {replicas} replicas"
              + (f" ({ladder_paths} in {ladder_replicas} for the ladders)"
                 if (ladder_paths, ladder_replicas) != (paths, replicas) else "")
              + (f" (fewer than {FINITE_D_WIDE_REPLICA_PATHS} paths per ladder replica: at width 4 such replicas "
                 "blew up, raise paths)" if wide and ladder_paths // ladder_replicas < FINITE_D_WIDE_REPLICA_PATHS
                 else "")
              + (f", {opts['response']} responses" if "response" in opts else "") + f", seed {seed}; "
              "P(capture by t) = P(mu_eff beyond m*(t) on its ray), mu_eff ~ N(0, V_eff(min(t, t_match)) / d), "
              "t_match = the last t with V_eff known to 5% (docs/theory.md §3.2, §5; m = 1: "
              "P(chi2_1 > d m*^2 / v_eff)); band: "
              "the replicas' m* and V_eff +- 2 se (not the rung interpolation), widened by the midpoint's "
              "interpolation error; midpoint: the root of P(capture by the horizon) = 1/2, bracketed on the delta "
              + ("grid (searched by bisection over its indices for the crossings of P and of its band's ends, with "
                 "single grid steps beyond the deltas solved for the band's ends and P's second delta, P taken as "
                 "monotone in delta; the grid's other deltas not solved)" if scan == "bisect" else "grid")
              + f" and refined by up to {refine} safeguarded secant steps per d (each a new delta with its own "
              f"DMFT runs; stopped once the bracket is below {FINITE_D_REFINE_TOL:g} of delta or the "
              f"interpolation error below {FINITE_D_BAND_FRACTION:g} of the band's width), then the linear "
              "interpolation of P in the last bracket; escape time: the first t with "
              "P >= 1/2")
    return FiniteD(deltas=deltas, ds=dims, horizon=H, probability=P, low=LO, high=HI, midpoints=tuple(mids),
                   escape_time=tuple(esc), per_delta=tuple(per), method=method)
