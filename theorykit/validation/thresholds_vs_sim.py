"""tables/thresholds_vs_sim.md: the DMFT's finite-d answers against GD, like with like.

For each setting (m = 1 and 2), delta of its grid and d in 200, 400, 800, 1600 (m = 2: 200, 400, 800):
* prediction: :func:`theorykit.thresholds.finite_d` (a capture ladder of nonlinear DMFT runs per delta, the linear
  hard process for v_eff): P(GD at dimension d captures the hard direction by the horizon), with its band, and the
  escape time t_1/2 (the first t with P >= 1/2);
* simulation: :func:`theorykit.sweep` from random initialisation, each run stopped at its escape (cos^2 > 1/2): the
  fraction escaped by the horizon with its binomial standard error, and the median escape time over all runs (a run
  that has not escaped counts as later than the horizon; the median exists when at least half escaped).
Pass criterion per cell: |P - fraction| <= max(2 se, 0.1).  Escape times are compared as they are
(prediction against the simulated median, with the simulated quartiles); their growth with ln d is fitted on both.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from ..thresholds import finite_d
from ..cases import problem as _problem
from ..report.writer import (cached_case, fmt, key_of, log, md_table, now, parse_case_table, regenerate_command,
                             write_table)

#: (setting, deltas, d values, seeds per delta and d, horizon)
CASES = [("pr-gelu", (8.0, 10.0, 12.0, 15.0), (200, 400, 800, 1600), 16, 200),
         ("pr-x2", (4.0, 5.0, 6.0, 8.0), (200, 400, 800, 1600), 16, 400),
         ("bounded", (6.0, 7.0, 9.0, 11.0), (200, 400, 800, 1600), 16, 200),
         ("pr-relu", (8.0, 11.0, 15.0, 20.0), (200, 400, 800, 1600), 16, 200),
         ("pr-xtanh", (6.0, 8.0, 11.0, 15.0), (200, 400, 800, 1600), 16, 200),
         ("pr-gelu-m2", (4.0, 5.5, 8.0), (200, 400, 800), 16, 200),
         ("pr-x2-m2-eta0.1", (3.5, 4.5, 6.0), (200, 400, 800), 16, 200)]
QUICK = [("pr-gelu", (10.0, 17.0), (100, 200), 4, 40)]
VERSION = "1"
#: a setting whose prediction changed after its rows were computed gets its own case version (a new case key):
#: bounded 2: the DMFT integrates its jumping link by Gauss-Legendre between the breakpoints (was Monte Carlo);
#: phase retrieval 2: the DMFT of n = delta d samples drops a tail path beyond the latent 1/n quantile once
#: eta D / delta > 2 (was 4); pr-relu 3: a kinked activation's ladders take at least KINKED_REPLICA_PATHS paths per
#: replica (were the --paths given).  GD's rows do not depend on the version: see :func:`_previous_gd`
CASE_VERSIONS = {"bounded": "2", "pr-gelu": "2", "pr-x2": "2", "pr-relu": "3", "pr-xtanh": "2", "pr-gelu-m2": "2",
                 "pr-x2-m2-eta0.1": "2"}
#: the simulation's columns of a row (GD alone; a new case version reuses them, see :func:`_previous_gd`)
GD_COLUMNS = ("sim_frac", "sim_se", "sim_escaped", "sim_runs", "t_sim_median", "t_sim_q25", "t_sim_q75",
              "seconds_sim")
#: finite_d options per setting beyond the defaults (part of the case key): width 2 costs rays x rungs solves per delta
FINITE_D_OPTIONS = {"pr-gelu-m2": {"m0s": (4e-3, 0.5, 8), "rays": 3, "paths": 4096},
                    "pr-x2-m2-eta0.1": {"m0s": (4e-3, 0.5, 8), "rays": 3, "paths": 4096}}
#: the per-cell tolerance floor of the pass criterion
TOL = 0.1




def _previous_gd(args, case) -> dict:
    """{(delta, d): GD's columns} of this setting from the table being regenerated, under any case version, where
    it holds every (delta, d) of the case with the same seeds and horizon (GD does not depend on the prediction's
    version, so a new version recomputes the prediction only); {} otherwise and with --recompute."""
    s, deltas, ds, seeds, horizon = case
    got = {}
    for rows in (getattr(args, "previous", None) or {}).values():
        for r in rows:
            if (r.get("setting") == s and int(r.get("horizon", -1)) == horizon
                    and int(r.get("sim_runs") or -1) == seeds):
                got[(float(r["delta"]), int(r["d"]))] = {c: r.get(c) for c in GD_COLUMNS}
    want = {(float(dl), int(d)) for dl in deltas for d in ds}
    return {k: got[k] for k in want} if want <= set(got) else {}


def _case(args, case) -> dict:
    """One setting: the prediction for every (delta, d) and the simulations, as plain rows (GD's read back from the
    table being regenerated where it holds them: :func:`_previous_gd`)."""
    from ..referee import sweep

    s, deltas, ds, seeds, horizon = case
    t0 = time.time()
    log(f"finite_d {s}")
    opts = dict(FINITE_D_OPTIONS.get(s, {}))
    if "m0s" in opts:
        opts["m0s"] = np.geomspace(*opts["m0s"])
    fd = finite_d(_problem(s, deltas[0], horizon), deltas, ds, horizon,
                  **{"paths": args.paths, "replicas": 4, "refine": 0, **opts})  # P on the committed grid
    t_theory = time.time() - t0
    pred = {(e["delta"], e["d"]): e for e in fd.escape_time}
    info = {q["delta"]: q for q in fd.per_delta}
    rows = []
    old_gd = _previous_gd(args, case)
    for j, d in enumerate(fd.ds):
        if old_gd:
            log(f"{s} d={d}: GD's rows read back from the table")
            for i, dl in enumerate(fd.deltas):
                rows.append(_prediction_row(s, dl, d, horizon, fd, i, j, pred, info, t_theory / len(deltas),
                                            old_gd[(float(dl), int(d))]))
            continue
        t1 = time.time()
        log(f"sweep {s} d={d}")
        csv = os.path.join(args.cache, "thresholds_vs_sim", f"sweep_{s}_d{d}_T{horizon}.csv")
        os.makedirs(os.path.dirname(csv), exist_ok=True)
        df = sweep(list(deltas), range(seeds), problem=_problem(s, deltas[0], horizon), d=d, stop_after_escape=0,
                   csv=csv, processes=args.processes, quiet=True)
        t_sim = (time.time() - t1) / len(deltas)
        for i, dl in enumerate(fd.deltas):
            g = df[(df.delta == dl) & (df.status != "failed")]
            n = len(g)
            esc = np.sort(g.escape_time.dropna().to_numpy(dtype=float))
            k = len(esc)
            frac = k / n if n else math.nan
            se = math.sqrt(max(frac * (1 - frac), 0.0) / n) if n else math.nan
            # the median over all runs, non-escaped ones later than the horizon: defined when >= half escaped
            allt = np.concatenate([esc, np.full(n - k, np.inf)])
            # quantiles of the empirical law itself (no interpolation: a run not escaped is +inf)
            q25, q50, q75 = (np.percentile(allt, [25, 50, 75], method="inverted_cdf") if n else [math.nan] * 3)
            med = float(q50) if n and k * 2 >= n else math.nan
            rows.append(_prediction_row(s, dl, d, horizon, fd, i, j, pred, info, t_theory / len(deltas),
                                        {"sim_frac": frac, "sim_se": se, "sim_escaped": k, "sim_runs": n,
                                         "t_sim_median": med, "t_sim_q25": float(q25), "t_sim_q75": float(q75),
                                         "seconds_sim": t_sim}))
    mids = {m["d"]: m for m in fd.midpoints}
    for r in rows:
        m = mids[r["d"]]
        r.update(mid_pred=m["midpoint"], mid_low=m["band"][0], mid_high=m["band"][1])
    return {"rows": rows}


def _prediction_row(s, dl, d, horizon, fd, i, j, pred, info, seconds_theory, gd) -> dict:
    """One cell: the prediction at (delta index i, d index j) beside GD's columns ``gd``, and the pass verdict."""
    e = pred.get((dl, d), {"t": None, "band": [None, None]})
    p, lo, hi = (float(a[i, j, horizon]) for a in (fd.probability, fd.low, fd.high))
    frac, se, n = _num(gd["sim_frac"]), _num(gd["sim_se"]), int(gd["sim_runs"] or 0)
    return {"setting": s, "delta": dl, "d": d, "horizon": horizon, "P_pred": p, "P_low": lo, "P_high": hi, **gd,
            "pass": bool(abs(p - frac) <= max(2 * se, TOL)) if n and math.isfinite(p) else None,
            "t_pred": e["t"], "t_pred_early": e["band"][0], "t_pred_late": e["band"][1],
            "noise_limited": info[dl]["noise_limited"], "pred_error": info[dl]["error"],
            "seconds_theory": seconds_theory}


def _num(v):
    return math.nan if v is None else float(v)


def _t(v):
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{float(v):g}"


def _slope(ds, ts):
    pts = [(d, t) for d, t in zip(ds, ts) if t is not None and math.isfinite(float(t))]
    if len(pts) < 3:
        return math.nan
    return float(np.polyfit(np.log([d for d, _ in pts]), [float(t) for _, t in pts], 1)[0])


def _render(rows) -> tuple:
    """(cells table rows, escape table rows, midpoint rows, pass line) of one case from its rows."""
    from ..rules import crossing

    s = rows[0]["setting"]
    cells, escape, mids = [], [], []
    for r in rows:
        ok = {True: "yes", False: "NO", None: "—"}[r["pass"]]
        flag = " (noise-limited)" if r.get("noise_limited") else ""
        cells.append([s, f"{float(r['delta']):g}", r["d"], r["horizon"],
                      f"{fmt(_num(r['P_pred']), 3)} [{fmt(_num(r['P_low']), 2)}, {fmt(_num(r['P_high']), 2)}]{flag}",
                      f"{fmt(_num(r['sim_frac']), 3)} ± {fmt(_num(r['sim_se']), 2)} "
                      f"({r['sim_escaped']}/{r['sim_runs']})",
                      ok])
    deltas = sorted({float(r["delta"]) for r in rows})
    ds = sorted({int(r["d"]) for r in rows})
    for dl in deltas:
        sub = sorted((r for r in rows if float(r["delta"]) == dl), key=lambda r: r["d"])
        sp, ss = _slope(ds, [r["t_pred"] for r in sub]), _slope(ds, [r["t_sim_median"] for r in sub])
        for r in sub:
            escape.append([s, f"{dl:g}", r["d"], f"{_t(r['t_pred'])} [{_t(r['t_pred_early'])}, {_t(r['t_pred_late'])}]",
                           f"{_t(r['t_sim_median'])} ({_t(r['t_sim_q25'])}-{_t(r['t_sim_q75'])})",
                           f"{fmt(sp)} / {fmt(ss)}" if r is sub[0] else ""])
    for d in ds:
        sub = sorted((r for r in rows if int(r["d"]) == d), key=lambda r: float(r["delta"]))
        sim_mid = crossing([float(r["delta"]) for r in sub], [_num(r["sim_frac"]) for r in sub])
        r0 = sub[0]
        mids.append([s, d, r0["horizon"], f"{fmt(_num(r0['mid_pred']))} [{fmt(_num(r0['mid_low']))}, "
                     f"{fmt(_num(r0['mid_high']))}]", fmt(math.nan if sim_mid is None else sim_mid)])
    judged = [r for r in rows if r["pass"] is not None]
    passed = sum(1 for r in judged if r["pass"])
    line = f"* {s}: {passed} of {len(judged)} cells pass."
    errs = sorted({r["pred_error"] for r in rows if r.get("pred_error")})
    if errs:
        line += "  No prediction at some delta: " + "; ".join(errs) + "."
    return cells, escape, mids, line


def main(argv=None, *, prog=None, root=None):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", type=int, default=8192, help="DMFT paths per solve, over 4 replicas (default 8192)")
    args, stem, root, cases = parse_case_table(ap, argv, root, "thresholds_vs_sim", CASES, QUICK)
    started, t0 = now(), time.time()
    rows, cells, escape, mids, lines = [], [], [], [], []
    for case in cases:
        key = key_of("finite_d", CASE_VERSIONS.get(case[0], VERSION), *case, args.paths,
                     *sorted(FINITE_D_OPTIONS.get(case[0], {}).items()))
        rec = cached_case(args, "finite_d", case, _case, key=key, folder=os.path.join(args.cache, "thresholds_vs_sim"))
        c, e, m, line = _render(rec["rows"])
        rows += [dict(r, part="finite_d") for r in rec["rows"]]
        cells += c
        escape += e
        mids += m
        lines.append(line)
    md = ["## Part A: P(GD captures the hard direction by the horizon), prediction against simulation\n",
          "Prediction: theorykit.thresholds.finite_d (docs/theory.md §5: per delta a ladder of 16 nonlinear DMFT runs "
          f"from initial hard overlaps in [0.002, 0.5], and one run with the linear hard process; {args.paths} paths "
          "in 4 replicas; width 2, to fit this machine: 4096 paths, a ladder of 8 in [0.004, 0.5] on each of 3 rays of "
          "initial-overlap directions (angles pi/4, pi/2, 3pi/4, the rest by symmetry), mu_eff ~ N(0, V_eff / d) over "
          "the circle), with its band (the replicas' m* and V_eff ± 2 se).  Simulation: theorykit.sweep from random "
          "initialisation, the fraction of runs with cos^2 > 1/2 by the horizon, ± its binomial s.e.  Pass: "
          f"|P - fraction| <= max(2 se, {TOL:g}).  Noise-limited: the replicas' m* at the horizon spread by more "
          "than 25% (the DMFT's Monte-Carlo noise, not the initial overlap, drives the hard overlap there).\n", *lines,
          "", md_table(["setting", "delta", "d", "horizon", "P predicted [band]", "GD fraction ± se (escaped/runs)",
                        "pass"], cells), "",
          "## Part B: escape time against d\n",
          "Predicted t_1/2: the first t with P(capture by t) >= 1/2 [band: where the band's high and low ends reach "
          "1/2].  Simulated: the median escape time over all runs (a run not escaped by the horizon counts as later; "
          "— when fewer than half escaped) with its quartiles.  Slope: least squares of t against ln d over the d "
          "where it exists (steps per e-fold of d), predicted / simulated.\n",
          md_table(["setting", "delta", "d", "t_1/2 predicted [band]", "GD median (quartiles)",
                    "slope per ln d (pred / sim)"], escape), "",
          "## Part C: the midpoint delta_1/2(d, horizon)\n",
          "Predicted: where P crosses 1/2 along the deltas [band: where its ends cross].  Simulated: where the escaped "
          "fraction crosses 1/2 (linear interpolation; — when it does not cross on the grid).\n",
          md_table(["setting", "d", "horizon", "delta_1/2 predicted [band]", "delta_1/2 GD"], mids), ""]
    cols = sorted({k for r in rows for k in r}, key=lambda k: (k != "part", k != "setting", k))
    write_table(stem, rows, cols, md, title="Finite-d thresholds and escape times: the DMFT against GD",
                command=regenerate_command(prog or "python scripts/thresholds_vs_sim.py", argv or []),
                timing="cases already in the table (same case key) or in the cache are read back; each row gives "
                       "its own seconds", started=started, wall=time.time() - t0, root=root)
    return rows
