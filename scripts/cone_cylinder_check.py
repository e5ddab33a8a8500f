#!/usr/bin/env python
"""How well does finite_d's interpolation of the capture strength reproduce a known capture region?

    python scripts/cone_cylinder_check.py M ANCHORS RATIO [SHAPE]   # e.g. 4 7 36 (width 4's default), 8 9 36

Synthetic capture regions with the width-m >= 3 symmetries of phase retrieval with a = +-1 (the a = +1 neurons one
class, the a = -1 ones another, and the flip): SHAPE (default cylinder) is the capture strength s(u) on a unit
direction u, capture iff |mu| s(mu/|mu|) > 1, with r0 = 0.1 and u_+ the a = +1 neurons' overlaps:

* cylinder: |u_+| / r0, the shape the width-4 ladders show (only the a = +1 overlaps matter);
* pair: sqrt(|u_+|^2 - 1.6 u_1 u_3) / r0 (u_1, u_3 the first two a = +1 overlaps: opposite signs capture sooner);
* ball: |u| / r0;
* diamond: |u_+|_1 / r0 (a cylinder over an l1 ball: not a quadratic form);
* box: |u_+|_inf / r0 (over an l-inf ball: not a quadratic form).

V_eff is RATIO times larger on the a = -1 neurons (3.1 on the a = +1 ones, d = 400).  Printed: P(capture) by Monte
Carlo (400000 draws of mu); with the exact strength on the Sobol' directions finite_d averages over; with the
committed rule (a quadratic gauge fitted to the anchors plus the cone interpolation of the rest:
theorykit.thresholds.directions.StrengthInterpolant); with the cone interpolation of s alone (the rule before it:
barycentric coordinates of the hull's exit point, normalised to sum 1, ConeInterpolant); and each rule's strength
against the exact one at those directions (median, 10% and 90% quantiles).  The anchors:
theorykit.thresholds.directions.anchor_directions.
"""
import sys

import numpy as np
from scipy.stats import chi2

from theorykit.thresholds.directions import (ConeInterpolant, StrengthInterpolant, anchor_directions,
                                             sphere_directions)


def main(m: int, anchors: int, ratio: float, shape: str = "cylinder") -> None:
    classes, flip = (tuple(range(0, m, 2)), tuple(range(1, m, 2))), True
    plus, r0, d = np.arange(0, m, 2), 0.1, 400
    shapes = {
        "cylinder": lambda U: np.linalg.norm(U[:, plus], axis=1),
        "pair": lambda U: np.sqrt(np.maximum((U[:, plus] ** 2).sum(1) - 1.6 * U[:, 0] * U[:, 2], 0.0)),
        "ball": lambda U: np.linalg.norm(U, axis=1),
        "diamond": lambda U: np.abs(U[:, plus]).sum(1),
        "box": lambda U: np.abs(U[:, plus]).max(1),
    }
    if shape not in shapes:
        raise SystemExit(f"SHAPE must be one of {', '.join(shapes)}")

    def strength(U):
        return shapes[shape](U) / r0

    V = np.diag([3.1 if j % 2 == 0 else 3.1 * ratio for j in range(m)])
    mu = np.random.default_rng(0).multivariate_normal(np.zeros(m), V / d, size=400_000)
    n = np.linalg.norm(mu, axis=1)
    truth = float(np.mean(n * strength(mu / n[:, None]) > 1))
    A = anchor_directions(m, flip, classes, anchors)
    Bw = sphere_directions(m) @ np.sqrt(V).T
    sc = (Bw ** 2).sum(1)
    q = Bw / np.sqrt(sc)[:, None]
    rule = StrengthInterpolant(A, flip, classes)
    s_rule = rule.evaluate(rule.prepare(q), strength(A))
    cone = ConeInterpolant(A, flip, classes)
    s_cone = cone.evaluate(cone.coordinates(q), strength(A))
    s_true = strength(q)

    def P(s):
        with np.errstate(divide="ignore"):
            return float(np.mean(chi2.sf(d * np.where(s > 0, 1 / s ** 2, np.inf) / sc, m)))

    print(f"m = {m}, {len(A)} anchors, V_eff ratio {ratio:g}, {shape}: P by Monte Carlo {truth:.3f}; "
          f"exact strength {P(s_true):.3f}; gauge + cone (committed) {P(s_rule):.3f}; cone alone {P(s_cone):.3f}")
    for name, s in (("gauge + cone", s_rule), ("cone alone", s_cone)):
        r = s / s_true
        print(f"  {name} / exact strength: median {np.median(r):.3f}, 10% {np.quantile(r, 0.1):.3f}, "
              f"90% {np.quantile(r, 0.9):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:5])
