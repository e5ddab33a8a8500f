#!/usr/bin/env python
"""The DMFT's verdict where a divergence comes from rare paths, against GD at finite d.

    python scripts/dmft_rare_paths.py     # writes tables/dmft_rare_paths.{md,csv}

Problem: sigma = x + x^2/2, y = z^2 (phase retrieval), square loss, delta = 8.23, 200 steps, eta = 0.5 and 5.
DMFT: ``theorykit.dmft`` with its defaults, without d (the d -> infinity DMFT: "unreliable" when its divergence is
driven by paths beyond the latent 1/n quantile of n = DMFT_REACH samples) and with d = 400, 1600 (the latent tail
truncated at n = delta d).  GD: ``theorykit.simulate`` from random starts, seeds 0.. (16 at d = 400, 4 at d = 1600):
how many diverge within the steps, and the earliest and latest step at which they do.
"""
from __future__ import annotations

import os
import sys
import time

import theorykit as tk
from theorykit.report.writer import now, regenerate_command, write_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBLEM = dict(activation="x + 0.5*x**2", link="phase-retrieval", loss="square", delta=8.23, steps=200)
SEEDS = {400: 16, 1600: 4}


def main(argv=()):
    t0, started = time.perf_counter(), now()
    rows = []
    for eta in (0.5, 5.0):
        for d in (None, 400, 1600):
            s = time.perf_counter()
            r = tk.dmft(**PROBLEM, eta=eta, d=d)
            rows.append({"eta": eta, "who": "DMFT", "d": d or "", "status": r.status,
                         "step": (r.diverged_at or {}).get("step", ""), "runs": "", "diverged": "",
                         "excluded_weight": r.settings["excluded_weight"], "seconds": time.perf_counter() - s,
                         "message": (r.diverged_at or {}).get("hint", "")})
            print(rows[-1], flush=True)
        for d, seeds in SEEDS.items():
            s = time.perf_counter()
            steps = []
            for seed in range(seeds):
                g = tk.simulate(**PROBLEM, eta=eta, d=d, seed=seed)
                if g.status != "ok":
                    steps.append(int(g.diverged_at["step"]))
            rows.append({"eta": eta, "who": "GD", "d": d, "status": f"{len(steps)}/{seeds} diverged",
                         "step": (f"{min(steps)}..{max(steps)}" if steps else ""), "runs": seeds,
                         "diverged": len(steps), "excluded_weight": "", "seconds": time.perf_counter() - s,
                         "message": " ".join(str(v) for v in steps)})
            print(rows[-1], flush=True)
    lines = ["| eta | who | d | status | step (GD: first..last divergence) | excluded weight | s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        w = f"{r['excluded_weight']:.2g}" if r["excluded_weight"] != "" else ""
        lines.append(f"| {r['eta']:g} | {r['who']} | {r['d'] or 'inf'} | {r['status']} | {r['step']} | {w} | "
                     f"{r['seconds']:.0f} |")
    lines += ["", "DMFT messages:", ""]
    lines += [f"* eta {r['eta']:g}, d = {r['d'] or 'inf'}: {r['message']}" for r in rows
              if r["who"] == "DMFT" and r["message"]]
    header = ["sigma = x + x^2/2, phase retrieval, square loss, delta = 8.23, 200 steps.  DMFT: defaults (65536 paths "
              "in 8 replicas); d = inf is the d -> infinity DMFT, d = 400, 1600 truncate the latent tail at n = delta "
              "d.  GD: simulate, seeds 0.. (the steps at which the diverging seeds diverged are in the CSV's "
              "message).\n"]
    return write_table(os.path.join(ROOT, "tables", "dmft_rare_paths"), rows, list(rows[0]), lines,
                       title="DMFT divergence through rare paths against GD at finite d",
                       command=regenerate_command("python scripts/dmft_rare_paths.py", argv),
                       started=started, wall=time.perf_counter() - t0, header=header, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
