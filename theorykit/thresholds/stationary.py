"""delta*(infinity): the Hessian threshold at the DMFT's stationary state (docs/theory.md §5, "delta*(infinity)").

The state GD converges to with no hard overlap (:func:`theorykit.dynamics.stationary.stationary_state`, m <= 2) gives
the static law of (D, zeta); the Hessian prediction on it (:func:`theorykit.spectra.hessian.hessian_prediction`) is a
deterministic, smooth function of delta.  At a converged state the bulk's left edge is >= 0 (a minimum in the
complement of the hard direction), so a hard outlier first separates from the bulk at a positive eigenvalue -- the
state is still stable -- and GD can leave only once that eigenvalue is negative.  delta*(infinity) is that second
point: the sign change of minus the outlier's eigenvalue, bracketed on a log grid and refined by the package's
safeguarded secant (:func:`theorykit.rules.secant_root`); the separation point is reported beside it.  No time is
run: the value is converged by construction, and its error is the bracket's width plus the quadrature's (the
criterion on the coarser latent rule at the upper end).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, cast

import numpy as np

from .._checks import Progress, check_int, check_number
from ..dynamics.stationary import G_NODES, STATIONARY_ORDER, stationary_state
from ..errors import TheorykitError
from ..rules import Root, crossing, crossing_index, secant_root
from ..spectra.hessian import hessian_prediction
from .spectral import THRESHOLD_DELTA_RANGE, check_threshold_problem, scan_inputs

__all__ = ["DeltaStarInfinity", "delta_star_infinity", "stationary_law"]

#: the grid's points and the secant's bracket width (relative)
STATIONARY_POINTS = 8
STATIONARY_RTOL = 2e-3
#: the separation (where the outlier leaves the bulk, reported beside delta*(infinity) with its bracket) is refined to
#: this many times the threshold's relative width: each refinement is a stationary state
SEPARATION_RTOL_FACTOR = 10.0


def stationary_law(state, *, d: Optional[int] = None, n: Optional[int] = None):
    """The :class:`theorykit.spectra.HessianLaw` of a stationary state (t = infinity), truncated at its 1/n quantile
    when d (n = delta d) or n is given, with the support's tail verdict (as for the DMFT's law at a finite t)."""
    from dataclasses import replace

    from ..spectra.hessian import HessianLaw, support_tail
    from .spectral import truncation_n_at

    if state.status != "ok":
        raise TheorykitError(f"the stationary state has no law: {state.message}")
    p = state.problem
    w, D, zeta, radius = state.law_samples()
    law = HessianLaw.from_samples(D, zeta, p.delta, weights=w, ridge=p.ridge, radius=radius,
                                  source=f"stationary (t = infinity) law ({len(w)} paths)")
    # the support with the latent pushed outward and each proximal point solved again (r follows y at t = infinity)
    tail = dict(law.tail or {})
    sup = support_tail(state.lam_min_pushed, np.linalg.norm(state.z, axis=1), state.weights)
    tail["support"] = sup
    if sup["unbounded"] is not None:
        tail["unbounded_paths"] = tail.get("unbounded")
        tail["unbounded"] = sup["unbounded"]
    law = replace(law, tail=tail, source=f"stationary (t = infinity) law, {state.method}")
    nn = truncation_n_at(p.delta, d, n)
    return law.truncated(nn) if nn is not None else law


@dataclass(frozen=True)
class DeltaStarInfinity:
    """delta*(infinity) (module docstring).  value: the smallest delta at which the stationary state's Hessian has a
    *negative* hard outlier below its bulk -- the state is then a saddle along the hard direction and GD leaves it
    (NaN when none on the grid: see ``error``); bracket (a, b) around it; error_bound: |b - a| plus the quadrature's
    error (the criterion's change on the coarser latent rule at b, through the bracket's slope); edge, outlier,
    overlap2: the Hessian prediction at b; separation, separation_bracket: where the hard outlier first separates
    from the bulk (the margin of delta*(t) changes sign): at the stationary state the bulk's edge is >= 0 (a minimum
    in the complement), so the outlier separates at a positive eigenvalue and turns negative later; truncation_n:
    n = delta d at b (None without d); tried: (delta, margin, instability) triples evaluated (instability: minus the
    outlier's eigenvalue, or the margin minus |edge| without an outlier; > 0 iff a negative outlier); states: {delta:
    status} of the deltas without a stationary state, or without a Hessian prediction at it; method: in words."""

    value: float
    bracket: tuple
    error_bound: float
    edge: float
    outlier: float
    overlap2: float
    separation: float
    separation_bracket: tuple
    truncation_n: Optional[int]
    tried: tuple
    states: dict
    method: str
    error: str = ""

    def as_delta_nn(self, truncation: Optional[dict] = None) -> dict:
        """delta_NN = delta*(infinity) in the JSON form of :class:`DeltaNN` (criterion "stationary", converged by
        construction; stderr: None, the error is the deterministic ``error_bound``)."""
        ok = not self.error
        return {"value": self.value if ok else None, "stderr": None, "error_bound": self.error_bound if ok else None,
                "criterion": "stationary", "converged": ok,
                "evidence": {"definition": "delta*(infinity): the smallest delta at which the Hessian at the state "
                                           "GD converges to without a hard overlap (the DMFT's stationary equations, "
                                           "docs/theory.md §3.4) has a negative hard outlier below its bulk: the "
                                           "state is a saddle along the hard direction",
                             "rule": "bracketed secant on the outlier's eigenvalue at the stationary state (no time "
                                     "is run: converged by construction)",
                             "lower_bound": False, "bracket": list(self.bracket), "edge": self.edge,
                             "outlier": self.outlier, "overlap2": self.overlap2, "separation": self.separation,
                             "separation_bracket": list(self.separation_bracket),
                             "truncation_n": self.truncation_n, "truncation": truncation,
                             "tried": [list(p) for p in self.tried],
                             "states": {str(k): v for k, v in self.states.items()}, "method": self.method,
                             "note": self.error or "delta*(t) tends to it as GD converges"},
                **({"error": self.error} if self.error else {})}

    def as_dict(self) -> dict:
        return {"t": "infinity", "value": self.value, "bracket": list(self.bracket), "error_bound": self.error_bound,
                "edge": self.edge, "outlier": self.outlier, "overlap2": self.overlap2,
                "separation": self.separation, "separation_bracket": list(self.separation_bracket),
                "truncation_n": self.truncation_n, "tried": [list(p) for p in self.tried],
                "states": {str(k): v for k, v in self.states.items()}, "method": self.method, "error": self.error}


def _tightest_bracket(points: list, lo: float, hi: float) -> Root:
    """The secant's answer from the evaluated (delta, value) pairs when a delta inside its bracket [lo, hi] (f(lo) <= 0
    < f(hi)) has no value: the first sign change from below among the finite values in [lo, hi], and the linear
    interpolation across it."""
    xs, ys = zip(*[(x, v) for x, v in points if math.isfinite(v) and lo <= x <= hi])
    i = cast(int, crossing_index(ys, 0.0, upward=True))  # lo and hi bracket 0 upwards, so some pair between does
    return Root(crossing(xs, ys, 0.0, upward=True), ((xs[i], ys[i]), (xs[i + 1], ys[i + 1])), tuple(points))


def _criteria(pred) -> tuple:
    """(margin, instability) of a Hessian prediction: the margin (> 0 iff a hard outlier below the edge) and minus the
    lowest outlier's eigenvalue (> 0 iff it is negative), continued without an outlier by margin - |edge| (equal to
    -edge where the outlier emerges at the edge, and < 0 below it)."""
    mg = float(pred.margin)
    if pred.outliers:
        return mg, -float(pred.outliers[0].lam)
    return mg, mg - abs(float(pred.edge))


def delta_star_infinity(problem, *, deltas=None, delta_range=THRESHOLD_DELTA_RANGE, points: int = STATIONARY_POINTS,
                        d: Optional[int] = None, n: Optional[int] = None, rtol: float = STATIONARY_RTOL,
                        order: Optional[int] = None, g_nodes: Optional[int] = None,
                        progress: bool = False) -> DeltaStarInfinity:
    """delta*(infinity) for a :class:`theorykit.Problem` of width m <= 2 with a hard direction (module docstring): the
    smallest delta on the grid (``deltas``, or ``points`` log-spaced in ``delta_range``) where the stationary state's
    Hessian has a negative hard outlier, refined to a bracket of relative width ``rtol``; beside it, where the outlier
    first separates from the bulk (to SEPARATION_RTOL_FACTOR times rtol).  d or n truncates the law at its 1/n
    quantile (n = delta d), as delta*(t) does: needed where D is unbounded below (square loss, y = z^2).  Deltas
    without a stationary state (below the interpolation threshold), or where the Hessian theory fails, are recorded
    in ``states`` and skipped.  ``order`` and ``g_nodes``: the stationary
    state's rule (:func:`theorykit.dynamics.stationary.stationary_state`); the quadrature's share of the error comes
    from 3/4 of ``order`` and G_NODES[m][1] (or 3/4 of ``g_nodes``) nodes in g."""
    p, _ = check_threshold_problem(problem, [0])
    if p.m not in G_NODES:
        raise TheorykitError(f"delta*(infinity) needs width m <= {max(G_NODES)} (got m = {p.m}): the stationary state "
                             "is solved for those; use delta_nn for the long-time DMFT")
    d, n, grid = scan_inputs(d, n, deltas, delta_range, points)
    rtol = check_number("rtol", rtol, lambda v: 0 < v < 1, "in (0, 1)")
    order = STATIONARY_ORDER if order is None else check_int("order", order, 8, 400)
    states, crit, preds, bad = {}, {}, {}, {}
    bar = Progress(len(grid) + 12, label="delta*(inf)", unit="states") if progress else None

    def solve(dl: float) -> tuple:
        if dl in crit:
            return crit[dl]
        below = [x for x, why in bad.items() if why == "init-dependent" and x > dl]
        if below:  # below the interpolation threshold at a larger delta: below it here too (n samples fewer)
            bad[dl] = f"init-dependent (as at delta = {min(below):g})"
            crit[dl] = (math.nan, math.nan)
            return crit[dl]
        try:  # started from the solved states: the two that bracket dl interpolated, else the nearest
            st = stationary_state(p.replace(delta=dl), order=order, check_order=0, start=list(states.values()),
                                  g_nodes=g_nodes)
        except np.linalg.LinAlgError as exc:  # a singular system at this delta: recorded, the others still answer
            st = None
            bad[dl] = f"no-solution (singular system: {exc})"
        pred = None
        if st is not None and st.status == "ok":
            try:
                pred = hessian_prediction(stationary_law(st, d=d, n=n))
            except TheorykitError as exc:  # the Hessian theory failed on this law: recorded, the others still answer
                bad[dl] = f"no Hessian prediction ({exc})"
                st = None
        if bar:
            bar.update(min(len(crit) + 1, len(grid) + 12))
        if st is None or st.status != "ok":
            bad.setdefault(dl, getattr(st, "status", "no-solution"))
            crit[dl] = (math.nan, math.nan)
            return crit[dl]
        preds[dl] = pred
        states[dl] = st.without_law()  # a start for the next delta (a width-2 law holds 10^5 - 10^6 paths)
        crit[dl] = _criteria(preds[dl])
        return crit[dl]

    # from the grid's middle, solved cold, up and then down, each solve started from the states solved so far (far
    # above the interpolation threshold a cold search can fail where a warm one succeeds: docs/theory.md §5); then
    # each delta without a state, nearest to a solved one first, once more from them
    ladder = sorted(grid)
    mid = len(ladder) // 2
    for dl in ladder[mid:] + ladder[:mid][::-1]:
        solve(dl)
    retry = [dl for dl in ladder if bad.get(dl) == "no-solution"]
    while retry and states:
        dl = min(retry, key=lambda x: min(abs(math.log(x / y)) for y in states))
        retry.remove(dl)
        del crit[dl], bad[dl]
        solve(dl)

    def root(which: int, rel: float):
        vals = [(dl, solve(dl)[which]) for dl in grid]
        fin = [(dl, v) for dl, v in vals if math.isfinite(v)]
        j = next((i for i, (_, v) in enumerate(fin) if v > 0), None)
        if j is None or j == 0:
            return None, j, vals
        (a, fa), (b, fb) = fin[j - 1], fin[j]
        try:
            r = secant_root(lambda x: solve(x)[which], a, b, tol=rel * b, max_evaluations=8, f_lo=fa, f_hi=fb)
        except TheorykitError:  # a delta inside the bracket has no value (recorded in bad): the tightest bracket found
            r = _tightest_bracket([(x, crit[x][which]) for x in sorted(crit)], a, b)
        return r, j, vals

    method = ("stationary state (latent Gauss-Hermite x composite Gauss-Legendre in g), Hessian outlier at it, "
              "bracketed secant")
    sep, _, _ = root(0, SEPARATION_RTOL_FACTOR * rtol)  # reported beside the threshold, with its bracket
    ins, j, vals = root(1, rtol)
    if bar:
        bar.close()
    tried = tuple((dl, *crit[dl]) for dl in sorted(crit))
    nan = math.nan
    sep_value = float(sep.value) if sep is not None else nan
    sep_bracket = (sep.bracket[0][0], sep.bracket[1][0]) if sep is not None else (nan, nan)
    if ins is None:
        listed = ", ".join(f"{dl:g}: {v:.3g}" for dl, v in vals)
        why = ("a negative hard outlier already exists at the grid's first delta with a state; lower the range"
               if j == 0 else "no negative hard outlier on the grid; raise the range")
        return DeltaStarInfinity(nan, (nan, nan), nan, nan, nan, nan, sep_value, sep_bracket, None, tried, bad,
                                 method, error=f"delta*(infinity): {why} (minus the outlier's eigenvalue: {listed})")
    (a, fa), (b, fb) = ins.bracket
    pred = preds[b]
    out = pred.outliers[0] if pred.outliers else None
    # the quadrature's part of the error: the criterion at b on the coarser rule, through the bracket's slope
    g_check = G_NODES[p.m][1] if g_nodes is None else max(16, 16 * ((3 * g_nodes) // 64))
    quad = math.nan
    try:
        cst = stationary_state(p.replace(delta=b), order=max(8, (3 * order) // 4), check_order=0, start=states[b],
                               g_nodes=g_check)
        if cst.status == "ok" and fb != fa:
            quad = abs(_criteria(hessian_prediction(stationary_law(cst, d=d, n=n)))[1] - fb) * (b - a) / abs(fb - fa)
    except np.linalg.LinAlgError:
        pass  # no coarser state: the bound is the bracket alone, as when the coarse state has no solution
    nt = None if d is None and n is None else (n if n is not None else max(1, int(round(b * d))))
    return DeltaStarInfinity(float(ins.value), (a, b), float(b - a) + (quad if math.isfinite(quad) else 0.0),
                             float(pred.edge), float(out.lam) if out else nan, float(out.overlap2) if out else nan,
                             sep_value, sep_bracket, nt, tried, bad, method)
