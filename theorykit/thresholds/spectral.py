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
from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from .. import defaults
from .._checks import Progress, check_int, check_number
from ..dynamics import dmft, dmft_scan
from ..errors import NoAnswer, TheorykitError
from ..rules import interpolation_error
from ..spectra.hessian import HessianLaw, hessian_prediction, top_edge

__all__ = ["DeltaNN", "DeltaStar", "HessianAt", "delta_nn", "delta_nn_from", "delta_star", "geometric_times", "hessian",
           "hessian_at", "law_at", "spectral_inapplicable"]

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
    truncation); unbounded: the law's tail verdict at b; tried: the (delta, margin) pairs evaluated, in order (a NaN
    margin: the DMFT did not reach t at that delta).  error: why this t has no value ("" when it has one): the
    margin does not change sign on the grid (with its trend), or the DMFT diverged where the sign changes; value,
    bracket and the prediction are then NaN.  dof: the degrees of freedom of stderr (replicas - 1);
    interpolation_error: the root's error from interpolating linearly in the bracket
    (:func:`theorykit.rules.interpolation_error`); interval95: Student's t on stderr widened by it (the paths and
    the grid, not the latent rule)."""

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
    error: str = ""
    dof: Optional[int] = None  # degrees of freedom of stderr: the replicas it was computed from, minus one
    interpolation_error: float = math.nan  # |linear - quadratic interpolation| of the margin's root (the grid's error)

    @property
    def interval95(self) -> tuple:
        """value -+ (t_{0.975, dof} stderr + interpolation_error): Student's t, since stderr is estimated from dof + 1
        replicas (4 replicas: 3 degrees of freedom, t = 3.18, not 1.96), widened by the root's interpolation error
        when it is known.  It covers the paths' sampling error and the bracket's interpolation, not the latent rule;
        (nan, nan) without a stderr."""
        if not self.dof or not math.isfinite(self.stderr) or not math.isfinite(self.value):
            return (math.nan, math.nan)
        from scipy.stats import t as student

        h = float(student.ppf(0.975, self.dof)) * self.stderr
        if math.isfinite(self.interpolation_error):
            h += self.interpolation_error
        return (self.value - h, self.value + h)

    def as_dict(self) -> dict:
        return {"t": self.t, "value": self.value, "stderr": self.stderr, "dof": self.dof,
                "interpolation_error": self.interpolation_error,
                "interval95": list(self.interval95), "bracket": list(self.bracket),
                "edge": self.edge, "outlier": self.outlier, "overlap2": self.overlap2,
                "truncation_n": self.truncation_n, "unbounded": self.unbounded,
                "tried": [list(p) for p in self.tried], "method": self.method, "D_low": self.D_low,
                "error": self.error}

    @classmethod
    def failed(cls, t: int, tried, error: str, method: str) -> "DeltaStar":
        """A t without a value: the margins tried and why (see ``error``)."""
        nan = math.nan
        return cls(t=t, value=nan, stderr=nan, bracket=(nan, nan), edge=nan, outlier=nan, overlap2=nan,
                   truncation_n=None, unbounded=None, tried=tuple((float(x), float(y)) for x, y in tried),
                   method=method, error=error)


def no_sign_change_reason(t: int, tried, grid) -> str:
    """Why delta*(t) has no value on the grid, with the margins' trend (where they head and how fast)."""
    fin = [(dl, mg) for dl, mg in tried if math.isfinite(mg)]
    listed = ", ".join(f"{dl:g}: {mg:.3g}" for dl, mg in tried)
    if not fin:
        return f"delta*(t = {t}): the DMFT did not reach t = {t} at any delta of the grid (margins {listed})"
    if fin[0][1] > 0:
        if fin[0][0] == grid[0]:
            return (f"delta*(t = {t}): a hard outlier already exists at delta = {grid[0]:g} (margin {fin[0][1]:.3g}); "
                    "lower the range")
        return (f"delta*(t = {t}): the margin is positive from delta = {fin[0][0]:g} on and undefined below it (the "
                f"DMFT did not reach t = {t} there: margins {listed}); the sign change is not on the grid")
    trend = ""
    if len(fin) >= 2:
        (d1, m1), (d2, m2) = fin[-2], fin[-1]
        slope = (m2 - m1) / (d2 - d1)
        trend = (f"; the margin still rises at the top ({m2:.3g} at delta = {d2:g}, {slope:.2g} per unit delta): "
                 f"raise the range" if slope > 0 else
                 f"; the margin falls at the top ({m2:.3g} at delta = {d2:g}): no outlier may exist at larger delta")
    return (f"delta*(t = {t}): no hard outlier for delta in [{grid[0]:g}, {grid[-1]:g}] (margins {listed})"
            + (trend or "; raise the range"))


def _low_quantiles(pred) -> Optional[dict]:
    q = (pred.D_tail or {}).get("quantiles") or {}
    out = {k: float(q[k]) for k in ("0.01", "0.001") if k in q}
    return out or None


def truncation_n_at(delta: float, d: Optional[int], n: Optional[int]) -> Optional[int]:
    if n is not None:
        return int(n)
    if d is not None:
        return max(1, int(round(delta * d)))
    return None


def with_support_verdict(law, pl, problem):
    """The law with its tail verdict from :func:`theorykit.spectra.hessian.support_tail` (D = the problem's network
    curvature at the paths' pre-activations and y = h(c z) with the noise at 0), when the network reproduces the
    law's D at its own paths (not during a spectral prefix, whose D is -T(y)); else the law's own tail diagnostic
    stays, marked as such."""
    from ..spectra.hessian import support_tail

    net, link = problem.network, problem.link_obj
    keep = pl.weights > 0
    if not np.any(keep) or not np.all(np.isfinite(pl.r[keep])):
        return law
    with np.errstate(all="ignore"):
        own = net.evaluate(pl.r[keep], pl.y[keep]).eigen_range()[0]
    lam_law = np.linalg.eigvalsh(pl.D[keep])[:, 0]
    tail = dict(law.tail or {})
    if not np.allclose(own, lam_law, rtol=1e-8, atol=1e-10 * (1.0 + float(np.max(np.abs(lam_law))))):
        tail["support"] = {"unbounded": None, "how": "support check skipped: the law's D is not the network's "
                                                     "curvature at its paths (a spectral prefix)"}
        return replace(law, tail=tail)
    r, z = pl.r[keep], pl.z[keep]

    def lam_min_at(c: float) -> np.ndarray:
        try:
            y = link.response(c * z)
        except TheorykitError:  # y not finite at c z: the sequence ends here
            return np.full(len(z), np.nan)
        return net.evaluate(r, y).eigen_range()[0]

    sup = support_tail(lam_min_at, np.linalg.norm(z, axis=1), pl.weights[keep])
    tail["support"] = sup
    if sup["unbounded"] is not None:
        tail["unbounded_paths"] = tail.get("unbounded")
        tail["unbounded"] = sup["unbounded"]
    return replace(law, tail=tail)


def law_at(result, t: int, *, d: Optional[int] = None, n: Optional[int] = None, replica: Optional[int] = None):
    """The :class:`HessianLaw` of a DMFT result at time t (kept with keep_law_at), truncated at its 1/n quantile when
    d (n = delta d) or n is given; ``replica`` restricts it to one replica's paths."""
    if result.laws is None or t not in result.laws:
        raise TheorykitError(f"the DMFT result holds no law at t = {t} (solve with keep_law_at=[{t}])")
    pl = result.laws[t]
    delta = result.problem.delta if result.problem is not None else result.settings["delta"]
    ridge = result.problem.ridge if result.problem is not None else result.settings.get("ridge", 0.0)
    if replica is not None:

        sel = pl.replica == replica
        w = np.where(sel, pl.weights, 0.0)
        if not w.sum() > 0:
            raise TheorykitError(f"replica {replica} has no kept paths at t = {t}")
        pl = replace(pl, weights=w / w.sum(), raw_weights=np.where(sel, pl.raw_weights, 0.0))
    law = HessianLaw.from_path_law(pl, delta, ridge)
    if result.problem is not None:
        law = with_support_verdict(law, pl, result.problem)
    nn = truncation_n_at(delta, d, n)
    return law.truncated(nn) if nn is not None else law


def hessian_at(result, t: int, *, d: Optional[int] = None, n: Optional[int] = None):
    """(HessianLaw, HessianPrediction) of a DMFT result at time t (see :func:`law_at`)."""
    law = law_at(result, t, d=d, n=n)
    return law, hessian_prediction(law)


@dataclass(frozen=True)
class HessianAt:
    """The Hessian of the empirical risk at GD time t (:func:`hessian`): ``law`` (a
    :class:`theorykit.spectra.HessianLaw`, truncated at its 1/n quantile when d or n was given), ``prediction`` (a
    :class:`theorykit.spectra.HessianPrediction`: edge, hard outliers with their overlap^2, margin), ``dmft``, the
    DMFT result the law was read from, and ``top_edge``, the bulk's right edge lambda_+
    (:func:`theorykit.spectra.hessian.top_edge`, its top tail truncated at the same n)."""

    t: int
    law: object
    prediction: object
    dmft: object
    top_edge: float = math.nan


def hessian(problem, t: int, *, d: Optional[int] = None, n: Optional[int] = None,
            paths: int = defaults.THRESHOLD_PATHS, replicas: int = defaults.THRESHOLD_REPLICAS,
            seed: int = defaults.DMFT_SEED, progress: bool = False) -> HessianAt:
    """The Hessian at GD time t for a :class:`theorykit.Problem` (docs/theory.md §4).

    The DMFT to t (its law of (D, zeta) kept at t), the law truncated at n = delta d samples (or ``n``) when given,
    and the bulk edge and hard outliers of H = (1/n) sum_i D_i (x) x_i x_i^T + ridge I solved on it: the bulk from
    S(z) = (-z I_m + E[(I_m + D S(z)/delta)^{-1} D])^{-1}, the hard outliers from det(Phi(lambda) - lambda I) = 0
    (docs/theory.md §4).

    Parameters
    ----------
    problem : Problem
        The learning problem; its step sizes are used up to t.
    t : int
        The GD time, >= 0.
    d, n : int, optional
        Truncate the law at n = delta d samples (or at ``n``); default: no truncation.  With d the DMFT itself is that
        of n = delta d samples (``dmft(..., d=d)``: paths beyond the latent 1/n quantile excluded where unstable).
    paths, replicas, seed : int
        The DMFT's.
    progress : bool
        Draw a progress bar on stderr.

    Returns
    -------
    HessianAt
        ``t``, ``law`` (a :class:`theorykit.spectra.HessianLaw`, truncated at its 1/n quantile when d or n was
        given), ``prediction`` (a :class:`theorykit.spectra.HessianPrediction`: edge, hard outliers with their
        overlap^2, margin), ``dmft``, the DMFT result the law was read from, and ``top_edge``, the bulk's right edge
        lambda_+ (eta lambda_+ > 2: GD runs beyond its edge of stability at t).

    Raises
    ------
    TheorykitError
        When the DMFT did not reach t (it diverged; the message carries its hint on eta).

    Examples
    --------
    >>> import theorykit as tk
    >>> pr = tk.Problem("gelu", "sign-symmetric", "logistic", delta=9.0, eta=1.0, steps=10)
    >>> h = tk.hessian(pr, 10, paths=4096, replicas=2)
    >>> h.prediction.margin > 0      # a hard outlier below the bulk at delta = 9, t = 10
    True
    """
    t = check_int("t", t, 0)
    res = dmft(_to_steps(problem, t), keep_law_at=[t], bias_check=False, paths=paths, replicas=replicas, seed=seed,
               progress=progress, d=d)
    if res.laws is None or t not in res.laws:
        hint = (res.diverged_at or {}).get("hint", "")
        raise TheorykitError(f"the DMFT did not reach t = {t} (status {res.status}){': ' + hint if hint else ''}")
    law, pred = hessian_at(res, t, d=d, n=n)
    try:
        top = top_edge(law, n=law.truncation_n)
    except TheorykitError:  # the right edge is a by-product: its solver failing leaves the rest (NaN, said by hessian)
        top = math.nan
    return HessianAt(t=t, law=law, prediction=pred, dmft=res, top_edge=top)


def spectral_inapplicable(problem) -> Optional[str]:
    """Why the spectral criterion cannot fire for ``problem`` (None when it can): the Hessian is PSD almost surely
    (:attr:`theorykit.symbolic.network.Network.hessian_psd`), so delta*(t) is infinite at every t."""
    net = problem.network
    if not net.hessian_psd:
        return None
    return (f"the Hessian is positive semi-definite almost surely (sigma'' = 0 off its kinks for "
            f"{net.activation.name!r} and l'' >= 0 for {net.loss.name!r}): it has no negative outlier at any delta "
            f"and t, so delta*(t) is infinite and the spectral criterion does not apply")


def check_threshold_problem(problem, times):
    from ..problem import Problem

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


def scan_inputs(d, n, deltas, delta_range, points) -> tuple:
    """(d, n, grid) checked for a threshold scan in delta: at most one of the truncations d (n = delta d) and n, and
    the sorted grid (``deltas``, or ``points`` log-spaced values in ``delta_range``)."""
    if d is not None and n is not None:
        raise TheorykitError("give d or n, not both")
    d = None if d is None else check_int("d", d, 1)
    n = None if n is None else check_int("n", n, 1)
    if deltas is None:
        lo, hi = (check_number("delta_range", v, lambda x: x > 0, "> 0") for v in delta_range)
        if not lo < hi:
            raise TheorykitError(f"delta_range must satisfy lo < hi, got {delta_range}")
        deltas = np.geomspace(lo, hi, check_int("points", points, 2, 1000))
    return d, n, sorted(float(x) for x in deltas)


def _to_steps(problem, T: int):
    """The Problem run for exactly T steps (its schedule cut at T, or steps = T)."""
    if problem.schedule is not None:
        return (problem.replace(schedule=list(problem.schedule)[:T]) if T > 0
                else problem.replace(schedule=None, eta=1.0, steps=0))
    return problem.replace(steps=T)


def delta_star(problem, times, deltas=None, *, delta_range=THRESHOLD_DELTA_RANGE, points: int = THRESHOLD_POINTS,
               d: Optional[int] = None, n: Optional[int] = None, paths: int = defaults.THRESHOLD_PATHS,
               replicas: int = defaults.THRESHOLD_REPLICAS, seed: int = defaults.DMFT_SEED,
               refine: int = THRESHOLD_REFINE, progress: bool = False, **dmft_options) -> list:
    """delta*(t) for every t in ``times`` (module docstring) -> list of :class:`DeltaStar`, one per t (sorted).

    delta*(t) is the smallest delta at which the DMFT state at time t has a hard outlier below the left edge of the
    Hessian's bulk: the sign change in delta of the margin -min eig(Phi(lambda_e) - lambda_e I) at the edge
    (docs/theory.md §5, "delta*(t): how it is computed"; the margin: docs/theory.md §4).

    Parameters
    ----------
    problem : Problem
        A :class:`theorykit.Problem` with a hard direction; its delta is replaced along the scan.
    times : sequence of int
        The times t >= 0.
    deltas : sequence of float, optional
        The scan grid (default ``points`` log-spaced values in ``delta_range``).
    delta_range : (float, float)
        The grid's range when ``deltas`` is not given.
    points : int
        The grid's number of deltas when ``deltas`` is not given.
    d, n : int, optional
        The truncation at the user's dimension (n = delta d moves with delta) or sample count.
    paths, replicas, seed, **dmft_options
        The DMFT's (the Problem's step sizes are used to T = max(times); from T = THRESHOLD_DIRECT_FROM_T on, direct
        Jacobian responses unless ``response`` is given or an ingredient is kinked).
    refine : int
        Regula-falsi DMFT solves per t after the grid.
    progress : bool
        Draw a progress bar on stderr.

    Returns
    -------
    list of DeltaStar
        One per t, sorted by t: ``value`` (the threshold), ``stderr``, ``bracket`` (a, b), ``edge``, ``outlier``,
        ``overlap2`` (at b), ``truncation_n``, ``unbounded``, ``tried`` (the (delta, margin) pairs evaluated) and
        ``error``.  A t whose margin does not change sign on the grid (or changes it where the DMFT diverged) has
        value NaN and its ``error`` (with the margins' trend), and the other t go on; a delta where the DMFT
        diverges is skipped (the bracket spans it).

    Raises
    ------
    TheorykitError
        A bad input (one line): no hard direction; a Hessian that is PSD almost surely (use
        :func:`theorykit.delta_dyn`).
    theorykit.errors.NoAnswer
        No t has a value (its ``partial`` holds every t's entry with its ``error``).

    Examples
    --------
    >>> import theorykit as tk
    >>> pr = tk.Problem("gelu", "sign-symmetric", "logistic", delta=9.0, eta=1.0, steps=10)
    >>> ds = tk.delta_star(pr, [5], deltas=[2.0, 4.0, 8.0, 16.0], paths=2048, replicas=2, refine=0, processes=1)
    >>> len(ds), ds[0].t, 2.0 <= ds[0].value <= 16.0
    (1, 5, True)
    """
    p, ts = check_threshold_problem(problem, times)
    d, n, grid = scan_inputs(d, n, deltas, delta_range, points)
    refine = check_int("refine", refine, 0, 50)
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
            fin = [(dl, mg) for dl, mg in tried if math.isfinite(mg)]  # a delta where the DMFT diverged is skipped
            j = next((i for i, (_, mg) in enumerate(fin) if mg > 0), None)
            if j is None or j == 0:
                out.append(DeltaStar.failed(t, tried, no_sign_change_reason(t, tried, grid),
                                            method="DMFT scan, no bracket"))
                continue
            (a, fa), (b, fb) = fin[j - 1], fin[j]
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
            interp = interpolation_error(value, (a, fa_true), (b, fb_true), tried)
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
                                 D_low=_low_quantiles(pred), dof=(len(per) - 1 if len(per) >= 2 else None),
                                 interpolation_error=interp,
                                 method=(f"DMFT scan ({len(grid)} deltas, {paths} paths in {replicas} replicas, "
                                         f"common random numbers) + {refine} regula-falsi solves to T = t (the "
                                         f"exact prefix of the solve to T = {T}); margin by "
                                         f"{pred.method.split(' on ')[0]}; value = linear interpolation of the margin "
                                         f"in the bracket; stderr from the per-replica laws ({len(per)} replicas, "
                                         f"{len(per) - 1} degrees of freedom: the paths' sampling error); "
                                         f"interpolation error {interp:.2g} (quadratic against linear root in the "
                                         f"bracket); neither covers the latent rule")))
    finally:
        if bar:
            bar.close(done)
    if not any(math.isfinite(q.value) for q in out):
        raise NoAnswer("; ".join(q.error for q in out), partial=out)
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
    gamma: tuple = ()  # criterion "dynamical": delta_dyn's gamma(delta) entries

    def as_dict(self) -> dict:
        out: dict[str, Any]
        out = {"value": self.value, "stderr": self.stderr, "criterion": self.criterion,
               "converged": None if self.criterion == "dynamical" else self.converged,
               "evidence": {"definition": self.definition, "rule": self.rule, "by_t": self.by_t,
                            "lower_bound": False if self.criterion == "dynamical" else not self.converged,
                            "sequence": [{"t": q.t, "value": q.value, "stderr": q.stderr, "edge": q.edge,
                                          "D_low": q.D_low, "truncation_n": q.truncation_n,
                                          "unbounded": q.unbounded} for q in self.sequence],
                            "increments": list(self.increments), "settled": self.settled,
                            "unbounded": self.unbounded, "truncation": self.truncation, "note": self.note}}
        if self.gamma:
            out["evidence"]["gamma"] = [dict(g) for g in self.gamma]
        return out

    @classmethod
    def from_dynamical(cls, dyn, why: str) -> "DeltaNN":
        """delta_NN where the spectral criterion cannot fire (``why``: the Hessian is PSD almost surely, see
        :func:`spectral_inapplicable`): the one criterion that applies is the dynamical one, so delta_NN is
        ``dyn`` (a :class:`theorykit.thresholds.DeltaDyn`)."""
        return cls(value=float(dyn.value), stderr=float(dyn.stderr), criterion="dynamical", definition=dyn.definition,
                   rule="delta_dyn: gamma(delta) = -d ln m*/dT crosses 0 (docs/theory.md §5)", converged=False,
                   by_t=int(dyn.t_range[1]), sequence=(), increments=(), settled={}, unbounded=None, truncation=None,
                   note=why + ", so delta_NN is the dynamical criterion's delta_dyn", gamma=tuple(dyn.gamma))


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
        bad = [q for q, v in zip(seq, vals) if not math.isfinite(v)]
        raise NoAnswer(f"delta_NN: delta*(t) is undefined at t = {[q.t for q in bad]}"
                       + (f" ({bad[0].error})" if getattr(bad[0], "error", "") else ""))
    inc = tuple(float(b - a) for a, b in zip(vals, vals[1:]))
    last, prev = seq[-1], seq[-2]
    small = [abs(x) <= tol * abs(last.value) for x in inc[-2:]]
    q_last = (last.D_low or {}).get("0.001")
    q_prev = (prev.D_low or {}).get("0.001")
    # the edge tends to 0 from below as GD converges (the bulk of a minimum's Hessian): its change is measured against
    # the width of D's low tail (|its 1e-3 quantile|) as well as against itself
    settled: dict[str, Any]
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
                f"truncated at its 1/n quantile with "
                f"{'n = delta d, d = ' + str(d) if d is not None else 'n = ' + str(n)}")
    else:
        note = "D bounded below (or undecided) along the sequence: the law has a left edge at every t"
    rule = (f"converged iff the last two increments of delta*(t) on the t grid are both <= {tol:g} x delta*(T) and "
            f"the edge and the 1e-3 quantile q of lambda_min(D) moved by <= {settle_tol:g} over the last increment "
            "(relative: the edge's change against max(|edge|, |q|), as the edge tends to 0 when GD converges); "
            "otherwise 'not converged by t = T' and the value is a lower bound")
    return DeltaNN(value=float(last.value), stderr=float(last.stderr), criterion="spectral",
                   definition="delta_NN = lim_t delta*(t), delta*(t) the smallest delta with a hard outlier below the "
                              "Hessian's bulk at GD time t (docs/theory.md §5)",
                   rule=rule, converged=converged, by_t=int(last.t), sequence=tuple(seq), increments=inc,
                   settled=settled, unbounded=unb, truncation=trunc,
                   note=note + ("" if converged else f"; not converged by t = {last.t}: delta_NN >= {last.value:.4g}"))


def delta_nn(problem, T: int, *, times=None, points_t: int = NN_POINTS, first_t: int = NN_FIRST_T,
             tol: float = NN_TOL, settle_tol: float = NN_SETTLE_TOL, d: Optional[int] = None, n: Optional[int] = None,
             dyn_range=None, dyn_deltas=None, **delta_star_options) -> DeltaNN:
    """delta_NN = lim delta*(t) from delta*(t) on a geometric t grid up to T, with its evidence.

    delta*(t) on a geometric t grid up to T (:func:`geometric_times`, or ``times``) — one :func:`delta_star` scan
    serves every t — judged by :func:`delta_nn_from`'s rule: converged iff the last two increments are both
    <= ``tol`` x delta*(T) and the edge and low quantiles of D have settled within ``settle_tol`` (docs/theory.md §5,
    "delta_NN: the limit, its rule and its evidence").

    Where the Hessian is PSD almost surely (:func:`spectral_inapplicable`) no outlier can exist and delta*(t) is
    infinite: delta_NN is then the dynamical criterion's :func:`theorykit.thresholds.delta_dyn` on the window
    ``dyn_range`` = (T1, T2) over ``dyn_deltas`` (criterion "dynamical"; an error names them when missing;
    docs/theory.md §5, "The dynamical criterion").

    Parameters
    ----------
    problem : Problem
        A :class:`theorykit.Problem`.
    T : int
        The last time of the grid.
    times : sequence of int, optional
        The t grid (it must end at T); default ``points_t`` geometric times from ``first_t``.
    points_t, first_t : int
        The default grid.
    tol, settle_tol : float
        The rule's tolerances.
    d, n : int, optional
        The truncation (required in effect where D is unbounded below).
    dyn_range, dyn_deltas
        The dynamical criterion's window and deltas, used where the Hessian is PSD almost surely.
    **delta_star_options
        Other options go to :func:`delta_star`.

    Returns
    -------
    DeltaNN
        ``value`` (delta*(T) at the grid's last time, a lower bound when not converged), ``stderr``, ``criterion``
        ("spectral" or "dynamical"), ``converged``, ``sequence`` (the DeltaStar of every grid time), ``increments``,
        ``settled``, ``unbounded``, ``truncation``, ``note``.

    Raises
    ------
    TheorykitError
        A t grid that does not end at T; fewer than 3 times; a PSD Hessian without ``dyn_range``; and the errors of
        :func:`delta_star`.

    Examples
    --------
    >>> import theorykit as tk
    >>> pr = tk.Problem("gelu", "sign-symmetric", "logistic", delta=9.0, eta=1.0, steps=10)
    >>> nn = tk.delta_nn(pr, 20, times=[5, 10, 20], deltas=[2.0, 4.0, 8.0], paths=2048, replicas=2, refine=0,
    ...                  processes=1)
    >>> nn.criterion, len(nn.sequence), [s.t for s in nn.sequence]
    ('spectral', 3, [5, 10, 20])
    """
    ts = sorted(set(times)) if times is not None else geometric_times(T, points_t, first_t)
    if max(ts) != T:
        raise TheorykitError(f"the t grid must end at T = {T}, got {ts}")
    why = spectral_inapplicable(problem)
    if why:
        if dyn_range is None:
            raise TheorykitError(why + "; delta_NN is then the dynamical criterion's delta_dyn: give dyn_range=(T1, "
                                       "T2) and dyn_deltas")
        from .dynamical import delta_dyn

        opts = {k: v for k, v in delta_star_options.items() if k in ("paths", "replicas", "seed", "progress")}
        return DeltaNN.from_dynamical(delta_dyn(problem, dyn_deltas, dyn_range, **opts), why)
    seq = delta_star(problem, ts, d=d, n=n, **delta_star_options)
    return delta_nn_from(seq, tol=tol, settle_tol=settle_tol, d=d, n=n)
