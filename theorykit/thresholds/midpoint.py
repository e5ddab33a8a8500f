"""The finite-d midpoint delta_1/2(d, T) by root finding on one DMFT run per delta (docs/theory.md §5, "At your d
and horizon", the median start).

For width m = 1 and a link even along its hard direction, the matched prediction of :mod:`.capture` is
P(capture by T) = P(chi2_1 > d m*(T)^2 / v_eff).  It equals 1/2 exactly when m*(T) equals the median effective
initial overlap

    m_1/2(delta, d) = sqrt(q_1/2 v_eff(t_match) / d),      q_1/2 = the median of chi2_1,

that is, when the nonlinear DMFT started from M0 = m_1/2 e sits at cos^2 = 1/2 at the horizon.  So the midpoint is
the root in delta of

    g(delta) = cos^2_T(delta; M0 = m_1/2(delta, d) e) - 1/2,

two DMFT runs per delta (the linear hard process for v_eff, then the run from m_1/2), instead of a ladder of m0 per
delta: no interpolation between rungs, and about eight times fewer runs.  The same run gives the escape time
t_1/2(delta, d), the first t with cos^2_t >= 1/2 (exact from t_match on, where v_eff is matched).

Where m_1/2 >= 1 the median start does not apply.  If the linear hard process's own median overlap,
cos^2_lin(t) = x / (x + |M_t|^2 + C_theta(t, t)) with x = q_1/2 C_mu(t) / d, reaches 1/2 by T, the linear phase alone
captures (the range's top moves in); if it does not (the hard direction contracts: V_eff = C_mu / C_init is then no
initial overlap), g(delta) = cos^2_lin(T) - 1/2 (docs/theory.md §5).

A run that blows up before T is read as GD's success is (an escape before a divergence counts): the run from m_1/2
is captured iff its cos^2 passed 1/2 before the blow-up; a random start that blows up is answered by the linear
process's median overlap up to then (docs/theory.md §5, "the median start").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .. import defaults
from .._checks import Progress, check_int
from ..dynamics import dmft
from ..dynamics.hard_process import hard_subspace_basis
from ..errors import DivergenceError, TheorykitError
from ..rules import crossing, first_passage, interpolation_error, secant_root
from .capture import check_dims, finite_d_paths, matching_time, overlap_cos2, symmetries

#: the median of chi2_1 (scipy.stats.chi2.ppf(0.5, 1))
CHI2_1_MEDIAN = 0.45493642311957283
#: the root finding stops when the bracket is narrower than this fraction of delta
MIDPOINT_TOL = 0.01
#: the most deltas evaluated per d (two DMFT runs each)
MIDPOINT_MAX_EVALUATIONS = 12
#: how often a bracket end whose DMFT diverges is moved a quarter of the way (in ln delta) towards the other
END_RETRIES = 3


def _before_divergence(c: np.ndarray, step: int, H: int) -> np.ndarray:
    """cos^2 over t = 0 .. H (last axis) from a run that diverged at ``step``: its values up to two steps before the
    blow-up (the step before it is already off), then their maximum held to H.  GD's success counts an escape
    before a divergence (theorykit.referee.sweeps.SUCCESS), so such a run is captured by H iff it passed 1/2 before
    it blew up, and not captured otherwise (docs/theory.md §5, "the median start")."""
    c = np.asarray(c, dtype=float)
    keep = max(min(int(step) - 1, c.shape[-1]), 1)
    out = np.empty(c.shape[:-1] + (H + 1,))
    out[..., :keep] = c[..., :keep]
    with np.errstate(invalid="ignore"):
        out[..., keep:] = np.nanmax(np.where(np.isfinite(c[..., :keep]), c[..., :keep], np.nan), axis=-1,
                                    keepdims=True)
    return out


class _CapturedAtStart(TheorykitError):
    """The median effective overlap m_1/2 is >= 1 at this delta: at this d the hard direction is captured from the
    start, so the range's top end moves in (not an error of the user's input)."""
#: the step in ln m0 of the extra run that measures d cos^2 / d ln m0 (v_eff's error in the band)
SLOPE_STEP = 0.25


@dataclass(frozen=True)
class FiniteDMidpoint:
    """delta_1/2(d, T) from the median start (docs/theory.md §5): per d, the root of g(delta) = cos^2_T - 1/2.

    midpoints: [{d, horizon, midpoint, band [lo, hi], stderr, interpolation_error, note}]; escape_time: [{delta, d, t,
    band [early, late], note}] at every delta evaluated; evaluations: [{delta, d, v_eff, v_stderr, t_match, m_half,
    cos2 (at the horizon), cos2_stderr, truncated_at_n (n = delta d: both runs are the DMFT of n samples), from
    ("median start", "linear process" where m_1/2 >= 1 and the linear process's median cos^2 stays below 1/2,
    "median start, diverged: ..." or "random start, diverged at step s" where a run blew up before the horizon: cos2
    is then the largest before the blow-up; v_eff is NaN and t_match the step for a random start), error}] in the
    order evaluated; method: how it was computed."""

    ds: tuple
    horizon: int
    midpoints: tuple
    escape_time: tuple
    evaluations: tuple
    method: str

    def as_dict(self) -> dict:
        return {"d": list(self.ds), "horizon": self.horizon, "finite_d": list(self.midpoints),
                "escape_time": list(self.escape_time), "evaluations": list(self.evaluations), "method": self.method}


def median_start_applies(problem) -> Optional[str]:
    """None when :func:`finite_d_midpoint` applies to ``problem``; else the reason (one line)."""
    if problem.m != 1:
        return f"the median start is built for width m = 1 (got m = {problem.m}): use finite_d's ladder"
    if hard_subspace_basis(problem.link_obj).shape[1] == 0:
        return "this link has no hard direction: nothing to capture"
    if not symmetries(problem)[0]:
        return ("the link is not even along its hard direction, so P(capture) averages two signs of the start and "
                "is not 1/2 at one start: use finite_d's ladder")
    return None


def finite_d_midpoint(problem, ds, horizon: int, *, delta_range=(1.0, 40.0), paths: Optional[int] = None,
                      replicas: int = defaults.THRESHOLD_REPLICAS, seed: int = defaults.DMFT_SEED,
                      progress: bool = False) -> FiniteDMidpoint:
    """The midpoint delta_1/2(d, T) where P(GD at dimension d captures the hard direction by T) = 1/2.

    Solves g(delta) = cos^2_T(delta; M0 = m_1/2 e) - 1/2 = 0 with m_1/2 = sqrt(q_1/2 v_eff(t_match) / d)
    (docs/theory.md §5, "the median start"; the root of the matched prediction of §3.2 without a ladder), in ln delta
    by a safeguarded secant (:func:`theorykit.rules.secant_root`) from the ends of ``delta_range`` until the bracket
    is narrower than MIDPOINT_TOL of delta.  Common random numbers (one seed for every run) make g smooth in delta.

    Parameters
    ----------
    problem : Problem
        Width m = 1, a link even along its hard direction, constant steps, no M0 (delta and steps are replaced).
    ds : sequence of int
        The dimensions d >= 1.
    horizon : int
        The horizon T >= 1.
    delta_range : (float, float)
        The bracket (lo, hi), 0 < lo < hi; a midpoint outside it is reported as such in ``note``.
    paths, replicas, seed : int
        The DMFT's; ``paths`` None: :func:`finite_d_paths` (THRESHOLD_PATHS, or ``replicas`` x KINKED_REPLICA_PATHS
        for a kinked activation or loss, whose Stein responses bias C_theta upwards with their noise).
    progress : bool
        Draw a progress bar on stderr.

    Returns
    -------
    FiniteDMidpoint
        Per d the midpoint with its band: +- 2 standard errors (the root of each replica's own cos^2 - 1/2 across
        the deltas evaluated, spread / sqrt(replicas)), plus the shift that v_eff +- 2 standard errors cause
        (through d cos^2 / d ln m0, one more run), plus the last bracket's interpolation error
        (:func:`theorykit.rules.interpolation_error`).

    Raises
    ------
    TheorykitError
        Not a Problem; width m != 1; a link not even along its hard direction; a schedule or an M0; bad ds, horizon
        or delta_range.

    Examples
    --------
    >>> import theorykit as tk
    >>> pp = tk.Problem("gelu", "phase-retrieval", delta=8.0, eta=1.0, steps=10)
    >>> fm = tk.thresholds.finite_d_midpoint(pp, [100], 10, delta_range=(4.0, 16.0), paths=1024, replicas=2)
    >>> [m["d"] for m in fm.midpoints], 4.0 <= fm.midpoints[0]["midpoint"] <= 16.0
    ([100], True)
    """
    from ..problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"finite_d_midpoint takes a theorykit.Problem, got {type(problem).__name__}")
    why = median_start_applies(problem)
    if why:
        raise TheorykitError(why)
    if problem.schedule is not None or problem.M0 is not None:
        raise TheorykitError("finite_d_midpoint needs constant-step GD from a random start (a Problem with eta, "
                             "without M0)")
    dims = check_dims(ds)
    H = check_int("horizon", horizon, 1)
    paths = finite_d_paths(problem, replicas, None if paths is None else check_int("paths", paths, 2))
    try:
        lo, hi = (float(v) for v in delta_range)
    except (TypeError, ValueError):
        raise TheorykitError(f"delta_range must be two numbers lo < hi, got {delta_range!r}") from None
    if not (0 < lo < hi and math.isfinite(hi)):
        raise TheorykitError(f"delta_range must satisfy 0 < lo < hi, got {delta_range!r}")
    e = hard_subspace_basis(problem.link_obj)[:, 0]
    opts: dict[str, Any] = dict(paths=paths, replicas=replicas, seed=seed, bias_check=False, mirror=True)
    bar = (Progress(len(dims) * (2 * MIDPOINT_MAX_EVALUATIONS + 1), label="finite-d midpoint", unit="DMFT solves")
           if progress else None)
    tick = bar.tick if bar else (lambda: None)
    # (delta, d) -> (v, v_se, t_match): the linear hard process of the DMFT of n = delta d samples
    hard: dict[Any, tuple] = {}
    hints: list = []  # the solver's diagnosis of each divergence, in order (the note quotes the last one)
    # the runs that blew up before the horizon (answered by _before_divergence): (delta, what happened, whether a
    # run from m_1/2 blew up before capture), for the evaluations and the note
    diverged: list = []

    def veff(dl: float, d: int) -> tuple:
        if (dl, d) not in hard:
            r = dmft(problem.replace(delta=dl, steps=H), d=d, **opts)
            tick()
            step = None
            if r.status != "ok":  # GD from a random start blows up at this step: captured only if the linear
                # process's median overlap passed 1/2 before it (_before_divergence)
                hints.append(r.diverged_at["hint"])  # type: ignore[index]
                step = int(r.diverged_at["step"])  # type: ignore[index]
                diverged.append((dl, f"the DMFT from the random start stopped at step {step}", False))
            V, V_se = np.asarray(r.V_eff, dtype=float), np.asarray(r.stderr["V_eff"], dtype=float)
            tm = matching_time(V, V_se) if step is None else 0
            # C_mu_init(t_match) / Sigma_0: below 1 the initial overlap has decayed (the hard direction contracts)
            init = np.asarray(r.C_mu_init, dtype=float).reshape(len(V), -1)[:, 0]
            # the linear process's own median cos^2 over t, q_1/2 C_mu(t) / d against the Gram's other part (used
            # where m_1/2 >= 1); per replica with each replica's Gram
            x = CHI2_1_MEDIAN * np.asarray(r.C_mu, dtype=float).reshape(len(V), -1)[:, 0] / d

            def lin_cos2(M, C):
                # an overflowed linear process (C_mu = inf: it grew without bound) has cos^2 -> 1; NaN stays NaN
                rest = np.einsum("...km,...km->...", M, M) + np.asarray(C, dtype=float)[..., 0, 0]
                with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                    return np.where(np.isposinf(x), 1.0, x / (x + rest))

            lin = (lin_cos2(np.asarray(r.M, dtype=float), r.C_theta_tt),
                   lin_cos2(np.asarray(r.per_replica["M"], dtype=float),  # type: ignore[index]
                            r.per_replica["C_theta_tt"]))  # type: ignore[index]
            if step is not None:
                hard[(dl, d)] = (math.nan, math.nan, step, math.nan, tuple(_before_divergence(x, step, H) for x in lin))
            else:
                hard[(dl, d)] = (float(V[tm, 0, 0]), float(V_se[tm, 0, 0]), tm, float(init[tm] / init[0]), lin)
        return hard[(dl, d)]

    def run(dl: float, m0: float, d: int) -> tuple:
        """(cos^2 over t (mean), each replica's cos^2 over t) from the DMFT of n = delta d samples."""
        r = dmft(problem.replace(delta=dl, steps=H, M0=[[m0 * float(v)] for v in e]), d=d, **opts)
        tick()
        c = overlap_cos2(r.M, r.C_theta_tt, e)
        c_rep = overlap_cos2(r.per_replica["M"], r.per_replica["C_theta_tt"], e)  # type: ignore[index]
        if r.status != "ok":  # captured iff cos^2 passed 1/2 before the blow-up (_before_divergence)
            hints.append(r.diverged_at["hint"])  # type: ignore[index]
            step = int(r.diverged_at["step"])  # type: ignore[index]
            c, c_rep = _before_divergence(c, step, H), _before_divergence(c_rep, step, H)
            before = bool(c[H] < 0.5)
            diverged.append((dl, f"the DMFT from m0 = {m0:.4g} stopped at step {step}, "
                             + ("before" if before else "after") + " cos^2 reached 1/2", before))
        return c, c_rep

    mids, esc, evals = [], [], []
    contracting: list = []  # per d: the deltas answered by the linear process (m_1/2 >= 1, median cos^2_T < 1/2)
    try:
        for d in dims:
            at: dict[float, tuple] = {}

            def g(ln_dl: float, d: int = d, at: dict = at) -> float:
                dl = float(math.exp(ln_dl))
                v, v_se, tm, kept, lin = veff(dl, d)
                m_half = math.sqrt(CHI2_1_MEDIAN * v / d)
                how = "median start"
                if math.isnan(v):  # the random start's DMFT blew up at step tm: the linear process up to it answers
                    c, c_rep, how = lin[0], lin[1], f"random start, diverged at step {tm}"
                elif not m_half < 1 and not lin[0][H] < 0.5:
                    raise _CapturedAtStart(f"{dl:.4g} (m_1/2 = {m_half:.3g}" + (
                        f"; the initial overlap's variance is x{kept:.2g} at t_match = {tm}: the hard direction "
                        "contracts" if kept < 1 else "") + ")")
                elif not m_half < 1:
                    # no median start (it would begin at an O(1) overlap), and the linear process's median overlap
                    # stays below cos^2 = 1/2 up to T: the overlap is small throughout, so the linear process
                    # answers (docs/theory.md §5, "Where the hard direction contracts")
                    c, c_rep, how = lin[0], lin[1], "linear process"
                    contracting.append(f"{dl:.4g} (m_1/2 = {m_half:.3g}; the initial overlap's variance is "
                                       f"x{kept:.2g} at t_match = {tm}; median cos^2 at T: {float(c[H]):.2g})")
                else:
                    n_div = len(diverged)
                    c, c_rep = run(dl, m_half, d)
                    if len(diverged) > n_div:
                        how = "median start, diverged: " + diverged[-1][1]
                at[ln_dl] = (dl, v, v_se, tm, m_half, c, c_rep)
                evals.append({"delta": dl, "d": d, "v_eff": v, "v_stderr": v_se, "t_match": tm, "m_half": m_half,
                              "cos2": float(c[H]), "cos2_stderr": float(np.std(c_rep[:, H], ddof=1)
                                                                         / math.sqrt(len(c_rep))),
                              "truncated_at_n": round(dl * d), "from": how, "error": ""})
                return float(c[H]) - 0.5

            note, value, band, se, err = "", math.nan, [math.nan, math.nan], math.nan, math.nan
            a0, b0, f_a, f_b, skipped, top = math.log(lo), math.log(hi), None, None, [], []
            contracting.clear()
            diverged.clear()
            root = None
            try:
                # a bracket end where the DMFT diverges (GD unstable there, or the solver) moves a quarter of the way
                # in, at most END_RETRIES times; the failures are named in the note
                for _ in range(END_RETRIES + 1):
                    try:
                        f_a = g(a0)
                        break
                    except DivergenceError as ex:
                        skipped.append(f"delta = {math.exp(a0):.4g}: {str(ex).splitlines()[0]}")
                        a0 = a0 + 0.25 * (b0 - a0)
                for _ in range(END_RETRIES + 1):
                    if f_a is None:
                        break
                    try:
                        f_b = g(b0)
                        break
                    except DivergenceError as ex:
                        skipped.append(f"delta = {math.exp(b0):.4g}: {str(ex).splitlines()[0]}")
                        b0 = b0 - 0.25 * (b0 - a0)
                    except _CapturedAtStart as ex:
                        top.append(str(ex))
                        b0 = b0 - 0.25 * (b0 - a0)
                if f_a is not None and f_b is not None:
                    root = secant_root(g, a0, b0, f_lo=f_a, f_hi=f_b, tol=math.log1p(MIDPOINT_TOL),
                                       max_evaluations=MIDPOINT_MAX_EVALUATIONS - 2)
            except DivergenceError as ex:
                skipped.append(str(ex).splitlines()[0])
            if skipped:
                note = ("the DMFT diverged at " + "; ".join(skipped)
                        + ("" if root is not None else " (no midpoint)")
                        + (f"; the last one: {hints[-1]}" if hints else ""))
            elif diverged:
                note = ("runs that blew up before the horizon count as captured iff cos^2 passed 1/2 first (as GD's "
                        "success counts an escape before a divergence): "
                        + "; ".join(f"delta = {x:.4g}: {what}" for x, what, _ in diverged)
                        + ("; a run from m_1/2 that blew up before capture counts as a failure, but the DMFT can "
                           "blow up earlier than GD does beyond GD's edge of stability, which can put the midpoint "
                           "above GD's"
                           if any(early for *_, early in diverged) else "")
                        + (f"; the solver's diagnosis of the last: {hints[-1]}" if hints else ""))
            if top:
                note = ((note + "; " if note else "")
                        + f"the median effective overlap m_1/2 is >= 1 and the linear process's median cos^2 "
                          f"reaches 1/2 by t = {H} at d = {d} (the linear phase alone brings the overlap to O(1): "
                          f"captured) at delta = {', '.join(top)}: the range's top moved in to {math.exp(b0):.4g}")
            if contracting:
                note = ((note + "; " if note else "")
                        + f"the median effective overlap m_1/2 is >= 1 at d = {d} (where the initial overlap's "
                          f"variance falls below x1, the hard direction contracts: V_eff = C_mu / C_init grows while "
                          f"the noise C_mu does not), but the linear process's median overlap stays below cos^2 = 1/2 "
                          f"up to t = {H}, so the linear process answers, at delta = {', '.join(contracting)}")
            if root is not None and root.bracket is None and top and root.side < 0:
                note = (f"no midpoint at d = {d}: P(capture by {H}) < 1/2 up to delta = {math.exp(b0):.4g}, and "
                        f"above that ({note})")
            elif root is not None and root.bracket is None:
                note = (f"P(capture by {H}) is {'above' if root.side > 0 else 'below'} 1/2 over the whole "
                        f"delta_range [{math.exp(a0):.4g}, {math.exp(b0):.4g}]: "
                        f"{'lower' if root.side > 0 else 'raise'} it" + (f" ({note})" if note else ""))
            elif root is not None:
                (a, fa), (b, fb) = root.bracket
                value = math.exp(root.value)
                err = interpolation_error(root.value, (a, fa), (b, fb), root.tried)
                err = abs(math.exp(root.value + err) - value) if math.isfinite(err) else math.nan
                # replicas: the root of each replica's own cos^2 - 1/2 across every delta evaluated
                xs = sorted(at)
                per = [crossing([math.exp(x) for x in xs], [float(at[x][6][i, H]) for x in xs])
                       for i in range(len(at[xs[0]][6]))]
                ok = [v for v in per if v is not None]
                se = float(np.std(ok, ddof=1) / math.sqrt(len(ok))) if len(ok) > 1 else math.nan
                # v_eff's error: shifts m_1/2 by v_se / (2 v) in ln m0; d cos^2 / d ln m0 from one more run
                # (a bracket end answered by a random start that diverged has no v_eff: the other end's slope)
                ends = sorted((e_ for e_ in ((a, fa), (b, fb)) if math.isfinite(at[e_[0]][1])),
                              key=lambda e_: abs(e_[1]))
                shift = 0.0
                if ends:
                    dl, v, v_se, _, m_half, c, _ = at[ends[0][0]]
                    c_up, _ = run(dl, m_half * math.exp(SLOPE_STEP), d)
                    slope_m = (float(c_up[H]) - float(c[H])) / SLOPE_STEP
                    slope_dl = (fb - fa) / (math.exp(b) - math.exp(a))
                    shift = abs(slope_m * (2 * v_se / (2 * v)) / slope_dl) if slope_dl != 0 else math.inf
                widen = 2 * (se if math.isfinite(se) else 0.0) + shift + (err if math.isfinite(err) else 0.0)
                band = [value - widen, value + widen]
            mids.append({"d": d, "horizon": H, "midpoint": value, "band": band, "stderr": se,
                         "interpolation_error": err, "note": note})
            for ln_dl in sorted(at):
                dl, *_, c, c_rep = at[ln_dl]
                t = first_passage(c)
                early, late = first_passage(c_rep.max(axis=0)), first_passage(c_rep.min(axis=0))
                esc.append({"delta": dl, "d": d, "t": t, "band": [early, late],
                            "note": "" if t is not None else f"P(capture) < 1/2 up to the horizon {H}"})
    finally:
        if bar:
            bar.close()
    method = (f"median start (docs/theory.md §5): per d the root in delta of cos^2_T(M0 = m_1/2 e) = 1/2, m_1/2 = "
              "sqrt(q_1/2 v_eff(t_match) / d) the median effective initial overlap, t_match the last t with v_eff "
              f"known to 5%; a safeguarded secant in ln delta from [{lo:g}, {hi:g}] to {MIDPOINT_TOL:.0%} of delta; "
              f"two DMFT runs per delta ({paths} paths in {replicas} replicas, seed {seed}; the hard process, then "
              "the run from m_1/2 with mirrored latent nodes sharing their paths, so that the hard overlap has no "
              "Monte-Carlo noise floor); band: +- 2 standard errors of the root (each replica's own root across the "
              "deltas evaluated), the shift from v_eff +- 2 se (through d cos^2/d ln m0, one more run) and the last "
              "bracket's interpolation error; escape time: the first t with cos^2_t >= 1/2 from m_1/2 (band: the "
              "replicas' highest and lowest cos^2); where m_1/2 >= 1, the linear process's median cos^2_T = x / (x + "
              "|M_T|^2 + C_theta(T, T)), x = q_1/2 C_mu(T) / d: >= 1/2 captured (the range's top moves in), < 1/2 it "
              "answers g (evaluations marked 'linear process'); a run that blows up before T: captured iff cos^2 "
              "passed 1/2 before it, as GD's success counts an escape before a divergence (evaluations marked "
              "'diverged')")
    return FiniteDMidpoint(ds=dims, horizon=H, midpoints=tuple(mids), escape_time=tuple(esc),
                           evaluations=tuple(evals), method=method)
