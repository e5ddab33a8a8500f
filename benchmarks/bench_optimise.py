"""Benchmark of the activation search (theorykit.optimise; issue 29 point 5: a 1-parameter search with the finite-d
objective at m = 1 in <= 15 min on 2 cores, a 2-parameter one in <= 45 min).

Every section runs `tk.optimise` as `theorykit optimise` does by default (grid 5 per parameter, up to 2 quadratic
refinements, the baseline GeLU, the ingredients), from an empty cache, with 2 processes, and reports:

* the wall time against its goal;
* the floor the search cannot beat with this objective: its evaluations' own compute time (the sum of their
  seconds) shared by the processes, and the time of one evaluation (a search needs at least grid^p of them);
* the brute-force grid the search replaces: 21 points per parameter at the measured mean cost per evaluation.

Sections (run all, or pick with --only):

* one:     GeLU's sharpness a in [0.4, 3], sigma_a = x (1 + erf(a x / sqrt 2)) / 2, centred phase retrieval
           (y = z^2 - 1, square loss, eta = 1), objective finite_d@d=400:T=200, bracket [2, 20].
* one-b:   the same family on the bounded sign link (logistic loss), bracket [3, 20].
* two-b:   sigma_{a,c} = sigma_a + c x^2, a in [0.4, 3], c in [-0.3, 0.3], on the bounded sign link (logistic
           loss), objective finite_d@d=400:T=200, bracket [3, 20].
* two:     the same two-parameter family on centred phase retrieval, bracket [2, 20].

    python benchmarks/bench_optimise.py [--only one,one-b,two-b,two] [--processes 2]

Results with their date and machine: tables/optimise_bench.md.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import theorykit as tk

SHARP = "x*(1 + erf(a*x/sqrt(2)))/2"
CASES = {
    "one": (SHARP, ["a=0.4:3"], "z**2 - 1", "square", (2.0, 20.0), 15),
    "one-b": (SHARP, ["a=0.4:3"], "sign-symmetric", "logistic", (3.0, 20.0), 15),
    "two-b": (SHARP + " + c*x**2", ["a=0.4:3", "c=-0.3:0.3"], "sign-symmetric", "logistic", (3.0, 20.0), 45),
    "two": (SHARP + " + c*x**2", ["a=0.4:3", "c=-0.3:0.3"], "z**2 - 1", "square", (2.0, 20.0), 45),
}
OBJECTIVE = "finite_d@d=400:T=200"


def run(name, processes):
    family, params, link, loss, bracket, goal = CASES[name]
    with tempfile.TemporaryDirectory(prefix="bench_optimise_") as cache:
        t0 = time.perf_counter()
        r = tk.optimise(family, link, params, OBJECTIVE, loss=loss, eta=1.0, deltas=bracket, cache=cache,
                        processes=processes)
        wall = time.perf_counter() - t0
    secs = [e["seconds"] for e in r.evaluations]
    n, npar = len(secs), len(params)
    mean = sum(secs) / max(n, 1)
    ok = sum(e["status"] == "ok" for e in r.evaluations)
    best = ", ".join(f"{k} = {v:.3g} ± {r.best['param_stderr'][k]:.2g}" for k, v in r.best["params"].items())
    print(f"[{name}] {family} on {link} ({loss} loss), {OBJECTIVE}, {processes} processes: {wall / 60:.1f} min "
          f"(goal <= {goal} min); {n} evaluations ({ok} ok), {mean:.0f} s each on average (the floor: their "
          f"compute shared by {processes} processes = {sum(secs) / processes / 60:.1f} min; the baseline and the "
          f"ingredients take the rest); a brute-force grid of 21^{npar} points at this cost: "
          f"{21 ** npar * mean / processes / 60:.0f} min.  Best {best}: {r.best['value']:.3f} ± "
          f"{r.best['stderr']:.2g}; GeLU {r.baseline['value']:.3f} ± {r.baseline['stderr']:.2g}.", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(CASES), help="comma-separated sections: " + ", ".join(CASES))
    ap.add_argument("--processes", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()
    for name in args.only.split(","):
        if name not in CASES:
            raise SystemExit(f"unknown section {name!r}: one of {', '.join(CASES)}")
        run(name, args.processes)


if __name__ == "__main__":
    main()
