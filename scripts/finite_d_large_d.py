#!/usr/bin/env python
"""The d -> infinity limit of the finite-d threshold: delta_1/2(d, T = c ln d) from d = 400 to 10^8, beside GD.

    python scripts/finite_d_large_d.py [--only theory|gd] [NAME ...]   # writes tables/finite_d_large_d.{md,csv}

Theory: ``theorykit.thresholds.finite_d_midpoint`` (the median start, docs/theory.md §5) at each (d, T = round(c ln
d)) for the horizon constants c listed per setting; the DMFT does not depend on d except through the median initial
overlap m_1/2 = sqrt(q_1/2 v_eff / d), so d = 10^8 costs what d = 10^3 costs.  GD: ``theorykit.sweep`` from random
starts, SEEDS seeds per delta, success = cos^2 > 1/2 by T, the maximum-likelihood logistic midpoint with a bootstrap
standard error (scripts/finite_d_midpoint_vs_gd.py's), runs kept in tables/raw/ (resumable).  Each theory midpoint is
cached in tables/raw/finite_d_large_d/ (a rerun reuses it; ``--only theory`` / ``--only gd`` split the work between
processes, and a last run without --only writes the table).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import theorykit as tk
from theorykit.cache import JsonCache
from theorykit.report.writer import now, write_study

from theorykit.validation.stats import logistic_midpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAW = os.path.join(ROOT, "tables", "raw")
SEEDS = 32
THEORY_DS = (10 ** 3, 10 ** 4, 10 ** 6, 10 ** 8)
#: the horizon constant of sigma = x^2 at eta = 0.05: T = 400 at d = 400
X2_C = 400 / math.log(400)
# name: (activation, link, loss, eta, delta_range, {c: theory ds}, GD: {d: deltas} at c = GD_C)
CASES = {
    "pr-gelu": ("gelu", "phase-retrieval", "square", 1.0, (4.0, 40.0), {12.5: THEORY_DS, 25.0: (400,) + THEORY_DS},
                {400: [9, 9.5, 10, 10.5, 11, 11.5, 12]}),
    "pr-gelu-centred": ("gelu", "z**2 - 1", "square", 1.0, (2.5, 30.0), {25.0: (400,) + THEORY_DS}, {}),
    # the other settings of tables/delta_nn.md's summary (GD at d = 200-1600: tables/thresholds_vs_sim.md)
    "bounded": ("gelu", "sign-symmetric", "logistic", 1.0, (3.0, 20.0), {25.0: THEORY_DS}, {}),
    "pr-relu": ("relu", "phase-retrieval", "square", 0.5, (4.0, 60.0), {25.0: THEORY_DS}, {}),
    "pr-xtanh": ("x*tanh(x)", "phase-retrieval", "square", 1.0, (1.0, 60.0), {25.0: THEORY_DS}, {}),
    # the paper's second example (sigma = x^2, eta = 0.05): c = 400 / ln 400 puts T = 400 at d = 400, the horizon of
    # GD's runs in tables/paper_comparison.md (at eta = 0.05, c = 25 would stop GD long before it escapes); the range
    # starts at 3: at delta = 2.75 the run from m_1/2 diverged (d = 400, step 97) and the root search stopped there
    "pr-x2-centred": ("quad", "z**2 - 1", "square", 0.05, (3.0, 15.0), {X2_C: (400,) + THEORY_DS}, {}),
}
#: GD runs shared with scripts/finite_d_midpoint_vs_gd.py (same setting, deltas, seeds and horizon)
GD_FILES = {("pr-gelu", 400): "finite_d_midpoint_gd_pr-gelu.csv"}
GD_C = 25.0


def horizon(c: float, d: int) -> int:
    return int(round(c * math.log(d)))


def theory(name: str, c: float, d: int, store: JsonCache) -> dict:
    act, link, loss, eta, rng, _, _ = CASES[name]
    T = horizon(c, d)
    # the key has no code version (theorykit.validation.delta_nn_summary reads it): a change of the prediction
    # drops the setting's cached records (tables/raw/finite_d_large_d/NAME_*.json) instead
    key = f"{name}_c{c:.4g}_d{d}_T{T}"
    rec = store.get(key)
    if rec is None:
        p = tk.Problem(act, link, loss, width=1, delta=rng[0], eta=eta, steps=T)
        s = time.perf_counter()
        fm = tk.thresholds.finite_d_midpoint(p, [d], T, delta_range=rng)
        m = fm.midpoints[0]
        rec = {"setting": name, "c": c, "d": d, "horizon": T, "theory": m["midpoint"], "theory_low": m["band"][0],
               "theory_high": m["band"][1], "theory_stderr": m["stderr"], "dmft_runs": 2 * len(fm.evaluations) + 1,
               "seconds": time.perf_counter() - s, "note": m["note"]}
        store.put(key, rec)
        print(rec, flush=True)
    return rec


def gd(name: str, d: int) -> dict:
    act, link, loss, eta, _, _, by_d = CASES[name]
    deltas = by_d[d]
    T = horizon(GD_C, d)
    df = tk.sweep([float(v) for v in deltas], range(SEEDS), processes=1, quiet=True,
                  csv=os.path.join(RAW, GD_FILES.get((name, d), f"finite_d_large_d_gd_{name}_d{d}_T{T}.csv")),
                  activation=act, link=link, loss=loss, width=1, eta=eta, d=d, steps=T, stop_after_escape=0)
    ok = df[df["status"].isin(["ok", "diverged"])]
    mid, se = logistic_midpoint(ok["delta"].to_numpy(float), ok["success"].to_numpy(float))
    frac = ok.groupby("delta")["success"].mean()
    rec = {"d": d, "horizon": T, "gd": mid, "gd_stderr": se, "gd_runs": len(ok),
           "gd_fractions": " ".join(f"{k:g}:{v:.2f}" for k, v in frac.items())}
    print(name, rec, flush=True)
    return rec


def figure(rows) -> list:
    """docs/figures/finite_d_large_d.{png,pdf}: delta_1/2 against ln d, one line per (setting, c), GD's midpoints."""
    from theorykit.report.figures import pyplot, save

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, key in enumerate(sorted({(r["setting"], r["c"]) for r in rows})):
        rs = sorted((r for r in rows if (r["setting"], r["c"]) == key), key=lambda r: r["d"])
        x = [math.log(r["d"]) for r in rs]
        y = [r["theory"] for r in rs]
        err = [[r["theory"] - r["theory_low"] for r in rs], [r["theory_high"] - r["theory"] for r in rs]]
        ax.errorbar(x, y, yerr=err, marker="o", ms=3, capsize=2, color=f"C{i}",
                    label=f"{key[0]}, T = {key[1]:.3g} ln d (theory)")
        g = [(math.log(r["d"]), r["gd"], r["gd_stderr"]) for r in rs if math.isfinite(r["gd"])]
        if g:
            ax.errorbar([v[0] for v in g], [v[1] for v in g], yerr=[2 * v[2] for v in g], marker="s", ls="none",
                        color=f"C{i}", mfc="white", label=f"{key[0]}, GD (± 2 s.e.)")
    ax.set_xlabel("ln d")
    ax.set_ylabel("delta_1/2(d, T)")
    ax.set_title("finite-d threshold at horizon T = c ln d (bars: the theory's band)", fontsize=9)
    ax.legend(fontsize=7)
    return save(fig, os.path.join(ROOT, "docs", "figures", "finite_d_large_d"))


def main(argv=()):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(CASES))
    ap.add_argument("--only", choices=["theory", "gd"], default=None)
    args = ap.parse_args(list(argv))
    store = JsonCache(os.path.join(RAW, "finite_d_large_d"))
    t0, started = time.perf_counter(), now()
    rows = []
    for name in args.names:
        act, link, loss, eta, _, cs, by_d = CASES[name]
        gd_at = {}
        if args.only != "theory":
            gd_at = {d: gd(name, d) for d in by_d}
        if args.only == "gd":
            continue
        for c, ds in cs.items():
            for d in sorted(set(ds)):
                r = dict(theory(name, c, d, store), activation=act, link=link, loss=loss, eta=eta)
                g = gd_at.get(d) if c == GD_C else None
                r.update(gd=g["gd"] if g else math.nan, gd_stderr=g["gd_stderr"] if g else math.nan,
                         gd_runs=g["gd_runs"] if g else 0, gd_fractions=g["gd_fractions"] if g else "")
                rows.append(r)
    if args.only is not None:
        return None
    figure(rows)
    lines = ["| setting | c | d | ln d | T = c ln d | theory delta_1/2 [band] | DMFT runs | s | GD delta_1/2 ± se | "
             "GD success fraction by delta |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = f"{r['gd']:.2f} ± {r['gd_stderr']:.2f}" if math.isfinite(r["gd"]) else ""
        lines.append(f"| {r['setting']} ({r['activation']}, {r['link']}, {r['loss']}, eta {r['eta']:g}) | "
                     f"{r['c']:.4g} | {r['d']:.0e} | {math.log(r['d']):.2f} | {r['horizon']} | {r['theory']:.2f} "
                     f"[{r['theory_low']:.2f}, {r['theory_high']:.2f}] | {r['dmft_runs']} | {r['seconds']:.0f} | "
                     f"{g} | {r['gd_fractions']} |")
        if r["note"]:
            lines.append(f"|  | note: {r['note']} |  |  |  |  |  |  |  |  |")
    header = ["delta_1/2(d, T): the delta at which P(GD at dimension d has cos^2 > 1/2 by T) = 1/2, with T = c ln d.  "
              "Theory: finite_d_midpoint's defaults (16384 paths in 4 replicas, a kinked activation "
              f"{4 * tk.defaults.KINKED_REPLICA_PATHS}: "
              "finite_d_paths; band = 2 s.e. + v_eff's error + "
              "interpolation); its wall time here (the 2 CPUs were shared with other work).  GD: "
              f"{SEEDS} seeds per delta at c = {GD_C:g}, logistic maximum-likelihood midpoint ± bootstrap s.e. "
              "(tables/raw/finite_d_large_d_gd_*.csv)."]
    cols = ["setting", "activation", "link", "loss", "eta", "c", "d", "horizon", "theory", "theory_low", "theory_high",
            "theory_stderr", "dmft_runs", "seconds", "gd", "gd_stderr", "gd_runs", "gd_fractions", "note"]
    return write_study("finite_d_large_d", __file__, argv, rows, lines,
                       title="The finite-d threshold from d = 400 to 10^8 at horizons T = c ln d",
                       header=header, started=started, t0=t0, root=ROOT, columns=cols)


if __name__ == "__main__":
    main(sys.argv[1:])
