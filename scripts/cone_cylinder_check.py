#!/usr/bin/env python
"""How well does finite_d's cone interpolation of the capture strength reproduce a known capture region?

    python scripts/cone_cylinder_check.py M ANCHORS RATIO     # e.g. 4 7 36 (width 4's default), 8 9 36

A synthetic cylinder, the shape the width-m >= 3 ladders show on phase retrieval with a = +-1: only the a = +1
neurons' overlaps matter, capture iff |mu_+| > r0 = 0.1 (strength |u_+| / r0 on a unit direction u), and V_eff is
RATIO times larger on the a = -1 neurons (3.1 on the a = +1 ones, d = 400).  Printed: P(capture) by Monte Carlo
(400000 draws of mu), with the exact strength on the Sobol' directions finite_d averages over, with the committed
rule (barycentric coordinates of the hull's exit point, normalised to sum 1:
theorykit.thresholds.directions.ConeInterpolant), and with the conic coefficients (the same facet, not normalised,
exact for a strength linear on the facet's cone); and the interpolated strength against the exact one (median,
10% and 90% quantiles) at those directions.  The anchors: theorykit.thresholds.directions.anchor_directions.
"""
import sys

import numpy as np
from scipy.stats import chi2

from theorykit.thresholds.directions import ConeInterpolant, anchor_directions, sphere_directions


def main(m: int, anchors: int, ratio: float) -> None:
    classes, flip = (tuple(range(0, m, 2)), tuple(range(1, m, 2))), True
    plus, r0, d = np.arange(0, m, 2), 0.1, 400

    def strength(U):
        return np.linalg.norm(U[:, plus], axis=1) / r0

    V = np.diag([3.1 if j % 2 == 0 else 3.1 * ratio for j in range(m)])
    mu = np.random.default_rng(0).multivariate_normal(np.zeros(m), V / d, size=400_000)
    truth = float(np.mean(np.linalg.norm(mu[:, plus], axis=1) > r0))
    A = anchor_directions(m, flip, classes, anchors)
    cone = ConeInterpolant(A, flip, classes)
    Bw = sphere_directions(m) @ np.sqrt(V).T
    sc = (Bw ** 2).sum(1)
    q = Bw / np.sqrt(sc)[:, None]
    idx, lam = cone.coordinates(q)
    s_norm = (lam * strength(A)[idx]).sum(1)
    # the conic coefficients of q on the same facet (q = sum L_i p_i): the normalised ones times sum L_i
    k = min(8, len(cone.vertices))
    score = q @ cone.normals.T
    cand = np.argpartition(-score, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(score, cand, axis=1)
    on = top >= top.max(axis=1, keepdims=True) * (1 - 1e-9) - 1e-12
    L = np.einsum("ckij,cj->cki", cone.inverse[cand], q)
    pick = np.argmax(np.where(on, L.min(axis=2), -np.inf), axis=1)
    s_conic = s_norm * np.maximum(L[np.arange(len(q)), pick], 0).sum(1)
    s_true = strength(q)

    def P(s):
        with np.errstate(divide="ignore"):
            return float(np.mean(chi2.sf(d * np.where(s > 0, 1 / s ** 2, np.inf) / sc, m)))

    print(f"m = {m}, {len(A)} anchors, V_eff ratio {ratio:g}: P by Monte Carlo {truth:.3f}; "
          f"exact strength {P(s_true):.3f}; normalised barycentric (committed) {P(s_norm):.3f}; conic {P(s_conic):.3f}")
    for name, s in (("normalised", s_norm), ("conic", s_conic)):
        r = s / s_true
        print(f"  {name} / exact strength: median {np.median(r):.3f}, 10% {np.quantile(r, 0.1):.3f}, "
              f"90% {np.quantile(r, 0.9):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
