"""Step schedules of the DMFT and the simulator: constant steps, or the non-uniform grid of the gradient-flow mode
(docs/theory.md §3, numerics)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import TheorykitError


def flow_schedule(flow_time: float, eta0: float = 0.05, eta_max: float = 1.0, doubling_every: int = 40):
    """Non-uniform grid for the gradient-flow mode: ``doubling_every`` steps of eta0, then of 2 eta0, ... up to
    eta_max, until the flow time sum(eta_t) reaches ``flow_time``.  Returns the step sizes (array).

    The DMFT with a step schedule is the exact DMFT of GD with that schedule; the gradient-flow limit is reached
    as eta0, eta_max -> 0 and is checked by halving them (see ``benchmarks/bench_dmft.py``)."""
    for name, v in (("flow_time", flow_time), ("eta0", eta0), ("eta_max", eta_max)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise TheorykitError(f"{name} must be a positive number, got {v!r}")
    if eta_max < eta0:
        raise TheorykitError(f"eta_max = {eta_max} is below eta0 = {eta0}")
    if not (isinstance(doubling_every, int) and doubling_every >= 1):
        raise TheorykitError(f"doubling_every must be a positive integer, got {doubling_every!r}")
    steps, tau, eta, count = [], 0.0, float(eta0), 0
    while tau < flow_time - 1e-12:
        h = min(eta, flow_time - tau)
        steps.append(h)
        tau += h
        count += 1
        if count == doubling_every and eta < eta_max:
            eta, count = min(2 * eta, eta_max), 0
        if len(steps) > 10 ** 6:
            raise TheorykitError("flow_schedule: more than 10^6 steps; raise eta0 or eta_max")
    return np.array(steps)
