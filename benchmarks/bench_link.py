#!/usr/bin/env python
"""Benchmark of `theorykit link` on multi-index links with k <= 3 (issue 30 point 5: each in <= 10 s on 2 cores).

    python benchmarks/bench_link.py   # writes tables/link_bench.{md,csv}

Each link runs as a new user runs it, `theorykit link L --json` in a fresh process (import, easy/hard subspaces,
delta_alg, delta_alg_hard); the wall time of that process, delta_alg and delta_alg_hard with their errors and the
hard threshold's method (its first words).  The links: the closed-form checks of issue 30 point 1, staircases and
links whose hard part given the easy coordinates is a shift, a scaled shift, a non-separable function of one or two
easy coordinates, two hard directions, jumps, noise, noisy staircases.  Run it on an otherwise idle machine.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from theorykit.report.writer import now, write_study

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKS = [
    # no easy direction: delta_alg of the whole link (closed forms in issue 30)
    "z1*z2", "sign(z1*z2)", "z1**2 + z2**2", "Abs(z1*z2)", "z1*z2*z3", "max(z1, z2, z3)",
    "tanh(z1*z2) + 0.2*eps", "z1*z2*z3 + 0.5*eps", "relu(z1*z2*z3 - 1)",
    # easy and hard directions: delta_alg_hard given the easy coordinates
    "z1 + z2**2", "z1 + z2**2 + z3**2", "z1 + z2*z3", "z1**2*z2 + z3", "z1 + sign(z1 + z2)*z3**2",
    "z1 + relu(z1)*z2**2", "z1 + tanh(z1)*z2**2 + z2**4", "sign(z1 + z2)*z3**2 + z1*z2",
    "sign(z3)*z1*z2 + z3**2", "z1 + z2 + relu(z1 - z2)*z3**2",
    "z1 + z2**2 + z1*z3**2", "z1 + Abs(z2) + z1*z3**2", "z1 + relu(z1)*z2**2 + relu(-z1)*z3**2",
    "z1 + z2 + (z1 - z2)*z3**2 + sin(z1 - z2)*z3**4", "z1 + z2 + sin(z1)*z3**2 + z2*z3**4",
    "sign(z1 + z2)*z3**2 + z1*z2 + z1*z3**4",
    # noisy staircases
    "z1 + z2**2 + 0.5*eps", "z1 + z2*z3 + eps", "z1 + relu(z1)*z2**2 + 0.1*eps", "z1 + z1**2*z2**2 + 0.3*eps",
    "z1 + z2**2 + z1*z3**2 + 0.3*eps",
]
GOAL = 10.0


def fmt(d) -> str:
    if d is None:
        return "—"
    if d.get("infinite"):
        return "∞"
    return f"{d['value']:.6g} ± {d['error']:.2g}" + (f" (exact {d['exact']})" if d.get("exact") else "")


def main(argv):
    started, t0 = now(), time.perf_counter()
    rows = []
    lines = ["| link | seconds | δ_alg | δ_alg_hard | how (hard) |", "|---|---|---|---|---|"]
    for lk in LINKS:
        t1 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "theorykit.cli", "link", lk, "--json"], capture_output=True,
                             text=True, check=True).stdout
        sec = time.perf_counter() - t1
        r = json.loads(out)
        da, dh = r.get("delta_alg"), r.get("delta_alg_hard")
        da = da if isinstance(da, dict) else {"value": da, "error": 0.0, "exact": None}
        how = (dh["method"] if dh else r.get("delta_alg_hard_reason", ""))[:70]
        rows.append(dict(link=lk, seconds=round(sec, 2), delta_alg=da.get("value"), delta_alg_error=da.get("error"),
                         delta_alg_hard=dh["value"] if dh else None, delta_alg_hard_error=dh["error"] if dh else None))
        lines.append(f"| `{lk}` | {'**' if sec > GOAL else ''}{sec:.1f}{'**' if sec > GOAL else ''} | {fmt(da)} | "
                     f"{fmt(dh)} | {how} |")
        print(lines[-1], flush=True)
    slow = [r["link"] for r in rows if r["seconds"] > GOAL]
    header = [f"Goal (issue 30 point 5): `theorykit link L` on any link with k <= 3 in <= {GOAL:g} s on 2 cores. "
              f"{len(rows) - len(slow)} of {len(rows)} links within it" + (f"; over it (bold): {', '.join(slow)}."
                                                                            if slow else ".")]
    return write_study("link_bench", __file__, argv, rows, lines, title="`theorykit link` on links with k <= 3: wall "
                       "time of a fresh process", header=header, started=started, t0=t0, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
