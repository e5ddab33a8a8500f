"""tables/paper_comparison.md: which convention moves GD's midpoints to the paper's numbers.

Montanari & Wang (2026) report for phase retrieval (y = z^2, full-batch GD on the first layer) the thresholds
delta_NN ~ 6.0 for GeLU and ~ 3.6 for sigma(x) = x^2 ("correlation > 0.5").  theorykit's own simulated midpoints at
d = 400 (m = 1: ~ 10.3 and ~ 5.3) are far above them.  Each case below changes one convention against the settings of
theorykit/validation/hessian_check.py (GeLU: eta = 1, T = 200; x^2: eta = 0.05, T = 400; square loss) and runs
:func:`theorykit.sweep` from random initialisation at d = 400, each run stopped at its escape:

* width 4 and 8 with a = +-1 (half +1, half -1), in theorykit's f = (1/m) sum_j a_j sigma(theta_j^T x);
* the 1/sqrt(m) output scale: a_j = +-sqrt(m) in the (1/m) convention;
* the centred target y - 1 (link "z**2 - 1");
* a larger initial scale, Sigma0 = 4 I;
* the second layer trained along with the first (:func:`theorykit.referee.second_layer.trained_a_run`, beside
  theorykit's simulator);
* the m = 1 baseline on the same grid;
* for the centred target: a finer grid with 48 seeds, the horizon doubled, and d = 800; the horizon doubled for the
  baseline and the widest cases.

Success (the simulator's): cos^2 > 1/2 between the hard direction and the top left singular vector of Theta at some
step by the horizon (escape_time not null).  The looser |cos| > 1/2 (cos^2 > 1/4) is read from the same rows: a run
that escaped has it, a run that did not escape ran to the horizon and its max_overlap (the largest cos^2 over the run)
says whether it ever passed 1/4.  Midpoint: where the fraction crosses 1/2, by linear interpolation in delta
(:func:`theorykit.rules.crossing`, the first crossing).  Reading: tables/paper_comparison_notes.md.
"""
from __future__ import annotations

import argparse
import hashlib
import math
import os
import time

import numpy as np
import pandas as pd

from ..problem import Problem
from ..rules import crossing
from ..cases import CASES as SETTINGS
from ..report.writer import cached_case, fmt, key_of, log, md_table, now, parse_case_table, regenerate_command, \
    write_table

#: the paper's thresholds (Montanari & Wang 2026, phase retrieval, "correlation > 0.5")
PAPER = {"pr-gelu": 6.0, "pr-x2": 3.6}
#: theorykit's midpoints at d = 400 before this comparison (the baseline the table is read against)
EARLIER = {("pr-gelu", 1): 10.3, ("pr-x2", 1): 5.3, ("pr-gelu", 2): 4.8, ("pr-x2", 2): 3.1}

GELU_GRID = (3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0)
X2_GRID = (2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0)
R2, R8 = 2.0, math.sqrt(8.0)


def _pm(m, s=1.0):
    """(s, -s, s, -s, ...) of length m: half +s, half -s."""
    return tuple(s if j % 2 == 0 else -s for j in range(m))


#: (name, setting, width m, a (None = all 1), link, Sigma0 scale c (None = I), deltas, seeds, horizon, d, variant)
CASES = [
    ("gelu-m4-pm1", "pr-gelu", 4, _pm(4), "phase-retrieval", None, GELU_GRID, 16, 200, 400, "(a) m = 4, a = +-1"),
    ("x2-m4-pm1", "pr-x2", 4, _pm(4), "phase-retrieval", None, X2_GRID, 16, 400, 400, "(a) m = 4, a = +-1"),
    ("gelu-m8-pm1", "pr-gelu", 8, _pm(8), "phase-retrieval", None, GELU_GRID, 16, 200, 400, "(a) m = 8, a = +-1"),
    ("x2-m8-pm1", "pr-x2", 8, _pm(8), "phase-retrieval", None, X2_GRID, 16, 400, 400, "(a) m = 8, a = +-1"),
    ("gelu-m4-pmsqrt", "pr-gelu", 4, _pm(4, R2), "phase-retrieval", None, GELU_GRID, 16, 200, 400,
     "(b) m = 4, a = +-sqrt(m) (1/sqrt(m) scale)"),
    ("x2-m4-pmsqrt", "pr-x2", 4, _pm(4, R2), "phase-retrieval", None, X2_GRID, 16, 400, 400,
     "(b) m = 4, a = +-sqrt(m) (1/sqrt(m) scale)"),
    ("gelu-m8-pmsqrt", "pr-gelu", 8, _pm(8, R8), "phase-retrieval", None, GELU_GRID, 16, 200, 400,
     "(b) m = 8, a = +-sqrt(m) (1/sqrt(m) scale)"),
    ("x2-m8-pmsqrt", "pr-x2", 8, _pm(8, R8), "phase-retrieval", None, X2_GRID, 16, 400, 400,
     "(b) m = 8, a = +-sqrt(m) (1/sqrt(m) scale)"),
    ("gelu-m1-centred", "pr-gelu", 1, None, "z**2 - 1", None, GELU_GRID, 16, 200, 400, "(c) m = 1, y = z^2 - 1"),
    ("x2-m1-centred", "pr-x2", 1, None, "z**2 - 1", None, X2_GRID, 16, 400, 400, "(c) m = 1, y = z^2 - 1"),
    ("gelu-m1-init4", "pr-gelu", 1, None, "phase-retrieval", 4.0, GELU_GRID, 16, 200, 400, "(d) m = 1, Sigma0 = 4 I"),
    ("x2-m1-init4", "pr-x2", 1, None, "phase-retrieval", 4.0, X2_GRID, 16, 400, 400, "(d) m = 1, Sigma0 = 4 I"),
    ("gelu-m1", "pr-gelu", 1, None, "phase-retrieval", None, GELU_GRID, 16, 200, 400, "baseline m = 1"),
    ("x2-m1", "pr-x2", 1, None, "phase-retrieval", None, X2_GRID, 16, 400, 400, "baseline m = 1"),
    # (e): the second layer trained along with the first (same step), from the (a) case's a = +-1
    ("gelu-m4-pm1-traina", "pr-gelu", 4, _pm(4), "phase-retrieval", None, GELU_GRID, 16, 200, 400,
     "(e) m = 4, a(0) = +-1, a trained", {"train_a": 1.0}),
    ("x2-m4-pm1-traina", "pr-x2", 4, _pm(4), "phase-retrieval", None, X2_GRID, 16, 400, 400,
     "(e) m = 4, a(0) = +-1, a trained", {"train_a": 0.05}),
    # (b) on the earlier m = 2, a = (1, 1) setting
    ("gelu-m2-sqrt", "pr-gelu", 2, (math.sqrt(2.0),) * 2, "phase-retrieval", None, GELU_GRID, 16, 200, 400,
     "(b) m = 2, a = sqrt(m) (1/sqrt(m) scale)"),
    ("x2-m2-sqrt", "pr-x2", 2, (math.sqrt(2.0),) * 2, "phase-retrieval", None, X2_GRID, 16, 400, 400,
     "(b) m = 2, a = sqrt(m) (1/sqrt(m) scale)"),
    # (c) refined: a finer grid and 48 seeds around the crossing, the horizon doubled, d = 800
    ("gelu-m1-centred-fine", "pr-gelu", 1, None, "z**2 - 1", None, (4.0, 5.0, 5.5, 6.0, 6.5, 7.0, 8.0), 48, 200, 400,
     "(c) m = 1, y = z^2 - 1, fine grid"),
    ("x2-m1-centred-fine", "pr-x2", 1, None, "z**2 - 1", None, (2.5, 3.0, 3.25, 3.5, 3.75, 4.0, 4.5, 5.0), 48, 400,
     400, "(c) m = 1, y = z^2 - 1, fine grid"),
    ("gelu-m1-centred-T400", "pr-gelu", 1, None, "z**2 - 1", None, GELU_GRID, 16, 400, 400,
     "(c) m = 1, y = z^2 - 1, 2T"),
    ("x2-m1-centred-T800", "pr-x2", 1, None, "z**2 - 1", None, X2_GRID, 16, 800, 400, "(c) m = 1, y = z^2 - 1, 2T"),
    ("gelu-m1-centred-d800", "pr-gelu", 1, None, "z**2 - 1", None, (4.0, 5.0, 6.0, 7.0, 8.0, 10.0), 16, 200, 800,
     "(c) m = 1, y = z^2 - 1, d = 800"),
    ("x2-m1-centred-d800", "pr-x2", 1, None, "z**2 - 1", None, (2.5, 3.0, 3.5, 4.0, 5.0, 6.0), 16, 400, 800,
     "(c) m = 1, y = z^2 - 1, d = 800"),
    # the horizon doubled (GeLU T = 400, x^2 T = 800) on the baseline and on the widest cases
    ("gelu-m1-T400", "pr-gelu", 1, None, "phase-retrieval", None, GELU_GRID, 16, 400, 400, "baseline m = 1, 2T"),
    ("x2-m1-T800", "pr-x2", 1, None, "phase-retrieval", None, X2_GRID, 16, 800, 400, "baseline m = 1, 2T"),
    ("gelu-m8-pmsqrt-T400", "pr-gelu", 8, _pm(8, R8), "phase-retrieval", None, (4.0, 5.0, 6.0, 7.0, 8.0, 10.0), 16,
     400, 400, "(b) m = 8, a = +-sqrt(m), 2T"),
    ("x2-m8-pm1-T800", "pr-x2", 8, _pm(8), "phase-retrieval", None, (3.0, 3.5, 4.0, 5.0, 6.0, 7.0), 16, 800, 400,
     "(a) m = 8, a = +-1, 2T"),
    ("gelu-m1-centred-fine-T400", "pr-gelu", 1, None, "z**2 - 1", None, (4.0, 5.0, 5.5, 6.0, 6.5, 7.0, 8.0), 48, 400,
     400, "(c) m = 1, y = z^2 - 1, fine grid, 2T"),
    ("gelu-m1-centred-d800-T400", "pr-gelu", 1, None, "z**2 - 1", None, (4.0, 5.0, 6.0, 7.0, 8.0, 10.0), 16, 400,
     800, "(c) m = 1, y = z^2 - 1, d = 800, 2T"),
    ("x2-m1-centred-d800-T800", "pr-x2", 1, None, "z**2 - 1", None, (2.5, 3.0, 3.5, 4.0, 5.0, 6.0), 16, 800, 800,
     "(c) m = 1, y = z^2 - 1, d = 800, 2T"),
]
QUICK = [("quick-gelu-m2-pm1", "pr-gelu", 2, _pm(2), "phase-retrieval", None, (4.0, 12.0), 2, 20, 50,
          "quick: m = 2, a = +-1")]
VERSION = "1"


def problem_of(case, delta=None) -> Problem:
    """The Problem of a case (at its first delta unless ``delta``)."""
    _, setting, m, a, link, c, deltas, _, horizon, _, _ = case[:11]
    act, _, loss, _, eta = SETTINGS[setting]
    return Problem(act, link, loss, m, a=a, delta=deltas[0] if delta is None else delta, eta=eta, steps=horizon,
                   Sigma0=c)


def _options(case) -> dict:
    """A case's optional 12th entry: {"train_a": eta_a} trains the second layer too
    (:func:`theorykit.referee.second_layer.trained_a_run`)."""
    return case[11] if len(case) > 11 else {}


def _case(args, case) -> dict:
    """One case: its sweep, as one row per delta."""
    from ..referee import sweep
    from ..referee.second_layer import TRAINED_COLUMNS, trained_a_run
    from ..runner import run_jobs

    name, setting, m, a, link, c, deltas, seeds, horizon, d, variant = case[:11]
    eta_a = _options(case).get("train_a")
    pr = problem_of(case)
    log(f"sweep {name}: {len(deltas)} deltas x {seeds} seeds at d = {d}, T = {horizon}")
    csv = os.path.join(args.cache, "paper_comparison", f"sweep_{name}_d{d}_T{horizon}.csv")
    os.makedirs(os.path.dirname(csv), exist_ok=True)
    if eta_a is None:
        df = sweep(list(deltas), range(seeds), problem=pr, d=d, stop_after_escape=0, csv=csv,
                   processes=args.processes, quiet=True)
    else:
        jobs = [{"key": f"delta={dl!r},seed={s}", "delta": float(dl), "seed": s,
                 "kwargs": {"problem": pr, "d": d, "eta_a": float(eta_a)}} for dl in deltas for s in range(seeds)]
        df = run_jobs(jobs, trained_a_run, csv, TRAINED_COLUMNS,
                      settings={"problem": pr.as_dict(), "d": d, "eta_a": float(eta_a), "deltas": list(deltas),
                                "seeds": seeds, "version": VERSION},
                      processes=args.processes or 1, label="trained-a", unit="runs", quiet=True)
        for col in ("escape_time", "max_overlap"):
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
        df["delta"] = df["delta"].astype(float)
    rows = []
    for dl in deltas:
        g = df[(df.delta == dl) & (df.status != "failed")]
        n = len(g)
        escaped = g.escape_time.notna().to_numpy()
        k = int(escaped.sum())
        # |cos| > 1/2 by the horizon: escaped (cos^2 > 1/2), or a run to the horizon whose largest cos^2 passed 1/4
        k4 = int((escaped | (g.max_overlap.to_numpy(dtype=float) > 0.25)).sum())
        frac = k / n if n else math.nan
        frac4 = k4 / n if n else math.nan
        se = math.sqrt(max(frac * (1 - frac), 0.0) / n) if n else math.nan
        esc = g.escape_time.dropna().to_numpy(dtype=float)
        rows.append({"case": name, "setting": setting, "activation": pr.activation, "variant": variant, "width": m,
                     "a": ",".join(f"{v:g}" for v in pr.a_vector), "link": pr.link,
                     "Sigma0": "I" if c is None else f"{c:g} I", "eta": pr.eta,
                     "second_layer": "fixed" if eta_a is None else f"trained, eta_a = {eta_a:g}",
                     "delta": float(dl), "d": d,
                     "horizon": horizon, "runs": n, "escaped": k, "frac": frac, "se": se,
                     "escaped_cos_half": k4, "frac_cos_half": frac4,
                     "diverged": int((g.status == "diverged").sum()), "failed": int((df[df.delta == dl].status
                                                                                       == "failed").sum()),
                     "median_escape_escaped": float(np.median(esc)) if len(esc) else None,
                     "seconds_run_mean": float(g.seconds.mean()) if n else None,
                     # the sum of the case's run times (a resumed sweep's wall time would miss the runs read back)
                     "seconds_case": float(pd.to_numeric(df.seconds, errors="coerce").sum())})
    return {"rows": rows}


def _mid(rows, col):
    """The midpoint of the fraction ``col`` ("frac" or "frac_cos_half"), from the integer counts (so that a table read
    back from its CSV, whose fractions are rounded, gives the same midpoint)."""
    k = {"frac": "escaped", "frac_cos_half": "escaped_cos_half"}[col]
    return crossing([float(r["delta"]) for r in rows], [int(r[k]) / int(r["runs"]) for r in rows])


def mid_band(rows, col="escaped", reps=2000, seed=0):
    """A 95% band on the midpoint from the per-delta counts alone (so it re-renders from the CSV): a parametric
    bootstrap, each delta's count redrawn Binomial(runs, count/runs) and the midpoint recomputed; the 2.5% and
    97.5% quantiles over the redraws that cross 1/2 (None when fewer than half of them cross)."""
    rows = sorted(rows, key=lambda r: float(r["delta"]))
    x = [float(r["delta"]) for r in rows]
    n = np.array([int(r["runs"]) for r in rows])
    p = np.array([int(r[col]) for r in rows]) / np.maximum(n, 1)
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n, p, size=(reps, len(rows))) / np.maximum(n, 1)
    mids = [v for v in (crossing(x, list(f)) for f in draws) if v is not None]
    if len(mids) * 2 < reps:
        return None, None
    lo, hi = np.percentile(mids, [2.5, 97.5])
    return float(lo), float(hi)


def _render(rows):
    """(per-delta table rows, midpoint row) of one case."""
    r0 = rows[0]
    rows = sorted(rows, key=lambda r: float(r["delta"]))
    m2, m4 = _mid(rows, "frac"), _mid(rows, "frac_cos_half")
    band = mid_band(rows)
    paper = PAPER.get(r0["setting"])
    cells = [[r0["case"], f"{float(r['delta']):g}",
              f"{int(r['escaped'])}/{int(r['runs'])} = {fmt(float(r['frac']), 3)} ± {fmt(float(r['se']), 2)}",
              f"{int(r['escaped_cos_half'])}/{int(r['runs'])}",
              f"{int(r['diverged'])}" + (f" ({int(r['failed'])} failed)" if r.get("failed") else ""),
              fmt(r["median_escape_escaped"]) if r["median_escape_escaped"] is not None else "—"] for r in rows]
    mid = [r0["case"], r0["activation"], r0["variant"], r0["width"], r0["a"], r0.get("second_layer") or "fixed",
           r0["link"], r0["Sigma0"],
           f"{float(r0['eta']):g}", f"{r0['d']} / {r0['horizon']}",
           f"{len(rows)} deltas {fmt(float(rows[0]['delta']))}..{fmt(float(rows[-1]['delta']))}, "
           f"{int(r0['runs'])} seeds", f"{fmt(m2)} [{fmt(band[0])}, {fmt(band[1])}]", fmt(m4), fmt(paper),
           fmt(None if m2 is None or paper is None else m2 - paper)]
    return cells, mid, (m2, m4)


def main(argv=None, *, prog=None, root=None):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    args, stem, root, cases = parse_case_table(ap, argv, root, "paper_comparison", CASES, QUICK)
    started, t0 = now(), time.time()
    rows, cells, mids = [], [], []
    for case in cases:
        # the case's name and a digest of all its entries (the entries themselves make too long a file name)
        key = key_of("paper", VERSION, case[0], hashlib.sha256(repr(case).encode()).hexdigest()[:16])
        rec = cached_case(args, "paper", case, _case, key=key, folder=os.path.join(args.cache, "paper_comparison"))
        c, m, (m2, m4) = _render(rec["rows"])
        rows += [dict(r, midpoint=m2, midpoint_cos_half=m4, second_layer=r.get("second_layer") or "fixed")
                 for r in rec["rows"]]
        cells += c
        mids.append(m)
    md = ["## Midpoints against the paper's thresholds\n",
          "delta_1/2: where the fraction of runs with cos^2 > 1/2 by the horizon crosses 1/2 (linear interpolation in "
          "delta, the first crossing; — when it does not cross on the grid), with a 95% band from a parametric "
          "bootstrap of the per-delta counts (binomial redraws; the band does not include the grid's interpolation "
          "error).  |cos| > 1/2: the same with cos^2 > 1/4 "
          "(escaped, or the largest cos^2 of a run to the horizon above 1/4).  Paper: Montanari & Wang (2026), "
          "delta_NN ~ 6.0 (GeLU) and ~ 3.6 (x^2).  theorykit's earlier midpoints at d = 400: GeLU 10.3 (m = 1), "
          "4.8 (m = 2, a = (1, 1)); x^2 5.3 (m = 1), 3.1 (m = 2, a = (1, 1)).\n",
          md_table(["case", "activation", "variant", "m", "a (initial)", "second layer", "link", "Sigma0", "eta",
                    "d / horizon", "grid",
                    "delta_1/2 (cos^2 > 1/2) [95% band]", "delta_1/2 (\\|cos\\| > 1/2)", "paper", "difference"],
                   mids), "",
          "## Per delta\n",
          "Escaped: runs with cos^2 > 1/2 by the horizon, fraction ± binomial s.e.; |cos| > 1/2: runs whose cos^2 "
          "passed 1/4; diverged runs count as not escaped; median escape time over the runs that escaped.\n",
          md_table(["case", "delta", "escaped (cos^2 > 1/2)", "\\|cos\\| > 1/2", "diverged", "median escape t"],
                   cells), ""]
    cols = sorted({k for r in rows for k in r}, key=lambda k: (k != "case", k != "delta", k))
    write_table(stem, rows, cols, md,
                title="Phase retrieval midpoints under the paper's conventions (GD, d = 400 unless noted)",
                command=regenerate_command(prog or "python scripts/paper_comparison.py", argv or []),
                timing="cases already in the table (same case key) or in the cache are read back; seconds_case in "
                       "the CSV: the sum of a case's run times, one core, shared", started=started,
                wall=time.time() - t0, root=root)
    return rows
