#!/usr/bin/env python
"""delta_alg of links of two or three Gaussian variables by a mesh -- triangles for two
(theorykit.symbolic.links.delta_alg_simplex), Gauss-Legendre slices of triangles for three
(theorykit.symbolic.links.delta_alg_slices) -- against values computed another way: the quadrature on the sphere
(closed forms for homogeneous links), the additive-noise quadrature, and Monte Carlo (cross-fitted, 8 x 2e6 samples)
for links with no other deterministic route.

    python scripts/delta_alg_by_mesh.py                 # writes tables/delta_alg_two_variables.{md,csv}
    python scripts/delta_alg_by_mesh.py --variables 3   # writes tables/delta_alg_three_variables.{md,csv}

Covered: |mesh - reference| <= the sum of the two stated errors.  The rule is run on every link, also on one with a
jump that the analysis's tier declines unless allow_jumps (column "used by link"): the stress case that shows why.
A reference "sphere of u" is the sphere quadrature of the link u that y is a strictly monotone function of (the mesh
rule is run on y itself, which is not homogeneous).  A reference "relu of the product" is for y = max(z1 z2 z3 - c, 0):
flipping the signs of two coordinates keeps y, so G(y) = g(y) I with g(y) = E[z1^2 | y] - 1 and rho = E[g(y)^2]; the
law of u = z1 z2 z3 and E[z1^2 | u] are one-dimensional integrals of the product density K0(|v|)/pi of z2 z3
(adaptive quadrature, scipy); the atom y = 0 is u <= c.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from types import SimpleNamespace

from theorykit.report.writer import now, regenerate_command, script_prog, write_table
from theorykit.symbolic.links import (delta_alg_additive, delta_alg_monte_carlo, delta_alg_simplex, delta_alg_slices,
                                      delta_alg_sphere, make_link)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: per number of variables: (the rule, its name, the finer rule run where Monte Carlo is the only other reference,
#: the table, its title, the rule's description); cases: (link, what kind of case, reference route: "sphere",
#: "sphere of <u>", additive s, or None for Monte Carlo)
SETUPS = {
    2: dict(rule=delta_alg_simplex, name="triangles", finer=(3200, 6400), table="delta_alg_two_variables",
            title="delta_alg of two-variable links by triangles, against other routes",
            about="Triangles: the exact law of y's piecewise-linear interpolant on 1200 (and 600) cells per axis of "
                  "[-8, 8]^2 (docs/theory.md §2); error: twice the change between the two meshes.  Finer mesh: the "
                  "rule with 3200 (and 1600) cells per axis and 6400 levels",
            declines="jumps (sign, Heaviside, floor, ceiling, Piecewise), whose smearing over one cell the rule's "
                     "error does not measure",
            cases=[("z1*z2", "smooth, unbounded; log-singular density at 0", "sphere"),
                   ("Abs(z1*z2)", "kinked, unbounded", "sphere"),
                   ("z1**2 + z2**2", "smooth, unbounded; density jumps at 0", "sphere"),
                   ("tanh(z1*z2)", "bounded (a monotone function of z1 z2)", "sphere"),
                   ("Max(z1, 0)*z2", "kinked; an atom of mass 1/2 at y = 0", "sphere"),
                   ("z**2 + 0.5*eps", "noisy single index, smooth", 0.5),
                   ("sign(z**2 - 1) + 0.5*eps", "noisy single index, jumps in z at +-1", 0.5),
                   ("z1**2 + tanh(z2)**2", "smooth, not homogeneous", None),
                   ("cos(z1)*cos(z2)", "bounded, not homogeneous, many critical points", None),
                   ("z1**2*exp(-z2**2)", "smooth, not homogeneous", None),
                   ("z**2*(1 + 0.3*eps)", "noisy single index, multiplicative noise", None)]),
    3: dict(rule=delta_alg_slices, name="slices", finer=(8, 320, 2000), table="delta_alg_three_variables",
            title="delta_alg of three-variable links by slices, against other routes",
            about="Slices: Gauss-Legendre in z1, or in the variable y jumps across (6 nodes per panel, graded toward "
                  "the slices where y is constant, cut where y jumps), in "
                  "each slice the exact law of y's piecewise-linear interpolant on 160 cells per axis of [-8, 8]^2, "
                  "1000 quantile bins of y extrapolated in 1/B and 1/B^2 (docs/theory.md §2); error: twice the sum "
                  "of the changes with half the nodes per panel, half the cells, half the bins.  Finer rule: 8 "
                  "nodes per panel, 320 cells, 2000 bins",
            declines="jumps across a curve of several variables (sign(z1 z2 - 0.5)), whose smearing over one cell the "
                     "rule's error does not measure; jumps across one variable are sliced along it, with panel edges "
                     "where y jumps",
            cases=[("z1*z2*z3", "smooth, unbounded; the slice z1 = 0 is constant", "sphere"),
                   ("z1*z2*z3 + (z1*z2*z3)**3", "not homogeneous, heavy tails (a monotone function of z1 z2 z3)",
                    "sphere of z1*z2*z3"),
                   ("tanh(z1*z2*z3)", "bounded (a monotone function of z1 z2 z3)", "sphere of z1*z2*z3"),
                   ("Abs(z1*z2) + z3**2", "kinked, unbounded", "sphere"),
                   ("z1*z2 + z3**2", "smooth, unbounded, not a product", "sphere"),
                   ("Max(z1, 0)*z2*z3", "kinked; an atom of mass 1/2 at y = 0", "sphere"),
                   ("z1*z2 + 0.5*eps", "noisy two-index, smooth", 0.5),
                   ("tanh(z1*z2) + 0.2*eps", "noisy two-index, bounded", 0.2),
                   ("z1**2 + z1*z2 + 0.3*eps", "noisy two-index, unbounded", 0.3),
                   ("sign(z1*z2 - 0.5) + 0.5*eps", "noisy two-index, jumps on a hyperbola", 0.5),
                   ("sign(z1)*z2*z3", "a jump across z1 = 0 (a panel edge)", "sphere"),
                   ("sign(z3)*z1*z2 + z3**2", "a jump across z3 = 0: z3 sliced", "sphere"),
                   ("sign(z1**2 - 1)*z1*z2 + 0.3*eps", "noisy two-index, jumps across z1 = +-1", 0.3),
                   ("cos(z1)*z2*z3", "not homogeneous; constant slices at z1 = pi/2 + j pi", None),
                   ("exp(z1)*z2*z3", "not homogeneous, heavy tails", None),
                   ("Max(z1*z2*z3 - 1, 0)", "kinked; an atom of mass 0.93 at y = 0", "relu of the product 1"),
                   ("z1*z2*(1 + 0.3*eps**2)", "noisy two-index, multiplicative noise", None)]),
}


def relu_of_product(c):
    """delta_alg of y = max(z1 z2 z3 - c, 0), c > 0, and an error bound (module docstring: "relu of the product");
    c None: of y = z1 z2 z3 itself (a check of the integrals against the sphere quadrature's 2.5651804)."""
    import numpy as np
    from scipy import integrate, special

    def moment(u: float, k: int) -> float:  # E[z1^k delta(u - z1 z2 z3)], u > 0: both signs of z1 alike
        def f(a):
            return 2 * a ** k * np.exp(-a * a / 2) / np.sqrt(2 * np.pi) * special.k0(u / a) / (np.pi * a)
        parts = [integrate.quad(f, lo, hi, limit=200, epsabs=1e-14, epsrel=1e-12) for lo, hi in ((0, 1), (1, np.inf))]
        return sum(v for v, _ in parts)

    def spread(u):  # (E[z1^2 | u] - 1)^2 p(u); 0 where p(u) underflows (far tail)
        m0 = moment(u, 0)
        return (moment(u, 2) / m0 - 1) ** 2 * m0 if m0 > 0 else 0.0

    def over(h, lo, hi=np.inf):
        return integrate.quad(h, lo, hi, limit=400, epsabs=1e-13, epsrel=1e-11)

    if c is None:  # u and -u alike: twice the half-line
        (a, ea), (b, eb) = over(spread, 0, 1), over(spread, 1)
        return 1 / (2 * (a + b)), 2 * (ea + eb) / (2 * (a + b)) ** 2
    p1, e1 = over(lambda u: moment(u, 0), c)         # P(u > c)
    a2, e2 = over(lambda u: moment(u, 2), c)         # E[z1^2; u > c]
    p0 = 1 - p1
    g0 = (1 - a2) / p0 - 1                           # g on the atom y = 0
    cont, e3 = over(spread, c)
    rho = p0 * g0 ** 2 + cont
    err_rho = e3 + (abs(g0) * 2 + g0 ** 2) * (e1 + e2) / p0 + 1e-10
    return 1 / rho, err_rho / rho ** 2


def main(argv=()):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variables", type=int, choices=sorted(SETUPS), default=2,
                    help="Gaussian variables of the links (latent ones and eps): 2 (triangles) or 3 (slices)")
    args = ap.parse_args(argv)
    setup = SETUPS[args.variables]
    rule, name = setup["rule"], setup["name"]
    t0, started = time.perf_counter(), now()
    rows = []
    lines = [f"| link | case | {name}: δ_alg ± error | s | used by link | reference ± error | route "
             "| \\|difference\\| | covered | finer rule (\\|change\\|) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for spec, kind, route in setup["cases"]:
        lk = make_link(spec)
        t = time.perf_counter()
        da = rule(lk, allow_jumps=True)
        value, error = da.value, da.error
        secs = time.perf_counter() - t
        used = rule(lk) is not None
        if isinstance(route, str) and route.startswith("sphere"):
            inner = route[len("sphere of "):] if route != "sphere" else spec
            ref, how = delta_alg_sphere(make_link(inner)), ("sphere quadrature" if route == "sphere" else
                                                            f"sphere quadrature of {inner}")
        elif isinstance(route, str) and route.startswith("relu of the product"):
            value_, error_ = relu_of_product(float(route.split()[-1]))
            ref, how = SimpleNamespace(value=value_, error=error_), "relu of the product: symmetry and 1-D integrals"
        elif route is not None:
            ref, how = delta_alg_additive(lk, route), "additive-noise quadrature"
        else:
            ref, how = delta_alg_monte_carlo(lk), "Monte Carlo (8 x 2e6)"
        finer = (rule(lk, allow_jumps=True, rule=setup["finer"]).value
                 if route is None or str(route).startswith("relu of the product") else None)
        diff = abs(value - ref.value)
        ok = diff <= error + ref.error
        rows.append(dict(link=spec, case=kind, value=value, error=error, seconds=round(secs, 2), used_by_link=used,
                         reference=ref.value, reference_error=ref.error, reference_route=how, difference=diff,
                         covered=ok, finer_rule=finer))
        lines.append(f"| `{spec}` | {kind} | {value:.7f} ± {error:.1e} | {secs:.1f} | {'yes' if used else 'no'} | "
                     f"{ref.value:.7f} ± {ref.error:.1e} | {how} | {diff:.1e} | {'yes' if ok else 'NO'} | "
                     + (f"{finer:.7f} ({abs(finer - value):.1e}) |" if finer is not None else "— |"))
        print(lines[-1], flush=True)
    head = ["delta_alg = 1/rho, rho the top eigenvalue of M -> E_y[G(y) M G(y)], G(y) = E[zz^T|y] - I.  "
            + setup["about"] + ", where Monte Carlo is the only other reference, and its change from the value.  "
            "s: the rule's seconds on this machine.  Used by link: whether the rule (the analysis's tier) takes the "
            "link; it declines " + setup["declines"] + ".",
            ""]
    write_table(os.path.join(ROOT, "tables", setup["table"]), rows, list(rows[0]), lines, title=setup["title"],
                command=regenerate_command(script_prog(__file__, ROOT), argv), started=started,
                wall=time.perf_counter() - t0, header=head, root=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
