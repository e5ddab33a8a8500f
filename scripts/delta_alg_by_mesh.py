#!/usr/bin/env python
"""delta_alg of links of two Gaussian variables by triangles (theorykit.symbolic.links.delta_alg_simplex) against
values computed another way: the quadrature on the sphere (closed forms for homogeneous links), the additive-noise
quadrature, and Monte Carlo (cross-fitted, 8 x 2e6 samples) for links with no other deterministic route.

    python scripts/delta_alg_two_variables.py   # writes tables/delta_alg_two_variables.{md,csv}

Covered: |triangles - reference| <= the sum of the two stated errors.  The rule is run on every link, also on
one with a jump that delta_alg_simplex declines unless allow_jumps (column "used by link"): the stress case that
shows why.
"""
from __future__ import annotations

import os
import sys
import time

from theorykit.report.writer import now, regenerate_command, script_prog, write_table
from theorykit.symbolic.links import (delta_alg_additive, delta_alg_monte_carlo, delta_alg_simplex, delta_alg_sphere,
                                      make_link)

#: the finer rule (cells per axis, levels) run where Monte Carlo is the only other reference
FINER = (3200, 6400)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: (link, what kind of case, reference route: sphere / additive s / None)
CASES = [("z1*z2", "smooth, unbounded; log-singular density at 0", "sphere"),
         ("Abs(z1*z2)", "kinked, unbounded", "sphere"),
         ("z1**2 + z2**2", "smooth, unbounded; density jumps at 0", "sphere"),
         ("tanh(z1*z2)", "bounded (a monotone function of z1 z2)", "sphere"),
         ("Max(z1, 0)*z2", "kinked; an atom of mass 1/2 at y = 0", "sphere"),
         ("z**2 + 0.5*eps", "noisy single index, smooth", 0.5),
         ("sign(z**2 - 1) + 0.5*eps", "noisy single index, jumps in z at +-1", 0.5),
         ("z1**2 + tanh(z2)**2", "smooth, not homogeneous", None),
         ("cos(z1)*cos(z2)", "bounded, not homogeneous, many critical points", None),
         ("z1**2*exp(-z2**2)", "smooth, not homogeneous", None),
         ("z**2*(1 + 0.3*eps)", "noisy single index, multiplicative noise", None)]


def main(argv=()):
    t0, started = time.perf_counter(), now()
    rows = []
    lines = ["| link | case | triangles: δ_alg ± error | s | used by link | reference ± error | route "
             "| \\|difference\\| | covered | finer mesh (\\|change\\|) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for spec, kind, route in CASES:
        lk = make_link(spec)
        t = time.perf_counter()
        da = delta_alg_simplex(lk, allow_jumps=True)
        value, error = da.value, da.error
        secs = time.perf_counter() - t
        used = delta_alg_simplex(lk) is not None
        if route == "sphere":
            ref, how = delta_alg_sphere(lk), "sphere quadrature"
        elif route is not None:
            ref, how = delta_alg_additive(lk, route), "additive-noise quadrature"
        else:
            ref, how = delta_alg_monte_carlo(lk), "Monte Carlo (8 x 2e6)"
        finer = delta_alg_simplex(lk, allow_jumps=True, rule=FINER).value if route is None else None
        diff = abs(value - ref.value)
        ok = diff <= error + ref.error
        rows.append(dict(link=spec, case=kind, value=value, error=error, seconds=round(secs, 2), used_by_link=used,
                         reference=ref.value, reference_error=ref.error, reference_route=how, difference=diff,
                         covered=ok, finer_mesh=finer))
        lines.append(f"| `{spec}` | {kind} | {value:.7f} ± {error:.1e} | {secs:.1f} | {'yes' if used else 'no'} | "
                     f"{ref.value:.7f} ± {ref.error:.1e} | {how} | {diff:.1e} | {'yes' if ok else 'NO'} | "
                     + (f"{finer:.7f} ({abs(finer - value):.1e}) |" if finer is not None else "— |"))
        print(lines[-1], flush=True)
    head = ["delta_alg = 1/rho, rho the top eigenvalue of M -> E_y[G(y) M G(y)], G(y) = E[zz^T|y] - I.  Triangles: "
            "the exact law of y's piecewise-linear interpolant on 1200 (and 600) cells per axis of [-8, 8]^2 "
            "(docs/theory.md §2); error: twice the change between the two meshes.  s: its seconds on this machine.  "
            "Used by link: whether delta_alg_simplex (the analysis's tier) takes the link; it declines jumps (sign, "
            "Heaviside, floor, ceiling, Piecewise), whose smearing over one cell the two meshes do not measure.  "
            "Finer mesh: where Monte Carlo is the only other reference, the rule with 3200 (and 1600) cells per "
            "axis and 6400 levels, and its change from the value.",
            ""]
    write_table(os.path.join(ROOT, "tables", "delta_alg_two_variables"), rows, list(rows[0]), lines,
                title="delta_alg of two-variable links by triangles, against other routes",
                command=regenerate_command(script_prog(__file__, ROOT), argv), started=started,
                wall=time.perf_counter() - t0, header=head, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
