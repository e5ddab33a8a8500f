"""tables/delta_nn.md: delta*(t) sequences and delta_NN by the spectral rule, and the dynamical
criterion's gamma(delta) from the DMFT next to the finite-d kick test.

Part 0 (first in the table, computed last): every threshold of a setting side by side
(:mod:`theorykit.validation.delta_nn_summary`).

Part 1, per setting: :func:`theorykit.thresholds.delta_nn` on a geometric t grid (one delta_star scan; laws truncated
at n = delta d where D is unbounded below), with its rule's verdict and the whole sequence.
Part 3: the simulator's escape time from random initialisation against d (bounded setting, d = 200-1600).
Part 2, per setting and delta: gamma = -d ln m*/dT from :func:`theorykit.thresholds.capture_curve` (a ladder of
nonlinear DMFT runs from small hard overlaps) fitted on a t range, beside the simulator's late growth rate of a small
hard overlap (:func:`theorykit.referee.kick_growth_rate`, the same units: a rate of the amplitude |cos|), and
delta_dyn where gamma crosses 0.  Agreement is not a pass criterion here (docs/theory.md §5: open); the table is the
result.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from .. import defaults
from ..errors import TheorykitError
from ..thresholds import delta_dyn, delta_nn, finite_d_paths
from ..cases import problem as _problem
from .delta_nn_summary import QUICK_SUMMARY, SUMMARY_CASES, part_summary
from ..report.writer import (add_case_table_arguments, cached_case, fmt, key_of, log, md_table, now, open_case_table,
                     regenerate_command, write_table)

#: Part 1: (setting, T, t grid points, delta range, truncation d or None, grid deltas)
NN_CASES = [("bounded", 1000, 6, (4.0, 12.0), None, 6),
            ("pr-gelu", 1000, 6, (8.0, 40.0), 1000, 6),
            ("bounded-m2", 400, 5, (3.0, 12.0), None, 6),
            ("pr-x2", 1000, 5, (2.0, 30.0), 1000, 6),
            ("pr-gelu-m2", 400, 5, (4.0, 40.0), 1000, 6),
            ("pr-x2-m2", 400, 5, (1.0, 30.0), 1000, 6),
            # ReLU, square loss: the Hessian is PSD almost surely, so no outlier exists (the row records the margins)
            ("pr-relu", 1000, 5, (4.0, 60.0), 1000, 6)]
#: not in the default run: --cases NAME adds one
EXTRA_NN_CASES = []
#: Part 2: (setting, deltas, t range, kick m0, kick d)
DYN_CASES = [("pr-gelu", (5.0, 6.5, 8.0, 10.0, 12.0, 14.0, 17.0), (25, 100), 0.05, 1000),
             ("bounded", (3.5, 4.25, 5.0, 6.0, 7.0, 8.0, 9.0), (25, 100), 0.05, 1000),
             # a longer window (the bounded delta_dyn of the short window lies far below delta*(t)), with a smaller
             # kick so that fewer runs escape before t = 100
             ("bounded", (5.0, 7.0, 9.0), (100, 400), 0.03, 1000),
             # a kinked sigma (ReLU: the Hessian is PSD, no spectral threshold) and sigma = x^2 (eta = 0.05: a
             # window of 300 steps is 15 units of time)
             ("pr-relu", (4.0, 6.0, 8.0, 10.0, 14.0, 20.0), (25, 100), 0.05, 1000),
             ("pr-x2", (3.0, 4.0, 5.0, 6.5, 8.0, 11.0), (100, 400), 0.05, 1000),
             # gamma > 0 from delta = 4 up and the DMFT diverges at 3: the sign change, between 3.5 and 4
             ("pr-x2", (3.5, 4.0), (100, 400), 0.05, 1000),
             # the paper's GeLU example with the centred target y = z^2 - 1 (tables/paper_comparison.md)
             ("pr-gelu-centred", (4.0, 5.0, 6.5, 8.0, 10.0, 12.0), (25, 100), 0.05, 1000)]
QUICK_NN = [("bounded", 40, 3, (2.0, 14.0), None, 8)]
QUICK_DYN = [("pr-gelu", (10.0, 17.0), (20, 40), 0.05, 500)]
#: Part 3: (setting, deltas, d values, seeds per d, horizon)
ESCAPE_CASES = [("bounded", (6.0, 7.0, 9.0, 11.0), (200, 400, 800, 1600), {200: 8, 400: 8, 800: 8, 1600: 6}, 1500)]
QUICK_ESCAPE = [("bounded", (6.0, 11.0), (100, 200, 400), 3, 200)]




def _nn_case(args, case):
    """One Part 1 case: delta_nn's sequence as plain rows (one per grid time); a case that fails records its one-line
    error instead (the other cases go on).  The verdict is re-derived from the rows when the table is written
    (:func:`_nn_render`), so a change of the rule needs no new DMFT solves."""
    s, T, pts, rng, d, points = case
    t0 = time.time()
    log(f"delta_NN {s} T={T}")
    try:
        r = delta_nn(_problem(s, rng[0], T), T, points_t=pts, first_t=min(25, T // 4), d=d, delta_range=rng,
                     points=points, paths=args.paths, replicas=4)
    except TheorykitError as e:
        return {"rows": [{"part": "nn", "setting": s, "T": T, "error": str(e), "seconds": time.time() - t0}]}
    sec = time.time() - t0
    return {"rows": [{"part": "nn", "setting": s, "T": T, "t": q.t, "delta_star": q.value,
                      "delta_star_se": q.stderr, "edge": q.edge, "outlier": q.outlier, "overlap2": q.overlap2,
                      "truncation_n": q.truncation_n, "unbounded": q.unbounded,
                      "D_q1e-3": (q.D_low or {}).get("0.001"), "seconds": sec} for q in r.sequence]}


def _nn_render(case, rows):
    """(Markdown row, note, rule, rows with the verdict) of a Part 1 case from its cached rows."""
    from ..thresholds import DeltaStar, delta_nn_from

    s, T, pts, rng, d, points = case
    trunc = "—" if d is None else f"n = delta x {d}"
    sec = f"{rows[0]['seconds']:.0f}" if rows and rows[0].get("seconds") is not None else "—"
    if rows[0].get("error"):
        return ([s, trunc, "—", f"failed: {rows[0]['error']}", "—", "—", "—", sec],
                f"* {s}: failed: {rows[0]['error']}", None, rows)
    seq = [DeltaStar(t=int(q["t"]), value=q["delta_star"], stderr=q["delta_star_se"], bracket=(math.nan, math.nan),
                     edge=q["edge"], outlier=q["outlier"], overlap2=q["overlap2"], truncation_n=q["truncation_n"],
                     unbounded=q["unbounded"], tried=(), method="from the table's cache",
                     D_low={"0.001": q["D_q1e-3"]}) for q in rows]
    r = delta_nn_from(seq, d=d)
    body = [s, trunc, ", ".join(str(q.t) for q in seq), ", ".join(f"{fmt(q.value)} ± {fmt(q.stderr, 2)}" for q in seq),
            ", ".join(fmt(q.edge) for q in seq), f"{fmt(r.value)} ± {fmt(r.stderr, 2)}"
            + ("" if r.converged else " (lower bound)"), fmt(np.bool_(r.converged)), sec]
    note = (f"* {s}: {r.note}.  Increments {[round(v, 3) for v in r.increments]}; settling: edge "
            f"{fmt(r.settled['edge_change'], 2)}, D quantile {fmt(r.settled['D_q1e-3_change'], 2)} (relative).")
    return body, note, r.rule, [dict(q, delta_nn=r.value, converged=bool(r.converged)) for q in rows]


#: bump when a change of the solver changes a part's numbers (the cache is keyed by it)
CACHE_VERSION = {"nn": "dyadic-16", "dyn": "1", "escape": "1", "summary": "2"}


def dyn_paths(args, setting: str) -> int:
    """Part 2's DMFT paths for a setting: --paths, raised for a kinked activation or loss to at least
    KINKED_REPLICA_PATHS per replica (:func:`theorykit.thresholds.finite_d_paths`: Stein responses' noise biases
    C_theta upwards and, from a small overlap, decides capture)."""
    p = _problem(setting, 1.0, 1)
    return max(args.paths, finite_d_paths(p, 4)) if p.network.kinked else args.paths


def case_key(args, part: str, case: tuple) -> str:
    """The identity of a finished case: its part, the part's CACHE_VERSION, the case tuple, paths and seeds."""
    paths = dyn_paths(args, case[0]) if part == "dyn" else args.paths
    return key_of(part, CACHE_VERSION[part], *case, paths, args.seeds)


def _cached(args, part: str, case: tuple, compute) -> dict:
    """:func:`theorykit.report.writer.cached_case` under ``args.cache``/delta_nn with this table's case key."""
    return cached_case(args, part, case, compute, key=case_key(args, part, case),
                       folder=os.path.join(args.cache, "delta_nn"))


def part_nn(args, rows, md, cases):
    md.append("## Part 1: delta*(t) on a geometric t grid and delta_NN (spectral criterion)\n")
    md.append("delta_NN = lim delta*(t) by theorykit.thresholds' rule (stated under each row); not converged: the last "
              "value is a lower bound.  One delta_star scan per setting (log-spaced deltas in the range, 2 "
              f"regula-falsi solves per t, {args.paths} DMFT paths in 4 replicas).\n")
    hdr = ["setting", "truncation", "t grid", "delta*(t) ± se", "edge at delta*(t)", "delta_NN", "converged",
           "seconds"]
    body, rule = [], None
    for case in cases:
        row, note, r_rule, case_rows = _nn_render(case, _cached(args, "nn", case, _nn_case)["rows"])
        rows += case_rows
        body.append(row)
        md.append(note)
        rule = r_rule or rule
    md.append(f"* Rule: {rule}.\n")
    md.append(md_table(hdr, body))
    md.append("")


def _dyn_case(args, case):
    """One Part 2 setting: delta_dyn from the DMFT and the kick test at each delta, as plain rows."""
    from ..referee import kick_growth_rate

    s, deltas, trange, m0, d = case
    t0 = time.time()
    log(f"delta_dyn {s} deltas={deltas}")
    res = delta_dyn(_problem(s, deltas[0], 1), deltas, trange, paths=dyn_paths(args, s), replicas=4)
    t_dmft = (time.time() - t0) / len(deltas)
    rows = []
    for g in res.gamma:
        t1 = time.time()
        kick = kick_growth_rate(_problem(s, g["delta"], 1), d=d, m0=m0, t_range=trange, seeds=range(args.seeds))
        rows.append({"part": "dyn", "setting": s, "delta": g["delta"], "t1": trange[0], "t2": trange[1],
                     "gamma_dmft_how": g.get("how", g.get("note")),
                     "gamma_dmft": g["value"], "gamma_dmft_se": g["stderr"], "gamma_sim": kick["value"],
                     "gamma_sim_se": kick["stderr"], "kick_m0": m0, "kick_d": d,
                     "escaped_before_window": len(kick["escaped_before_window"]), "seeds": len(kick["seeds"]),
                     "delta_dyn": res.value, "delta_dyn_se": res.stderr,
                     "delta_dyn_reason": res.reason, "seconds_dmft": t_dmft, "seconds_kick": time.time() - t1})
    return {"rows": rows}


def _num(v) -> float:
    return math.nan if v is None else float(v)


def _dyn_render(case, rows) -> tuple:
    """(Markdown rows, note) of a Part 2 case from its rows."""
    s = case[0]
    body = []
    for r in rows:
        sec = (f"{r['seconds_dmft']:.0f} / {r['seconds_kick']:.0f}" if r.get("seconds_dmft") is not None
               else "—")
        body.append([s, f"{float(r['delta']):g}", f"[{r['t1']}, {r['t2']}]",
                     f"{fmt(_num(r['gamma_dmft']), 3)} ± {fmt(_num(r['gamma_dmft_se']), 2)}",
                     f"{fmt(_num(r['gamma_sim']), 3)} ± {fmt(_num(r['gamma_sim_se']), 2)}",
                     f"{r['kick_m0']:g}, {r['kick_d']}", f"{r['escaped_before_window']}/{r['seeds']}", sec])
    value, se = _num(rows[0]["delta_dyn"]), _num(rows[0]["delta_dyn_se"])
    dyn = (f"{fmt(value)} ± {fmt(se, 2)}" if math.isfinite(value)
           else f"undefined: {rows[0].get('delta_dyn_reason') or 'see the rows'}")
    why = [f"delta = {r['delta']:g}: {r['gamma_dmft_how']}" for r in rows
           if not math.isfinite(_num(r["gamma_dmft"])) and r.get("gamma_dmft_how")]
    note = f"* {s}, t in [{rows[0]['t1']}, {rows[0]['t2']}]: delta_dyn (DMFT) = {dyn}."
    if why:
        note += "  No DMFT rate at " + "; ".join(why) + "."
    return body, note


def part_dyn(args, rows, md, cases):
    md.append("## Part 2: the dynamical criterion, gamma(delta), DMFT against the finite-d kick test\n")
    md.append("DMFT: m*(T) = the smallest initial hard overlap that the nonlinear DMFT captures (cos^2 > 1/2) by T, "
              f"from a ladder of 14 runs (m0 in [1e-4, 0.5], {args.paths} paths in 4 replicas; a kinked activation or "
              f"loss at least {defaults.KINKED_REPLICA_PATHS} per replica, as the finite-d answer); "
              "gamma = -d ln m*/dT by least squares on the t range (se: the same fit on each DMFT replica's own m*, "
              "spread / sqrt(4)).  "
              "Finite d: GD from a kick m0 along the "
              f"hard direction, {args.seeds} seeds; gamma_sim = the slope of ln|cos(theta, e)| on the same range "
              "before cos^2 > 1/2 (seeds that escape before the window are counted, not fitted).  Same units (a "
              "rate of the amplitude; the rate of cos^2 is twice it).\n")
    hdr = ["setting", "delta", "t range", "gamma DMFT ± se", "gamma finite d ± se", "kick m0, d",
           "escaped before window", "seconds (DMFT / finite d)"]
    body = []
    for case in cases:
        case_rows = _cached(args, "dyn", case, _dyn_case)["rows"]
        b, note = _dyn_render(case, case_rows)
        rows += case_rows
        body += b
        md.append(note)
    md.append("")
    md.append(md_table(hdr, body))
    md.append("")


def _escape_case(args, case):
    """One Part 3 setting: the sweeps at every d (each run stopped at its escape), as plain rows per (delta, d)."""
    from ..referee import sweep

    s, deltas, ds, seeds, horizon = case
    folder = os.path.join(args.cache, "delta_nn")
    os.makedirs(folder, exist_ok=True)
    pr = _problem(s, deltas[0], horizon)
    per = {}
    for d in ds:
        t0 = time.time()
        log(f"escape {s} d={d}")
        csv = os.path.join(folder, f"escape_{s}_d{d}_T{horizon}.csv")
        df = sweep(list(deltas), range(seeds[d] if isinstance(seeds, dict) else seeds), problem=pr, d=d,
                   stop_after_escape=0, csv=csv, processes=args.processes, quiet=True)
        sec = time.time() - t0
        for dl in deltas:
            g = df[df.delta == dl]
            per[(dl, d)] = (g.escape_time.dropna().to_numpy(dtype=float), len(g), sec / len(deltas))
    rows = []
    for dl in deltas:
        full = [(d, float(np.median(per[(dl, d)][0]))) for d in ds if len(per[(dl, d)][0]) == per[(dl, d)][1] > 0]
        slope = (float(np.polyfit(np.log([d for d, _ in full]), [v for _, v in full], 1)[0]) if len(full) >= 3
                 else float("nan"))
        for d in ds:
            esc, nr, sec = per[(dl, d)]
            q = np.percentile(esc, [25, 75]) if len(esc) else [float("nan")] * 2
            rows.append({"part": "escape", "setting": s, "delta": dl, "d": d, "horizon": horizon,
                         "escaped": len(esc), "runs": nr, "escape_median": float(np.median(esc)) if len(esc)
                         else float("nan"), "escape_q25": q[0], "escape_q75": q[1], "escape_slope_lnd": slope,
                         "seconds": sec})
    return {"rows": rows}


def _escape_render(rows) -> list:
    body, first = [], set()
    for r in rows:
        top = r["delta"] not in first
        first.add(r["delta"])
        ne, med = r["escaped"], _num(r["escape_median"])
        body.append([r["setting"], f"{float(r['delta']):g}", r["d"], r["horizon"], f"{ne}/{r['runs']}", fmt(med),
                     f"{fmt(_num(r['escape_q25']))}-{fmt(_num(r['escape_q75']))}" if ne else "—",
                     fmt(_num(r["escape_slope_lnd"])) if top else "",
                     f"{r['seconds']:.0f}" if r.get("seconds") is not None else "—"])
    return body


def part_escape(args, rows, md, cases):
    """Part 3: the simulator's escape time (first step with hard overlap > 1/2) against d, from random initialisation:
    fast escape that grows like ln d above delta_NN, none or slow below it."""
    md.append("## Part 3: the simulator's escape time against d (bounded setting)\n")
    md.append("GD from random initialisation (theorykit.sweep, each run stopped at its escape: the first step with "
              "hard overlap cos^2 > 1/2).  Per delta and d: the fraction escaped by the horizon, and the median and "
              "quartiles of the escape time over the runs that escaped.  Slope: least squares of the median escape "
              "time against ln d over the d where every run escaped (steps per e-fold of d); a fast escape is "
              "t ~ a + b ln d.\n")
    hdr = ["setting", "delta", "d", "horizon", "escaped", "median escape time", "quartiles", "slope b (per ln d)",
           "seconds"]
    body = []
    for case in cases:
        case_rows = _cached(args, "escape", case, _escape_case)["rows"]
        rows += case_rows
        body += _escape_render(case_rows)
    md.append(md_table(hdr, body))
    md.append("")


def main(argv=None, *, prog=None, root=None):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", type=int, default=16384, help="DMFT paths (default 16384)")
    ap.add_argument("--seeds", type=int, default=8, help="finite-d seeds of the kick test (default 8)")
    ap.add_argument("--parts", default="0123", help="which parts (default 0123; 0, the summary, reads 1 and 2)")
    add_case_table_arguments(ap, "delta_nn")
    args = ap.parse_args(argv)
    stem = open_case_table(args, root, "delta_nn")
    root = root or os.getcwd()
    started, t0 = now(), time.time()
    rows, md = [], []
    pick = (lambda cases: cases) if not args.cases else \
        (lambda cases: [c for c in cases if c[0] in args.cases.split(",")])
    if "1" in args.parts:
        part_nn(args, rows, md, pick(QUICK_NN if args.quick else NN_CASES + (EXTRA_NN_CASES if args.cases else [])))
    n1 = len(rows)
    if "2" in args.parts:
        part_dyn(args, rows, md, pick(QUICK_DYN if args.quick else DYN_CASES))
    if "3" in args.parts:
        part_escape(args, rows, md, pick(QUICK_ESCAPE if args.quick else ESCAPE_CASES))
    if "0" in args.parts:  # last (it reads Parts 1 and 2), printed first
        head = []
        part_summary(args, rows, head, pick(QUICK_SUMMARY if args.quick else SUMMARY_CASES), _cached, rows[:n1],
                     [r for r in rows[n1:] if r.get("part") == "dyn"], root)
        md[:0] = head
    cols = sorted({k for r in rows for k in r}, key=lambda k: (k != "part", k))
    write_table(stem, rows, cols, md, title="delta_NN and the dynamical criterion",
                command=regenerate_command(prog or "python scripts/delta_nn_table.py", argv or []),
                timing="cases already in the table (same case key) or in the cache tables/.cache/delta_nn are read "
                       "back, so this counts only the cases computed in this run; each row gives its own case's "
                       "seconds",
                started=started, wall=time.time() - t0, root=root)
    return rows
