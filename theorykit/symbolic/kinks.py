"""Kinks: where an ingredient's first derivative jumps (docs/theory.md §3.1).

A kink of the activation at x_k with jump J_k = sigma'(x_k+) - sigma'(x_k-) puts J_k delta(x - x_k) into sigma''.
A finite-n Hessian never sees it (no sample sits on a kink), but the DMFT's responses are Gaussian averages and
must keep it.  This module finds the kinks of sigma exactly where SymPy can locate them and numerically otherwise:

* candidate points: the zeros of the arguments of Heaviside, DiracDelta, sign and Abs, of the differences of the
  arguments of Max and Min, and of the boundaries of Piecewise conditions, located on a grid of [-X_RANGE, X_RANGE]
  by sign changes and refined by Brent's method;
* a scan of sigma' on that grid for jumps the candidates missed (a user function of unknown structure), refined by
  bisection;
* at every point, the one-sided limits of sigma and sigma' (evaluated at x_k +- h for two h, which must agree): a
  point whose sigma' jumps by more than JUMP_TOL is a kink; a point where sigma itself jumps is a discontinuity,
  which the DMFT refuses (its D would carry derivatives of Dirac terms).

For the loss only whether l' jumps in yhat matters (the DMFT then takes its equal-time response from Stein's lemma,
which needs no location): :func:`loss_derivative_jumps`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp
from scipy.optimize import brentq

from .lambdify import drop_dirac, lambdify_safe

#: kinks are searched in [-X_RANGE, X_RANGE] (pre-activations beyond it have Gaussian weight < 1e-300 at unit scale)
X_RANGE = 40.0
#: grid step of the scans
GRID_STEP = 2e-3
#: a jump of sigma' smaller than this is not a kink
JUMP_TOL = 1e-7


@dataclass(frozen=True)
class Kinks:
    """Kinks of sigma: ``points`` (x_k,) and ``jumps`` (J_k = sigma'(x_k+) - sigma'(x_k-),); ``discontinuities``:
    points where sigma itself jumps (the DMFT refuses these); ``how``: how each point was found."""

    points: tuple
    jumps: tuple
    discontinuities: tuple
    how: tuple

    def __bool__(self):
        return bool(self.points)

    def as_dict(self) -> dict:
        return {"points": list(self.points), "jumps": list(self.jumps),
                "discontinuities": list(self.discontinuities), "how": list(self.how)}


def _arguments(expr: sp.Expr, var: sp.Symbol) -> list:
    """Expressions g(var) whose zeros may be non-smooth points of expr."""
    out = []
    for node in sp.preorder_traversal(expr):
        if isinstance(node, (sp.Heaviside, sp.DiracDelta, sp.sign, sp.Abs)):
            out.append(node.args[0])
        elif isinstance(node, (sp.Max, sp.Min)):
            args = node.args
            out.extend(args[i] - args[j] for i in range(len(args)) for j in range(i + 1, len(args)))
        elif isinstance(node, sp.Piecewise):
            for _, cond in node.args:
                for rel in cond.atoms(sp.core.relational.Relational):
                    out.append(rel.lhs - rel.rhs)
    return [g for g in out if getattr(g, "has", lambda *_: False)(var)]


def _zeros(g: sp.Expr, var: sp.Symbol, grid: np.ndarray) -> list:

    try:  # exact roots of a low-degree polynomial argument (max(0, x), abs(x - 1), ...)
        poly = sp.Poly(g, var)
        if poly.degree() <= 4 and poly.get_domain() in (sp.ZZ, sp.QQ):
            return [float(r) for r in poly.real_roots() if abs(float(r)) <= grid[-1]]
    except (sp.PolynomialError, sp.polys.polyerrors.GeneratorsNeeded, ValueError, TypeError, NotImplementedError):
        pass
    f = lambdify_safe([var], drop_dirac(g)[0], "kink_argument")
    v = np.asarray(f(grid), dtype=float)
    out = [float(x) for x in grid[v == 0.0]]
    s = np.sign(v)
    idx = np.flatnonzero((s[:-1] * s[1:] < 0) & np.isfinite(v[:-1]) & np.isfinite(v[1:]))
    for i in idx:
        try:
            out.append(float(brentq(lambda u: float(f(np.array(u))), grid[i], grid[i + 1], xtol=1e-15, rtol=4e-16)))
        except (ValueError, RuntimeError):
            continue
    return out


def _limits(f, x: float, h: float):
    return float(f(np.array(x - h))), float(f(np.array(x + h)))


def find_kinks(expr: sp.Expr, var: sp.Symbol) -> Kinks:
    """Kinks and discontinuities of sigma(var) = expr on [-X_RANGE, X_RANGE] (see the module docstring)."""

    s0 = lambdify_safe([var], expr, "sigma")
    d1_expr = sp.diff(expr, var)
    s1 = lambdify_safe([var], drop_dirac(d1_expr)[0], "sigma_prime")
    grid = np.arange(-X_RANGE, X_RANGE + GRID_STEP / 2, GRID_STEP)
    cands = {}
    for g in _arguments(expr, var) + _arguments(d1_expr, var):
        for x in _zeros(g, var, grid):
            cands.setdefault(round(x, 12), ("symbolic", x))
    # scan sigma' (and sigma) for jumps the candidates missed
    for f, what in ((s1, "scan of sigma'"), (s0, "scan of sigma")):
        v = np.asarray(f(grid), dtype=float)
        dv = np.abs(np.diff(v))
        nb = np.maximum(np.concatenate([[0.0], dv[:-1]]), np.concatenate([dv[1:], [0.0]]))
        for i in np.flatnonzero((dv > 1e-6) & (dv > 8 * nb + 1e-9)):
            lo, hi = float(grid[i]), float(grid[i + 1])
            vl, vh = float(v[i]), float(v[i + 1])
            for _ in range(60):  # bisection on "which side's value is mid closer to"
                mid = 0.5 * (lo + hi)
                vm = float(f(np.array(mid)))
                if abs(vm - vl) < abs(vm - vh):
                    lo, vl = mid, vm
                else:
                    hi, vh = mid, vm
            x = 0.5 * (lo + hi)
            if not any(abs(x - c[1]) < 1e-9 for c in cands.values()):
                cands[round(x, 12)] = (what, x)
    points, jumps, disc, how = [], [], [], []
    for _, (src, x) in sorted(cands.items()):
        scale = max(1.0, abs(x))
        j1 = [np.subtract(*_limits(s1, x, h)[::-1]) for h in (1e-9 * scale, 1e-7 * scale)]
        j0 = [np.subtract(*_limits(s0, x, h)[::-1]) for h in (1e-9 * scale, 1e-7 * scale)]
        if not all(np.isfinite(j0 + j1)):
            continue
        if abs(j0[0]) > 1e-6 and abs(j0[0] - j0[1]) < 1e-3 * abs(j0[0]):
            disc.append(float(x))
            continue
        if abs(j1[0]) > JUMP_TOL and abs(j1[0] - j1[1]) <= 1e-4 * max(1.0, abs(j1[0])):
            points.append(float(x))
            jumps.append(float(j1[0]))
            how.append(src)
    return Kinks(points=tuple(points), jumps=tuple(jumps), discontinuities=tuple(disc), how=tuple(how))


def loss_derivative_jumps(expr: sp.Expr, y: sp.Symbol, yhat: sp.Symbol) -> bool:
    """Whether l'(y, yhat) = dl/dyhat jumps in yhat (hinge, absolute loss): a jump of l' at the non-smooth points of l
    (:func:`find_kinks` in yhat) for a set of y values.  (A DiracDelta in SymPy's d^2 l/dyhat^2 is no proof: SymPy
    differentiates every Piecewise branch, also where the branch does not apply, e.g. Huber's.)"""
    if not _arguments(expr, yhat) and not _arguments(sp.diff(expr, yhat), yhat):
        return False
    for yv in (-2.3, -1.0, -0.41, 0.37, 1.0, 1.9, 3.1):
        e = expr.subs(y, yv)
        if find_kinks(e, yhat):
            return True
    return False
