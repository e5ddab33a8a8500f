"""The Hessian theory against finite-d Hessians: ``python scripts/hessian_vs_finite_d.py`` writes
tables/hessian_vs_finite_d.md.

Part A (spectrum at time t).  For each setting, constrained GD at dimension d to step t (the referee), then the
finite-d Hessian of the empirical risk at Theta(t): bottom eigenpairs by Lanczos with their hard overlap^2, and (when
md <= DENSE_COUNT_MAX) the dense spectrum for eigenvalue counts.  Two predictions of the same quantities:
* "sample law": the simulation's own D_i and hard coordinates as the law (tests the random-matrix code), with its
  single-sample spikes split off (spectra.hessian.split_spikes) and predicted;
* "DMFT law": the DMFT's PathLaw at the same t, truncated at its 1/n quantile, n = delta d (tests the chain
  DMFT -> law -> spectrum).
Pass criteria (stated in the table): counts of eigenvalues at or below edge + {0.02, 0.05, 0.15} x |edge| (or x the
law's scale when the edge is 0) within +-2 of m d F(lambda) + (outliers and spikes below); each predicted outlier's
eigenvalue within 3% (or 0.005 absolute) of the finite-d eigenvalue carrying the most hard overlap, and overlap^2
within 0.05, the finite-d overlap summed over the bottom eigenvectors up to it (spikes sitting below it included).

Part B (thresholds).  delta*(t) (thresholds.delta_star), and the delta at which the predicted outliers' summed
overlap^2 crosses 1/2, against the delta at which the finite-d bottom eigenvectors' summed hard overlap^2 crosses 1/2
(d = 1000 and 2000; with kH hard directions, summed up to the K-th most overlapping eigenvector, K the number of
outliers, 1 to kH, of the seed's own sample law with its spikes split off).  The overlap^2 of
an outlier born at delta*(t) rises from 0 (it is continuous there), so the finite-d 1/2-crossing is compared with the
predicted 1/2-crossing (like with like); delta*(t) must lie below it.
"""
from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import replace

import numpy as np

from ..errors import TheorykitError
from ..cases import CASES as SETTINGS, problem as problem_of
from ..rules import crossing
from ..problem import Problem
from ..runner import run_jobs
from ..spectra.hessian import HessianLaw, eigenvalue_counting, hessian_prediction, split_spikes
from ..thresholds import THRESHOLD_DIRECT_FROM_T, law_at
from ..report.writer import fmt, log, md_table, now, regenerate_command, write_table

#: the dense spectrum (for counts) is computed when md is at most this
DENSE_COUNT_MAX = 2000
#: count offsets, in units of |edge| (or the law's scale)
COUNT_OFFSETS = (0.02, 0.05, 0.15)
K_EIG = 12

#: Part A cases: (setting, delta, t)
SPECTRUM_CASES = [
    ("bounded", 9.0, 0), ("bounded", 9.0, 50), ("bounded", 12.0, 200),
    ("pr-gelu", 10.0, 0), ("pr-gelu", 40.0, 50), ("pr-gelu", 40.0, 200),
    ("pr-x2", 6.0, 0), ("pr-x2", 15.0, 50),
    ("pr-relu", 10.0, 0), ("pr-relu", 30.0, 50), ("pr-relu", 1.5, 50),  # delta = 1.5: H singular (kernel ~ 1/4)
    ("pr-gelu-m2", 20.0, 0), ("pr-gelu-m2", 40.0, 0), ("pr-gelu-m2", 40.0, 50),
    ("bounded-m2", 12.0, 50),
]
QUICK_CASES = [("bounded", 9.0, 50), ("pr-gelu", 10.0, 0), ("pr-relu", 10.0, 0), ("pr-gelu-m2", 40.0, 0)]
#: Part A with two hard directions (k_H = 2; ``--set k2``, tables/hessian_vs_finite_d_k2)
K2_SPECTRUM_CASES = [("k2-sum", 20.0, 0), ("k2-sum", 20.0, 50), ("k2-prod", 20.0, 0), ("k2-prod", 40.0, 50),
                     ("k2-sign", 10.0, 0), ("k2-sign", 15.0, 50)]
#: Part B with k_H = 2
K2_THRESHOLD_CASES = [("k2-sum", 0, (4.0, 6.0, 8.0, 10.0, 12.0, 14.0)),
                      ("k2-prod", 0, (6.0, 8.0, 10.0, 12.0, 14.0, 16.0)),
                      ("k2-sign", 0, (5.0, 7.0, 9.0, 10.0, 11.0, 13.0)),
                      ("k2-sign", 50, (8.0, 9.0, 10.0, 11.0, 12.0, 14.0))]
#: Part B: (setting, t, delta grid)
THRESHOLD_CASES = [("bounded", 0, (4.0, 5.0, 6.0, 7.0, 8.0, 9.0)), ("bounded", 50, (7.0, 8.0, 9.0, 10.0, 12.0, 14.0)),
                   ("pr-gelu", 0, (8.0, 9.0, 10.0, 11.0, 12.0, 14.0))]


#: from this t on the DMFT runs with direct Jacobian responses (on fewer paths): Stein's responses drift there for
#: phase retrieval (GeLU, delta = 40: Theta^T Theta at t = 200 is 2.53 with Stein's responses, 1.71 direct, GD 1.65)
DIRECT_FROM_T = THRESHOLD_DIRECT_FROM_T  # the same rule as thresholds.delta_star
DIRECT_PATHS = 16384


def dmft_options(t: int, paths: int) -> dict:
    """The DMFT's options for a law at time t (see DIRECT_FROM_T)."""
    if t >= DIRECT_FROM_T:
        return {"response": "direct", "paths": min(paths, DIRECT_PATHS)}
    return {"paths": paths}


def _hard_dirs(problem: Problem, d: int) -> np.ndarray:
    k = problem.link_obj.k
    basis = np.asarray(problem.analysis.hard_basis, dtype=float).reshape(k, -1)
    H = np.zeros((d, basis.shape[1]))
    H[:k] = basis
    return H


def finite_d_job(setting, delta, t, d, seed, offsets_for_counts=True):
    """One finite-d Hessian: constrained GD to t, then Lanczos (and dense when small) at Theta(t), with the sample-law
    prediction.  Returns a dict of JSON-able numbers (the runner's row)."""
    from ..referee import dense_hessian, hessian_bottom, simulate
    from ..referee.gd import training_data

    pr = problem_of(setting, delta, t)
    sim = simulate(pr, d=d, seed=seed, constrained=True, n_test=1)
    if sim.status != "ok":
        return {"status": "diverged"}
    X, y = training_data(pr, d, seed)
    der = pr.network.evaluate(X @ sim.theta, y)
    hard = _hard_dirs(pr, d)
    zeta = X @ hard
    m = pr.m
    hb = hessian_bottom(X, der, k=K_EIG, ridge=pr.ridge, hard_dirs=hard)
    law = HessianLaw.from_samples(der.D, zeta, delta, ridge=pr.ridge,
                                  radius=np.linalg.norm(X[:, :pr.link_obj.k], axis=1))
    bulk, spikeD, spikes = split_spikes(law)
    pred = hessian_prediction(bulk)  # the bulk (spikes split off): its edge, and its outliers as if uncoupled
    whole = hessian_prediction(law, sample=True)  # the whole sample: the spikes couple to the outliers
    row = {"eig": hb.eigenvalues.tolist(), "eig_overlap2": hb.hard_overlap2.tolist(),
           "law_edge": pred.edge, "law_outliers": [o.lam for o in whole.outliers],
           "law_overlap2": [o.overlap2 for o in whole.outliers], "law_spikes": spikes.tolist(),
           "bulk_outliers": [o.lam for o in pred.outliers], "bulk_overlap2": [o.overlap2 for o in pred.outliers],
           "min_D": float(law.lam_min_D.min())}
    if m * d <= DENSE_COUNT_MAX:
        ev = np.linalg.eigvalsh(dense_hessian(X, der, pr.ridge))
        unit = abs(pred.edge) if pred.edge != 0 else bulk.scale
        qs = pred.edge + unit * np.array(COUNT_OFFSETS)
        F = eigenvalue_counting(bulk, qs, edge=pred.edge)
        # one eigenvalue per spike and per outlier of the bulk (coupling moves them, it does not change their number)
        discrete = [sum(1 for v in list(row["bulk_outliers"]) + list(spikes) if v <= q) for q in qs]
        row.update(count_at=qs.tolist(), count_pred=(m * d * F + np.array(discrete)).tolist(),
                   count_dense=[int((ev <= q).sum()) for q in qs])
    return row


COLUMNS = ["setting", "delta", "t", "d", "seed", "eig", "eig_overlap2", "law_edge", "law_outliers", "law_overlap2",
           "law_spikes", "bulk_outliers", "bulk_overlap2", "min_D", "count_at", "count_pred", "count_dense"]
JSON_COLUMNS = ["eig", "eig_overlap2", "law_outliers", "law_overlap2", "law_spikes", "bulk_outliers",
                "bulk_overlap2", "count_at",
                "count_pred", "count_dense"]


def _worker(setting, delta, t, d, seed):
    row = finite_d_job(setting, delta, t, d, seed)
    row.update(setting=setting, delta=delta, t=t, d=d, seed=seed)
    return row


def match_outliers(pred_lams, eig, ov):
    """For the predicted outliers (lowest first), the finite-d eigenvalues carrying the most hard overlap (as many,
    sorted) and the finite-d overlap^2 summed over the bottom eigenvectors up to each of them (minus what the previous
    outliers took)."""
    eig, ov = np.asarray(eig), np.asarray(ov)
    K = len(pred_lams)
    if K == 0:
        return [], []
    idx = sorted(np.argsort(-ov)[:K])
    lams, sums, taken = [], [], 0.0
    for i in idx:
        s = float(ov[:i + 1].sum()) - taken
        lams.append(float(eig[i]))
        sums.append(s)
        taken += s
    return lams, sums


def eig_ok(pred, fin):
    return abs(pred - fin) <= max(0.03 * abs(fin), 0.005)


def paired_mean_ok(paired, seeds: int) -> bool:
    """The sample law's check over seeds: each seed's prediction minus its own finite-d value (paired, so the sample-
    to-sample variation that the law sees cancels), averaged; pass if the mean error is within 3% (or 0.005) + 2 se
    for every outlier eigenvalue and within 0.05 + 2 se for its overlap^2.  The per-seed check cannot pass reliably
    where the outlier has an O(1/sqrt(n)) fluctuation of several per cent that the law does not see (D unbounded
    below, d = 1000: notes of tables/hessian_vs_finite_d.md).  Every seed must have matched its own predicted
    outliers.  An outlier near its birth exists in some samples only: the j-th outlier is averaged over the seeds
    whose law predicts it (one such seed: the per-seed tolerances)."""
    if len(paired) != seeds or seeds < 2:
        return False
    K = max(len(p[0]) for p in paired)
    for j in range(K):
        rows = np.array([[p[i][j] for i in range(4)] for p in paired if len(p[0]) > j], dtype=float)
        pl, fl, po, fo = rows.T
        el, eo = pl - fl, po - fo
        se = (lambda e: e.std(ddof=1) / math.sqrt(len(e))) if len(rows) > 1 else (lambda e: 0.0)
        if not (abs(el.mean()) <= max(0.03 * abs(fl.mean()), 0.005) + 2 * se(el)
                and abs(eo.mean()) <= 0.05 + 2 * se(eo)):
            return False
    return True


# the cache's settings are what a row depends on (not the number of seeds: a job's key names its seed, so more seeds
# extend the same cache)
def part_a(args, rows, md, cases):
    jobs = [{"key": f"{s}|{dl}|{t}|{args.d}|{seed}", "setting": s, "delta": dl, "t": t, "d": args.d, "seed": seed}
            for s, dl, t in cases for seed in range(args.seeds)]
    df = run_jobs(jobs, _worker, os.path.join(args.cache, "hessian_finite_d.csv"), COLUMNS,
                  settings={"d": args.d, "k": K_EIG}, processes=args.processes,
                  json_columns=JSON_COLUMNS, label="finite-d Hessians")
    failed = df.attrs["summary"]["failed"]
    if failed:
        raise TheorykitError(f"{len(failed)} finite-d jobs failed, e.g. {failed[0]['key']}: {failed[0]['error']}")
    table = []
    from ..dynamics import dmft
    for s, dl, t in cases:
        sub = df[(df.setting == s) & (df.delta == dl) & (df.t == t)]
        pr = problem_of(s, dl, t)
        log(f"DMFT {s} delta={dl} t={t}")
        r = dmft(pr, keep_law_at=[t], bias_check=False, **dmft_options(t, args.paths))
        dpred = hessian_prediction(law_at(r, t, d=args.d))
        K = len(dpred.outliers)
        law_pass, count_pass, fin_l, fin_o, counts = [], [], [], [], []
        paired = []  # per seed: (sample-law prediction, matched finite-d value) for eigenvalues and overlaps
        for _, row in sub.iterrows():
            lam_f, ov_f = match_outliers(row.law_outliers, row.eig, row.eig_overlap2)
            law_pass.append(len(lam_f) == len(row.law_outliers) and all(
                eig_ok(p, f) and abs(po - fo) <= 0.05
                for p, f, po, fo in zip(row.law_outliers, lam_f, row.law_overlap2, ov_f)))
            if len(lam_f) == len(row.law_outliers):
                paired.append((list(row.law_outliers), list(lam_f), list(row.law_overlap2), list(ov_f)))
            if isinstance(row.count_dense, list):
                count_pass.append(bool(np.all(np.abs(np.array(row.count_dense) - np.array(row.count_pred)) <= 2)))
                counts.append((row.count_dense, row.count_pred))
            lg, og = match_outliers([0.0] * max(K, 1), row.eig, row.eig_overlap2)
            fin_l.append(lg)
            fin_o.append(og)
        fin_l, fin_o = np.array(fin_l), np.array(fin_o)
        S = len(sub)
        mean_l, mean_o = fin_l.mean(0), fin_o.mean(0)
        se_l = fin_l.std(0, ddof=1) / math.sqrt(S) if S > 1 else np.zeros(len(mean_l))
        se_o = fin_o.std(0, ddof=1) / math.sqrt(S) if S > 1 else np.zeros(len(mean_o))
        if K:
            dmft_ok = all(abs(o.lam - mean_l[j]) <= max(0.03 * abs(mean_l[j]), 0.005) + 2 * se_l[j]
                          and abs(o.overlap2 - mean_o[j]) <= 0.05 + 2 * se_o[j]
                          for j, o in enumerate(dpred.outliers))
        else:  # no outlier predicted: no finite-d eigenvector below the edge may carry most of the hard direction
            dmft_ok = bool(mean_o[0] <= 0.2)
        law_mean_ok = paired_mean_ok(paired, S)
        rec = {"part": "A", "setting": s, "m": pr.m, "delta": dl, "t": t, "d": args.d, "seeds": S,
               "finite_outliers": mean_l.tolist(), "finite_outliers_se": se_l.tolist(),
               "finite_overlap2": mean_o.tolist(), "finite_overlap2_se": se_o.tolist(),
               "finite_bottom": float(np.mean([e[0] for e in sub.eig])),
               "dmft_edge": dpred.edge, "dmft_outliers": [o.lam for o in dpred.outliers],
               "dmft_overlap2": [o.overlap2 for o in dpred.outliers], "dmft_outliers_from": dpred.outliers_from,
               "dmft_spikes": [v for v in dpred.spikes[:3] if v is not None], "unbounded": dpred.unbounded,
               "law_edge": float(np.mean(sub.law_edge)), "law_pass": int(sum(law_pass)), "law_mean_ok": law_mean_ok,
               "count_pass": int(sum(count_pass)), "count_cases": len(count_pass),
               "counts_seed0": counts[0] if counts else None,
               "finite_spikes_seed0": [float(v) for v in sub.iloc[0].law_spikes[:3]],
               "dmft_ok": bool(dmft_ok)}
        rows.append(rec)
        table.append(rec)
    md.append("## Part A: the spectrum at time t (constrained GD)\n")
    md.append("Finite-d: Lanczos bottom eigenpairs of the Hessian at Theta(t); the outliers are the eigenvalues "
              "carrying the most hard overlap^2 (the overlap^2 summed over the bottom eigenvectors up to each: "
              "spikes below it included); mean ± standard error over seeds.  *Sample law* (the random-matrix code): "
              "each run's own D_i and hard coordinates; pass per seed: outlier eigenvalue within 3% (or 0.005) and "
              "overlap^2 within 0.05, and eigenvalue counts at edge + (0.02, 0.05, 0.15)|edge| within ±2 of "
              "m d F(lambda) + one eigenvalue for each outlier of the law with its spikes split off and for each "
              "spike below (the outliers themselves: the whole sample law's, found in every gap between its spikes "
              "for m = 1); *paired mean*: the seeds' "
              "prediction-minus-finite-d errors, averaged, within 3% (or 0.005) + 2 se and 0.05 + 2 se (the "
              "per-seed check also meets the outlier's own O(1/sqrt(n)) fluctuation, which no law sees).  "
              "*DMFT law* (the whole chain): "
              "the DMFT's PathLaw at the same t, truncated at its 1/n quantile (n = delta d) with its 10 expected "
              "lowest samples as atoms of weight 1/n (for t >= 100 the DMFT uses direct Jacobian responses on 16384 "
              "paths: Stein's responses drift there, see the notes); pass: within 3% (or 0.005) + 2 se of the seed "
              "mean, "
              "overlap^2 within 0.05 + 2 se (with no predicted outlier: the finite-d summed overlap^2 <= 0.2).\n")
    hdr = ["setting", "m", "delta", "t", "finite-d outliers: lambda (overlap²)", "DMFT law", "edge: DMFT / sample",
           "spikes: DMFT / sample (seed 0)", "counts dense/pred (seed 0)", "sample law pass per seed",
           "sample law paired mean", "counts pass", "DMFT pass"]
    body = []
    for r in table:
        fin = ", ".join(f"{fmt(a)} ± {fmt(sa, 2)} ({fmt(b, 3)} ± {fmt(sb, 2)})" for a, sa, b, sb in
                        zip(r["finite_outliers"], r["finite_outliers_se"], r["finite_overlap2"],
                            r["finite_overlap2_se"]))
        dm = ", ".join(f"{fmt(a)} ({fmt(b, 3)})" for a, b in zip(r["dmft_outliers"], r["dmft_overlap2"])) or "none"
        cnt = ("—" if r["counts_seed0"] is None else
               " ".join(f"{c}/{p:.1f}" for c, p in zip(*r["counts_seed0"])))
        body.append([r["setting"], r["m"], r["delta"], r["t"], fin, dm, f"{fmt(r['dmft_edge'])} / {fmt(r['law_edge'])}",
                     f"{', '.join(fmt(v) for v in r['dmft_spikes']) or 'none'} / "
                     f"{', '.join(fmt(v) for v in r['finite_spikes_seed0']) or 'none'}", cnt,
                     f"{r['law_pass']}/{r['seeds']}", fmt(np.bool_(r["law_mean_ok"])),
                     f"{r['count_pass']}/{r['count_cases']}" if r["count_cases"] else "—",
                     fmt(np.bool_(r["dmft_ok"]))])
    md.append(md_table(hdr, body))
    md.append("")


def summed_overlap(prediction) -> float:
    """The hard overlap^2 carried by the predicted outliers, summed (with kH hard directions it splits over up to kH
    outliers; one outlier: its overlap^2)."""
    return float(sum(o.overlap2 for o in prediction.outliers))


def below_edge_overlap(eig, ov, edge):
    """The finite-d hard overlap^2 carried below the bulk: summed over the bottom eigenvectors whose eigenvalue lies
    below the sample law's bulk edge (spikes included; they carry little of it)."""
    eig, ov = np.asarray(eig), np.asarray(ov)
    return float(ov[eig < edge].sum())


def part_b(args, rows, md, cases):
    from ..thresholds import delta_star
    from ..dynamics import dmft_scan

    md.append("## Part B: thresholds against the finite-d 1/2-crossing of the hard overlap\n")
    md.append("delta*(t): first hard outlier (DMFT scan, truncated at n = delta d with d = 1000).  The outlier is born "
              "at delta*(t) with overlap^2 0 and its overlap^2 grows continuously, so the finite-d crossing of 1/2 is "
              "compared with delta_1/2, the delta at which the *predicted* overlap^2 reaches 1/2 (DMFT scan on 13 "
              "deltas, linear interpolation; its se from the same crossing on each DMFT replica's own law).  With "
              "kH hard directions the overlap^2 splits over up to kH outliers, and both sides sum it: the predicted "
              "outliers' overlap^2, and the finite-d hard overlap^2 summed over the bottom eigenvectors up to the "
              "K-th most overlapping one, K the number of outliers of the seed's own sample law with its spikes "
              "split off, between 1 and kH (kH = 1: the one carrying the most; spikes below it included), mean over "
              "seeds, crossing 1/2 (linear interpolation), at d = 1000 and 2000 (its se from each seed's own "
              "crossing).  Shown beside it: the overlap^2 summed over every eigenvector below the sample-law edge (it "
              "also counts bulk eigenvalues that fluctuate below the edge, and runs high near delta*: see the "
              "notes), and the sample law's own prediction of the summed overlap^2 (the random-matrix code on each "
              "seed's D_i and hard coordinates), with and without its single-sample spikes.  *Without the law's "
              "extremes*: delta_1/2 from the truncated law's own outliers, without its expected lowest samples as "
              "atoms (the continuation finds the outliers below the fold that the deepest atom makes, and can miss "
              "the ones above it; the atoms only share out the hard overlap^2 among eigenvectors near them, so the "
              "sum is that of the law without them: see the notes).  Pass: delta_1/2 inside the "
              "interval between the two "
              "finite-d crossings widened by their drift |c_2000 - c_1000| (the issue's criterion) and by 2 "
              "sqrt(se_finite^2 + se_theory^2) (the statistical error of both sides; se_finite the larger of the two "
              "d), and delta*(t) < delta_1/2.  *Matched d* (like with like, tighter): at each d the finite-d crossing "
              "against delta_1/2 of the DMFT law truncated at that d's n = delta d, within 2 sqrt(se_finite^2 + "
              "se_theory^2).\n")
    hdr = ["setting", "t", "delta*(t) ± se", "delta_1/2 (DMFT) ± se", "finite-d crossing ± se: d=1000 / 2000",
           "widened interval", "pass", "delta_1/2, law truncated at d=2000", "matched d: 1000 / 2000",
           "delta_1/2 without the law's extremes: d=1000 / 2000"]
    body = []
    for s, t, grid in cases:
        base = problem_of(s, grid[0], t)
        ds = delta_star(base, [t], delta_range=(grid[0] * 0.4, grid[-1]), points=8, d=1000,
                        **dmft_options(t, args.paths))[0]
        fine = list(np.linspace(grid[0], grid[-1], 13))
        scan = dmft_scan(base, fine, keep_law_at=[t], bias_check=False, **dmft_options(t, args.paths))
        kH = _hard_dirs(base, base.link_obj.k).shape[1]  # the hard overlap can split over up to kH outliers

        def overlap(r, replica=None, d=1000, extremes=True):
            law = law_at(r, t, d=d, replica=replica)
            return summed_overlap(hessian_prediction(law if extremes else replace(law, extremes=None)))

        reps = sorted(int(j) for j in np.unique(scan[0].laws[t].replica))
        halves = {}  # (d, extremes) -> (delta_1/2 of the law truncated at n = delta d, its se, overlap^2 on the grid)
        for d in (1000, 2000):
            for ext in (True, False):
                ov_d = [overlap(r, d=d, extremes=ext) for r in scan]
                per_rep = [crossing(fine, [overlap(r, j, d, ext) for r in scan], upward=True) for j in reps]
                halves[d, ext] = (crossing(fine, ov_d, upward=True), _crossing_se(per_rep), ov_d)
        half, half_se, ovs = halves[1000, True]
        cross = {}
        for d in (1000, 2000):
            jobs = [{"key": f"{s}|{dl}|{t}|{d}|{seed}", "setting": s, "delta": dl, "t": t, "d": d, "seed": seed}
                    for dl in grid for seed in range(args.seeds)]
            df = run_jobs(jobs, _worker, os.path.join(args.cache, f"hessian_crossing_{d}.csv"), COLUMNS,
                          settings={"d": d, "k": K_EIG}, processes=args.processes,
                          json_columns=JSON_COLUMNS, label=f"crossing d={d}")
            by_seed = {}  # seed -> {delta: outlier overlap^2}; a cache may hold a ragged set of seeds
            below = {}  # delta -> [below-edge overlap^2 per seed] (shown beside it)
            sample = {}  # delta -> [the sample law's summed outlier overlap^2 per seed: with, without its spikes]
            for dl in grid:
                sub = df[(df.setting == s) & (df.delta == dl) & (df.t == t)]
                for sd, e, o, le, lo, lb in zip(sub.seed, sub.eig, sub.eig_overlap2, sub.law_edge, sub.law_overlap2,
                                                sub.bulk_overlap2):
                    # as many eigenvectors as the seed's own sample law (spikes split off) has outliers, at least
                    # one and at most kH: a kH-th eigenvector where there is no kH-th outlier adds bulk overlap
                    K = min(kH, max(1, len(lb)))
                    by_seed.setdefault(int(sd), {})[dl] = sum(match_outliers([0.0] * K, e, o)[1])
                    below.setdefault(dl, []).append(below_edge_overlap(e, o, le))
                    sample.setdefault(dl, []).append((float(sum(lo)), float(sum(lb))))
            means = [float(np.mean([v[dl] for v in by_seed.values() if dl in v])) for dl in grid]
            full = [v for v in by_seed.values() if len(v) == len(grid)]
            cross[d] = (crossing(grid, means, upward=True), means,
                        _crossing_se([crossing(grid, [v[dl] for dl in grid], upward=True) for v in full]),
                        [float(np.mean(below[dl])) for dl in grid], np.mean([sample[dl] for dl in grid], axis=1))
        c1, c2 = cross[1000][0], cross[2000][0]
        ok, lo, hi = None, None, None
        if half is not None and c1 is not None and c2 is not None:
            drift = abs(c2 - c1)
            se = math.sqrt(max(cross[1000][2], cross[2000][2]) ** 2 + half_se ** 2)
            lo, hi = min(c1, c2) - drift - 2 * se, max(c1, c2) + drift + 2 * se
            ok = bool(lo - 1e-9 <= half <= hi + 1e-9 and ds.value < half)
        # like with like: at each d the finite-d crossing against delta_1/2 of the law truncated at that d's n
        matched = {}
        for d in (1000, 2000):
            h, hse = halves[d, True][:2]
            c, cse = cross[d][0], cross[d][2]
            matched[d] = (None if h is None or c is None else
                          bool(abs(c - h) <= 2 * math.sqrt(cse ** 2 + hse ** 2) + 1e-9))
        rec = {"part": "B", "setting": s, "t": t, "delta_star": ds.value, "delta_star_se": ds.stderr,
               "delta_half": half, "delta_half_se": half_se, "finite_cross_se_1000": cross[1000][2],
               "finite_cross_se_2000": cross[2000][2], "dmft_overlap2_on_grid": ovs, "dmft_grid": fine,
               "grid": list(grid),
               "finite_cross_1000": c1, "finite_cross_2000": c2, "finite_overlap2_1000": cross[1000][1],
               "finite_overlap2_2000": cross[2000][1], "threshold_ok": ok,
               "delta_half_2000": halves[2000, True][0], "delta_half_2000_se": halves[2000, True][1],
               "delta_half_no_extremes_1000": halves[1000, False][0],
               "delta_half_no_extremes_1000_se": halves[1000, False][1],
               "delta_half_no_extremes_2000": halves[2000, False][0],
               "delta_half_no_extremes_2000_se": halves[2000, False][1],
               "matched_ok_1000": matched[1000], "matched_ok_2000": matched[2000]}
        rows.append(rec)
        body.append([s, t, f"{fmt(ds.value)} ± {fmt(ds.stderr, 2)}", f"{fmt(half)} ± {fmt(half_se, 2)}",
                     f"{fmt(c1)} ± {fmt(cross[1000][2], 2)} / {fmt(c2)} ± {fmt(cross[2000][2], 2)}",
                     "—" if lo is None else f"[{fmt(lo)}, {fmt(hi)}]", "—" if ok is None else fmt(np.bool_(ok)),
                     f"{fmt(halves[2000, True][0])} ± {fmt(halves[2000, True][1], 2)}",
                     " / ".join("—" if matched[d] is None else fmt(np.bool_(matched[d])) for d in (1000, 2000)),
                     " / ".join(f"{fmt(halves[d, False][0])} ± {fmt(halves[d, False][1], 2)}" for d in (1000, 2000))])
        md.append(f"* {s}, t = {t}: finite-d outlier overlap^2 on delta = {list(grid)}: d = 1000 "
                  f"{[round(v, 3) for v in cross[1000][1]]}, d = 2000 {[round(v, 3) for v in cross[2000][1]]} "
                  f"(summed below the sample-law edge instead: d = 1000 {[round(v, 3) for v in cross[1000][3]]}, "
                  f"d = 2000 {[round(v, 3) for v in cross[2000][3]]}; the seed's own sample law: d = 1000 "
                  f"{[round(float(v), 3) for v in cross[1000][4][:, 0]]}, d = 2000 "
                  f"{[round(float(v), 3) for v in cross[2000][4][:, 0]]}, without its spikes: d = 1000 "
                  f"{[round(float(v), 3) for v in cross[1000][4][:, 1]]}, d = 2000 "
                  f"{[round(float(v), 3) for v in cross[2000][4][:, 1]]}); "
                  f"DMFT overlap^2 on {[round(float(v), 2) for v in fine]}: {[round(float(v), 3) for v in ovs]} "
                  f"(d = 1000; without the law's extremes: {[round(float(v), 3) for v in halves[1000, False][2]]})")
    md.append("")
    md.append(md_table(hdr, body))
    md.append("")


def _crossing_se(values) -> float:
    """Standard error of the mean of the per-seed (or per-replica) crossings; inf when fewer than two crossed."""
    v = [x for x in values if x is not None]
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) >= 2 else math.inf


def main(argv=None, *, prog=None, root=None):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 spectrum cases, 1 seed, no threshold part (~3 min)")
    ap.add_argument("--d", type=int, default=1000, help="dimension of Part A (default 1000)")
    ap.add_argument("--seeds", type=int, default=4, help="seeds per case (default 4)")
    ap.add_argument("--paths", type=int, default=65536, help="DMFT paths (default 65536)")
    ap.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--parts", default="AB", help="which parts (default AB)")
    ap.add_argument("--set", default="main", choices=("main", "k2"), dest="case_set",
                    help="main: the table's cases; k2: two hard directions (default table "
                         "tables/hessian_vs_finite_d_k2)")
    ap.add_argument("--out", default=None, help="table stem (default tables/hessian_vs_finite_d)")
    ap.add_argument("--cache", default=None, help="folder of the resumable finite-d rows (default tables/.cache)")
    args = ap.parse_args(argv)
    root = root or os.getcwd()
    k2 = args.case_set == "k2"
    stem = args.out or os.path.join(root, "tables", "hessian_vs_finite_d" + ("_quick" if args.quick else "")
                                    + ("_k2" if k2 else ""))
    args.cache = args.cache or os.path.join(root, "tables", ".cache" + ("_quick" if args.quick else ""))
    os.makedirs(args.cache, exist_ok=True)
    started, t0 = now(), time.time()
    rows, md = [], []
    if args.quick:
        args.seeds = 2
    if "A" in args.parts:
        part_a(args, rows, md, K2_SPECTRUM_CASES if k2 else QUICK_CASES if args.quick else SPECTRUM_CASES)
    if "B" in args.parts and not args.quick:
        part_b(args, rows, md, K2_THRESHOLD_CASES if k2 else THRESHOLD_CASES)
    used = {r.get("setting") for r in rows}
    cols = sorted({k for r in rows for k in r}, key=lambda k: (k != "part", k))
    flat = [{k: (str(v) if isinstance(v, (list, tuple)) else v) for k, v in r.items()} for r in rows]
    write_table(stem, flat, cols, md, title="The Hessian at time t: theory (sample law and DMFT law) vs finite-d "
                                            "Hessians", command=regenerate_command(prog or "python scripts/"
                                                                                   "hessian_vs_finite_d.py",
                                                                                   argv if argv is not None else []),
                started=started, wall=time.time() - t0, root=root,
                header=[f"Finite-d: constrained GD (hard subspace projected out) at d = {args.d}, {args.seeds} seeds; "
                        f"DMFT: {args.paths} paths.  Settings: "
                        + "; ".join(f"{k} = {v[0]}, {v[1]}, {v[2]} loss, m = {v[3]}, eta = {v[4]}"
                                    for k, v in SETTINGS.items() if k in used) + ".\n"])
    return rows
