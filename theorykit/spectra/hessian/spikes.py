"""Single-sample spikes (docs/theory.md §4).

A sample with D_i far below the rest adds, at finite n, an eigenvalue where det(I + D_i S(lambda)/delta) = 0 on the
real curve (:mod:`.curve`) of the law without it (below the edge), with the eigenvector localised on x_i.  A finite-n
law's spikes are split off one by one (:func:`split_spikes`); a truncated DMFT law's are predicted from its expected
lowest samples (:func:`expected_extremes`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np
from scipy import optimize

from ..._checks import check_int
from ...errors import TheorykitError
from .curve import Curve, find_edge
from .law import HessianLaw, check_law
from .solver import Core

__all__ = ["expected_extremes", "single_sample_spikes", "split_spikes"]


def single_sample_spikes(law: HessianLaw, D_extreme, n: Optional[int] = None):
    """Predicted eigenvalues of the single-sample spikes of the given extreme D_i (K,), (K, 1, 1) or (K, m, m) on the
    bulk of ``law`` (the law without those samples): for each, lambda with det(I + D_i S(lambda)/delta) = 0 on the
    real curve below the edge (ridge included), or None when it falls inside the bulk.  Sorted lowest first."""
    law = check_law(law)
    De = np.asarray(D_extreme, dtype=float)
    if De.ndim == 1:
        De = De[:, None, None]
    if De.ndim != 3 or De.shape[1:] != (law.m, law.m):
        raise TheorykitError(f"D_extreme must have shape (K, {law.m}, {law.m})")
    core = Core(law)
    curve = Curve(core)
    tau_e, case, taus = find_edge(curve, law)

    def det_min(t, Di):
        S = core.mat(curve.at(t)[0])
        ev, U = np.linalg.eigh(S)
        R = (U * np.sqrt(ev)) @ U.T
        return float(np.linalg.eigvalsh(np.eye(law.m) + R @ Di @ R / law.delta)[0])

    out = []
    for Di in De:
        if det_min(tau_e, Di) > 0:
            out.append(None)
            continue
        lo = taus[0]
        if det_min(lo, Di) <= 0:
            out.append(None)
            continue
        t = optimize.brentq(det_min, lo, tau_e, args=(Di,), xtol=1e-14 * tau_e, rtol=1e-13, maxiter=200)
        out.append(float(curve.at(t)[1] + law.ridge))
    return out


def split_spikes(law: HessianLaw, max_spikes: int = 20):
    """Separate the single-sample spikes of a finite-n law (e.g. a simulation's own D_i, equal weights): repeatedly
    take the path with the lowest lambda_min(D); if, on the law without it, det(I + D S/delta) = 0 below the edge
    (:func:`single_sample_spikes`), it is a spike: remove it and continue; else stop.  Returns (bulk law, spike D
    (K, m, m), predicted spike eigenvalues (K,), lowest first)."""
    law = check_law(law)
    max_spikes = check_int("max_spikes", max_spikes, 0, 10000)
    Ds, lams = [], []
    cur = law
    for _ in range(max_spikes):
        i = int(np.argmin(cur.lam_min_D))
        keep = np.ones(len(cur.weights), bool)
        keep[i] = False
        if keep.sum() < 2:
            break
        rest = replace(cur, weights=cur.weights[keep] / cur.weights[keep].sum(), D=cur.D[keep], zeta=cur.zeta[keep],
                       radius=cur.radius[keep])
        lam = single_sample_spikes(rest, cur.D[i:i + 1])[0]
        if lam is None:
            break
        Ds.append(cur.D[i])
        lams.append(lam)
        cur = rest
    if Ds:
        cur = replace(cur, notes=cur.notes + (f"{len(Ds)} single-sample spikes split off (split_spikes)",))
    return cur, np.array(Ds).reshape(-1, law.m, law.m), np.array(lams)


def expected_extremes(law: HessianLaw, n, count: int = 5) -> np.ndarray:
    """The D of the law's paths at the weighted quantiles (j - 1/2)/n, j = 1..count, of lambda_min(D): the expected
    lowest D_i of a sample of n points (their spikes: :func:`single_sample_spikes` on ``law.truncated(n)``)."""
    law = check_law(law)
    n = check_int("n", n, 1)
    count = check_int("count", count, 1, 10000)
    lm = law.lam_min_D
    order = np.argsort(lm, kind="stable")
    cum = np.cumsum(law.weights[order])
    idx = [order[min(int(np.searchsorted(cum, (j - 0.5) / n)), len(order) - 1)] for j in range(1, count + 1)]
    return law.D[np.array(idx)]
