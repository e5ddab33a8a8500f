#!/usr/bin/env python
"""The activation search against an independent brute-force grid over the same family (issue 29 point 3).

    python scripts/optimise_check.py     # writes tables/optimise_check.{md,csv}; figures docs/figures/optimise_*.png

Per family: theorykit.optimise (grid 5, 3 refinement rounds) and, independently, every point of a fine grid
(BRUTE points) with the same objective, options and cache (a point both evaluate is computed once).  Pass when the
search's best is within 2 combined standard errors of the brute-force grid's best (or below it).  Families:
x^2 + c x on phase retrieval (the optimum c = 0 is known: docs/optimise.md), and GeLU's sharpness
x (1 + erf(a x / sqrt 2)) / 2 on the bounded sign link with the logistic loss (a = 1 is GeLU).
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

import theorykit as tk
from theorykit.report.optimise import figure
from theorykit.report.writer import now, write_study

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "tables", "raw", "optimise_check")
BRUTE = 21
OPTIONS = dict(paths=4096, replicas=4, delta_range=(1.0, 20.0))
FAMILIES = [  # name, activation, link, loss, eta, param, objective
    ("x2-plus-cx", "x**2 + c*x", "phase-retrieval", "square", 0.05, ("c", -1.0, 1.0), "delta_star@t=0:d=1000"),
    ("gelu-sharpness", "x*(1 + erf(a*x/sqrt(2)))/2", "sign-symmetric", "logistic", 1.0, ("a", 0.05, 2.0),
     "delta_star@t=0"),
]


def main(argv):
    names = set(argv)
    started, t0 = now(), time.perf_counter()
    rows, lines = [], ["| family | objective | search: best [evaluations, s] | brute force: best of "
                       f"{BRUTE} | difference / combined s.e. | pass | baseline gelu |", "|---" * 7 + "|"]
    for name, act, link, loss, eta, (pn, lo, hi), obj in FAMILIES:
        if names and name not in names:
            continue
        t1 = time.perf_counter()
        r = tk.optimise(act, link, f"{pn}={lo}:{hi}", obj, loss=loss, eta=eta, grid=5, refine=3, cache=CACHE,
                        **OPTIONS)
        s_search = time.perf_counter() - t1
        brute = tk.optimise(act, link, f"{pn}={lo}:{hi}", obj, loss=loss, eta=eta, grid=BRUTE, refine=0,
                            baseline=None, ingredients=False, cache=CACHE, **OPTIONS)
        figure(r, os.path.join(ROOT, "docs", "figures", f"optimise_{name}"))
        b, g = r.best, brute.best
        z = (b["value"] - g["value"]) / max(math.hypot(b["stderr"], g["stderr"]), 1e-12)
        ok = bool(z <= 2.0)
        base = r.baseline or {}
        rows.append(dict(family=name, activation=act, link=link, loss=loss, eta=eta, objective=obj, param=pn,
                         search_best=b["params"][pn], search_param_se=b["param_stderr"][pn], search_value=b["value"],
                         search_se=b["stderr"], search_evaluations=len(r.evaluations), search_seconds=s_search,
                         search_smooth=b["smooth"], search_at_bound=",".join(b["at_bound"]),
                         brute_best=g["params"][pn], brute_value=g["value"], brute_se=g["stderr"], z=z, passed=ok,
                         baseline=base.get("value", math.nan), baseline_se=base.get("stderr", math.nan),
                         delta_alg=r.delta_alg))
        lines.append(f"| {name}: {act} on {link} ({loss}, eta {eta:g}) | {obj} | {pn} = {b['params'][pn]:.4g} ± "
                     f"{b['param_stderr'][pn]:.2g}: {b['value']:.4f} ± {b['stderr']:.2g} [{len(r.evaluations)}, "
                     f"{s_search:.0f}] | {pn} = {g['params'][pn]:.4g}: {g['value']:.4f} ± {g['stderr']:.2g} | "
                     f"{z:+.2f} | {'yes' if ok else 'NO'} | {base.get('value', math.nan):.4f} ± "
                     f"{base.get('stderr', math.nan):.2g} |")
        print(lines[-1], flush=True)
        curve = brute.curve()
        lines.append("")
        lines.append(f"Brute-force curve, {name}: " + ", ".join(f"{v:.3g}: {w:.4f}" for v, w in
                                                               zip(curve[pn], curve["value"]) if np.isfinite(w)))
        lines.append("")
    header = ["Search: theorykit.optimise with grid 5 and 3 refinement rounds; brute force: the same objective at "
              f"{BRUTE} evenly spaced points; both with {OPTIONS['paths']} DMFT paths in {OPTIONS['replicas']} "
              "replicas and one cache (tables/raw/optimise_check), so shared points are computed once.  Difference "
              "/ combined s.e.: (search best - brute-force best) / sqrt(se_1^2 + se_2^2); pass when <= 2.  Figures: "
              "docs/figures/optimise_<family>.png."]
    return write_study("optimise_check", __file__, argv, rows, lines,
                       title="The activation search against a brute-force grid", header=header, started=started,
                       t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
