#!/usr/bin/env python
"""Is GD beyond its edge of stability where the finite-d DMFT fails?  sigma = x + x^2/2 on phase retrieval, square
loss, eta = 0.5, delta = 8.437, d = 400 (issue 28 point 5: the finite-d midpoint's DMFT diverges before escape there).

    python scripts/edge_of_stability_check.py   # writes tables/edge_of_stability.{md,csv}

Part 1, the Hessian's right edge: per t, the bulk's right edge lambda_+ of the DMFT's law at t (``tk.hessian(problem,
t, d=400)``: the DMFT of n = delta d samples, its law's top tail truncated at n; at t = 0 also from the exact law of
(u, z) ~ N(0, I), 400 000 draws) against GD's own Hessian (1/n) sum_i D_i x_i x_i^T at the same t: GD from a random
unit-norm start with the hard direction removed from the gradient (the DMFT's no-overlap state), seeds 0..2, its
largest and third-largest eigenvalues (dense).  eta lambda > 2: beyond the edge of stability.

Part 3: GD's own samples with eta D_i / delta > 2 before it escapes (8 seeds, the full gradient), and the weight of
|u| > 4 in the DMFT from m0 against GD from the same start (16 seeds).

Part 2, the DMFT's collapse: the DMFT from the finite-d midpoint's median start m0 = 0.06785 (mirrored nodes, as
``theorykit threshold`` runs it) to t = 200 with several path budgets and seeds: the step at which it stopped (the
first replica whose C_theta blew up) and its largest cos^2 before.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import theorykit as tk
from theorykit.report.writer import now, regenerate_command, script_prog, write_table
from theorykit.spectra import HessianLaw, top_edge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACT, LINK, LOSS = "x + 0.5*x**2", "phase-retrieval", "square"
D_DIM, DELTA, ETA = 400, 8.437, 0.5
TIMES = (0, 5, 10, 20, 40)
SEEDS = 3
M0 = 0.06785
# (paths, replicas, seed)
BUDGETS = [(65536, 8, 0), (65536, 8, 1), (65536, 8, 2), (131072, 4, 0), (262144, 4, 0)]


def gd_path(n: int, seed: int, steps: int, start: str, hard_removed: bool = False):
    """GD on x + x^2/2, phase retrieval, square loss at d = D_DIM, n samples: yields (t, X, theta, u, residual,
    sigma') for t = 0 .. steps - 1, theta the iterate before step t's update.  start: "random" (unit norm),
    "orthogonal" (unit norm, no hard component) or "m0" (M0 along the hard direction plus a random complement);
    hard_removed: the hard direction removed from every gradient (the DMFT's no-overlap state).  Seeds as
    numpy.random.default_rng(seed): the data first, then the start."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D_DIM))
    y = X[:, 0] ** 2
    th = rng.standard_normal(D_DIM)
    if start != "random":
        th[0] = 0.0
    th /= np.linalg.norm(th)
    if start == "m0":
        th *= np.sqrt(1 - M0 ** 2)
        th[0] = M0
    for t in range(steps):
        u = X @ th
        res, sp1 = u + u * u / 2 - y, 1.0 + u
        yield t, X, th, u, res, sp1
        g = X.T @ (res * sp1)
        if hard_removed:
            g[0] = 0.0
        th -= ETA / n * g


def gd_tops(n: int) -> dict:
    """{t: [(lambda_max, lambda_3) per seed]} of GD's Hessian, hard direction removed from the gradient."""
    out: dict = {t: [] for t in TIMES}
    for seed in range(SEEDS):
        for t, X, _, _, res, sp1 in gd_path(n, seed, max(TIMES) + 1, "orthogonal", hard_removed=True):
            if t in out:
                ev = np.linalg.eigvalsh((X.T * (sp1 ** 2 + res)) @ X / n)
                out[t].append((float(ev[-1]), float(ev[-3])))
    return out


def gd_overshoot(n: int, seed: int) -> tuple:
    """(escape step, divergence step, max eta D_i / delta before escape, sample-steps with eta D_i / delta > 2 before
    escape) of GD from a random unit-norm start (the full gradient), 200 steps."""
    esc = div = None
    top, cnt = 0.0, 0
    with np.errstate(over="ignore", invalid="ignore"):
        for t, _, th, _, res, sp1 in gd_path(n, seed, 200, "random"):
            if not np.all(np.isfinite(res)) or np.abs(res).max() > 1e8:
                div = t
                break
            ratio = ETA * (sp1 ** 2 + res) / DELTA
            if esc is None and th[0] ** 2 / (th @ th) > 0.5:
                esc = t
            if esc is None:
                top, cnt = max(top, float(ratio.max())), cnt + int((ratio > 2).sum())
    return esc, div, top, cnt


def gd_u_tail(n: int, times) -> dict:
    """{t: (weight of |u| > 4 pooled over seeds, runs counted)}: GD from M0 along the hard direction plus a random
    unit complement, 16 seeds, a run counted at t while its cos^2 < 0.3."""
    acc: dict = {t: [] for t in times}
    for seed in range(16):
        with np.errstate(over="ignore", invalid="ignore"):
            for t, _, th, u, _, _ in gd_path(n, seed, max(times) + 1, "m0"):
                if not th[0] ** 2 / (th @ th) < 0.3:
                    break
                if t in acc:
                    acc[t].append(np.abs(u) > 4)
    return {t: (float(np.mean(np.concatenate(v))) if v else float("nan"), len(v)) for t, v in acc.items()}


def main(argv=()):
    t0, started = time.perf_counter(), now()
    n = int(round(DELTA * D_DIM))
    gd = gd_tops(n)
    rng = np.random.default_rng(9)
    u, z = rng.standard_normal(400_000), rng.standard_normal(400_000)
    exact0 = top_edge(HessianLaw.from_samples((1 + u) ** 2 + (u + u * u / 2 - z * z), None, DELTA), n=n)
    rows, lines = [], ["| t | predicted η λ₊ (DMFT law, top truncated at n) | GD η λ_max (seeds 0, 1, 2) | "
                       "GD η λ₃ | predicted η λ₊, untruncated law |", "|---|---|---|---|---|"]
    for t in TIMES:
        pr = tk.Problem(ACT, LINK, LOSS, delta=DELTA, eta=ETA, steps=max(t, 1))
        h = tk.hessian(pr, t, d=D_DIM)
        full = top_edge(h.law)
        pred = ETA * h.top_edge
        g1 = [ETA * a for a, _ in gd[t]]
        g3 = [ETA * b for _, b in gd[t]]
        rows.append(dict(t=t, predicted_eta_top_edge=pred, untruncated=ETA * full,
                         gd_eta_lambda_max=" ".join(f"{v:.4f}" for v in g1),
                         gd_eta_lambda_3=" ".join(f"{v:.4f}" for v in g3)))
        extra = f" (exact law: {ETA * exact0:.3f})" if t == 0 else ""
        lines.append(f"| {t} | {pred:.3f}{extra} | {', '.join(f'{v:.2f}' for v in g1)} | "
                     f"{', '.join(f'{v:.2f}' for v in g3)} | {ETA * full:.3f} |")
    lines += ["", "The DMFT from the median start m0 = 0.06785 (mirrored nodes) to t = 200:", "",
              "| paths | replicas | seed | stopped at step | max cos² before | seconds |", "|---|---|---|---|---|---|"]
    for paths, reps, seed in BUDGETS:
        s0 = time.perf_counter()
        pr = tk.Problem(ACT, LINK, LOSS, delta=DELTA, eta=ETA, steps=200, M0=[[M0]])
        r = tk.dmft(pr, d=D_DIM, paths=paths, replicas=reps, seed=seed, bias_check=False, mirror=True,
                    response="direct")
        M, C = np.asarray(r.M, dtype=float)[:, 0, 0], np.asarray(r.C_theta_tt, dtype=float)[:, 0, 0]
        c = M * M / (M * M + C)  # cos^2 between Theta and the hard direction (m = k = 1)
        step = None if r.diverged_at is None else int(r.diverged_at["step"])
        rows.append(dict(t="", paths=paths, replicas=reps, seed=seed, stopped_at=step, max_cos2=float(np.nanmax(c))))
        lines.append(f"| {paths} | {reps} | {seed} | {step if step is not None else 'reached 200'} | "
                     f"{float(np.nanmax(c)):.3f} | {time.perf_counter() - s0:.0f} |")
    # Part 3: GD's single samples beyond the per-sample bound before escape, and the tail of |u| against the DMFT's
    lines += ["", "GD's samples with η D_i/δ > 2 before escape (cos² < ½), random start, 200 steps, seeds 0..7:", "",
              "| seed | escape step | diverged at | max η D_i/δ before escape | sample-steps above 2 |",
              "|---|---|---|---|---|"]
    for seed in range(8):
        esc, div, top, cnt = gd_overshoot(n, seed)
        rows.append(dict(t="", seed=seed, escape=esc, diverged_at=div, max_eta_D_over_delta=top, steps_above_2=cnt))
        lines.append(f"| {seed} | {esc if esc is not None else 'none'} | {div if div is not None else 'none'} | "
                     f"{top:.2f} | {cnt} |")
    times = (10, 20, 40, 60, 80)
    pr = tk.Problem(ACT, LINK, LOSS, delta=DELTA, eta=ETA, steps=max(times), M0=[[M0]])
    r = tk.dmft(pr, d=D_DIM, keep_law_at=times, paths=65536, replicas=8, seed=0, bias_check=False)
    gd_tail = gd_u_tail(n, times)
    lines += ["", f"Weight of |u| > 4: the DMFT from m0 = {M0} (65 536 paths in 8 replicas) against GD (16 seeds from "
              "the same start, samples pooled while cos² < 0.3):", "", "| t | DMFT | GD (runs counted) |",
              "|---|---|---|"]
    for t in times:
        dm = "—"
        if r.laws is not None and t in r.laws:
            L = r.laws[t]
            dm = f"{float(L.weights @ (np.abs(L.r[:, 0]) > 4)):.1e}"
        g, k = gd_tail[t]
        lines.append(f"| {t} | {dm} | {g:.1e} ({k}) |")
    head = [f"σ = x + x²/2, phase retrieval y = z², square loss, η = {ETA}, δ = {DELTA}, d = {D_DIM} (n = {n}). "
            "Predicted: the bulk's right edge λ₊ of the Hessian H = (1/n) Σ D_i x_i x_iᵀ from the DMFT's law of D at t "
            "(`tk.hessian(problem, t, d=400).top_edge`); GD: the dense Hessian of GD at the same t, hard direction "
            "removed from the gradient, random unit-norm start. η λ > 2: beyond GD's edge of stability.", ""]
    write_table(os.path.join(ROOT, "tables", "edge_of_stability"), rows,
                ["t", "predicted_eta_top_edge", "untruncated", "gd_eta_lambda_max", "gd_eta_lambda_3", "paths",
                 "replicas", "seed", "stopped_at", "max_cos2", "escape", "diverged_at", "max_eta_D_over_delta",
                 "steps_above_2"], lines,
                title="GD beyond its edge of stability: x + x²/2 on phase retrieval, η = 0.5",
                command=regenerate_command(script_prog(__file__, ROOT), argv), started=started,
                wall=time.perf_counter() - t0, header=head, root=ROOT)
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
