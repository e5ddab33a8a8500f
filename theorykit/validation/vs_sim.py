"""DMFT (theorykit.dmft, docs/theory.md §3, §3.1, §3.2) against the finite-d simulator (§7), per §8.

The table generator behind ``scripts/dmft_vs_sim.py`` (:func:`main` is its command line).  Statistics:
:mod:`theorykit.validation.stats`; simulator seeds: :mod:`theorykit.validation.seeds` (resumable with ``--cache``);
output: :func:`theorykit.report.writer.write_table` (hand-written notes go in ``<out>_notes.md``, never touched).

Writes tables/dmft_vs_sim.csv (one row per setting x quantity x t, or a summary row) and tables/dmft_vs_sim.md.

Parts (``--parts``, default all):

1. easy link y = z + z^2/2, square loss, tanh and gelu, m = 2, a = (1,1) and (1,-1), delta in {2, 4}, eta = 1, T = 50:
   relative error of the DMFT against the mean over seeds of GD at d (default 2000) for M_t, Theta^T Theta (Frobenius
   norms), train loss and test loss at t in {1, 2, 5, 10, 20, 50}; goal <= 3%.  Also the sign of M_t per neuron and
   seed, and (1b) the gap at d = 1000, 2000, 4000 for two settings.
2. hard link y = z^2: (x^2, m = 1, eta = 0.05, delta = 4, T = 100) and (gelu, m = 2, eta = 1, delta = 4, T = 50):
   gram, train and test loss against *constrained* GD (hard direction projected out, d = 2000); and (2b) the hard
   process trace C_mu(t) against d M_t^T M_t of *unconstrained* GD (d = 1000, >= 40 seeds) at small t.
3. (retired: the finite-d success probability is validated by scripts/thresholds_vs_sim.py, which tests
   :func:`theorykit.thresholds.finite_d`, the one finite-d pipeline; the earlier part 3 tables are in tables/archive/.)
4. kinked activations (relu, hardtanh), easy two-index link y = z1 + z2/2 + z2^2/2, m = 2, a = (1, -1), delta in
   {3, 5}, eta = 1, T = 20: as part 1 (the Dirac terms of sigma'' in the DMFT's responses, docs/theory.md §3.1).

Definitions (also in the .md): for a matrix quantity X_t (M_t, gram) rel_err = ||X_dmft - mean_seeds X_sim||_F /
||mean_seeds X_sim||_F; for a scalar |dmft - sim_mean| / |sim_mean|.  rel_se = sqrt(sum of squared entrywise standard
errors of the DMFT (over replicas) and of the seed mean) / ||mean X_sim||_F: the size of the gap expected from noise
alone.  The simulator's test loss is its population test loss (exact expectation over a fresh sample given M_t and
gram_t) when it has one, else the fresh-test-set average.

Examples::

    python scripts/dmft_vs_sim.py --quick            # a few minutes: one setting per part, fewer seeds
    python scripts/dmft_vs_sim.py                    # everything (about 30-40 min on 2 busy cores)
    python scripts/dmft_vs_sim.py --parts 1 --seeds 16 --d 2000
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

from ..dynamics import dmft
from ..errors import TheorykitError

from .seeds import run_sims, stack
from .stats import compare, loglog_slope, per_seed_rms, within, within_factor
from ..report.writer import (check_table_writable, fmt, log, md_table, now, pct, regenerate_command, script_prog,
                     write_table)

EASY_LINK = "z+z**2/2"
HARD_LINK = "z**2"
T_COMPARE = (1, 2, 5, 10, 20, 50)
GOAL = 0.03

CSV_COLUMNS = ["part", "setting", "quantity", "t", "d", "seeds", "dmft", "dmft_se", "sim_mean", "sim_se", "rel_err",
               "rel_se", "ratio", "pass", "note"]
QUANTITY_KEYS = {"M": "M", "gram": "gram", "train_loss": "train", "test_loss": "test"}


# ------------------------------------------------------------------------------------------------ helpers
def run_dmft(label, **kw):
    """dmft(**kw), with a log line."""
    r = dmft(**kw)
    log(f"  dmft {label}: {r.seconds:.0f} s, status {r.status}"
        + (f" (diverged at step {r.diverged_at['step']})" if r.diverged_at else "")
        + f", paths/replica {r.settings['paths_per_replica']}, response {r.settings['response']}"
          f" ({r.settings['response_paths_per_replica']} paths)")
    return r


def sim_data(sims, quantities=("M", "gram", "train_loss", "test_loss")):
    """{quantity: (seeds, T, ...)} from the seed runner's dicts."""
    return {q: stack(sims, QUANTITY_KEYS[q]) for q in quantities}


def sim_test_loss_kind() -> str:
    return "population (exact over a fresh sample given M_t, gram_t)"


# ------------------------------------------------------------------------------------------------ part 1: easy
def easy_settings(quick):
    out = []
    for act in ("tanh", "gelu"):
        for a in ((1, 1), (1, -1)):
            for delta in (2.0, 4.0):
                out.append(dict(activation=act, a=a, delta=delta))
    if quick:
        out = [out[0], out[-1]]  # tanh a=(1,1) delta=2 ; gelu a=(1,-1) delta=4
    return out


def setting_name(s, extra=""):
    a = s.get("a")
    astr = f", a=({a[0]},{a[1]})" if a is not None else ""
    return f"{s['activation']}{astr}, m={s.get('width', 2)}, delta={s['delta']:g}, eta={s.get('eta', 1.0):g}{extra}"


def part1(args, rows, md):
    T = 20 if args.quick else 50
    ts = [t for t in T_COMPARE if t <= T]
    md.append(f"## 1. Easy link y = {EASY_LINK}, square loss, m = 2, eta = 1 (DMFT vs GD, d = {args.d}, "
              f"{args.seeds} seeds, t <= {T})\n")
    return compare_settings(args, rows, md, easy_settings(args.quick), EASY_LINK, T, ts, "1")


#: part 4: kinked activations (docs/theory.md §3.1) on a two-index easy link
KINK_LINK = "z1 + z2/2 + z2**2/2"
KINK_T = (1, 2, 3, 4, 5, 6, 10, 20)


def kink_settings(quick):
    out = [dict(activation=act, a=(1, -1), delta=delta) for act in ("relu", "min(1,max(-1,x))")
           for delta in (3.0, 5.0)]
    return out[::3] if quick else out


def part4(args, rows, md):
    T = 10 if args.quick else 20
    ts = [t for t in KINK_T if t <= T]
    md.append(f"## 4. Kinked activations: y = {KINK_LINK}, square loss, m = 2, a = (1, -1), eta = 1 (DMFT vs GD, "
              f"d = {args.d}, {args.seeds} seeds, t <= {T})\n")
    md.append("relu (kinked, unbounded) and hardtanh = min(1, max(-1, x)) (two kinks, bounded). The DMFT keeps the "
              "Dirac terms of sigma'' (equal-time response averaged over the newest innovation, older lags by "
              "Stein's lemma; "
              "docs/theory.md §3.1); before that fix the Gram of the relu setting at delta = 3 came out 9.5% low at "
              "t = 1.\n")
    return compare_settings(args, rows, md, kink_settings(args.quick), KINK_LINK, T, ts, "4",
                            paths=args.kink_paths)


def compare_settings(args, rows, md, settings, link, T, ts, part, paths=None):
    """DMFT vs GD for each setting (activation, a, delta; square loss, m = 2, eta = 1): M_t, gram, train and test loss
    at the times ts; appends rows and Markdown; returns {name: (setting, DMFT result, per-seed data)}."""
    paths = paths or args.easy_paths
    md.append(f"Goal: rel_err <= {GOAL:.0%} for M_t, gram = Theta^T Theta, train and test loss. DMFT: paths "
              f"{paths}, replicas {args.replicas}, response estimator = library default (stein). Test loss of the "
              f"simulator: {sim_test_loss_kind()}.\n")
    summary = []
    sign_lines = []
    per_setting = {}
    for s in settings:
        name = setting_name(s)
        log(f"part {part}: {name}")
        net = dict(activation=s["activation"], link=link, loss="square", width=2, a=list(s["a"]))
        res = run_dmft(name, **net, delta=s["delta"], eta=1.0, steps=T, paths=paths,
                       replicas=args.replicas, seed=args.dmft_seed)
        sims = run_sims(dict(**net, delta=s["delta"], d=args.d, steps=T, eta=1.0), range(args.seeds),
                        processes=args.processes, label=name, cache=args.cache)
        data = sim_data(sims)
        per_setting[name] = (s, res, data)
        worst = {}
        for t in ts:
            for q in ("M", "gram", "train_loss", "test_loss"):
                c = compare(getattr(res, q)[t], res.stderr[q][t], data[q][:, t])
                ok = within(c["rel_err"], GOAL)
                rows.append(dict(part=part, setting=name, quantity=q, t=t, d=args.d, seeds=args.seeds, **c,
                                 ratio=c["sim_mean"] / c["dmft"] if c["dmft"] else float("nan"), **{"pass": ok},
                                 note=""))
                if q not in worst or c["rel_err"] > worst[q][0]:
                    worst[q] = (c["rel_err"], c["rel_se"], t)
        # sign of M_t per neuron: DMFT sign vs every seed, t >= 1
        sgn_d = np.sign(res.M[1:T + 1, 0, :])
        sgn_s = np.sign(data["M"][:, 1:T + 1, 0, :])
        flips = int(np.sum(np.any(sgn_s != sgn_d[None], axis=(1, 2))))
        sign_lines.append(f"- {name}: DMFT sign of M_t per neuron {np.sign(res.M[T, 0]).astype(int).tolist()}; "
                          f"seeds with any neuron of opposite sign at some t in 1..{T}: {flips}/{args.seeds}")
        rows.append(dict(part=part, setting=name, quantity="M_sign_flips", t="1..%d" % T, d=args.d, seeds=args.seeds,
                         dmft=None, dmft_se=None, sim_mean=flips, sim_se=None, rel_err=None, rel_se=None, ratio=None,
                         **{"pass": flips == 0}, note="seeds with a neuron whose M_t sign differs from the DMFT"))
        allok = all(within(w[0], GOAL) for w in worst.values())
        for q, (re_, rs, t) in worst.items():
            rows.append(dict(part=part, setting=name, quantity=q, t="max", d=args.d, seeds=args.seeds, dmft=None,
                             dmft_se=None, sim_mean=None, sim_se=None, rel_err=re_, rel_se=rs, ratio=None,
                             **{"pass": within(re_, GOAL)}, note=f"worst t = {t}"))
        summary.append([name] + [f"{pct(worst[q][0])} (t={worst[q][2]}, se {pct(worst[q][1])})"
                                 for q in ("M", "gram", "train_loss", "test_loss")]
                       + [fmt(allok), f"{res.seconds:.0f}"])
    md.append("Worst relative error over t in " + str(ts) + " (combined standard error of the gap in brackets):\n")
    md.append(md_table(["setting", "M_t", "gram", "train", "test", f"all <= {GOAL:.0%}", "DMFT s"], summary))
    md.append("\nSign of M_t (easy link: the first step fixes it, M_1 = -eta E[z u^0], so no seed should flip):\n")
    md.extend(sign_lines)
    # detailed table for every t
    md.append("\nPer-t detail (rel_err; rel_se in brackets):\n")
    det = []
    for name, (s, res, data) in per_setting.items():
        for t in ts:
            cells = []
            for q in ("M", "gram", "train_loss", "test_loss"):
                r = next(r for r in rows if r["part"] == part and r["setting"] == name and r["quantity"] == q
                         and r["t"] == t)
                cells.append(f"{pct(r['rel_err'])} ({pct(r['rel_se'])})")
            det.append([name, t] + cells + [fmt(float(res.train_loss[t])), fmt(float(res.test_loss[t]))])
    md.append(md_table(["setting", "t", "M_t", "gram", "train", "test", "DMFT train", "DMFT test"], det))
    md.append("")
    return per_setting


def part1b(args, rows, md, per_setting):
    """Gap vs d for one or two settings."""
    T = 20 if args.quick else 50
    ts = [t for t in T_COMPARE if t <= T]
    scan = [dict(activation="tanh", a=(1, 1), delta=2.0), dict(activation="gelu", a=(1, -1), delta=4.0)]
    if args.quick:
        scan = scan[:1]
    md.append(f"## 1b. Finite-d gap vs d (d = {', '.join(map(str, args.d_scan))}, {args.seeds} seeds each)\n")
    md.append("mean gap = rel_err of the seed mean (bias + noise/sqrt(seeds)); per-seed rms = sqrt(mean over seeds "
              "of ||X_seed - X_dmft||_F^2) / ||X_dmft||_F (the finite-d fluctuation, expected ~ d^-1/2). Values are "
              "the max over t in " + str(ts) + ". slope = least-squares slope of log(value) vs log(d).\n")
    table = []
    for s in scan:
        name = setting_name(s)
        net = dict(activation=s["activation"], link=EASY_LINK, loss="square", width=2, a=list(s["a"]))
        hit = per_setting.get(name)
        res = hit[1] if hit else run_dmft(name, **net, delta=s["delta"], eta=1.0, steps=T, paths=args.easy_paths,
                                          replicas=args.replicas, seed=args.dmft_seed)
        stats = {q: {"gap": [], "se": [], "rms": []} for q in ("M", "gram", "train_loss", "test_loss")}
        for d in args.d_scan:
            if hit and d == args.d:
                data = hit[2]
            else:
                log(f"part 1b: {name}, d = {d}")
                sims = run_sims(dict(**net, delta=s["delta"], d=d, steps=T, eta=1.0), range(args.seeds),
                                processes=args.processes, label=f"{name} d={d}", cache=args.cache)
                data = sim_data(sims)
            for q in stats:
                gaps, ses, rmss = [], [], []
                for t in ts:
                    c = compare(getattr(res, q)[t], res.stderr[q][t], data[q][:, t])
                    rms = per_seed_rms(getattr(res, q)[t], data[q][:, t])
                    gaps.append(c["rel_err"]), ses.append(c["rel_se"]), rmss.append(rms)
                    rows.append(dict(part="1b", setting=name, quantity=q, t=t, d=d, seeds=args.seeds, **c,
                                     ratio=None, **{"pass": within(c["rel_err"], GOAL)},
                                     note=f"per-seed rms {rms:.4g}"))
                stats[q]["gap"].append(max(gaps))
                stats[q]["se"].append(ses[int(np.argmax(gaps))])
                stats[q]["rms"].append(max(rmss))
        for q, st in stats.items():
            sl_rms = loglog_slope(args.d_scan, st["rms"]) if len(args.d_scan) > 1 else float("nan")
            resolved = all(g > 2 * e for g, e in zip(st["gap"], st["se"]))
            sl_gap = loglog_slope(args.d_scan, st["gap"]) if len(args.d_scan) > 1 else float("nan")
            rows.append(dict(part="1b", setting=name, quantity=q, t="max", d="scan", seeds=args.seeds, dmft=None,
                             dmft_se=None, sim_mean=None, sim_se=None, rel_err=None, rel_se=None, ratio=None,
                             **{"pass": None},
                             note=f"slope log rms vs log d {sl_rms:.3f}; slope log gap {sl_gap:.3f} "
                                  f"({'resolved' if resolved else 'gap within 2 se at some d: noise-dominated'})"))
            table.append([name, q] + [f"{pct(g)} ({pct(e)})" for g, e in zip(st["gap"], st["se"])]
                         + [pct(v) for v in st["rms"]]
                         + [f"{sl_gap:.2f}" + ("" if resolved else " (noise)"), f"{sl_rms:.2f}"])
    hdr = (["setting", "quantity"] + [f"mean gap d={d} (se)" for d in args.d_scan]
           + [f"per-seed rms d={d}" for d in args.d_scan] + ["slope gap", "slope rms"])
    md.append(md_table(hdr, table))
    md.append("")


# ------------------------------------------------------------------------------------------------ part 2: hard
def hard_settings(args):
    out = [dict(activation="x**2", width=1, eta=0.05, delta=4.0, T=100, order=args.x2_order),
           dict(activation="gelu", width=2, eta=1.0, delta=4.0, T=50, order=None)]
    if args.quick:
        out = [dict(out[0], T=40), dict(out[1], T=20)]
    return out


def part2(args, rows, md):
    md.append(f"## 2. Hard link y = {HARD_LINK} (phase retrieval), square loss, a = 1\n")
    md.append("Numerics of the hard-link DMFT (why these options): (i) the hard process C_mu comes from pathwise "
              "tangents on the whole batch (exact for the sampled paths); R_u comes from the estimator chosen by "
              "`response='auto'` (Stein's lemma for eta >= 0.25, propagated Jacobians below: Stein's error grows like "
              "1/eta^2), and the other estimator is shown as a check; (ii) for "
              "sigma = x^2 the per-sample curvature at r^2 = y is D = 4y, so a latent node with eta*4y/delta > 2 has "
              "a leave-one-out oscillation: the library excludes such single paths at latent nodes of probability "
              "< 1e-9 and reports their weight (`--x2-order 10`, y <= 23.6, avoids them altogether); (iii) the "
              "outputs at long t are averages carried by rare paths whose responses grew where D < 0, so part 2 uses "
              "the random sampler and 16 replicas: the replica spread is then an honest (if heavy-tailed) error.\n")
    md.append(f"DMFT response estimator for R_u on the hard link: `{args.hard_response}`. GH order for "
              f"sigma = x^2: {args.x2_order or 'library default (32)'}; part 2 DMFT: {args.hard_paths} paths, "
              f"{args.hard_replicas} replicas, sampler {args.hard_sampler}.\n")
    md.append(f"### 2a. DMFT vs constrained GD (d = {args.d}, {args.seeds} seeds)\n")
    t2a, t2b, checks = [], [], []
    for h in hard_settings(args):
        T = h["T"]
        name = setting_name(h)
        net = dict(activation=h["activation"], link=HARD_LINK, loss="square", width=h["width"])
        log(f"part 2: {name}")
        kw = dict(**net, delta=h["delta"], eta=h["eta"], steps=T, paths=args.hard_paths, replicas=args.hard_replicas,
                  seed=args.dmft_seed, sampler=args.hard_sampler)
        if h["order"]:
            kw["order"] = h["order"]
        res = run_dmft(name, **kw, response=args.hard_response)
        # the other R_u estimator, as a check
        used = res.settings["response"]
        other = "stein" if used != "stein" else "direct"
        res_o = run_dmft(name + f" [{other}]", **kw, response=other)
        Tm = len(res.t) - 1
        sims = run_sims(dict(**net, delta=h["delta"], d=args.d, steps=T, eta=h["eta"], constrained=True),
                        range(args.seeds), processes=args.processes, label=name + " constrained", cache=args.cache)
        data = sim_data(sims, ("gram", "train_loss", "test_loss"))
        ts = sorted(set([t for t in (1, 2, 5, 10, 20, 50, 100) if t <= min(T, Tm)] + [min(T, Tm)]))
        worst = {}
        for t in ts:
            for q in ("gram", "train_loss", "test_loss"):
                c = compare(getattr(res, q)[t], res.stderr[q][t], data[q][:, t])
                rows.append(dict(part="2a", setting=name, quantity=q, t=t, d=args.d, seeds=args.seeds, **c,
                                 ratio=None, **{"pass": within(c["rel_err"], GOAL)}, note="constrained GD"))
                if q not in worst or c["rel_err"] > worst[q][0]:
                    worst[q] = (c["rel_err"], c["rel_se"], t)
            # the other estimator at the same t (if it got there)
            if t < len(res_o.t):
                for q in ("gram", "train_loss"):
                    c = compare(getattr(res_o, q)[t], res_o.stderr[q][t], data[q][:, t])
                    rows.append(dict(part="2a", setting=name, quantity=q + f"[{other}]", t=t, d=args.d,
                                     seeds=args.seeds, **c, ratio=None, **{"pass": within(c["rel_err"], GOAL)},
                                     note=f"DMFT with response={other}"))
        t2a.append([name, T] + [f"{pct(worst[q][0])} (t={worst[q][2]}, se {pct(worst[q][1])})"
                                for q in ("gram", "train_loss", "test_loss")]
                   + [fmt(all(within(w[0], GOAL) for w in worst.values())), f"{float(np.max(np.abs(res.M))):.1e}"])
        checks.append(f"- {name}: response={used}: status {res.status}"
                      f"{'' if not res.diverged_at else ' at step %d' % res.diverged_at['step']}; response={other}: "
                      f"status {res_o.status}"
                      f"{'' if not res_o.diverged_at else ' at step %d' % res_o.diverged_at['step']}"
                      f"; gram at t = {min(T, len(res_o.t) - 1)}: {used} "
                      f"{fmt(float(np.trace(res.gram[min(T, len(res_o.t) - 1)])))} vs {other} "
                      f"{fmt(float(np.trace(res_o.gram[min(T, len(res_o.t) - 1)])))} (traces); C_mu trace at t = "
                      f"{min(T, len(res_o.t) - 1)}: {fmt(float(np.trace(res.C_mu[min(T, len(res_o.t) - 1), 0])))} vs "
                      f"{fmt(float(np.trace(res_o.C_mu[min(T, len(res_o.t) - 1), 0])))}")
        # ---- 2b: hard process vs unconstrained GD
        log(f"part 2b: {name} unconstrained, d = {args.d_hard}")
        sims_u = run_sims(dict(**net, delta=h["delta"], d=args.d_hard, steps=T, eta=h["eta"]),
                          range(args.seeds_hard), processes=args.processes, label=name + " unconstrained",
                          cache=args.cache)
        Mu = stack(sims_u, "M")  # (S, T+1, 1, m)
        dMM = args.d_hard * np.einsum("stka,stka->st", Mu, Mu)  # trace of d M^T M per seed and t
        S = dMM.shape[0]
        sim_mean, sim_se = dMM.mean(0), dMM.std(0, ddof=1) / math.sqrt(S)
        for rr, lab in ((res, used), (res_o, other)):
            Cmu = np.einsum("taa->t", rr.C_mu[:, 0])
            Cmu_se = np.sqrt(np.einsum("taa->t", rr.stderr["C_mu"][:, 0] ** 2))
            n = min(len(Cmu), len(sim_mean))
            ratio = sim_mean[:n] / Cmu[:n]
            off = [t for t in range(n) if not within_factor(ratio[t], 1.5)]
            first_off = off[0] if off else None
            for t in range(n):
                rows.append(dict(part="2b", setting=name, quantity=f"trace C_mu vs d|M_t|^2 [{lab}]", t=t,
                                 d=args.d_hard, seeds=S, dmft=float(Cmu[t]), dmft_se=float(Cmu_se[t]),
                                 sim_mean=float(sim_mean[t]), sim_se=float(sim_se[t]),
                                 rel_err=abs(Cmu[t] - sim_mean[t]) / sim_mean[t],
                                 rel_se=math.hypot(Cmu_se[t], sim_se[t]) / sim_mean[t], ratio=float(ratio[t]),
                                 **{"pass": within_factor(ratio[t], 1.5)}, note="ratio = sim / dmft"))
            pick = sorted(set([t for t in (0, 1, 2, 3, 5, 8, 10, 15, 20, 30, 40, 50, 60, 80, 100) if t < n]
                              + ([first_off] if first_off is not None else [])))
            t2b.append((name, f"{lab} (hard_reliable_until = {rr.hard_reliable_until})", pick, Cmu, Cmu_se, sim_mean,
                        sim_se, ratio, first_off))
    md.append(md_table(["setting", "T", "gram", "train", "test", f"all <= {GOAL:.0%}", "max|M| DMFT"], t2a))
    md.append("\nEstimator check (same DMFT, other response estimator):\n")
    md.extend(checks)
    md.append(f"\n### 2b. Hard process: trace C_mu(t) (DMFT, docs/theory.md §3.2) vs d tr(M_t^T M_t) of "
              f"unconstrained GD "
              f"(d = {args.d_hard}, {args.seeds_hard} seeds)\n")
    md.append("ratio = simulated mean / DMFT; 'agrees' = within a factor 1.5. docs/theory.md §3.2: the linear "
              "process is right "
              "while growth is linear and biased low once it is nonlinear.\n")
    for (name, lab, pick, Cmu, Cmu_se, sm, ss, ratio, first_off) in t2b:
        md.append(f"**{name}**, DMFT response = {lab}: first t outside a factor 1.5: "
                  f"{first_off if first_off is not None else 'none up to T'}"
                  + (f" (simulated d|M_t|^2 = {sm[first_off]:.3g} there)" if first_off is not None else "") + "\n")
        md.append(md_table(["t", "DMFT tr C_mu", "se", "sim d|M_t|^2", "se", "ratio"],
                           [[t, fmt(float(Cmu[t])), fmt(float(Cmu_se[t])), fmt(float(sm[t])), fmt(float(ss[t])),
                             f"{ratio[t]:.3f}"] for t in pick]))
        md.append("")


# ------------------------------------------------------------------------------------------------ part 3: success
def main(argv=None, *, prog=None, root=None):
    """The command line of scripts/dmft_vs_sim.py (``prog``: the command shown as regenerating the table, default
    'python <sys.argv[0] relative to root>'; ``root``: the repository root, default the one holding theorykit)."""
    p = argparse.ArgumentParser(prog=prog.split()[-1] if prog else None, description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a reduced run: two easy settings, T <= 20, fewer seeds")
    p.add_argument("--parts", default="1,2,4", help="comma list of parts to run (1, 2, 4; 1 includes 1b)")
    p.add_argument("--seeds", type=int, default=None, help="seeds for parts 1, 1b, 2a (default 8; quick 8)")
    p.add_argument("--d", type=int, default=2000, help="dimension for parts 1 and 2a")
    p.add_argument("--d-scan", default="1000,2000,4000", help="dimensions for part 1b")
    p.add_argument("--d-hard", type=int, default=1000, help="dimension for part 2b (unconstrained GD)")
    p.add_argument("--seeds-hard", type=int, default=None, help="seeds for part 2b (default 40)")
    p.add_argument("--x2-order", type=int, default=None,
                   help="Gauss-Hermite nodes in z for sigma = x^2 (default: the library's 32; outer nodes with "
                        "eta*4y/delta > 2 are leave-one-out unstable single paths, excluded with their weight)")
    p.add_argument("--hard-response", default="auto", choices=("auto", "direct", "stein"),
                   help="DMFT estimator of R_u for the hard link (part 2); C_mu always uses pathwise tangents")
    p.add_argument("--easy-paths", type=int, default=262144,
                   help="DMFT paths in part 1 (65536 biased the late train loss low by ~1-2%%: tables/dmft_dscan.md)")
    p.add_argument("--kink-paths", type=int, default=524288,
                   help="DMFT paths in part 4 (kinked activations; 65536 biased hardtanh's Gram low by ~1.4%%)")
    p.add_argument("--hard-paths", type=int, default=262144, help="DMFT paths in part 2 (heavy-tailed: see notes)")
    p.add_argument("--hard-replicas", type=int, default=16, help="DMFT replicas in part 2")
    p.add_argument("--hard-sampler", default="random", choices=("random", "sobol"),
                   help="DMFT sampler in part 2 (random: replica spread is an honest error for heavy tails)")
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--dmft-seed", type=int, default=0)
    p.add_argument("--processes", type=int, default=2, help="parallel simulator runs (one BLAS thread each)")
    p.add_argument("--out", default=None, help="output stem (default tables/dmft_vs_sim)")
    p.add_argument("--cache", default=None,
                   help="folder for the per-seed simulator results (resumable runner files, reused by a rerun with the "
                        "same settings); default: none (temporary)")
    args = p.parse_args(argv)
    args.parts = {int(x) for x in args.parts.split(",") if x.strip()}
    args.d_scan = [int(x) for x in args.d_scan.split(",")]
    if args.seeds is None:
        args.seeds = 8
    if args.seeds_hard is None:
        args.seeds_hard = 24 if args.quick else 40
    if args.quick:
        args.d_scan = [d for d in args.d_scan if d <= 2000] or args.d_scan[:1]
        args.hard_paths, args.hard_replicas = min(args.hard_paths, 65536), min(args.hard_replicas, 8)
        args.easy_paths = min(args.easy_paths, 65536)
    root = root or repo_root()
    stem = args.out or os.path.join(root, "tables", "dmft_vs_sim" + ("_quick" if args.quick else ""))
    try:
        check_table_writable(stem)  # before an hour of computing, not after
    except TheorykitError as exc:
        p.error(str(exc))
    if args.cache:
        os.makedirs(args.cache, exist_ok=True)

    t0 = time.perf_counter()
    cpu0 = time.process_time()
    started = now()
    cmd = regenerate_command(prog or script_prog(sys.argv[0], root), sys.argv[1:] if argv is None else argv)
    rows, body = [], []
    log(f"start: {cmd}")
    per_setting = {}
    if 1 in args.parts:
        per_setting = part1(args, rows, body)
        part1b(args, rows, body, per_setting)
    if 2 in args.parts:
        part2(args, rows, body)
    if 4 in args.parts:
        part4(args, rows, body)
    wall = time.perf_counter() - t0

    header = [f"CSV: `{os.path.relpath(os.path.abspath(stem + '.csv'), root)}` (columns: {', '.join(CSV_COLUMNS)}; for "
              f"matrices dmft, sim_mean are Frobenius norms and dmft_se, sim_se the Frobenius norms of the entrywise "
              f"standard errors).\n",
              "Definitions: rel_err = ||X_dmft - mean_seeds X_sim||_F / ||mean_seeds X_sim||_F (|.| for scalars); "
              "rel_se = sqrt(sum of squared entrywise standard errors of the DMFT (replicas) and of the seed mean) / "
              "||mean X_sim||_F, the gap expected from noise alone. DMFT standard errors: spread over replicas. "
              "Simulator test loss: "
              "population test loss (exact expectation over a fresh sample given M_t, gram_t).\n"]
    write_table(stem, rows, CSV_COLUMNS, body, title="DMFT vs finite-d GD (docs/theory.md §3, §3.1, §3.2, §5, §8)",
                command=cmd, started=started, wall=wall, root=root,
                timing=f"this process' CPU {time.process_time() - cpu0:.0f} s; DMFT replicas and simulator runs in "
                       f"{args.processes} worker processes", header=header)
    log(f"done in {wall / 60:.1f} min: {stem}.csv, {stem}.md")


def repo_root() -> str:
    """The repository root (the folder holding the theorykit package): tables/ and the command paths are relative
    to it."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
