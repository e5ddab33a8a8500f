#!/usr/bin/env python
"""Do the searches' winners beat GeLU in gradient descent? (issue 29 point 4)

    python scripts/optimise_gd.py     # writes tables/optimise_gd.{md,csv}; runs kept in tables/raw/optimise_gd_*.csv
    python scripts/optimise_gd.py bounded 800    # one setting, one d (the table then holds only those)

GeLU's sharpness, sigma_a(x) = x (1 + erf(a x / sqrt 2)) / 2 (a = 1 is GeLU), on the bounded sign link with the
logistic loss, and on centred phase retrieval (y = z^2 - 1, square loss), eta = 1; and on the bounded link the
two-parameter family sigma_a + c x^2 (c in [-0.3, 0.3]; searched at d = 400 only).  Winners: per setting a search
here with the finite-d objective finite_d@d=D:T=200 at D = 400 and 800 (grid 5 over a in [0.4, 3], 1 refinement;
cached in tables/raw/optimise_gd_search*), and on the bounded link the delta*(0) search of tables/optimise_check.md.
Each against GeLU with theorykit.sweep at the same d, horizon 200, the same seeds and deltas; success = cos^2 > 1/2
by the horizon.  Midpoint: logistic maximum-likelihood fit (theorykit.validation.stats.logistic_midpoint) with a
95% band of +- 1.96 bootstrap standard errors.  The table reports what GD does, gain or not.
"""
from __future__ import annotations

import math
import os
import sys
import time

import pandas as pd

import theorykit as tk
from theorykit.report.writer import now, write_study
from theorykit.validation.stats import logistic_midpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DS, HORIZON, SEEDS = (400, 800), 200, 24
DELTAS = [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
FAMILY = "x*(1 + erf(a*x/sqrt(2)))/2"


def winner() -> float:
    df = pd.read_csv(os.path.join(ROOT, "tables", "optimise_check.csv"))
    return float(df[df["family"] == "gelu-sharpness"]["search_best"].iloc[0])


#: name, link, loss, GD deltas, the finite-d bracket, whether the delta*(0) winner of tables/optimise_check.md is
#: included (it was searched on the bounded link)
SETTINGS = [("bounded", "sign-symmetric", "logistic", DELTAS, (3.0, 20.0), True),
            ("pr-centred", "z**2 - 1", "square", [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], (2.0, 20.0), False),
            ("bounded-2", "sign-symmetric", "logistic", [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], (2.0, 20.0), False)]
#: per setting: the family and its parameters (default: GeLU's sharpness), and the d of its search (default DS)
FAMILIES = {"bounded-2": (FAMILY + " + c*x**2", ["a=0.4:3", "c=-0.3:0.3"], (400,))}


def setting(name, link, loss, deltas, bracket, with_star, D, rows, lines):
    t1 = time.perf_counter()
    cache = os.path.join(ROOT, "tables", "raw", "optimise_gd_search" + ("" if name == "bounded" else f"_{name}")
                         + ("" if D == 400 else f"_d{D}"))
    family, params, _ = FAMILIES.get(name, (FAMILY, ["a=0.4:3"], DS))
    fd = tk.optimise(family, link, params, f"finite_d@d={D}:T={HORIZON}", loss=loss, eta=1.0, grid=5, refine=1,
                     baseline="gelu", ingredients=False, deltas=bracket, cache=cache, processes=2)
    s_fd = time.perf_counter() - t1
    best = fd.best["params"]
    a1 = best["a"]
    win = (f"x*(1 + erf({a1!r}*x/sqrt(2)))/2" if family == FAMILY  # the form the runs in tables/raw were made with
           else tk.report.optimise.substitute(family, {k: float(v) for k, v in best.items()}))
    wlabel = "sigma_{" + ",".join(best) + "}, " + ", ".join(f"{k} = {v:.3g}" for k, v in best.items())
    lines += [f"### {name}: {link}, {loss} loss, d = {D}", "",
              f"Finite-d search ({s_fd / 60:.0f} min, {len(fd.evaluations)} evaluations): "
              + ", ".join(", ".join(f"{k} = {v:.3g}" for k, v in e["params"].items()) + ": "
                          + (f"{e['value']:.2f} ± {e['stderr']:.2g}" if e["value"] == e["value"] else e["status"])
                          for e in fd.evaluations)
              + f"; GeLU {fd.baseline['value']:.2f} ± {fd.baseline['stderr']:.2g}; best "
                f"{', '.join(f'{k} = {v:.3g}' for k, v in best.items())} ({fd.best['how']}).", ""]
    cands = []
    if with_star:
        a0 = winner()
        cands.append((f"sigma_a, a = {a0:.3g} (delta*(0) winner)", f"x*(1 + erf({a0!r}*x/sqrt(2)))/2", a0, math.nan))
    cands += [(f"{wlabel} (finite-d winner)", win, a1, fd.best["value"]),
              ("GeLU (a = 1)", "gelu", 1.0, fd.baseline["value"])]
    mine = []
    lines += ["| activation | predicted finite-d delta_1/2 | GD delta_1/2 [95% band] | success fraction by delta | "
              "runs | seconds |", "|---|---|---|---|---|---|"]
    for label, act, a, pred in cands:
        t1 = time.perf_counter()
        tag = ("gelu" if act == "gelu" else
               "".join(f"{k}{v:.4g}" for k, v in (best.items() if act == win else [("a", a)])))
        tag += "" if name == "bounded" else f"_{name}"
        df = tk.sweep(deltas, range(SEEDS), processes=1, quiet=True,
                      csv=os.path.join(ROOT, "tables", "raw", f"optimise_gd_{tag}_d{D}_T{HORIZON}.csv"),
                      activation=act, link=link, loss=loss, width=1, eta=1.0, d=D, steps=HORIZON,
                      stop_after_escape=0)
        ok = df[df["status"].isin(["ok", "diverged"])]
        mid, se = logistic_midpoint(ok["delta"].to_numpy(float), ok["success"].to_numpy(float))
        frac = ok.groupby("delta")["success"].mean()
        sec = time.perf_counter() - t1
        mine.append(dict(setting=name, link=link, loss=loss, activation=act, label=label, a=a, predicted=pred, d=D,
                         horizon=HORIZON, seeds=SEEDS, midpoint=mid, stderr=se, low=mid - 1.96 * se,
                         high=mid + 1.96 * se, runs=len(ok), seconds=sec,
                         fractions=" ".join(f"{k:g}:{v:.2f}" for k, v in frac.items())))
        lines.append(f"| {label}: `{act}` | {pred:.2f} | {mid:.2f} [{mid - 1.96 * se:.2f}, {mid + 1.96 * se:.2f}] | "
                     f"{mine[-1]['fractions']} | {len(ok)} | {sec:.0f} |")
        print(lines[-1], flush=True)
    base = mine[-1]
    lines.append("")
    for r in mine[:-1]:
        diff = r["midpoint"] - base["midpoint"]
        se = math.hypot(r["stderr"], base["stderr"])
        verdict = ("a gain in GD" if diff + 1.96 * se < 0 else "worse than GeLU in GD" if diff - 1.96 * se > 0
                   else "no difference GD resolves")
        lines.append(f"* {r['label']} minus GeLU: {diff:+.2f} ± {se:.2f} (bootstrap s.e.; the seeds are shared): "
                     f"{verdict}.")
    lines.append("")
    rows += mine


def main(argv):
    started, t0 = now(), time.perf_counter()
    rows, lines = [], []
    names = [a for a in argv if not a.isdigit()]
    ds = [int(a) for a in argv if a.isdigit()] or list(DS)
    for st in SETTINGS:
        if names and st[0] not in names:
            continue
        for D in ds:
            if D in FAMILIES.get(st[0], (None, None, DS))[2]:
                setting(*st, D, rows, lines)
    header = [f"GD (theorykit.sweep) at d = {', '.join(map(str, ds))}, horizon {HORIZON}, {SEEDS} seeds per delta (the "
              "same for every activation of a setting and d), eta = 1, width 1.  Winners: the finite-d search of each "
              f"setting at each d (objective finite_d@d=D:T={HORIZON}, grid 5 over a in [0.4, 3] + 1 refinement; "
              "bounded-2: grid 5 x 5 over a in [0.4, 3], c in [-0.3, 0.3], d = 400 only) and, on the bounded link, "
              "the delta*(0) search of tables/optimise_check.md."]
    return write_study("optimise_gd", __file__, argv, rows, lines,
                       title="The searches' winners against GeLU in gradient descent", header=header, started=started,
                       t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
