#!/usr/bin/env python
"""Golden outputs: fixed-seed results of every solver, to check that a restructuring moves no number.

    python scripts/golden.py --write      # record tests/golden/outputs.json from the current code
    python scripts/golden.py              # compare the current code with the record (max relative difference)

tests/test_golden.py runs the comparison (tolerance 1e-12 relative to each array's scale).  Regenerate the record
only together with a change that is meant to move numbers, and say so in the commit.

The record is bitwise only for one BLAS kernel: OpenBLAS picks its GEMM kernel by CPU, and the phase-retrieval DMFT
runs amplify the kernels' different rounding to ~1e-8 (measured: OPENBLAS_CORETYPE=Haswell vs the SkylakeX kernel
moved dmft_pr_C_mu by 3.6e-8, every other output by <= 1e-12).  So the script runs itself under the generic x86-64
kernel (OPENBLAS_CORETYPE=Prescott) with one BLAS thread, and the numba kernels (fastmath: vectorised reductions,
FMA) for the generic x86-64 CPU (NUMBA_CPU_NAME=generic: on an AMD EPYC without AVX-512 the host build moved
dmft_x2_C_mu by 2.6e-11, the generic build matches the record to 1e-14) (PINNED_ENV); those variables must be set
before numpy and numba load, hence the re-exec.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

PINNED_ENV = {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1", "NUMBA_CPU_NAME": "generic"}
if __name__ == "__main__" and any(os.environ.get(k) != v for k, v in PINNED_ENV.items()):
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
              {**os.environ, **PINNED_ENV})

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = os.path.join(ROOT, "tests", "golden", "outputs.json")


def _arr(v):
    return np.asarray(v, dtype=float).tolist()


def compute() -> dict:
    """Every entry: a name -> nested list of floats."""
    import theorykit as tk

    out = {}
    # DMFT: smooth easy link (direct Jacobians), forced Stein (with its bias check), hard link with tangents, a kink
    r = tk.dmft("tanh", "z+z**2/2", "square", 2, a=[1, -1], delta=2.0, eta=1.0, steps=8, paths=4096, replicas=2,
                seed=3, processes=1)
    out.update({f"dmft_easy_{k}": _arr(getattr(r, k)) for k in ("M", "gram", "train_loss", "test_loss")})
    r = tk.dmft("tanh", "z+z**2/2", "square", 1, delta=2.0, eta=1.0, steps=8, paths=4096, replicas=2, seed=3,
                response="stein", processes=1)
    out.update({f"dmft_stein_{k}": _arr(getattr(r, k)) for k in ("gram", "train_loss", "test_loss")})
    out["dmft_stein_gram_stderr"] = _arr(r.stderr["gram"])
    r = tk.dmft("gelu", "phase-retrieval", "square", 1, delta=4.0, eta=1.0, steps=10, paths=4096, replicas=2, seed=1,
                processes=1)
    out.update({f"dmft_pr_{k}": _arr(getattr(r, k)) for k in ("gram", "test_loss", "C_mu", "D_tail")})
    r = tk.dmft("relu", "phase-retrieval", "square", 1, delta=4.0, eta=1.0, steps=6, paths=4096, replicas=2, seed=2,
                processes=1)
    out.update({f"dmft_relu_{k}": _arr(getattr(r, k)) for k in ("gram", "test_loss", "C_mu")})
    r = tk.dmft("quad", "phase-retrieval", "square", 1, delta=4.0, eta=0.05, steps=12, paths=4096, replicas=2,
                seed=0, processes=1)
    out.update({f"dmft_x2_{k}": _arr(getattr(r, k)) for k in ("gram", "train_loss", "C_mu")})
    # closed forms
    c = tk.dynamics.dmft_closed_form("quad", "z+z**2/2", "square", 2, a=[1, -1], delta=2, eta=1).numeric()
    out.update({f"closed_{k}": _arr(v) for k, v in sorted(c.items())})
    from theorykit.dynamics import linear_gd_limit

    lin = linear_gd_limit(delta=2.0, eta=0.5, steps=10, ridge=0.1, noise=0.5)
    out.update({f"linear_{k}": _arr(getattr(lin, k)) for k in ("M", "gram", "train_loss", "test_loss")})
    # simulator: random and constrained GD, spectral initialisation
    s = tk.simulate("gelu", "phase-retrieval", "square", 1, delta=6.0, d=150, steps=15, eta=1.0, seed=4, n_test=1)
    out.update({f"sim_{k}": _arr(getattr(s, k)) for k in ("M", "gram", "train_loss", "population_test_loss")})
    s = tk.simulate("tanh", "z1 + z2**2", "square", 2, a=[1, -1], delta=3.0, d=120, steps=10, eta=1.0, seed=5,
                    constrained=True, n_test=1)
    out.update({f"sim_constrained_{k}": _arr(getattr(s, k)) for k in ("M", "gram", "train_loss")})
    s = tk.simulate("quad", "phase-retrieval", "square", 1, delta=3.0, d=120, steps=5, eta=0.05, seed=6,
                    init="spectral", n_test=1)
    out["sim_spectral_M"] = _arr(s.M)
    # spectra, links, Hermite, population loss
    p = tk.spectra.spectral_prediction("phase-retrieval", "(y-1)/(y+sqrt(2*delta)-1)", 2.0)
    out["spectral_prediction"] = _arr([p.top_eigenvalue, p.overlap2, p.bulk_edge])
    out["delta_alg_pr"] = _arr(float(tk.analyse_link("phase-retrieval").delta_alg.value))
    h = tk.hermite_coefficients("gelu", 4)
    out["hermite_gelu"] = _arr([float(c.value) for c in h.coefficients])
    net = tk.symbolic.Network("gelu", "square", 2, a=[1, -1])
    out["population_loss"] = _arr(tk.population.population_loss(net, tk.link("z+z**2/2"), np.array([[0.3, -0.2]]),
                                                     np.array([[1.0, 0.1], [0.1, 0.8]])).value)
    return out


def compare(new: dict, old: dict) -> dict:
    """name -> max |new - old| / max(|old|) (inf when the shapes or names differ)."""
    diff = {}
    for k in sorted(set(new) | set(old)):
        if k not in new or k not in old:
            diff[k] = float("inf")
            continue
        a, b = np.asarray(new[k], float), np.asarray(old[k], float)
        if a.shape != b.shape:
            diff[k] = float("inf")
            continue
        scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-300)
        diff[k] = float(np.max(np.abs(a - b))) / scale if b.size else 0.0
    return diff


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="record the current outputs")
    args = p.parse_args(argv)
    new = compute()
    if args.write:
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(PATH, "w") as f:
            json.dump(new, f, indent=0, sort_keys=True)
        print(f"wrote {len(new)} outputs to {os.path.relpath(PATH, ROOT)}")
        return 0
    with open(PATH) as f:
        old = json.load(f)
    diff = compare(new, old)
    for k, v in diff.items():
        print(f"{k:40s} {v:.3g}")
    worst = max(diff.values())
    print(f"max relative difference: {worst:.3g}")
    return 0 if worst <= 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
