"""The finite-d kick test (docs/theory.md §7, "Kick test"): GD started with a small overlap m0 on the first hard
direction, and the late growth rate of that overlap, fitted per seed.  The referee's side of the dynamical criterion
(theorykit.thresholds.delta_dyn); it runs the simulator only."""
from __future__ import annotations

import math

import numpy as np

from ..errors import TheorykitError


def kick_growth_rate(problem, *, d: int, m0: float, t_range, seeds=(0, 1, 2, 3), **simulate_options) -> dict:
    """gamma_sim: the slope of ln |a_t| over t in ``t_range`` = (t1, t2), a_t = (e^T M_t) / sqrt(gram_t) the
    overlap amplitude (cos) of GD's weights with the first hard direction e, from Theta(0) = m0 Theta* e + noise
    (the Problem's M0 set to m0 e; width 1).  Per seed a least-squares slope, over the times of the range before the
    run first reaches cos^2 > 1/2 (the growth stops being linear there); reported: the mean over seeds, its standard
    error, and the per-seed slopes.  Same units as delta_dyn's gamma = -d ln m*/dT (a rate of the amplitude, half
    the rate of cos^2).  simulate_options: the simulator's (e.g. constrained=False, n_test)."""
    from ..problem import Problem
    from .gd import simulate

    if not isinstance(problem, Problem):
        raise TheorykitError(f"kick_growth_rate takes a theorykit.Problem, got {type(problem).__name__}")
    if problem.m != 1:
        raise TheorykitError("kick_growth_rate is defined for width m = 1")
    if not (isinstance(m0, (int, float)) and 0 < m0 < 1):
        raise TheorykitError(f"m0 must be a number in (0, 1), got {m0!r}")
    t1, t2 = (int(v) for v in t_range)
    if not 0 <= t1 < t2 - 1:
        raise TheorykitError(f"t_range must satisfy 0 <= t1 < t2 - 1, got {t_range!r}")
    hb = np.asarray(problem.analysis.hard_basis, dtype=float).reshape(problem.link_obj.k, -1)
    if hb.shape[1] == 0:
        raise TheorykitError("this link has no hard direction: no kick test")
    e = hb[:, 0]
    pr = problem.replace(steps=t2, M0=[[float(v)] for v in m0 * e])
    slopes, used, early = [], [], []
    for seed in seeds:
        r = simulate(pr, d=d, seed=int(seed), **simulate_options)
        if r.status != "ok":
            raise TheorykitError(f"GD diverged at step {r.diverged_at['step']} (seed {seed})")
        amp = np.abs(r.M[:, :, 0] @ e) / np.sqrt(r.gram[:, 0, 0])
        stop = next((t for t in range(len(amp)) if amp[t] ** 2 > 0.5), len(amp))
        ts = np.arange(t1, min(t2, stop - 1) + 1)
        if len(ts) < 3:  # escaped before the window: no late rate to fit (counted, not averaged)
            early.append(int(seed))
            continue
        slopes.append(float(np.polyfit(ts, np.log(amp[ts]), 1)[0]))
        used.append([int(ts[0]), int(ts[-1])])
    s = np.asarray(slopes)
    return {"value": (float(s.mean()) if len(s) else math.nan),
            "stderr": (float(s.std(ddof=1) / math.sqrt(len(s))) if len(s) > 1 else math.nan),
            "per_seed": slopes, "fitted_on": used, "escaped_before_window": early, "d": int(d), "m0": float(m0),
            "seeds": [int(v) for v in seeds],
            "how": "per seed: least squares of ln|cos(theta, e)| on t in the range (before cos^2 > 1/2); "
                   "mean and standard error over the seeds still below cos^2 = 1/2 at t1 + 2 (the others are "
                   "listed as escaped before the window)"}
