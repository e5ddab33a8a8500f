"""tables/delta_nn.md (issue 13): delta*(t) sequences and delta_NN by the spectral rule, and the dynamical
criterion's gamma(delta) from the DMFT next to the finite-d kick test.

Part 1, per setting: :func:`theorykit.thresholds.delta_nn` on a geometric t grid (one delta_star scan; laws truncated
at n = delta d where D is unbounded below), with its rule's verdict and the whole sequence.
Part 2, per setting and delta: gamma = -d ln m*/dT from :func:`theorykit.dynamics.capture_curve` (a ladder of
nonlinear DMFT runs from small hard overlaps) fitted on a t range, beside the simulator's late growth rate of a small
hard overlap (:func:`theorykit.referee.kick_growth_rate`, the same units: a rate of the amplitude |cos|), and
delta_dyn where gamma crosses 0.  Agreement is not a pass criterion here (docs/theory.md §5: open); the table is the result.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from ..problem import Problem
from ..thresholds import delta_dyn, delta_nn
from .hessian_check import SETTINGS
from .tables import fmt, log, md_table, now, regenerate_command, write_table

#: Part 1: (setting, T, t grid points, delta range, truncation d or None)
NN_CASES = [("bounded", 400, 5, (2.0, 14.0), None),
            ("pr-gelu", 200, 4, (4.0, 40.0), 1000)]
#: Part 2: (setting, deltas, t range, kick m0, kick d)
DYN_CASES = [("pr-gelu", (5.0, 6.5, 8.0, 10.0, 12.0, 14.0, 17.0), (25, 100), 0.05, 1000),
             ("bounded", (3.5, 4.25, 5.0, 6.0, 7.0, 8.0, 9.0), (25, 100), 0.05, 1000)]
QUICK_NN = [("bounded", 40, 3, (2.0, 14.0), None)]
QUICK_DYN = [("pr-gelu", (10.0, 17.0), (20, 40), 0.05, 500)]


def _problem(setting: str, delta: float, steps: int) -> Problem:
    act, link, loss, m, eta = SETTINGS[setting]
    return Problem(act, link, loss, m, delta=delta, eta=eta, steps=steps)


def part_nn(args, rows, md, cases):
    md.append("## Part 1: delta*(t) on a geometric t grid and delta_NN (spectral criterion)\n")
    md.append("delta_NN = lim delta*(t) by theorykit.thresholds' rule (stated under each row); not converged: the last "
              "value is a lower bound.  One delta_star scan per setting (8 log-spaced deltas in the range, 2 "
              f"regula-falsi solves per t, {args.paths} DMFT paths in 4 replicas).\n")
    hdr = ["setting", "truncation", "t grid", "delta*(t) ± se", "edge at delta*(t)", "delta_NN", "converged",
           "seconds"]
    body = []
    for s, T, pts, rng, d in cases:
        t0 = time.time()
        log(f"delta_NN {s} T={T}")
        r = delta_nn(_problem(s, rng[0], T), T, points_t=pts, first_t=min(25, T // 4), d=d, delta_range=rng,
                     points=8, paths=args.paths, replicas=4)
        sec = time.time() - t0
        seq = r.sequence
        body.append([s, "—" if d is None else f"n = delta x {d}", ", ".join(str(q.t) for q in seq),
                     ", ".join(f"{fmt(q.value)} ± {fmt(q.stderr, 2)}" for q in seq),
                     ", ".join(fmt(q.edge) for q in seq), f"{fmt(r.value)} ± {fmt(r.stderr, 2)}"
                     + ("" if r.converged else " (lower bound)"), fmt(np.bool_(r.converged)), f"{sec:.0f}"])
        for q in seq:
            rows.append({"part": "nn", "setting": s, "T": T, "t": q.t, "delta_star": q.value,
                         "delta_star_se": q.stderr, "edge": q.edge, "outlier": q.outlier, "overlap2": q.overlap2,
                         "truncation_n": q.truncation_n, "unbounded": q.unbounded,
                         "D_q1e-3": (q.D_low or {}).get("0.001"), "delta_nn": r.value, "converged": r.converged})
        md.append(f"* {s}: {r.note}.  Increments {[round(v, 3) for v in r.increments]}; settling: edge "
                  f"{fmt(r.settled['edge_change'], 2)}, D quantile {fmt(r.settled['D_q1e-3_change'], 2)} (relative).")
    md.append(f"* Rule: {cases and r.rule}.\n")
    md.append(md_table(hdr, body))
    md.append("")


def part_dyn(args, rows, md, cases):
    from ..referee import kick_growth_rate

    md.append("## Part 2: the dynamical criterion, gamma(delta), DMFT against the finite-d kick test\n")
    md.append("DMFT: m*(T) = the smallest initial hard overlap that the nonlinear DMFT captures (cos^2 > 1/2) by T, "
              f"from a ladder of 14 runs (m0 in [1e-4, 0.5], {args.paths} paths in 4 replicas); gamma = -d ln m*/dT "
              "by least squares on the t range (se: the same fit on each DMFT replica's own m*, spread / sqrt(4)).  Finite d: GD from a kick m0 along the "
              f"hard direction, {args.seeds} seeds; gamma_sim = the slope of ln|cos(theta, e)| on the same range "
              "before cos^2 > 1/2 (seeds that escape before the window are counted, not fitted).  Same units (a "
              "rate of the amplitude; the rate of cos^2 is twice it).\n")
    hdr = ["setting", "delta", "t range", "gamma DMFT ± se", "gamma finite d ± se", "kick m0, d", "escaped before window",
           "seconds (DMFT / finite d)"]
    body = []
    for s, deltas, trange, m0, d in cases:
        t0 = time.time()
        log(f"delta_dyn {s} deltas={deltas}")
        res = delta_dyn(_problem(s, deltas[0], 1), deltas, trange, paths=args.paths, replicas=4)
        t_dmft = (time.time() - t0) / len(deltas)
        for g in res.gamma:
            t1 = time.time()
            kick = kick_growth_rate(_problem(s, g["delta"], 1), d=d, m0=m0, t_range=trange, seeds=range(args.seeds))
            t_kick = time.time() - t1
            body.append([s, g["delta"], f"[{trange[0]}, {trange[1]}]", f"{fmt(g['value'], 3)} ± {fmt(g['stderr'], 2)}",
                         f"{fmt(kick['value'], 3)} ± {fmt(kick['stderr'], 2)}", f"{m0:g}, {d}",
                         f"{len(kick['escaped_before_window'])}/{len(kick['seeds'])}", f"{t_dmft:.0f} / {t_kick:.0f}"])
            rows.append({"part": "dyn", "setting": s, "delta": g["delta"], "t1": trange[0], "t2": trange[1],
                         "gamma_dmft_how": g.get("how", g.get("note")),
                         "gamma_dmft": g["value"], "gamma_dmft_se": g["stderr"], "gamma_sim": kick["value"],
                         "gamma_sim_se": kick["stderr"], "kick_m0": m0, "kick_d": d,
                         "escaped_before_window": len(kick["escaped_before_window"]), "seeds": len(kick["seeds"]),
                         "delta_dyn": res.value, "delta_dyn_se": res.stderr})
        dyn = (f"{fmt(res.value)} ± {fmt(res.stderr, 2)}" if math.isfinite(res.value) else f"undefined: {res.reason}")
        md.append(f"* {s}: delta_dyn (DMFT) = {dyn}.")
    md.append("")
    md.append(md_table(hdr, body))
    md.append("")


def main(argv=None, *, prog=None, root=None):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one tiny case per part (a few minutes)")
    ap.add_argument("--paths", type=int, default=16384, help="DMFT paths (default 16384)")
    ap.add_argument("--seeds", type=int, default=8, help="finite-d seeds of the kick test (default 8)")
    ap.add_argument("--parts", default="12", help="which parts (default 12)")
    ap.add_argument("--out", default=None, help="table stem (default tables/delta_nn)")
    args = ap.parse_args(argv)
    root = root or os.getcwd()
    stem = args.out or os.path.join(root, "tables", "delta_nn" + ("_quick" if args.quick else ""))
    started, t0 = now(), time.time()
    rows, md = [], []
    if "1" in args.parts:
        part_nn(args, rows, md, QUICK_NN if args.quick else NN_CASES)
    if "2" in args.parts:
        part_dyn(args, rows, md, QUICK_DYN if args.quick else DYN_CASES)
    cols = sorted({k for r in rows for k in r}, key=lambda k: (k != "part", k))
    write_table(stem, rows, cols, md, title="delta_NN and the dynamical criterion",
                command=regenerate_command(prog or "python scripts/delta_nn_table.py", argv or []),
                started=started, wall=time.time() - t0, root=root)
    return rows
