"""Thresholds from the Hessian at time t (docs/theory.md §5): delta*(t), the smallest delta at which the DMFT state at
time t (itself depending on delta) has a hard outlier below the left edge of the Hessian's bulk.

One DMFT scan in delta (:func:`theorykit.dmft_scan`: common random numbers, the first solve's 'auto' choices frozen,
excluded paths united) run to T = max(times), keeping the law of (D, zeta) at every requested t, gives the outlier
margin (:func:`theorykit.spectra.hessian.hessian_prediction`: minus the smallest eigenvalue of Phi(lambda) - lambda I
at the edge; > 0 iff a hard outlier exists) at every (delta, t) — so a whole list of t costs one scan, not one per
t.  For each t the smallest sign change of the margin along the grid is refined by regula falsi (Illinois) with
further DMFT solves under the same frozen choices and exclusions, and the value reported is the linear
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
from ._checks import Progress, check_int, check_number
from .errors import TheorykitError
from .dynamics import dmft, dmft_scan
from .spectra.hessian import HessianLaw, hessian_prediction

__all__ = ["DeltaStar", "delta_star", "hessian_at", "law_at"]

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

    def as_dict(self) -> dict:
        return {"t": self.t, "value": self.value, "stderr": self.stderr, "bracket": list(self.bracket),
                "edge": self.edge, "outlier": self.outlier, "overlap2": self.overlap2,
                "truncation_n": self.truncation_n, "unbounded": self.unbounded,
                "tried": [list(p) for p in self.tried], "method": self.method}


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
    T = max(ts)
    if problem.schedule is not None:
        if len(problem.schedule) < T:
            raise TheorykitError(f"the Problem's schedule has {len(problem.schedule)} steps < max(times) = {T}")
        p = problem.replace(schedule=list(problem.schedule)[:T]) if T > 0 else problem.replace(schedule=None, eta=1.0,
                                                                                                   steps=0)
    else:
        p = problem.replace(steps=T)
    return p, ts


def delta_star(problem, times, deltas=None, *, delta_range=THRESHOLD_DELTA_RANGE, points: int = THRESHOLD_POINTS, d: Optional[int] = None,
               n: Optional[int] = None, paths: int = THRESHOLD_PATHS, replicas: int = THRESHOLD_REPLICAS,
               seed: int = defaults.DMFT_SEED, refine: int = THRESHOLD_REFINE, progress: bool = False,
               **dmft_options) -> list:
    """delta*(t) for every t in ``times`` (module docstring) -> list of :class:`DeltaStar`, one per t (sorted).

    deltas: the scan grid (default ``points`` log-spaced values in ``delta_range``); d or n: the truncation at the
    user's dimension (n = delta d moves with delta) or sample count; paths, replicas, seed and ``dmft_options``: the
    DMFT's (the Problem's step sizes are used to T = max(times); from T = THRESHOLD_DIRECT_FROM_T on, direct Jacobian
    responses unless ``response`` is given); refine: regula-falsi DMFT solves per t after the
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
    if max(ts) >= THRESHOLD_DIRECT_FROM_T and "response" not in dmft_options:
        dmft_options = {**dmft_options, "response": "direct"}
    opts = dict(paths=paths, replicas=replicas, seed=seed, bias_check=False, keep_law_at=ts, **dmft_options)
    # the bar counts DMFT scan solves: one per grid delta, then `refine` per requested t
    bar = Progress(len(grid) + refine * len(ts), label="delta_star", unit="DMFT solves") if progress else None
    scan = dmft_scan(p, grid, **opts)
    done = len(grid)
    if bar:
        bar.update(done)
    frozen = scan[0].settings["scan"]["frozen"]
    exclude = scan[0].excluded_masks
    solved = {dl: r for dl, r in zip(grid, scan)}

    def solve(dl):
        nonlocal done
        if dl not in solved:
            r = dmft(p.replace(delta=dl), **{**opts, **frozen}, exclude=exclude)
            solved[dl] = r
            done += 1
            if bar:
                bar.update(done)
        return solved[dl]

    def margin(dl, t, replica=None):
        r = solve(dl)
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
            law = law_at(solve(b), t, d=d, n=n)
            pred = hessian_prediction(law)
            o = pred.outliers[0] if pred.outliers else None
            out.append(DeltaStar(t=t, value=float(value), stderr=stderr, bracket=(float(a), float(b)),
                                 edge=float(pred.edge), outlier=(float(o.lam) if o else math.nan),
                                 overlap2=(float(o.overlap2) if o else math.nan), truncation_n=law.truncation_n,
                                 unbounded=pred.unbounded, tried=tuple((float(x), float(y)) for x, y in tried),
                                 method=(f"DMFT scan ({len(grid)} deltas, {paths} paths in {replicas} replicas, "
                                         f"common random numbers) + {refine} regula-falsi solves; margin by "
                                         f"{pred.method.split(' on ')[0]}; value = linear interpolation of the margin "
                                         f"in the bracket; stderr from the per-replica laws ({len(per)} replicas)")))
    finally:
        if bar:
            bar.close(done)
    return out
