"""tables/delta_nn.md, Part 0: every threshold of a setting side by side (issue 28 point 3).

Per setting: delta_alg (the link's spectral threshold), delta*(0) (the Hessian at initialisation), the longest
delta*(t) of Part 1 (a lower bound of its limit), the stationary state's separation point and delta*(infinity)
(:func:`theorykit.thresholds.delta_star_infinity`, m <= 2), delta_dyn (Part 2), the finite-d midpoint delta_1/2(d, T)
from the theory at d = 10^3 .. 10^8 with T = 25 ln d (scripts/finite_d_large_d.py's cache, tables/raw/finite_d_large_d)
and from GD at d = 200-1600 (logistic maximum-likelihood fits to the runs of tables/thresholds_vs_sim.csv and
tables/paper_comparison.csv), and the paper's value where it gives one.  The thresholds computed here (delta_alg,
delta*(0), delta*(infinity)) are cached like the other parts; the others are read from the tables that measure them,
so that Part 0 follows them when they are regenerated.
"""
from __future__ import annotations

import math
import os
import re
import time

import numpy as np

from ..cases import CASES, problem as _problem
from ..errors import TheorykitError
from ..report.writer import fmt, log, md_table
from .stats import logistic_midpoint

#: (setting, delta range of the delta* scans, GD sources: thresholds_vs_sim setting or paper_comparison cases by d,
#:  the paper's delta_NN or None[, the delta range of delta*(infinity) where not INF_RANGE])
SUMMARY_CASES = [
    ("bounded", (2.0, 30.0), {"vs_sim": "bounded"}, None),
    ("pr-gelu-centred", (2.0, 30.0), {"paper": {400: "gelu-m1-centred-fine", 800: "gelu-m1-centred-d800"}}, 6.0),
    ("pr-x2-centred", (1.5, 30.0), {"paper": {400: "x2-m1-centred-fine", 800: "x2-m1-centred-d800"}}, 3.6),
    ("pr-gelu", (2.0, 60.0), {"vs_sim": "pr-gelu"}, 6.0),
    ("pr-x2", (1.5, 40.0), {"vs_sim": "pr-x2"}, 3.6),
    ("pr-relu", (2.0, 60.0), {"vs_sim": "pr-relu"}, None),
    ("pr-xtanh", (2.0, 60.0), {"vs_sim": "pr-xtanh"}, None),
    # width 2 on y = z^2: the outlier is still positive at delta = 60 (-0.0165), so delta*(infinity) to 150
    ("pr-gelu-m2", (2.0, 60.0), {"vs_sim": "pr-gelu-m2"}, None, (1.0, 150.0)),
    ("bounded-m2", (2.0, 30.0), {}, None),
]
#: the delta range of delta*(infinity) (a case's fifth entry overrides it)
INF_RANGE = (1.0, 60.0)
QUICK_SUMMARY = [("bounded", (2.0, 30.0), {"vs_sim": "bounded"}, None)]
#: the finite-d midpoints from the theory: T = c ln d at these d (scripts/finite_d_large_d.py), c = LARGE_D_C except
#: where a setting has its own (sigma = x^2 at eta = 0.05: c = 400 / ln 400, T = 400 at d = 400, GD's horizon)
LARGE_D_C = 25.0
LARGE_D_C_OF = {"pr-x2-centred": 400 / math.log(400)}
LARGE_DS = (10 ** 3, 10 ** 4, 10 ** 6, 10 ** 8)
#: the truncation of delta*(0) where D is unbounded below (as Part 1): the law's 1/n quantile, n = delta d
TRUNCATION_D = 1000


def _finite(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _error_text(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def summary_case(args, case) -> dict:
    """The thresholds Part 0 computes for one setting: delta_alg, delta*(0), delta*(infinity) and the separation."""
    from ..symbolic.links import analyse_link
    from ..thresholds import delta_star, delta_star_infinity

    s, rng = case[0], case[1]
    inf_range = case[4] if len(case) > 4 else INF_RANGE
    act, link, loss, m, eta = CASES[s]
    t0 = time.time()
    log(f"summary {s}")
    alg = analyse_link(link).delta_alg
    row = {"part": "summary", "setting": s, "activation": act, "link": link, "loss": loss, "m": m, "eta": eta,
           "delta_alg": alg.value, "delta_alg_exact": None if alg.exact is None else str(alg.exact),
           "delta_alg_method": alg.method}
    p = _problem(s, rng[0], 1)
    try:
        q = delta_star(p, [0], delta_range=rng, d=TRUNCATION_D, paths=args.paths)[0]
        row.update(delta_star0=q.value, delta_star0_stderr=q.stderr, delta_star0_unbounded=bool(q.unbounded),
                   delta_star0_note="")
    except TheorykitError as e:
        row.update(delta_star0=math.nan, delta_star0_stderr=math.nan, delta_star0_unbounded=None,
                   delta_star0_note=_error_text(e))
    t1 = time.time()
    try:
        r = delta_star_infinity(p, delta_range=inf_range)
        row.update(delta_inf=r.value, delta_inf_error=r.error_bound, separation=r.separation,
                   delta_inf_note=r.error or "")
    except TheorykitError as e:
        row.update(delta_inf=math.nan, delta_inf_error=math.nan, separation=math.nan,
                   delta_inf_note=_error_text(e))
    row.update(seconds_star0=t1 - t0, seconds_inf=time.time() - t1)
    return {"rows": [row]}


def _counts_midpoint(deltas, fracs, runs) -> tuple:
    """The logistic maximum-likelihood midpoint (± bootstrap s.e.) from per-delta success fractions and run counts."""
    x, y = [], []
    for dl, f, n in zip(deltas, fracs, runs):
        k = int(round(float(f) * int(n)))
        x += [float(dl)] * int(n)
        y += [1.0] * k + [0.0] * (int(n) - k)
    if not x or min(y) == max(y):
        return math.nan, math.nan
    return logistic_midpoint(np.array(x), np.array(y), resamples=200)


def gd_midpoints(root: str, source: dict) -> dict:
    """{d: (midpoint, stderr, horizon, runs)} of GD for one setting, from the committed tables' per-delta counts."""
    import pandas as pd

    out = {}
    if "vs_sim" in source:
        fn = os.path.join(root, "tables", "thresholds_vs_sim.csv")
        if os.path.exists(fn):
            df = pd.read_csv(fn)
            df = df[(df["part"] == "finite_d") & (df["setting"] == source["vs_sim"])]
            for (d, T), g in df.groupby(["d", "horizon"]):
                mid, se = _counts_midpoint(g["delta"], g["sim_frac"], g["sim_runs"])
                out[int(d)] = (mid, se, int(T), int(g["sim_runs"].sum()))
    for d, name in source.get("paper", {}).items():
        fn = os.path.join(root, "tables", "paper_comparison.csv")
        if os.path.exists(fn):
            df = pd.read_csv(fn)
            g = df[df["case"] == name]
            if len(g):
                mid, se = _counts_midpoint(g["delta"], g["frac"], g["runs"])
                out[int(d)] = (mid, se, int(g["horizon"].iloc[0]), int(g["runs"].sum()))
    return out


def large_d_theory(root: str, setting: str) -> dict:
    """{d: record} of scripts/finite_d_large_d.py's cached theory midpoints at T = c ln d (c of the setting)."""
    from ..cache import JsonCache

    store = JsonCache(os.path.join(root, "tables", "raw", "finite_d_large_d"))
    out = {}
    c = LARGE_D_C_OF.get(setting, LARGE_D_C)
    for d in LARGE_DS:
        T = int(round(c * math.log(d)))
        rec = store.get(f"{setting}_c{c:.4g}_d{d}_T{T}")
        if rec is not None:
            out[d] = rec
    return out


#: a GD midpoint whose bootstrap standard error exceeds this is reported as undetermined (the grid's runs do not
#: pin the crossing: e.g. three deltas all far from 1/2)
_GD_SE_MAX = 5.0


def _theory_cell(rec) -> str:
    """A theory midpoint, or where it lies when the bracket held no crossing ('> hi' / '< lo', from its note)."""
    if _finite(rec.get("theory")):
        return fmt(float(rec["theory"]), 3)
    note = str(rec.get("note") or "")
    m = re.search(r"(below|above) 1/2 over the whole delta_range \[([0-9.eE+-]+), ([0-9.eE+-]+)\]", note)
    if m:
        return f"> {m.group(3)}" if m.group(1) == "below" else f"< {m.group(2)}"
    return "failed"


def part_summary(args, rows, md, cases, cached, nn_rows, dyn_rows, root) -> None:
    """Part 0 (placed first in the table): the thresholds of each setting side by side."""
    md.append("## Part 0: every threshold of a setting, side by side\n")
    md.append(
        "delta_alg: the link's spectral threshold (exact where stated).  delta*(0): the Hessian at initialisation "
        f"(law truncated at n = delta x {TRUNCATION_D} where D is unbounded below).  delta*(T): the longest delta*(t) "
        "of Part 1, a lower bound of lim delta*(t) (not converged).  separation / delta*(inf): the Hessian at the "
        "stationary state (GD converged with no hard overlap; docs/theory.md §3.4): where the hard outlier leaves the "
        "bulk / where it turns negative (delta_nn's criterion 'stationary').  delta_dyn: Part 2 (window).  "
        f"delta_1/2(d): the finite-d midpoint, P(cos^2 > 1/2 by T) = 1/2 -- theory at T = {LARGE_D_C:g} ln d "
        + "".join(f"({s}: T = {c:.4g} ln d) " for s, c in LARGE_D_C_OF.items()) +
        "(scripts/finite_d_large_d.py; band in tables/finite_d_large_d.md), GD from random starts at d = 200-1600 "
        "(logistic ML fit to the runs of tables/thresholds_vs_sim.csv or tables/paper_comparison.csv; horizon "
        "T in brackets, ± bootstrap s.e.).  Paper: Montanari & Wang's delta_NN for phase retrieval (they find it with "
        "GD; tables/paper_comparison.md: the centred target reproduces it).  — : not computed (reason below the "
        "table).\n")
    hdr = ["setting", "delta_alg", "delta*(0)", "delta*(T) (Part 1)", "separation", "delta*(inf)", "delta_dyn",
           "theory delta_1/2 at d = 1e3, 1e4, 1e6, 1e8", "GD delta_1/2 by d [T]", "paper"]
    body, notes = [], []
    for case in cases:
        s, source, paper = case[0], case[2], case[3]
        r = dict(cached(args, "summary", case, summary_case)["rows"][0])
        seq = [q for q in nn_rows if q.get("setting") == s and q.get("part") == "nn" and _finite(q.get("t"))]
        if seq:
            last = max(seq, key=lambda q: q["t"])
            r.update(delta_star_T=last["delta_star"], delta_star_T_t=int(last["t"]))
        dyn = {}
        for q in dyn_rows:
            if q.get("setting") == s and q.get("part") == "dyn":
                dyn[(q["t1"], q["t2"])] = (q["delta_dyn"], q["delta_dyn_se"])
        theory = large_d_theory(root, s)
        gd = gd_midpoints(root, source)
        for d, rec in theory.items():
            r[f"theory_d{d}"], r[f"theory_d{d}_low"], r[f"theory_d{d}_high"] = (rec["theory"], rec["theory_low"],
                                                                                rec["theory_high"])
        for d, (mid, se, T, n) in gd.items():
            r[f"gd_d{d}"], r[f"gd_d{d}_stderr"], r[f"gd_d{d}_horizon"], r[f"gd_d{d}_runs"] = mid, se, T, n
        r["paper"] = paper
        rows.append(r)
        alg = (f"{fmt(r['delta_alg'])} (exact)" if r.get("delta_alg_exact") not in (None, "None")
               else fmt(r["delta_alg"]))
        s0 = (f"{fmt(r['delta_star0'])} ± {fmt(r['delta_star0_stderr'], 2)}" if math.isfinite(r["delta_star0"])
              else "—")
        sT = (f">= {fmt(float(r['delta_star_T']))} (t = {r['delta_star_T_t']})" if _finite(r.get("delta_star_T"))
              else "—")
        inf = (f"{fmt(r['delta_inf'])} ± {fmt(r['delta_inf_error'], 2)}" if math.isfinite(r["delta_inf"]) else "—")
        sep = fmt(r["separation"]) if math.isfinite(r["separation"]) else "—"
        dd = "; ".join(f"{fmt(float(v))} ± {fmt(float(e), 2)} [{a}, {b}]" if _finite(v) else f"undefined [{a}, {b}]"
                       for (a, b), (v, e) in sorted(dyn.items()))
        th = ", ".join(_theory_cell(theory[d]) if d in theory else "—" for d in LARGE_DS)
        g = "; ".join(f"{d}: {fmt(mid, 3)} ± {fmt(se, 2)} [{T}]" if _finite(mid) and se < _GD_SE_MAX
                      else f"{d}: undetermined [{T}]" for d, (mid, se, T, _) in sorted(gd.items()))
        body.append([f"{s} ({r['activation']}, {r['link']}, {r['loss']}, m = {r['m']}, eta {r['eta']:g})", alg, s0,
                     sT, sep, inf, dd or "—", th, g or "—", fmt(paper) if paper else "—"])
        why = [f"delta*(0): {r['delta_star0_note']}" if r.get("delta_star0_note") else "",
               f"delta*(inf): {r['delta_inf_note']}" if r.get("delta_inf_note") else "",
               "delta*(T): not in Part 1" if "delta_star_T" not in r else "",
               "delta_dyn: not in Part 2" if not dyn else "",
               (f"theory delta_1/2: not computed at d = {', '.join(f'{d:.0e}' for d in LARGE_DS if d not in theory)}"
                if len(theory) < len(LARGE_DS) else "")]
        why = [w for w in why if w]
        if why:
            notes.append(f"* {s}: " + "; ".join(why) + ".")
    md.append(md_table(hdr, body))
    md.append("")
    md += notes
    md.append("")
