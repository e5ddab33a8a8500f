"""The dynamical criterion (docs/theory.md §5, "The dynamical criterion"): delta_dyn, where the capture growth rate
gamma(delta) = -d ln m*/dT changes sign.  gamma > 0: ever smaller initial hard overlaps are captured as the horizon T
grows (the hard direction is dynamically unstable at that delta); gamma <= 0: they are not.  m*(T) comes from
:func:`theorykit.thresholds.capture.capture_curve` (one ladder of nonlinear DMFT runs per delta), gamma from
:func:`theorykit.thresholds.capture.growth_rate`.  This is the criterion that applies when the Hessian is positive
semi-definite (no spectral outlier can exist: ReLU with a convex loss)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from .._checks import Progress, check_deltas, check_int
from ..errors import DivergenceError, TheorykitError
from ..rules import crossing_index
from .capture import LADDER_POINTS, capture_curve, growth_rate


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
    """gamma(delta) = -d ln m*/dT at every delta of ``deltas``, and delta_dyn where gamma crosses 0.

    m*(T) is the smallest initial hard overlap m0 from which the nonlinear DMFT reaches cos^2 > 1/2 by T;
    gamma(delta) = -d ln m*/dT (:func:`.capture.growth_rate` on :func:`.capture.capture_curve`, one ladder of DMFT
    runs per delta, each to T = t_range[1]) and delta_dyn is where gamma crosses 0 (docs/theory.md §5, "The
    dynamical criterion").

    Parameters
    ----------
    problem : Problem
        m = 1, constant steps, no M0 (its delta is replaced).
    deltas : sequence of float
        At least two deltas.
    t_range : (int, int)
        The fit window (t1, t2), with t1 + 2 <= t2.
    m0s : sequence of float, optional
        The ladder of initial overlaps (default: LADDER_POINTS geometric rungs).
    progress : bool
        Draw a progress bar on stderr.
    **dmft_options
        paths, replicas, seed, ... (the same seed at every delta); ``paths`` not given: capture_curve's default
        (a kinked activation or loss at least replicas x KINKED_REPLICA_PATHS).

    Returns
    -------
    DeltaDyn
        ``value`` (NaN when gamma does not change sign on the grid: ``reason`` says which way), ``stderr``,
        ``gamma`` (one entry per delta {"delta", "value", "stderr", "t_range", "points"}), ``t_range``,
        ``criterion`` "dynamical", ``method``.

    Raises
    ------
    TheorykitError
        Fewer than two deltas, or a bad ``t_range``.  A delta whose GD diverges, or whose m* leaves the ladder on
        the range, gets value NaN with a note instead.

    Examples
    --------
    >>> import theorykit as tk
    >>> pp = tk.Problem("gelu", "phase-retrieval", delta=8.0, eta=1.0, steps=10)
    >>> dd = tk.delta_dyn(pp, [4.0, 16.0], (5, 10), m0s=[0.01, 0.05, 0.2, 0.5], paths=1024, replicas=2,
    ...                   processes=1)
    >>> dd.criterion, [g["delta"] for g in dd.gamma]
    ('dynamical', [4.0, 16.0])
    """
    grid = sorted(check_deltas(deltas, at_least=2))
    try:
        t1, t2 = (check_int("t_range", v, 0) for v in t_range)
    except TypeError:
        raise TheorykitError(f"t_range must be two integers t1 < t2, got {t_range!r}") from None
    if not t1 + 2 <= t2:
        raise TheorykitError(f"t_range must satisfy t1 + 2 <= t2, got {t_range!r}")
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
                            "note": str(err), "m_star_at_t2": curve.m_star[t2]})
                continue
            gam.append({"delta": dl, "value": g.value, "stderr": g.stderr, "t_range": list(g.t_range),
                        "points": g.points, "how": g.how})
    finally:
        if bar:
            bar.close()
    value, se, reason = math.nan, math.nan, None
    ok = [g for g in gam if math.isfinite(g["value"])]  # deltas with a rate (m* inside the ladder)
    i = crossing_index([g["value"] for g in ok], 0.0, upward=True)
    if len(ok) < 2:
        reason = (f"gamma is defined at {len(ok)} delta(s) of the grid "
                  "(elsewhere m* leaves the ladder or the DMFT diverges)")
    elif i is None:
        reason = ("gamma > 0 at every delta of the grid where it is defined: delta_dyn is below it"
                  if ok[0]["value"] > 0 else
                  "gamma <= 0 at every delta of the grid where it is defined: delta_dyn is above it")
    else:
        a, b = ok[i], ok[i + 1]
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
