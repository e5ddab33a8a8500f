"""Thresholds from the Hessian at time t (docs/theory.md §5): delta*(t), the smallest delta at which the DMFT state at
time t (itself depending on delta) has a hard outlier below the left edge of the Hessian's bulk.

One DMFT scan in delta (:func:`theorykit.dmft_scan`: common random numbers, the first solve's 'auto' choices frozen,
excluded paths united) run to T = max(times), keeping the law of (D, zeta) at every requested t, gives the outlier
margin (:func:`theorykit.spectra.hessian.hessian_prediction`: minus the smallest eigenvalue of Phi(lambda) - lambda I
at the edge; > 0 iff a hard outlier exists) at every (delta, t) — so a whole list of t costs one scan, not one per
t.  For each t the smallest sign change of the margin along the grid is refined by regula falsi (Illinois) with
further DMFT solves under the same frozen choices and exclusions, each run to t only with the innovations drawn to
T = max(times) (dmft's ``horizon``: exactly the first t steps of the solve to T), and the value reported is the linear
interpolation of the margin in the final bracket.  Its standard error: the same interpolation on each replica's own
law (the PathLaw's paths of one replica), spread / sqrt(replicas).

Unbounded D (square loss, y = z^2): the n -> infinity law has no left edge; with ``d`` (n = delta d moves along the
scan) or ``n`` the law at each delta is truncated at its 1/n quantile (HessianLaw.truncated), and every entry says
whether the law was unbounded and at which n it was truncated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import defaults
from ._checks import Progress, check_deltas, check_int, check_number
from .errors import DivergenceError, TheorykitError
from .rules import midpoint
from .dynamics import dmft, dmft_scan
from .spectra.hessian import HessianLaw, hessian_prediction

__all__ = ["DeltaDyn", "DeltaNN", "DeltaStar", "FiniteD", "finite_d", "delta_dyn", "delta_nn", "delta_nn_from", "delta_star", "geometric_times", "hessian_at",
           "law_at"]

#: DMFT paths (total over replicas) of a threshold scan: the validation table's accuracy
THRESHOLD_PATHS = 16384
THRESHOLD_REPLICAS = 4
#: regula-falsi refinements per t after the grid
THRESHOLD_REFINE = 2
#: from this T = max(times) on, the scan uses direct Jacobian responses unless ``response`` is given: Stein's responses
#: drift at long times (GeLU phase retrieval, delta = 40, t = 200: Theta^T Theta 2.53 against GD's 1.65, direct 1.71;
#: bounded GeLU/logistic, t = 200: the DMFT at delta = 5.86 diverged and delta*(200) was undefined)
THRESHOLD_DIRECT_FROM_T = 100
#: default scan: POINTS log-spaced deltas in DELTA_RANGE
THRESHOLD_DELTA_RANGE = (1.0, 40.0)
THRESHOLD_POINTS = 8


@dataclass(frozen=True)
class DeltaStar:
    """delta*(t) for one t.  value: the threshold (linear interpolation of the margin in ``bracket``); stderr: from
    the replicas; bracket (a, b) with margin(a) <= 0 < margin(b); edge, outlier (lambda), overlap2: the Hessian
    prediction at the bracket's upper end b (the first delta with an outlier); truncation_n: n used at b (None: no
    truncation); unbounded: the law's tail verdict at b; tried: the (delta, margin) pairs evaluated, in order."""

    t: int
    value: float
    stderr: float
    bracket: tuple
    edge: float
    outlier: float
    overlap2: float
    truncation_n: Optional[int]
    unbounded: Optional[bool]
    tried: tuple
    method: str
    D_low: Optional[dict] = None  # the 1e-2 and 1e-3 quantiles of lambda_min(D) of the law at b

    def as_dict(self) -> dict:
        return {"t": self.t, "value": self.value, "stderr": self.stderr, "bracket": list(self.bracket),
                "edge": self.edge, "outlier": self.outlier, "overlap2": self.overlap2,
                "truncation_n": self.truncation_n, "unbounded": self.unbounded,
                "tried": [list(p) for p in self.tried], "method": self.method, "D_low": self.D_low}


def _low_quantiles(pred) -> Optional[dict]:
    q = (pred.D_tail or {}).get("quantiles") or {}
    out = {k: float(q[k]) for k in ("0.01", "0.001") if k in q}
    return out or None


def _truncation(delta: float, d: Optional[int], n: Optional[int]) -> Optional[int]:
    if n is not None:
        return int(n)
    if d is not None:
        return max(1, int(round(delta * d)))
    return None


def law_at(result, t: int, *, d: Optional[int] = None, n: Optional[int] = None, replica: Optional[int] = None):
    """The :class:`HessianLaw` of a DMFT result at time t (kept with keep_law_at), truncated at its 1/n quantile when
    d (n = delta d) or n is given; ``replica`` restricts it to one replica's paths."""
    if result.laws is None or t not in result.laws:
        raise TheorykitError(f"the DMFT result holds no law at t = {t} (solve with keep_law_at=[{t}])")
    pl = result.laws[t]
    delta = result.problem.delta if result.problem is not None else result.settings["delta"]
    ridge = result.problem.ridge if result.problem is not None else result.settings.get("ridge", 0.0)
    if replica is not None:
        from dataclasses import replace

        sel = pl.replica == replica
        w = np.where(sel, pl.weights, 0.0)
        if not w.sum() > 0:
            raise TheorykitError(f"replica {replica} has no kept paths at t = {t}")
        pl = replace(pl, weights=w / w.sum(), raw_weights=np.where(sel, pl.raw_weights, 0.0))
    law = HessianLaw.from_path_law(pl, delta, ridge)
    nn = _truncation(delta, d, n)
    return law.truncated(nn) if nn is not None else law


def hessian_at(result, t: int, *, d: Optional[int] = None, n: Optional[int] = None):
    """(HessianLaw, HessianPrediction) of a DMFT result at time t (see :func:`law_at`)."""
    law = law_at(result, t, d=d, n=n)
    return law, hessian_prediction(law)


def spectral_inapplicable(problem) -> Optional[str]:
    """Why the spectral criterion cannot fire for ``problem`` (None when it can): the Hessian is PSD almost surely
    (:attr:`theorykit.symbolic.network.Network.hessian_psd`), so delta*(t) is infinite at every t."""
    net = problem.network
    if not net.hessian_psd:
        return None
    return (f"the Hessian is positive semi-definite almost surely (sigma'' = 0 off its kinks for "
            f"{net.activation.name!r} and l'' >= 0 for {net.loss.name!r}): it has no negative outlier at any delta "
            f"and t, so delta*(t) is infinite and the spectral criterion does not apply")


def _check_problem(problem, times):
    from .problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"delta_star takes a theorykit.Problem, got {type(problem).__name__}")
    try:
        raw = [float(v) for v in np.atleast_1d(np.asarray(times, dtype=float))]
    except (TypeError, ValueError):
        raise TheorykitError(f"times must be a list of integers >= 0, got {times!r}") from None
    if not raw or any(not (math.isfinite(v) and v >= 0 and v == int(v)) for v in raw):
        raise TheorykitError(f"times must be a non-empty list of integers >= 0, got {times!r}")
    ts = sorted({int(v) for v in raw})
    if np.asarray(problem.analysis.hard_basis, dtype=float).reshape(problem.link_obj.k, -1).shape[1] == 0:
        raise TheorykitError(f"the link {problem.link!r} has no hard direction: delta*(t) is not defined")
    why = spectral_inapplicable(problem)
    if why:
        raise TheorykitError(why + "; use the dynamical criterion (theorykit.delta_dyn)")
    T = max(ts)
    if problem.schedule is not None and len(problem.schedule) < T:
        raise TheorykitError(f"the Problem's schedule has {len(problem.schedule)} steps < max(times) = {T}")
    return _to_steps(problem, T), ts


def _to_steps(problem, T: int):
    """The Problem run for exactly T steps (its schedule cut at T, or steps = T)."""
    if problem.schedule is not None:
        return problem.replace(schedule=list(problem.schedule)[:T]) if T > 0 else problem.replace(schedule=None, eta=1.0,
                                                                                                     steps=0)
    return problem.replace(steps=T)


def delta_star(problem, times, deltas=None, *, delta_range=THRESHOLD_DELTA_RANGE, points: int = THRESHOLD_POINTS, d: Optional[int] = None,
               n: Optional[int] = None, paths: int = THRESHOLD_PATHS, replicas: int = THRESHOLD_REPLICAS,
               seed: int = defaults.DMFT_SEED, refine: int = THRESHOLD_REFINE, progress: bool = False,
               **dmft_options) -> list:
    """delta*(t) for every t in ``times`` (module docstring) -> list of :class:`DeltaStar`, one per t (sorted).

    deltas: the scan grid (default ``points`` log-spaced values in ``delta_range``); d or n: the truncation at the
    user's dimension (n = delta d moves with delta) or sample count; paths, replicas, seed and ``dmft_options``: the
    DMFT's (the Problem's step sizes are used to T = max(times); from T = THRESHOLD_DIRECT_FROM_T on, direct Jacobian
    responses unless ``response`` is given or an ingredient is kinked); refine: regula-falsi DMFT solves per t after the
    grid.  Errors (one line): no hard direction; no sign change on the grid for some t (with the margins tried);
    an outlier already at the grid's first delta."""
    p, ts = _check_problem(problem, times)
    if d is not None and n is not None:
        raise TheorykitError("give d or n, not both")
    d = None if d is None else check_int("d", d, 1)
    n = None if n is None else check_int("n", n, 1)
    refine = check_int("refine", refine, 0, 50)
    if deltas is None:
        lo, hi = (check_number("delta_range", v, lambda x: x > 0, "> 0") for v in delta_range)
        if not lo < hi:
            raise TheorykitError(f"delta_range must satisfy lo < hi, got {delta_range}")
        deltas = np.geomspace(lo, hi, check_int("points", points, 2, 1000))
    grid = sorted(float(x) for x in deltas)
    if max(ts) >= THRESHOLD_DIRECT_FROM_T and "response" not in dmft_options and not p.network.kinked:
        # (a kinked activation or loss keeps 'auto': only Stein's responses carry its Dirac terms, docs/theory.md §3.1)
        dmft_options = {**dmft_options, "response": "direct"}
    # the margin needs the laws of (D, zeta) only: no hard process (about a fifth of a long solve)
    opts = {**dict(paths=paths, replicas=replicas, seed=seed, bias_check=False, keep_law_at=ts, hard_process=False),
            **dmft_options}
    # the bar counts DMFT scan solves: one per grid delta, then `refine` per requested t
    bar = Progress(len(grid) + refine * len(ts), label="delta_star", unit="DMFT solves") if progress else None
    scan = dmft_scan(p, grid, **opts)
    done = len(grid)
    if bar:
        bar.update(done)
    frozen = scan[0].settings["scan"]["frozen"]
    exclude = scan[0].excluded_masks
    solved = {dl: r for dl, r in zip(grid, scan)}

    T = max(ts)

    def solve(dl, t):
        # a refinement at (delta, t) solves to t only, with the innovations drawn to T: exactly the first t steps of
        # the solve to T at that delta (dmft's horizon), so grid and refinement margins are one smooth function
        nonlocal done
        r = solved.get(dl)
        if r is None or r.settings["steps"] < t:
            kept = [s for s in ts if s <= t]
            r = dmft(_to_steps(p, t).replace(delta=dl), **{**opts, **frozen, "keep_law_at": kept}, exclude=exclude,
                     horizon=T)
            solved[dl] = r
            done += 1
            if bar:
                bar.update(done)
        return r

    def margin(dl, t, replica=None):
        r = solve(dl, t)
        if r.status != "ok" and t not in (r.laws or {}):
            return math.nan
        law = law_at(r, t, d=d, n=n, replica=replica)
        return float(hessian_prediction(law).margin)

    out = []
    try:
        for t in ts:
            tried = [(dl, margin(dl, t)) for dl in grid]
            j = next((i for i, (_, mg) in enumerate(tried) if math.isfinite(mg) and mg > 0), None)
            if j is None:
                raise TheorykitError(f"delta*(t = {t}): no hard outlier for delta in [{grid[0]:g}, {grid[-1]:g}] "
                                     f"(margins {', '.join(f'{dl:g}: {mg:.3g}' for dl, mg in tried)}); raise the range")
            if j == 0:
                raise TheorykitError(f"delta*(t = {t}): a hard outlier already exists at delta = {grid[0]:g} "
                                     f"(margin {tried[0][1]:.3g}); lower the range")
            (a, fa), (b, fb) = tried[j - 1], tried[j]
            if not math.isfinite(fa):
                raise TheorykitError(f"delta*(t = {t}): the margin is undefined at delta = {a:g} (DMFT diverged?)")
            side = 0
            for _ in range(refine):  # Illinois regula falsi on the (smooth, common-random-number) margin
                c = b - fb * (b - a) / (fb - fa)
                c = min(max(c, a + 0.05 * (b - a)), b - 0.05 * (b - a))
                fc = margin(c, t)
                tried.append((c, fc))
                if not math.isfinite(fc):
                    break
                if fc > 0:
                    b, fb = c, fc
                    if side == 1:
                        fa *= 0.5
                    side = 1
                else:
                    a, fa = c, fc
                    if side == -1:
                        fb *= 0.5
                    side = -1
            fa_true, fb_true = margin(a, t), margin(b, t)
            value = a - fa_true * (b - a) / (fb_true - fa_true)
            R = replicas
            per = []
            for rep in range(R):
                try:
                    ma, mb = margin(a, t, rep), margin(b, t, rep)
                except TheorykitError:
                    continue
                if math.isfinite(ma) and math.isfinite(mb) and mb != ma:
                    per.append(a - ma * (b - a) / (mb - ma))
            stderr = float(np.std(per, ddof=1) / math.sqrt(len(per))) if len(per) >= 2 else math.nan
            law = law_at(solve(b, t), t, d=d, n=n)
            pred = hessian_prediction(law)
            o = pred.outliers[0] if pred.outliers else None
            out.append(DeltaStar(t=t, value=float(value), stderr=stderr, bracket=(float(a), float(b)),
                                 edge=float(pred.edge), outlier=(float(o.lam) if o else math.nan),
                                 overlap2=(float(o.overlap2) if o else math.nan), truncation_n=law.truncation_n,
                                 unbounded=pred.unbounded, tried=tuple((float(x), float(y)) for x, y in tried),
                                 D_low=_low_quantiles(pred),
                                 method=(f"DMFT scan ({len(grid)} deltas, {paths} paths in {replicas} replicas, "
                                         f"common random numbers) + {refine} regula-falsi solves to T = t (the "
                                         f"exact prefix of the solve to T = {T}); margin by "
                                         f"{pred.method.split(' on ')[0]}; value = linear interpolation of the margin "
                                         f"in the bracket; stderr from the per-replica laws ({len(per)} replicas)")))
    finally:
        if bar:
            bar.close(done)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# delta_NN = lim_t delta*(t) (docs/theory.md §5, "delta_NN")

#: convergence rule of delta_NN: the last two increments of delta*(t) on the geometric t grid both below
#: NN_TOL x delta*(T), and the edge and the 1e-3 quantile of lambda_min(D) (at the bracket's upper end) moved by at
#: most NN_SETTLE_TOL (relative) over the last increment
NN_TOL = 0.01
NN_SETTLE_TOL = 0.05
#: default geometric t grid of delta_nn: NN_POINTS times from NN_FIRST_T to T
NN_FIRST_T = 10
NN_POINTS = 6


def geometric_times(T: int, points: int = NN_POINTS, first: int = NN_FIRST_T) -> list:
    """Integer times on a geometric grid from ``first`` to T (distinct, sorted; T always included)."""
    T = check_int("T", T, 1)
    points = check_int("points", points, 2, 200)
    first = check_int("first", first, 1)
    if first >= T:
        raise TheorykitError(f"the geometric t grid needs first = {first} < T = {T}")
    return sorted({int(round(v)) for v in np.geomspace(first, T, points)} | {T})


@dataclass(frozen=True)
class DeltaNN:
    """delta_NN with its evidence (docs/theory.md §5).  value: delta*(T) at the grid's last time (a lower bound
    when not converged: delta*(t) has risen along every measured sequence); criterion: "spectral" (a separated hard
    outlier of the Hessian at time t); definition and rule: in words; converged: the rule held at the last grid
    time; sequence: the DeltaStar of every grid time (the answer's evidence, never dropped); increments: delta*(t_k)
    - delta*(t_{k-1}); unbounded: some law of the sequence has no left edge as n -> infinity (then every value is
    for the truncation n given and the n -> infinity law has no edge); truncation: {"d": ...} or {"n": ...} or None."""

    value: float
    stderr: float
    criterion: str
    definition: str
    rule: str
    converged: bool
    by_t: int
    sequence: tuple
    increments: tuple
    settled: dict
    unbounded: Optional[bool]
    truncation: Optional[dict]
    note: str

    def as_dict(self) -> dict:
        return {"value": self.value, "stderr": self.stderr, "criterion": self.criterion, "converged": self.converged,
                "evidence": {"definition": self.definition, "rule": self.rule, "by_t": self.by_t,
                             "lower_bound": not self.converged,
                             "sequence": [{"t": q.t, "value": q.value, "stderr": q.stderr, "edge": q.edge,
                                           "D_low": q.D_low, "truncation_n": q.truncation_n,
                                           "unbounded": q.unbounded} for q in self.sequence],
                             "increments": list(self.increments), "settled": self.settled,
                             "unbounded": self.unbounded, "truncation": self.truncation, "note": self.note}}


def _rel_change(a, b, scale=None) -> float:
    """|a - b| relative to max(|a|, |scale|) (scale: a size the change is measured against when a itself may tend to
    0, as the bulk edge does when GD converges)."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    ref = max(abs(a), abs(scale) if scale is not None and math.isfinite(scale) else 0.0, 1e-12)
    return abs(a - b) / ref


def delta_nn_from(sequence, *, tol: float = NN_TOL, settle_tol: float = NN_SETTLE_TOL, d: Optional[int] = None,
                  n: Optional[int] = None) -> DeltaNN:
    """delta_NN from a sequence of :class:`DeltaStar` on a t grid (sorted by t; at least 3 times), by the stated
    rule: converged iff the last two increments |delta*(t_k) - delta*(t_{k-1})| are both <= tol x delta*(t_K) and,
    over the last increment, the edge and the 1e-3 quantile of lambda_min(D) moved by <= settle_tol (relative; the
    edge's change relative to max(|edge|, |1e-3 quantile|), since the edge tends to 0 as GD converges).
    Otherwise "not converged by t = t_K", and the value delta*(t_K) is a lower bound."""
    seq = sorted(sequence, key=lambda q: q.t)
    if len(seq) < 3:
        raise TheorykitError(f"delta_NN needs delta*(t) at >= 3 times of a t grid, got {len(seq)}")
    tol = check_number("tol", tol, lambda v: 0 < v < 1, "in (0, 1)")
    settle_tol = check_number("settle_tol", settle_tol, lambda v: 0 < v < 1, "in (0, 1)")
    vals = [q.value for q in seq]
    if not all(math.isfinite(v) for v in vals):
        raise TheorykitError(f"delta*(t) is undefined at t = {[q.t for q, v in zip(seq, vals) if not math.isfinite(v)]}")
    inc = tuple(float(b - a) for a, b in zip(vals, vals[1:]))
    last, prev = seq[-1], seq[-2]
    small = [abs(x) <= tol * abs(last.value) for x in inc[-2:]]
    q_last = (last.D_low or {}).get("0.001")
    q_prev = (prev.D_low or {}).get("0.001")
    # the edge tends to 0 from below as GD converges (the bulk of a minimum's Hessian): its change is measured against
    # the width of D's low tail (|its 1e-3 quantile|) as well as against itself
    settled = {"edge_change": _rel_change(last.edge, prev.edge, q_last), "D_q1e-3_change": _rel_change(q_last, q_prev),
               "increments_small": small}
    converged = bool(all(small) and settled["edge_change"] <= settle_tol and settled["D_q1e-3_change"] <= settle_tol)
    unb = (True if any(q.unbounded for q in seq) else (None if any(q.unbounded is None for q in seq) else False))
    trunc = {"d": d} if d is not None else ({"n": n} if n is not None else None)
    if unb and trunc is None:
        note = ("D is unbounded below: the n -> infinity law has no left edge, so delta*(t) of the untruncated law is "
                "a statement about a law no finite sample has; give d or n for the finite-n threshold")
    elif unb:
        note = (f"D is unbounded below: the n -> infinity law has no left edge; these values are for the law "
                f"truncated at its 1/n quantile with {'n = delta d, d = ' + str(d) if d is not None else 'n = ' + str(n)}")
    else:
        note = "D bounded below (or undecided) along the sequence: the law has a left edge at every t"
    rule = (f"converged iff the last two increments of delta*(t) on the t grid are both <= {tol:g} x delta*(T) and "
            f"the edge and the 1e-3 quantile q of lambda_min(D) moved by <= {settle_tol:g} over the last increment "
            "(relative: the edge's change against max(|edge|, |q|), as the edge tends to 0 when GD converges); otherwise 'not converged by t = T' and the value is a lower bound")
    return DeltaNN(value=float(last.value), stderr=float(last.stderr), criterion="spectral",
                   definition="delta_NN = lim_t delta*(t), delta*(t) the smallest delta with a hard outlier below the "
                              "Hessian's bulk at GD time t (docs/theory.md §5)",
                   rule=rule, converged=converged, by_t=int(last.t), sequence=tuple(seq), increments=inc,
                   settled=settled, unbounded=unb, truncation=trunc,
                   note=note + ("" if converged else f"; not converged by t = {last.t}: delta_NN >= {last.value:.4g}"))


def delta_nn(problem, T: int, *, times=None, points_t: int = NN_POINTS, first_t: int = NN_FIRST_T,
             tol: float = NN_TOL, settle_tol: float = NN_SETTLE_TOL, d: Optional[int] = None, n: Optional[int] = None,
             **delta_star_options) -> DeltaNN:
    """delta_NN = lim delta*(t) from delta*(t) on a geometric t grid up to T (:func:`geometric_times`, or ``times``)
    — one :func:`delta_star` scan serves every t — judged by :func:`delta_nn_from`'s rule.  d or n: the truncation
    (required in effect where D is unbounded below).  Other options go to :func:`delta_star`."""
    ts = sorted(set(times)) if times is not None else geometric_times(T, points_t, first_t)
    if max(ts) != T:
        raise TheorykitError(f"the t grid must end at T = {T}, got {ts}")
    seq = delta_star(problem, ts, d=d, n=n, **delta_star_options)
    return delta_nn_from(seq, tol=tol, settle_tol=settle_tol, d=d, n=n)


# ---------------------------------------------------------------------------------------------------------------------
# The dynamical criterion (docs/theory.md §5, "The dynamical criterion")


@dataclass(frozen=True)
class DeltaDyn:
    """delta_dyn: the delta where the capture growth rate gamma(delta) = -d ln m*/dT crosses 0 (linear
    interpolation between the grid's first sign change; stderr from gamma's errors there: se_gamma / |dgamma/ddelta|).
    value is NaN (null in JSON) when gamma does not change sign on the grid: ``reason`` says which way.  gamma: one
    entry per delta {"delta", "value", "stderr", "t_range", "points"}; a delta where m* leaves the ladder on the
    range has value NaN and a "note" (and is skipped by the crossing); criterion "dynamical"."""

    value: float
    stderr: float
    gamma: tuple
    t_range: tuple
    criterion: str
    definition: str
    reason: Optional[str]
    method: str

    def as_dict(self) -> dict:
        return {"value": self.value, "stderr": self.stderr, "criterion": self.criterion,
                "gamma": [dict(g) for g in self.gamma], "t_range": list(self.t_range), "definition": self.definition,
                "reason": self.reason, "method": self.method}


def delta_dyn(problem, deltas, t_range, *, m0s=None, progress: bool = False, **dmft_options) -> DeltaDyn:
    """gamma(delta) = -d ln m*/dT (:func:`theorykit.dynamics.growth_rate` on :func:`theorykit.dynamics.capture_curve`,
    one ladder of DMFT runs per delta, each to T = t_range[1]) at every delta of ``deltas``, and delta_dyn where gamma
    crosses 0.  problem: m = 1, constant steps, no M0 (its delta is replaced); dmft_options: paths, replicas, seed,
    ... (the same seed at every delta)."""
    from .dynamics import capture_curve, growth_rate

    grid = sorted(check_deltas(deltas, at_least=2))
    try:
        t1, t2 = (check_int("t_range", v, 0) for v in t_range)
    except TypeError:
        raise TheorykitError(f"t_range must be two integers t1 < t2, got {t_range!r}") from None
    if not t1 + 2 <= t2:
        raise TheorykitError(f"t_range must satisfy t1 + 2 <= t2, got {t_range!r}")
    from .dynamics.capture import LADDER_POINTS

    rungs = LADDER_POINTS if m0s is None else len(list(m0s))
    bar = Progress(len(grid) * rungs, label="delta_dyn", unit="DMFT solves") if progress else None
    tick = bar.tick if bar else None

    gam = []
    try:
        for dl in grid:
            try:
                curve = capture_curve(problem.replace(delta=dl), t2, m0s, on_solve=tick, **dmft_options)
            except DivergenceError as err:  # GD itself diverges at this delta (e.g. sigma = x^2 at small delta)
                gam.append({"delta": dl, "value": math.nan, "stderr": math.nan, "t_range": [t1, t2], "points": 0,
                            "note": str(err)})
                continue
            try:
                g = growth_rate(curve, (t1, t2))
            except TheorykitError as err:  # m* outside the ladder on the range: no rate at this delta (said so)
                gam.append({"delta": dl, "value": math.nan, "stderr": math.nan, "t_range": [t1, t2], "points": 0,
                            "note": str(err), "m_star_at_t2": curve["m_star"][t2]})
                continue
            gam.append({"delta": dl, "value": g["value"], "stderr": g["stderr"], "t_range": g["t_range"],
                        "points": g["points"], "how": g.get("how")})
    finally:
        if bar:
            bar.close()
    value, se, reason = math.nan, math.nan, None
    ok = [g for g in gam if math.isfinite(g["value"])]  # deltas with a rate (m* inside the ladder)
    j = next((i for i in range(1, len(ok)) if ok[i - 1]["value"] <= 0 < ok[i]["value"]), None)
    if len(ok) < 2:
        reason = f"gamma is defined at {len(ok)} delta(s) of the grid (elsewhere m* leaves the ladder or the DMFT diverges)"
    elif j is None:
        reason = ("gamma > 0 at every delta of the grid where it is defined: delta_dyn is below it"
                  if ok[0]["value"] > 0 else
                  "gamma <= 0 at every delta of the grid where it is defined: delta_dyn is above it")
    else:
        a, b = ok[j - 1], ok[j]
        slope = (b["value"] - a["value"]) / (b["delta"] - a["delta"])
        value = a["delta"] - a["value"] / slope
        f = (value - a["delta"]) / (b["delta"] - a["delta"])
        se = math.sqrt(((1 - f) * a["stderr"]) ** 2 + (f * b["stderr"]) ** 2) / abs(slope)
    return DeltaDyn(value=float(value), stderr=float(se), gamma=tuple(gam), t_range=(t1, t2), criterion="dynamical",
                    definition="delta_dyn: where gamma(delta) = -d ln m*/dT crosses 0, m*(T) the smallest initial hard "
                               "overlap that the nonlinear DMFT captures (cos^2 > 1/2) by the horizon T "
                               "(docs/theory.md §5)",
                    reason=reason,
                    method=f"capture ladder per delta, gamma fitted on t in [{t1}, {t2}] (least squares of ln m*; "
                           "stderr from the same fit on each DMFT replica, see growth_rate); delta_dyn by linear "
                           "interpolation of gamma")


# ------------------------------------------------------------------------------------------------ finite d
#: the finite-d ladder of initial hard overlaps (geometric; the 1/sqrt(d) scale of a random start lies inside for
#: d in 10 .. 10^5, and adjacent rungs are a factor 1.45 apart, so the interpolated m* is close to a bisection's)
FINITE_D_LADDER = (2e-3, 0.5, 16)
#: replicas' relative spread of m*(horizon) above which a delta's prediction is flagged noise-limited
FINITE_D_NOISE_RSE = 0.25


@dataclass(frozen=True)
class FiniteD:
    """Finite-d answers from the DMFT (docs/theory.md §5, "At your d and horizon"; m = 1, 2): for each delta and d, the
    probability that GD at dimension d has captured the hard direction (cos^2 > 1/2) by time t, for every t up to the
    horizon, with its band; the midpoint delta_1/2(d, horizon) and the escape time t_1/2(delta, d) read off it.

    probability, low, high: (deltas, ds, horizon + 1) arrays; midpoints: [{d, horizon, midpoint, band [lo, hi],
    note}]; escape_time: [{delta, d, t, band [early, late], note}] (t is None when P stays below 1/2 up to the
    horizon); per_delta: [{delta, v, v_stderr (m = 1; NaN for m = 2), V (V_eff at t_match, m x m), t_match, m_star
    (at the horizon, first ray), rays [{direction, m_star, m_star_spread}], m_star_spread (the replicas' relative
    spread, largest over the rays), noise_limited, error}]; method: how it was computed."""

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


def _symmetries(problem) -> tuple:
    """(flip, swap): GD's law is invariant under e -> -e when the link is even along the first hard direction e
    (checked at 512 random latent points and noises, to 1e-12), and under exchanging the neurons when m = 2 with
    equal second-layer weights, equal biases and an exchangeable Sigma0."""
    from .dynamics.hard_process import hard_subspace_basis

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


def _ray_angles(m: int, flip: bool, swap: bool, rays: int) -> np.ndarray:
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


def _ray_star(curve: dict, t: int) -> tuple:
    """(1/m*, 1/ its smallest and 1/ its largest over the replicas) of one ray at time t: the capture strength, which
    is interpolated between rays (0 on a ray that never captures, where m* grows like 1/|angle - its angle|).  Outside
    the ladder: never captured gives 0 with the band up to the top rung's 1/m0; captured from the bottom rung gives
    _S_ALWAYS with the band down to the bottom rung's 1/m0."""
    m0s = curve["m0s"]
    cos2 = np.asarray(curve["cos2"], dtype=float)[:, t]
    ms = curve["m_star"][t]
    if ms is None:
        if np.all(cos2 < 0.5) or np.isnan(cos2).any():
            return 0.0, 1.0 / m0s[-1], 0.0
        return _S_ALWAYS, _S_ALWAYS, 1.0 / m0s[0]
    reps = [r[t] for r in curve["m_star_replicas"] if r[t] is not None] + [ms]
    return 1.0 / ms, 1.0 / min(reps), 1.0 / max(reps)


def _capture_probabilities(rays: list, flip: bool, swap: bool, V: np.ndarray, V_se: np.ndarray, t_match: int,
                           d: int) -> tuple:
    """(P, low, high) over t from the capture ladders of the rays (docs/theory.md §3.2 and §5, the matched prediction
    with the horizon t).  The effective initial overlap vector is mu_eff = B g / sqrt(d), g ~ N(0, I_m), B B^T =
    V = V_eff(min(t, t_match)); it is captured by t iff its length exceeds m*(t) on its ray.  With g = rho w (w
    uniform on the sphere, rho^2 ~ chi2_m): P(t) = mean over w of P(chi2_m > d m*(t; B w)^2 / |B w|^2), over w =
    +-1 (m = 1: P(chi2_1 > d m*^2 / v)) or _CIRCLE_POINTS evenly spaced directions (m = 2; the capture strength
    1/m* interpolated linearly in the angle between the rays and their images under the symmetries, 0 on a ray that
    never captures).  The band takes every ray's
    smallest and largest m*(t) over the replicas and V scaled by 1 -+ 2 relative standard errors (Frobenius)."""
    from scipy.stats import chi2

    rays = [(float(a), c) for a, c in rays]
    m = V.shape[-1]
    T = np.asarray(rays[0][1]["cos2"]).shape[1] - 1
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
        w = np.cos(psi)[:, None] if m == 1 else np.column_stack([np.cos(psi), np.sin(psi)])
        Bw = w @ B.T
        scale2 = (Bw ** 2).sum(1)
        phi = np.where(Bw[:, 0] >= 0, 0.0, math.pi) if m == 1 else np.arctan2(Bw[:, 1], Bw[:, 0]) % (2 * math.pi)
        stars = [_ray_star(c, t) for _, c in rays]
        out = []
        for which, fac in ((0, 1.0), (2, max(1.0 - 2 * rse, 1e-12)), (1, 1.0 + 2 * rse)):
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


def _first_at_least(x: np.ndarray, level: float = 0.5):
    idx = np.flatnonzero(x >= level)
    return int(idx[0]) if idx.size else None


def finite_d(problem, deltas, ds, horizon: int, *, paths: int = THRESHOLD_PATHS, replicas: int = THRESHOLD_REPLICAS,
             seed: int = defaults.DMFT_SEED, m0s=None, rays: int = FINITE_D_RAYS, progress: bool = False) -> FiniteD:
    """What GD at dimension d does by a horizon, from the DMFT (docs/theory.md §5, "At your d and horizon"; width
    m = 1 or 2).

    Per delta of ``deltas``: one DMFT run with the linear hard process (V_eff(t), the covariance of the effective
    initial overlap vector, and the time ``hard_reliable_until`` up to which the linear process is trusted), and for
    each ray u of initial-overlap directions a ladder of nonlinear DMFT runs from M0 = m0 e u^T (``m0s``, default
    FINITE_D_LADDER), each to ``horizon`` (:func:`theorykit.dynamics.capture_curve`: m*(t; u) for every t at once).
    m = 1: u = +1 (and -1 unless the link is even along e).  m = 2: ``rays`` angles on the fundamental domain of the
    circle under the problem's symmetries (:func:`_symmetries`).  Then for every d of ``ds`` and t <= horizon
    P(capture by t) = P(mu_eff beyond m* on its ray), mu_eff ~ N(0, V_eff(min(t, t_match)) / d) (see
    :func:`_capture_probabilities`; m = 1: P(chi2_1 > d m*(t)^2 / v_eff)).  Read off it: the midpoint
    delta_1/2(d, horizon) where P crosses 1/2 along the deltas (band: where the band's ends cross), and the escape
    time t_1/2(delta, d), the first t with P >= 1/2 (band: the first t where the high and the low end reach 1/2).
    A delta whose DMFT diverges (GD itself does) keeps its error and P = NaN; the others go on.  problem: a
    :class:`theorykit.Problem` with m <= 2, constant steps, no M0 (its delta and steps are replaced)."""
    from .dynamics import capture_curve
    from .dynamics.hard_process import hard_subspace_basis
    from .problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"finite_d takes a theorykit.Problem, got {type(problem).__name__}")
    if problem.m > 2:
        raise TheorykitError(f"the finite-d prediction is built for width m = 1 and 2 (got m = {problem.m}): the "
                             "capture region over the sphere of initial-overlap directions is not built for m >= 3")
    if problem.schedule is not None or problem.M0 is not None:
        raise TheorykitError("finite_d needs constant-step GD from a random start (a Problem with eta, without M0)")
    if hard_subspace_basis(problem.link_obj).shape[1] == 0:
        raise TheorykitError("this link has no hard direction: nothing to capture")
    grid = tuple(sorted(float(v) for v in check_deltas(deltas, at_least=1)))
    try:
        dims = tuple(sorted({check_int("d", v, 1) for v in ds}))
    except TypeError:
        raise TheorykitError(f"ds must be a list of integers d >= 1, got {ds!r}") from None
    if not dims:
        raise TheorykitError("ds must hold at least one dimension d")
    H = check_int("horizon", horizon, 1)
    rays = check_int("rays", rays, 2)
    if m0s is None:
        lo_, hi_, k_ = FINITE_D_LADDER
        m0s = np.geomspace(lo_, hi_, k_)
    rungs = len(list(m0s))
    flip, swap = _symmetries(problem)
    angles = _ray_angles(problem.m, flip, swap, rays)
    bar = (Progress(len(grid) * (len(angles) * rungs + 1), label="finite-d prediction", unit="DMFT solves")
           if progress else None)
    tick = bar.tick if bar else None

    shape = (len(grid), len(dims), H + 1)
    P, LO, HI = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    per = []
    opts = dict(paths=paths, replicas=replicas, seed=seed)
    try:
        for i, dl in enumerate(grid):
            pr = problem.replace(delta=dl, steps=H)
            info = {"delta": dl, "v": math.nan, "v_stderr": math.nan, "V": None, "t_match": None, "m_star": None,
                    "rays": [], "m_star_spread": math.nan, "noise_limited": None, "error": ""}
            try:
                r = dmft(pr, bias_check=False, **opts)
                if tick:
                    tick()
                if r.status != "ok":
                    raise DivergenceError(f"the DMFT did not reach t = {H} ({r.diverged_at['hint']})")
                curves = []
                for ang in angles:
                    u = [math.cos(ang)] if problem.m == 1 else [math.cos(ang), math.sin(ang)]
                    curves.append((ang, capture_curve(pr, H, m0s, direction=u, on_solve=tick, **opts)))
            except DivergenceError as err:
                info["error"] = str(err).splitlines()[0]
                per.append(info)
                continue
            V = np.asarray(r.V_eff, dtype=float)
            V_se = np.asarray(r.stderr["V_eff"], dtype=float)
            tm = int(r.hard_reliable_until)
            spreads, ray_info = [], []
            for ang, c in curves:
                ms = c["m_star"][H]
                reps = [q[H] for q in c["m_star_replicas"] if q[H] is not None]
                spreads.append(float(np.std(reps, ddof=1) / np.mean(reps)) if len(reps) > 1 else math.nan)
                ray_info.append({"direction": c["direction"], "m_star": ms, "m_star_spread": spreads[-1]})
            finite = [v for v in spreads if math.isfinite(v)]
            spread = max(finite) if finite else math.nan
            info.update(v=float(V[tm, 0, 0]) if problem.m == 1 else math.nan,
                        v_stderr=float(V_se[tm, 0, 0]) if problem.m == 1 else math.nan, V=V[tm].tolist(),
                        t_match=tm, m_star=ray_info[0]["m_star"], rays=ray_info, m_star_spread=spread,
                        noise_limited=bool(spread > FINITE_D_NOISE_RSE) if math.isfinite(spread) else None)
            per.append(info)
            for j, d in enumerate(dims):
                P[i, j], LO[i, j], HI[i, j] = _capture_probabilities(curves, flip, swap, V, V_se, tm, d)
    finally:
        if bar:
            bar.close()
    mids, esc = [], []
    ok = [i for i, q in enumerate(per) if not q["error"]]
    for j, d in enumerate(dims):
        x = [grid[i] for i in ok]
        m, a, b = (midpoint(x, [arr[i, j, H] for i in ok]) for arr in (P, HI, LO))
        note = "" if m is not None else "P does not cross 1/2 on the delta grid at this horizon: widen the deltas"
        mids.append({"d": d, "horizon": H, "midpoint": math.nan if m is None else m,
                     "band": [math.nan if a is None else a, math.nan if b is None else b], "note": note})
        for i in ok:
            t, early, late = (_first_at_least(arr[i, j]) for arr in (P, HI, LO))
            esc.append({"delta": grid[i], "d": d, "t": t, "band": [early, late],
                        "note": "" if t is not None else f"P(capture) < 1/2 up to the horizon {H}"})
    sym = ", ".join(n for n, on in (("e -> -e", flip), ("neuron exchange", swap)) if on) or "none"
    method = (f"per delta: one DMFT run with the linear hard process for V_eff, and per ray u of initial-overlap "
              f"directions ({len(angles)} ray(s); symmetries used: {sym}) a ladder of {rungs} nonlinear DMFT runs "
              f"from M0 = m0 e u^T (m0 in [{float(min(m0s)):g}, {float(max(m0s)):g}], geometric) to t = {H}, m*(t; u) "
              f"by geometric interpolation of cos^2 = 1/2; {paths} paths in {replicas} replicas, seed {seed}; "
              "P(capture by t) = P(mu_eff beyond m*(t) on its ray), mu_eff ~ N(0, V_eff(min(t, t_match)) / d), "
              "t_match = hard_reliable_until (docs/theory.md §3.2, §5; m = 1: P(chi2_1 > d m*^2 / v_eff)); band: "
              "the replicas' m* and V_eff +- 2 se (not the rung interpolation); midpoint: linear interpolation of P in "
              "delta; escape time: the first t with P >= 1/2")
    return FiniteD(deltas=grid, ds=dims, horizon=H, probability=P, low=LO, high=HI, midpoints=tuple(mids),
                   escape_time=tuple(esc), per_delta=tuple(per), method=method)
