#!/usr/bin/env python
"""Spectral methods with a matrix preprocessing T(y) (k x k) for multi-index links: the asymptotic theory
(theorykit.spectra.matrix_preprocessing, the Hessian theory's m x m law with D = -T) against the top eigenpairs of
M_n = (1/n) sum_i T(y_i) (x) x_i x_i^T at finite d (theorykit.referee.finite_d_matrix_spectrum).

    python scripts/spectral_matrix.py     # writes tables/spectral_matrix.{md,csv}

Per case (link, T, delta): the theory's outliers (eigenvalue, squared overlap of the eigenvector with the latent
subspace), bulk edge, error (change under the coarser quadrature) and threshold; finite d = 500, 1000, 2000 with 8
seeds each: the mean of the top eigenvalues and of their latent overlaps, with standard errors over the seeds.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from theorykit.referee.spectral_methods import finite_d_matrix_spectrum
from theorykit.report.writer import now, write_study
from theorykit.spectra.matrix_preprocessing import matrix_spectral_prediction, matrix_spectral_thresholds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DS, SEEDS = (500, 1000, 2000), 8
TURNING = [["tanh(y)", "tanh(y)**2"], ["tanh(y)**2", "0"]]
#: (case, link, T, deltas, how many top eigenpairs to read at finite d)
CASES = [("smooth, y unbounded", "z1*z2", TURNING, (2.0, 6.0), 2),
         ("kinked, an atom of y at 0", "Max(z1, 0)*z2", TURNING, (6.0,), 2),
         ("a double outlier (symmetry z1 <-> z2)", "z1**2 - z2**2",
          [["tanh(y)", "tanh(y)**2"], ["tanh(y)**2", "-tanh(y)"]], (4.0,), 3),
         ("bounded y (two values): no outlier", "sign(z1*z2)", [["y", "0.5"], ["0.5", "0"]], (3.0,), 2),
         ("k = 3", "z1*z2*z3", [["tanh(y)", "tanh(y)**2", "0"], ["tanh(y)**2", "0", "0"], ["0", "0", "tanh(y)"]],
          (8.0, 20.0), 2)]


def show(T) -> str:
    return "[" + "; ".join(", ".join(str(e) for e in row) for row in T) + "]"


def main(argv):
    started, t0 = now(), time.perf_counter()
    rows, lines = [], []
    for case, link, T, deltas, top in CASES:
        t1 = time.perf_counter()
        ths = matrix_spectral_thresholds(link, T, delta_range=(0.1, 50.0))
        th = ths[0]
        thr = "; ".join(f"outlier {t['outlier']}: " + (f"{t['delta_u']:.5g} ± {t['error']:.1g}"
                                                      if t["delta_u"] is not None else t["note"]) for t in ths)
        lines += [f"### y = {link} ({case}), T(y) = {show(T)}", "",
                  f"Thresholds (theory, {time.perf_counter() - t1:.0f} s): {thr}", "",
                  "| delta | theory: outliers (eigenvalue, overlap^2) | bulk edge | error (top) | seconds | d | finite "
                  f"d: top {top} eigenvalues ± s.e. | latent overlap^2 ± s.e. | seconds |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for delta in deltas:
            t1 = time.perf_counter()
            p = matrix_spectral_prediction(link, T, delta)
            st = time.perf_counter() - t1
            out = "; ".join(f"{ev:.4f}, {ov:.4f}" for ev, ov in zip(p.eigenvalues, p.overlap2)) or "none"
            for d in DS:
                t1 = time.perf_counter()
                runs = [finite_d_matrix_spectrum(link, T, delta, d, top=top, seed=s) for s in range(SEEDS)]
                V = np.array([r[0] for r in runs])
                Ov = np.array([r[1] for r in runs])
                sec = time.perf_counter() - t1
                vm, vs = V.mean(0), V.std(0, ddof=1) / np.sqrt(SEEDS)
                om, os_ = Ov.mean(0), Ov.std(0, ddof=1) / np.sqrt(SEEDS)
                lines.append(f"| {delta:g} | {out} | {p.bulk_edge:.4f} | {p.error['top']:.1e} | {st:.1f} | {d} | "
                             + ", ".join(f"{a:.4f} ± {b:.4f}" for a, b in zip(vm, vs)) + " | "
                             + ", ".join(f"{a:.3f} ± {b:.3f}" for a, b in zip(om, os_)) + f" | {sec:.0f} |")
                print(lines[-1], flush=True)
                rows.append(dict(case=case, link=link, T=show(T), delta=delta, d=d, seeds=SEEDS,
                                 theory_eigenvalues=list(p.eigenvalues), theory_overlap2=list(p.overlap2),
                                 bulk_edge=p.bulk_edge, error_top=p.error["top"], threshold=th["delta_u"],
                                 threshold_error=th["error"], eigenvalues=list(vm), eigenvalues_se=list(vs),
                                 overlap2=list(om), overlap2_se=list(os_), seconds=sec))
        lines.append("")
    header = ["Theory: theorykit.spectra.matrix_preprocessing (the law of (T(Y), z) by tensor quadrature of z, the "
              "Hessian theory's matrix Marchenko-Pastur law and spike equation with D = -T; error: the change under "
              "the rule with half the panels).  Finite d: x ~ N(0, I_d), n = delta d, latent z = x[:, :k], "
              f"{SEEDS} seeds per (delta, d), scipy eigsh on the (d k) x (d k) operator; overlap^2 = squared "
              "Frobenius norm of an eigenvector's latent rows V[:k].  An eigenvalue at the bulk edge has overlap -> "
              "0; a double outlier splits at finite d by O(d^-1/2), with the mean of the pair on the theory."]
    return write_study("spectral_matrix", __file__, argv, rows, lines,
                       title="Spectral methods with a matrix preprocessing: theory against finite d", header=header,
                       started=started, t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
