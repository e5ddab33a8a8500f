"""Finite-d gap of GD against the DMFT, scanned over d with many seeds (easy link, square loss, m = 2, eta = 1).

The table generator behind ``scripts/dmft_dscan.py`` (:func:`main` is its command line).  Statistics (signed scalar,
control variates, fits over d, verdict): :mod:`theorykit.validation.stats`; simulator seeds: the resumable seed runner
:func:`theorykit.validation.seeds.run_sims`; output: :func:`theorykit.report.writer.write_table` (hand-written notes go
in ``<out>_notes.md``, never touched).

Writes tables/dmft_dscan.csv and tables/dmft_dscan.md.

For each setting (default: tanh a=(1,1) delta=2 and gelu a=(1,-1) delta=4, the two settings of dmft_vs_sim.py part 1b):

* one accurate DMFT solve (``--paths``, default 2**20, 8 replicas, processes=1), plus a smaller independent solve
  (``--check-paths``, other seed) to check that the DMFT mean does not move with the number of paths beyond its s.e.;
* GD (theorykit.simulate) at every d of ``--d`` with n = delta d, ``--seeds`` seeds per d (distinct and reproducible:
  seed = seed_base + 10000 d + i, i = 0..S-1, disjoint across d); the test loss is the simulator's population test
  loss (exact expectation over a fresh sample given M_t and gram_t), so n_test = 1.

Per (setting, quantity, t, d):

* signed scalar s: the scalar itself for train/test loss; for a matrix X (M_t, gram = Theta^T Theta) the component
  along the DMFT matrix, s = <X, X_dmft> / ||X_dmft||_F (so s_dmft = ||X_dmft||_F and, to first order,
  s_sim - s_dmft = ||mean X_sim||_F - ||X_dmft||_F; linear in X, so its seed standard error is exact);
* gap = mean_seeds s_sim - s_dmft, se = sqrt(var_seeds(s)/S + se_dmft^2), rel gap = gap / s_dmft;
* per-seed rms = sqrt(mean_seeds ||X_seed - X_dmft||_F^2) / ||X_dmft||_F (finite-d fluctuation, expected ~ d^-1/2).

Two estimators of the GD mean: the plain seed mean and (primary) a control-variate mean that regresses out six per-seed
covariates with exactly zero expectation (train_0 - population loss_0, gram_0 - I, M_0; see the .md).

Per (setting, quantity, t), generalised least squares over d with the full covariance (seed noise independent across
d, the DMFT error common to all d): gap = c/d; gap = b + c/d (b = the d -> infinity offset: a DMFT problem if != 0);
gap = A (d/1000)^p (only when c is resolved); the zero-gap chi^2. Verdict: 'no measurable gap' when the zero model is
acceptable (p-value >= 0.01 and every |gap|/se < 3), then a 95% bound at d = 1000; otherwise 'gap shrinks' when c/d
is acceptable (p-value >= 0.01) and b is within 2.5 se of 0, 'offset persists' when b is > 3 se from 0, else
'ambiguous'.  rms slope = least-squares slope of log(per-seed rms) vs log d.

Per-seed simulator results and the DMFT solves are cached (``--cache``, default /tmp/dmft_dscan_cache) so that an
interrupted or extended run reuses them; ``--deadline-min`` stops launching simulations after that many minutes
(seeds are run in rounds over all (setting, d), so a deadline thins every d evenly) and the tables use what is done.

``--paths-scan`` adds independent DMFT solves at other numbers of paths: a convergence table and an extrapolation
value(P) = X_inf + B/P (P = paths per replica).  The replica s.e. does not show a bias that shrinks with the paths of
each replica (the replica mean keeps it); this does.

Examples::

    python scripts/dmft_dscan.py --quick                    # < 2 min, writes /tmp/dmft_dscan_quick.{csv,md}
    python scripts/dmft_dscan.py                            # the full scan (about 40 min on one core)
    python scripts/dmft_dscan.py --paths-scan 32768,65536,262144,524288,2097152   # + DMFT convergence in paths
    python scripts/dmft_dscan.py --settings gelu_pm_4 --d 500,1000 --seeds 64 --paths 262144
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np


from ..errors import TheorykitError
from . import vs_sim as base
from .seeds import run_sims, stack, zero_mean_covariates
from .stats import cv_mean, extrapolate_inverse, fit_over_d, loglog_slope, signed
from ..report.writer import check_table_writable, fmt, log, md_table, now, pm, regenerate_command, script_prog, \
    write_table

QUANTITIES = ("M", "gram", "train_loss", "test_loss")
SIM_KEY = {"M": "M", "gram": "gram", "train_loss": "train", "test_loss": "test"}
QNAME = {"M": "M_t", "gram": "gram", "train_loss": "train loss", "test_loss": "test loss"}
CSV_COLUMNS = ["kind", "estimator", "setting", "quantity", "t", "d", "seeds", "dmft", "dmft_se", "sim_mean", "sim_se",
               "gap", "gap_se", "rel_gap", "rel_gap_se", "z", "frob_diff", "rel_err_full", "rms_rel", "spread_rel",
               "fit_c", "fit_c_se", "chi2_c", "dof_c", "p_c", "fit_b", "fit_b_se", "fit_c2", "fit_c2_se", "chi2_bc",
               "chi2_0", "p_0", "pow_A", "pow_A_se", "pow_p", "pow_p_se", "rms_slope", "bound_1000", "verdict"]


def all_settings():
    out = {}
    for s in base.easy_settings(False):
        key = f"{s['activation']}_{'pp' if tuple(s['a']) == (1, 1) else 'pm'}_{int(s['delta'])}"
        out[key] = s
    return out


# ------------------------------------------------------------------------------------------------ computation
def net_kw(s):
    return dict(activation=s["activation"], link=base.EASY_LINK, loss="square", width=2, a=list(s["a"]))


def solve_dmft(key, s, T, paths, replicas, seed, cache):
    fn = os.path.join(cache, f"dmft_{key}_T{T}_p{paths}_r{replicas}_s{seed}.npz")
    if os.path.exists(fn):
        z = np.load(fn)
        log(f"  dmft {key} paths {paths} seed {seed}: cached ({float(z['seconds']):.0f} s when solved)")
        return {k: z[k] for k in z.files}
    log(f"  dmft {key} paths {paths} seed {seed}: solving")
    r = base.run_dmft(f"{key} paths={paths}", **net_kw(s), delta=s["delta"], eta=1.0, steps=T, paths=paths,
                      replicas=replicas, seed=seed, processes=1)
    if r.status != "ok":
        raise RuntimeError(f"DMFT {key} did not finish: {r.status} {r.diverged_at}")
    out = {q: np.asarray(getattr(r, q)) for q in QUANTITIES}
    out.update({q + "_se": np.asarray(r.stderr[q]) for q in QUANTITIES})
    out["seconds"] = np.asarray(r.seconds)
    out["paths_per_replica"] = np.asarray(r.settings["paths_per_replica"])
    np.savez(fn, **out)
    return out


def seed_of(args, d, i):
    return args.seed_base + 10000 * d + i


def run_all_sims(args, settings, t_start):
    """Rounds over (setting, d) so that a deadline thins every d evenly; every seed goes through the resumable seed
    runner (files in ``args.cache``, so an interrupted or extended run reuses them).  Returns ({(key, d): [results]},
    {(key, d): diverged}, whether the deadline stopped it)."""
    fracs = (0.125, 0.25, 0.5, 1.0)
    done = {(k, d): {} for k in settings for d in args.d}
    diverged = {(k, d): 0 for k in settings for d in args.d}
    deadline = (time.time() + args.deadline_min * 60 - (time.perf_counter() - t_start)) if args.deadline_min else None
    stopped = False
    for f in fracs:
        for key, s in settings.items():
            for d, S in zip(args.d, args.seeds):
                target = max(2, int(math.ceil(f * S)))
                todo = [i for i in range(target) if i not in done[(key, d)]]
                if not todo or stopped:
                    continue
                t0 = time.perf_counter()
                rs = run_sims(dict(**net_kw(s), delta=s["delta"], d=d, steps=args.T, eta=1.0),
                              [seed_of(args, d, i) for i in todo], processes=args.processes, label=f"{key} d={d}",
                              cache=args.cache, deadline=deadline, verbose=False)
                by_seed = {r["seed"]: r for r in rs}
                secs = []
                for i in todo:
                    r = by_seed.get(seed_of(args, d, i))
                    if r is None:  # not started: the deadline
                        if not stopped:
                            log(f"deadline of {args.deadline_min} min reached: no more simulations")
                        stopped = True
                        continue
                    secs.append(r["seconds"])
                    if r["status"] != "ok":
                        done[(key, d)][i] = None
                        diverged[(key, d)] += 1
                        continue
                    if r.get("test_kind") != "population":
                        raise RuntimeError("the simulator did not return a population test loss (n_test = 1 would "
                                           "be meaningless)")
                    done[(key, d)][i] = r
                log(f"  sims {key} d={d}: seeds {len(done[(key, d)])}/{S} (round {f:g}), "
                    f"{time.perf_counter() - t0:.0f} s this round, {np.mean(secs) if secs else 0:.2f} s/seed")
    out = {}
    for kd, dd in done.items():
        out[kd] = [dd[i] for i in sorted(dd) if dd[i] is not None]
    return out, diverged, stopped


# ------------------------------------------------------------------------------------------------ report
def main(argv=None, *, prog=None, root=None):
    """The command line of scripts/dmft_dscan.py (``prog``: the command shown as regenerating the table, default
    'python <sys.argv[0] relative to root>'; ``root``: the repository root, default the one holding theorykit)."""
    settings_all = all_settings()
    p = argparse.ArgumentParser(prog=prog.split()[-1] if prog else None, description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="< 2 min: d = 200, 400, 6 seeds, 2**14 DMFT paths")
    p.add_argument("--settings", default="tanh_pp_2,gelu_pm_4",
                   help="comma list of " + ", ".join(settings_all) + " (activation_a-signs_delta)")
    p.add_argument("--d", default="500,1000,2000,4000", help="comma list of dimensions")
    p.add_argument("--seeds", default="256,192,80,32", help="seeds per d (one number for all, or one per d)")
    p.add_argument("--T", type=int, default=50)
    p.add_argument("--ts", default="1,5,10,20,50", help="time points compared")
    p.add_argument("--paths", type=int, default=2 ** 20, help="DMFT paths (all replicas)")
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--dmft-seed", type=int, default=0)
    p.add_argument("--check-paths", type=int, default=2 ** 17,
                   help="paths of the independent DMFT check solve (seed dmft-seed + 1); 0: none")
    p.add_argument("--paths-scan", default="",
                   help="comma list of extra DMFT path counts (seed dmft-seed + 2 + j) for a convergence-in-paths "
                        "table and a value + B/paths extrapolation; empty: none")
    p.add_argument("--seed-base", type=int, default=0, help="simulator seed = seed_base + 10000 d + i")
    p.add_argument("--deadline-min", type=float, default=0.0,
                   help="stop launching simulations after this many minutes (0: never)")
    p.add_argument("--cache", default="/tmp/dmft_dscan_cache",
                   help="cache folder: DMFT solves (npz) and the per-seed simulator results (resumable runner files)")
    p.add_argument("--processes", type=int, default=1,
                   help="parallel simulator runs (one BLAS thread each; default 1: the DMFT shares the machine)")
    p.add_argument("--note", default="", help="free text added to the .md header (e.g. how the cache was filled)")
    p.add_argument("--out", default=None, help="output stem (default tables/dmft_dscan; quick: /tmp/dmft_dscan_quick)")
    args = p.parse_args(argv)
    if args.quick:
        args.d, args.seeds, args.paths, args.check_paths = "200,400", "6", 2 ** 14, 2 ** 13
    args.settings = [x.strip() for x in args.settings.split(",") if x.strip()]
    bad = [k for k in args.settings if k not in settings_all]
    if bad:
        p.error(f"unknown settings {bad}; choose from {list(settings_all)}")
    args.d = [int(x) for x in args.d.split(",")]
    sd = [int(x) for x in args.seeds.split(",")]
    args.seeds = sd * len(args.d) if len(sd) == 1 else sd
    if len(args.seeds) != len(args.d):
        p.error("--seeds: one number, or one per d")
    args.ts = [int(x) for x in args.ts.split(",") if int(x) <= args.T]
    args.paths_scan = [int(x) for x in args.paths_scan.split(",") if x.strip()]
    if args.quick and args.paths_scan:
        args.paths_scan = [2 ** 12, 2 ** 13]
    os.makedirs(args.cache, exist_ok=True)
    root = root or base.repo_root()
    stem = args.out or (os.path.join("/tmp", "dmft_dscan_quick") if args.quick
                        else os.path.join(root, "tables", "dmft_dscan"))
    try:
        check_table_writable(stem)  # before the computation, not after
    except TheorykitError as exc:
        p.error(str(exc))
    settings = {k: settings_all[k] for k in args.settings}

    t_start = time.perf_counter()
    started = now()
    cmd = regenerate_command(prog or script_prog(sys.argv[0], root), sys.argv[1:] if argv is None else argv,
                             redact=("--note",))
    log(f"start: {cmd}")

    # ---- DMFT
    dm, dmc = {}, {}
    for key, s in settings.items():
        dm[key] = solve_dmft(key, s, args.T, args.paths, args.replicas, args.dmft_seed, args.cache)
        if args.check_paths:
            dmc[key] = solve_dmft(key, s, args.T, args.check_paths, args.replicas, args.dmft_seed + 1, args.cache)
    scan = {}
    for key, s in settings.items():
        for j, P in enumerate(args.paths_scan):
            scan[(key, P)] = solve_dmft(key, s, args.T, P, args.replicas, args.dmft_seed + 2 + j, args.cache)
    t_dmft = time.perf_counter() - t_start

    # ---- simulator
    sims, diverged, stopped = run_all_sims(args, settings, t_start)
    t_sims = time.perf_counter() - t_start - t_dmft
    sim_seconds = {kd: [r["seconds"] for r in v if "seconds" in r] for kd, v in sims.items()}
    few = [f"{k} d={d}" for (k, d), v in sims.items() if len(v) < 2]
    if few:
        raise TheorykitError(f"fewer than 2 simulator seeds finished for {', '.join(few)}"
                             + (" before the deadline (--deadline-min)" if stopped else "")
                             + "; what was done is kept in the cache")

    # ---- statistics
    rows, per = [], {}
    for key, s in settings.items():
        name = base.setting_name(s)
        D = dm[key]
        for q in QUANTITIES:
            for t in args.ts:
                recs = {"plain": [], "cv": []}
                for d in args.d:
                    rs = sims[(key, d)]
                    S = len(rs)
                    arr = stack(rs, SIM_KEY[q])[:, t]
                    s_dm, s_se, sv, frob, full, rms = signed(D[q][t], D[q + "_se"][t], arr)
                    cvm, cvse = cv_mean(sv, zero_mean_covariates(rs))
                    for est, mean, sim_se in (("plain", float(np.mean(sv)), float(np.std(sv, ddof=1) / math.sqrt(S))),
                                              ("cv", cvm, cvse)):
                        gap = mean - s_dm
                        gse = math.hypot(sim_se, s_se)
                        rec = dict(kind="gap", estimator=est, setting=name, quantity=q, t=t, d=d, seeds=S, dmft=s_dm,
                                   dmft_se=s_se, sim_mean=mean, sim_se=sim_se, gap=gap, gap_se=gse, rel_gap=gap / s_dm,
                                   rel_gap_se=gse / abs(s_dm), z=gap / gse, frob_diff=frob, rel_err_full=full,
                                   rms_rel=rms, spread_rel=float(np.std(sv, ddof=1)) / abs(s_dm))
                        rows.append(rec)
                        recs[est].append(rec)
                for est in ("cv", "plain"):
                    rl = recs[est]
                    fit = fit_over_d(args.d, [r["gap"] for r in rl], [r["sim_se"] for r in rl], rl[0]["dmft_se"])
                    fit["rms_slope"] = loglog_slope(args.d, [r["rms_rel"] for r in rl]) if len(args.d) > 1 \
                        else float("nan")
                    s_dm = rl[0]["dmft"]
                    rows.append(dict(kind="fit", estimator=est, setting=name, quantity=q, t=t, d="scan",
                                     seeds=sum(r["seeds"] for r in rl), dmft=s_dm, dmft_se=rl[0]["dmft_se"],
                                     **{k: fit[k] for k in ("fit_c", "fit_c_se", "chi2_c", "dof_c", "p_c", "fit_b",
                                                            "fit_b_se", "fit_c2", "fit_c2_se", "chi2_bc", "chi2_0",
                                                            "p_0", "pow_A", "pow_A_se", "pow_p", "pow_p_se",
                                                            "rms_slope", "bound_1000", "verdict")}))
                    per[(key, q, t, est)] = (rl, fit)

    # ---- DMFT paths check
    chk = []
    for key in settings:
        if key not in dmc:
            continue
        for q in QUANTITIES:
            for t in args.ts:
                a, ase = signed(dm[key][q][t], dm[key][q + "_se"][t], np.asarray(dm[key][q][t])[None])[:2]
                # project the check solve on the main solve's direction
                b_s = signed(dm[key][q][t], dmc[key][q + "_se"][t], np.asarray(dmc[key][q][t])[None])
                b, bse = float(b_s[2][0]), b_s[1]
                chk.append((key, q, t, a, ase, b, bse, (b - a) / math.hypot(ase, bse)))
                rows.append(dict(kind="dmft_paths_check", setting=base.setting_name(settings[key]), quantity=q, t=t,
                                 d="", seeds="", dmft=a, dmft_se=ase, sim_mean=b, sim_se=bse, gap=b - a,
                                 gap_se=math.hypot(ase, bse), rel_gap=(b - a) / a, z=(b - a) / math.hypot(ase, bse),
                                 verdict=f"check solve: paths {args.check_paths}, seed {args.dmft_seed + 1}"))
    # ---- DMFT convergence in paths: value(P) = X_inf + B / P (P = paths per replica), weighted by the replica s.e.
    pscan = []
    if args.paths_scan:
        Ps = sorted(set(args.paths_scan + [args.paths] + ([args.check_paths] if args.check_paths else [])))
        for key in settings:
            for q in QUANTITIES:
                for t in args.ts:
                    vals = []
                    for P in Ps:
                        src = dm[key] if P == args.paths else (dmc[key] if P == args.check_paths and key in dmc
                                                               else scan[(key, P)])
                        _, se_, sv = signed(dm[key][q][t], src[q + "_se"][t], np.asarray(src[q][t])[None])[:3]
                        vals.append((P, float(sv[0]), se_))
                    inf, inf_se, c2, _ = extrapolate_inverse([1.0 / (v[0] / args.replicas) for v in vals],
                                                             [v[1] for v in vals], [v[2] for v in vals])
                    ref = signed(dm[key][q][t], dm[key][q + "_se"][t], np.asarray(dm[key][q][t])[None])[0]
                    pscan.append((key, q, t, vals, inf, inf_se, ref, c2, len(vals) - 2))
                    rows.append(dict(kind="dmft_paths_extrapolation", setting=base.setting_name(settings[key]),
                                     quantity=q, t=t, d="", seeds="", dmft=ref, dmft_se=vals[Ps.index(args.paths)][2],
                                     sim_mean=inf, sim_se=inf_se, gap=inf - ref, rel_gap=(inf - ref) / ref,
                                     chi2_c=c2, dof_c=len(vals) - 2,
                                     verdict="sim_mean = value extrapolated to infinite paths (value + B/paths per "
                                             "replica); gap = extrapolated - main solve; paths " + " ".join(
                                                 f"{P}:{v:.6g}" for P, v, _ in vals)))
    wall = time.perf_counter() - t_start

    # ---- CSV and markdown
    header = [*(["**The simulation deadline was reached: seed counts below are what was done.**\n"] if stopped else []),
              *([f"Note: {args.note}\n"] if args.note else []),
              f"CSV: `{os.path.relpath(os.path.abspath(stem + '.csv'), root)}` (kind = gap: one row per setting x "
              "quantity x t x d; kind = fit: one row per setting x quantity x t; kind = dmft_paths_check).\n"]
    timing = (f"DMFT {t_dmft / 60:.1f} min, simulator {t_sims / 60:.1f} min, in this invocation; per-seed simulator "
              f"times summed over every seed used, including seeds computed by an earlier invocation and reused from "
              f"the cache: {sum(sum(v) for v in sim_seconds.values()) / 60:.1f} min. DMFT processes=1; simulator runs "
              f"in {args.processes} process(es), one BLAS thread each")
    md = [
          "## Definitions\n",
          "- DMFT: `theorykit.dmft`, " f"{args.paths} paths, {args.replicas} replicas (s.e. = spread over replicas), "
          f"seed {args.dmft_seed}, response estimator = library default; a second independent solve "
          f"({args.check_paths} paths, seed {args.dmft_seed + 1}) checks that the DMFT mean is converged in the "
          "number of paths.",
          f"- GD: `theorykit.simulate`, n = delta d, seeds = {args.seed_base} + 10000 d + i (i = 0..S-1; disjoint "
          "across d). Test loss = the simulator's population test loss (exact expectation over a fresh sample given "
          "M_t, gram_t); train loss = the empirical risk on the n training samples.",
          "- Signed scalar s: the loss itself; for M_t and gram = Theta^T Theta the component along the DMFT matrix, "
          "s = <X, X_dmft>/||X_dmft||_F (s_dmft = ||X_dmft||_F; s_sim - s_dmft = ||mean X_sim||_F - ||X_dmft||_F to "
          "first order; the CSV also has that Frobenius-norm difference, frob_diff, and the full relative "
          "||mean X_sim - X_dmft||_F/||X_dmft||_F, rel_err_full, which includes the orthogonal part and noise).",
          "- gap = mean_seeds s_sim - s_dmft; se = sqrt(var_seeds(s)/S + se_dmft^2); rel gap = gap/s_dmft "
          "(shown in %).",
          "- Two estimators of mean_seeds s_sim: the plain seed mean, and (primary) a control-variate mean: the "
          "intercept of the least-squares regression of s over seeds on six per-seed covariates whose expectation is "
          "exactly 0 at every d: train_0 - (population test loss)_0 (the data are independent of Theta(0), so E[train "
          "loss at t = 0 | Theta(0)] is the population loss there), gram_0 - I (3 entries; Theta(0) ~ N(0, I/d)) and "
          "M_0 (2 entries). Same expectation as the plain mean (up to O(1/S)), smaller variance where s correlates "
          "with them: the train loss' seed noise is mostly the sample of labels, which train_0 - pop_0 sees "
          "(correlation ~0.95 for tanh, delta = 2). se = OLS s.e. of the intercept.",
          "- per-seed rms = sqrt(mean_seeds ||X_seed - X_dmft||_F^2)/||X_dmft||_F; rms slope = least-squares slope "
          "of log rms vs log d (expected -1/2).",
          "- Fits over d, generalised least squares with the full covariance (seed noise independent across d, the "
          "DMFT error common to every d): c/d (c shown as the implied relative gap at d = 1000, c/(1000 s_dmft)); "
          "b + c/d (b = offset at d = infinity, relative); A (d/1000)^p with p free (only when c is > 3 se). "
          "chi2_0: the zero-gap model.",
          "- Verdict: 'no measurable gap' when the zero-gap model is acceptable (p >= 0.01 and every |gap|/se < 3); "
          "then the bound is the 95% bound |gap(1000)| + 2 se measured at d = 1000 (and, in brackets, the c/d-fit "
          "bound (|c| + 2 se_c)/1000). 'gap shrinks' when c/d is acceptable (p >= 0.01) and b is within 2.5 se of 0; "
          "'offset persists' when c/d is rejected and b is > 3 se from 0; else 'ambiguous'.\n"]

    md.append("## Runs\n")
    rr = []
    for key, s in settings.items():
        for d, S in zip(args.d, args.seeds):
            got = len(sims[(key, d)])
            ss = sim_seconds[(key, d)]
            rr.append([base.setting_name(s), d, int(round(s["delta"] * d)), f"{got}/{S}", diverged[(key, d)],
                       f"{np.mean(ss):.2f}" if ss else "cached"])
    md.append(md_table(["setting", "d", "n", "seeds done/planned", "diverged", "s per seed"], rr))
    md.append("")
    md.append("DMFT (main solve; relative s.e. in brackets) and the paths check (check - main, in units of the "
              "combined s.e.):\n")
    dr = []
    for key, s in settings.items():
        for t in args.ts:
            cells = []
            for q in QUANTITIES:
                a, ase = signed(dm[key][q][t], dm[key][q + "_se"][t], np.asarray(dm[key][q][t])[None])[:2]
                c = next((x for x in chk if x[0] == key and x[1] == q and x[2] == t), None)
                cells.append(f"{fmt(a)} ({100 * ase / abs(a):.2f}%)" + (f"; {c[7]:+.1f}" if c else ""))
            dr.append([base.setting_name(s), t] + cells)
    md.append(md_table(["setting", "t"] + [f"{QNAME[q]} s_dmft (rel se); check z" for q in QUANTITIES], dr))
    md.append("")

    if pscan:
        Ps = [v[0] for v in pscan[0][3]]
        md.append("### DMFT convergence in the number of paths\n")
        md.append("Independent solves (one seed each; replicas = %d) at each total number of paths: relative deviation "
                  "from the main solve (%d paths) in %%, ± the replica s.e. of that solve; 'extrap.' = value + B/paths "
                  "fitted (weighted) over all solves, the infinite-paths value, relative to the main solve; chi2 of "
                  "that fit. A bias that the replica s.e. does not show (each replica is an independent solve with "
                  "paths/replicas paths, so the replica mean keeps the per-replica bias) appears here.\n"
                  % (args.replicas, args.paths))
        tab = []
        for key, q, t, vals, inf, inf_se, ref, c2, dof in pscan:
            tab.append([base.setting_name(settings[key]), QNAME[q], t]
                       + [pm((v - ref) / ref, se_ / abs(ref)) for P, v, se_ in vals]
                       + [pm((inf - ref) / ref, inf_se / abs(ref)), f"{c2:.1f}/{dof}"])
        md.append(md_table(["setting", "quantity", "t"] + [f"{P}" for P in Ps] + ["extrap.", "chi2"], tab))
        md.append("")

    for key, s in settings.items():
        name = base.setting_name(s)
        md.append(f"## {name}\n")
        for est in ("cv", "plain"):
            md.append(("**Control-variate estimator (primary)**" if est == "cv" else "**Plain seed mean**")
                      + ": relative gap (GD - DMFT)/DMFT in % ± se, per d; fits; verdict.\n")
            tab = []
            for q in QUANTITIES:
                for t in args.ts:
                    recs, fit = per[(key, q, t, est)]
                    s_dm = recs[0]["dmft"]
                    cells = [pm(r["rel_gap"], r["rel_gap_se"]) for r in recs]
                    c1000 = pm(fit["fit_c"] / 1000 / s_dm, fit["fit_c_se"] / 1000 / abs(s_dm))
                    c_cell = f"{c1000} (chi2 {fit['chi2_c']:.1f}/{fit['dof_c']})"
                    b_cell = pm(fit["fit_b"] / s_dm if fit["fit_b"] is not None else None,
                                fit["fit_b_se"] / abs(s_dm) if fit["fit_b_se"] is not None else None)
                    p_cell = "—" if fit["pow_p"] is None else f"{fit['pow_p']:.2f} ± {fit['pow_p_se']:.2f}"
                    v = fit["verdict"]
                    if v == "no measurable gap":
                        v += (f" (|rel gap| < {100 * fit['bound_1000'] / abs(s_dm):.2f}% at d = {fit['bound_d']:.0f}; "
                              f"fit {100 * fit['bound_1000_fit'] / abs(s_dm):.2f}%)")
                    elif v == "gap shrinks":
                        v += f" (c/d consistent, p = {p_cell})" if fit["pow_p"] is not None else " (c/d consistent)"
                    tab.append([QNAME[q], t] + cells + [c_cell, b_cell, p_cell,
                                                       f"{fit['chi2_0']:.1f}/{len(args.d)}", v])
            md.append(md_table(["quantity", "t"] + [f"d={d}" for d in args.d]
                                    + ["c/d: rel gap at d=1000 (chi2/dof)", "offset b (rel)", "p", "chi2_0/dof",
                                       "verdict"], tab))
            md.append("")
        md.append("\nPer-seed rms deviation from the DMFT (relative, %) and its slope in log d:\n")
        tab = []
        for q in QUANTITIES:
            for t in args.ts:
                recs, fit = per[(key, q, t, "plain")]
                tab.append([QNAME[q], t] + [f"{100 * r['rms_rel']:.2f}" for r in recs] + [f"{fit['rms_slope']:.2f}"])
        md.append(md_table(["quantity", "t"] + [f"d={d}" for d in args.d] + ["slope"], tab))
        md.append("")

    # ---- the train loss at t = T
    tT = max(args.ts)
    md.append(f"## Train loss at t = {tT}: finite-size effect or DMFT offset?\n")
    for key, s in settings.items():
        for est in ("cv", "plain"):
            recs, fit = per[(key, "train_loss", tT, est)]
            s_dm = recs[0]["dmft"]
            md.append(f"- **{base.setting_name(s)}**, "
                      f"{'control-variate estimator' if est == 'cv' else 'plain seed mean'}"
                      f": DMFT {fmt(s_dm)} ± {fmt(recs[0]['dmft_se'])}; rel gap "
                      + ", ".join(f"d={r['d']}: {pm(r['rel_gap'], r['rel_gap_se'])}%" for r in recs)
                      + f". Fit c/d: rel gap at d=1000 "
                      f"{pm(fit['fit_c'] / 1000 / s_dm, fit['fit_c_se'] / 1000 / abs(s_dm))}%"
                      f" (chi2 {fit['chi2_c']:.1f}/{fit['dof_c']}, p-value {fit['p_c']:.2g}); b + c/d: offset b = "
                      + pm(fit['fit_b'] / s_dm if fit['fit_b'] is not None else None,
                           fit['fit_b_se'] / abs(s_dm) if fit['fit_b_se'] is not None else None) + "%"
                      + (f"; power law p = {fit['pow_p']:.2f} ± {fit['pow_p_se']:.2f}" if fit["pow_p"] is not None
                         else "")
                      + f". Verdict: {fit['verdict']}.")
        ps = next((x for x in pscan if x[0] == key and x[1] == "train_loss" and x[2] == tT), None)
        if ps:
            md.append(f"- **{base.setting_name(s)}**, DMFT train loss at t = {tT} against its number of paths "
                      f"(relative to the {args.paths}-path solve, ± replica s.e.): "
                      + ", ".join(f"{P}: {pm((v - ps[6]) / ps[6], se_ / abs(ps[6]))}%" for P, v, se_ in ps[3])
                      + f"; extrapolated to infinite paths {pm((ps[4] - ps[6]) / ps[6], ps[5] / abs(ps[6]))}%.")
    md.append("")
    write_table(stem, rows, CSV_COLUMNS, md, title="Finite-d gap of GD vs the DMFT, scanned over d (easy link y = z + "
                f"z^2/2, square loss, m = 2, eta = 1, T = {args.T})", command=cmd, started=started, wall=wall,
                timing=timing, cpus_note="shared with another job", header=header, root=root)
    log(f"done in {wall / 60:.1f} min: {stem}.csv, {stem}.md")


if __name__ == "__main__":
    main()
