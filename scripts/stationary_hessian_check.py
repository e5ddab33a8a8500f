#!/usr/bin/env python
"""The Hessian at the stationary state against the finite-d Hessian at GD's converged end point.

    python scripts/stationary_hessian_check.py   # writes tables/stationary_hessian.{md,csv}

Per setting (m = 1, eta = 1) and delta: GD at d = D run for T steps with the hard direction projected out after every
step (simulate(..., constrained=True)), SEEDS seeds, and the bottom K eigenpairs of its Hessian at the end point
(hessian_every = T): the smallest eigenvalue among those with hard overlap^2 > 0.2 (the hard outlier; "-" when none)
and the bulk's lowest eigenvalue (the smallest with overlap^2 < 0.05).  Beside them the theory on the stationary
state's law truncated at n = delta D (theorykit.thresholds.stationary_law + hessian_prediction): the bulk edge and
the hard outlier with its overlap^2.  The deltas sit below the separation point, between it and delta*(infinity),
and above delta*(infinity) (tables/delta_star_infinity.md).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import theorykit as tk
from theorykit.dynamics.stationary import stationary_state
from theorykit.report.writer import now, write_study
from theorykit.spectra.hessian import hessian_prediction
from theorykit.thresholds import stationary_law

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [("pr-gelu-centred", "gelu", "z**2 - 1", "square", (7.0, 9.5, 13.0)),
         ("bounded-gelu", "gelu", "sign-symmetric", "logistic", (7.0, 9.0, 10.5))]
D, T, SEEDS, K = 1000, 1500, 2, 8


def main(argv):
    started, t0 = now(), time.perf_counter()
    rows = []
    lines = ["| setting | delta | theory: edge | theory: hard outlier (overlap^2) | GD: lowest bulk eigenvalue | "
             "GD: hard outlier (overlap^2) per seed |", "|---|---|---|---|---|---|"]
    for name, act, link, loss, deltas in CASES:
        for dl in deltas:
            p = tk.Problem(act, link, loss, delta=dl, eta=1.0, steps=T)
            st = stationary_state(p, check_order=0)
            pred = hessian_prediction(stationary_law(st, d=D))
            out = pred.outliers[0] if pred.outliers else None
            bulk, hard = [], []
            for seed in range(SEEDS):
                r = tk.simulate(p, d=D, seed=seed, constrained=True, hessian_every=T, hessian_k=K)
                h = r.hessian[-1]
                ev, ov = np.asarray(h["eigenvalues"]), np.asarray(h["hard_overlap2"])
                b = ev[ov < 0.05]
                bulk.append(float(b.min()) if len(b) else float("nan"))
                j = np.flatnonzero(ov > 0.2)
                hard.append((float(ev[j[0]]), float(ov[j[0]])) if len(j) else None)
            rows.append(dict(setting=name, delta=dl, edge=pred.edge, outlier=out.lam if out else None,
                             outlier_overlap2=out.overlap2 if out else None, gd_bulk=bulk,
                             gd_outlier=[x[0] if x else None for x in hard],
                             gd_overlap2=[x[1] if x else None for x in hard]))
            th = f"{out.lam:.4f} ({out.overlap2:.2f})" if out else "none"
            gd = ", ".join(f"{x[0]:.4f} ({x[1]:.2f})" if x else "none" for x in hard)
            lines.append(f"| {name} | {dl:g} | {pred.edge:.4f} | {th} | "
                         f"{', '.join(f'{b:.4f}' for b in bulk)} | {gd} |")
            print(lines[-1], flush=True)
    header = [f"GD at d = {D}, T = {T}, {SEEDS} seeds, hard direction projected out; bottom {K} Hessian eigenpairs at "
              "the end point.  Theory: the stationary state's law truncated at n = delta d."]
    return write_study("stationary_hessian", __file__, argv, rows, lines,
                       title="The Hessian at the stationary state against GD's converged end point",
                       header=header, started=started, t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
