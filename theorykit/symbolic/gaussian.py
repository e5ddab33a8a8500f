"""Gaussian expectations E[g(G_1, ..., G_p)], G_i i.i.d. N(0, 1), in tiers.

Tier ``exact`` (closed form, this module's own engine, fast and deterministic)
    Each term of the expanded integrand factorises over the variables, and each one-dimensional factor is, on
    the pieces between the breakpoints of its non-smooth parts (Heaviside, sign, Abs, Max, Min, Piecewise),
        c * x^n * exp(-beta x^2) * [erf(a x)]^{0,1,2}    (erf only on the whole line).
    Formulas (Stein's lemma E[G f(G)] = E[f'(G)] and Gaussian rescaling s = (1 + 2 beta)^(-1/2)):
        E[G^n exp(-beta G^2) F(G)] = s^(n+1) E[G^n F(sG)],
        E[G^n 1{p<G<q}] = (n-1) E[G^(n-2) 1{p<G<q}] + p^(n-1) phi(p) - q^(n-1) phi(q),
        E[G erf(aG)] = 2a / sqrt(pi (1 + 2a^2)),
        E[erf(aG) erf(bG)] = (2/pi) asin(2ab / sqrt((1 + 2a^2)(1 + 2b^2)))   (Williams 1997).
Tier ``exact`` (``sympy.integrate``, run in a child process under a time limit, one-dimensional only)
Tier ``quadrature``
    one variable: mpmath tanh-sinh quadrature split at the breakpoints, 30 digits, with mpmath's error estimate;
    two or three variables: tensor Gauss-Hermite, error estimated from doubling the order.
Tier ``monte-carlo``: more than three variables; the value with its standard error (seeded).
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp_proc
import os
import signal
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import mpmath
import numpy as np
import sympy as sp

from .. import conventions as cv
from ..errors import TheorykitError, TimeLimitError
from ..rules import gauss_hermite
from . import functions as fn

# integrands with these never close under sympy.integrate against a Gaussian: skip that (slow) tier
_NO_SYMPY = (sp.tanh, sp.sinh, sp.cosh, fn.sigmoid, fn.softplus, sp.atan, sp.log)
_NONSMOOTH = (sp.Heaviside, sp.sign, sp.Abs, sp.Max, sp.Min, sp.Piecewise)


@dataclass(frozen=True)
class Expectation:
    """A Gaussian expectation and how it was obtained.

    exact: the closed form (SymPy) or None; value: its float value (None if the closed form has free parameters);
    tier: "exact" | "quadrature" | "monte-carlo"; error: absolute error estimate (0.0 for exact, rounding aside;
    the standard error for Monte Carlo); method: a short description of the method.
    """

    exact: Optional[sp.Expr]
    value: Optional[float]
    tier: str
    error: float
    method: str


# ----------------------------------------------------------------------------------------------- exact engine
def double_factorial(m: int) -> int:
    """(m)!! with (-1)!! = 0!! = 1."""
    out = 1
    while m > 1:
        out *= m
        m -= 2
    return out


def _gauss_exp_moment(m: int, c):
    """E[G^m exp(-c G^2)]."""
    if m % 2:
        return sp.Integer(0)
    return (1 + 2 * c) ** sp.Rational(-(m + 1), 2) * double_factorial(m - 1)


@lru_cache(maxsize=4096)
def _erf1(n: int, a):
    """E[G^n erf(aG)]."""
    if n % 2 == 0:
        return sp.Integer(0)
    if n == 1:
        return 2 * a / sp.sqrt(sp.pi * (1 + 2 * a ** 2))
    return (n - 1) * _erf1(n - 2, a) + 2 * a / sp.sqrt(sp.pi) * _gauss_exp_moment(n - 1, a ** 2)


def _exp_erf1(m: int, c, b):
    """E[G^m exp(-c G^2) erf(bG)]."""
    s = 1 / sp.sqrt(1 + 2 * c)
    return s ** (m + 1) * _erf1(m, b * s)


@lru_cache(maxsize=4096)
def _erf2(n: int, a, b):
    """E[G^n erf(aG) erf(bG)]."""
    if n % 2:
        return sp.Integer(0)
    if n == 0:
        return 2 / sp.pi * sp.asin(2 * a * b / sp.sqrt((1 + 2 * a ** 2) * (1 + 2 * b ** 2)))
    return ((n - 1) * _erf2(n - 2, a, b) + 2 * a / sp.sqrt(sp.pi) * _exp_erf1(n - 1, a ** 2, b)
            + 2 * b / sp.sqrt(sp.pi) * _exp_erf1(n - 1, b ** 2, a))


def _phi(p):
    return sp.Integer(0) if p in (sp.oo, -sp.oo) else sp.exp(-p ** 2 / 2) / sp.sqrt(2 * sp.pi)


def _Phi(p):
    if p == sp.oo:
        return sp.Integer(1)
    if p == -sp.oo:
        return sp.Integer(0)
    return (1 + sp.erf(p / sp.sqrt(2))) / 2


def truncate(n: int, p, q):
    """E[G^n 1{p < G < q}]."""
    if n == 0:
        return _Phi(q) - _Phi(p)
    if n == 1:
        return _phi(p) - _phi(q)
    bp = 0 if p == -sp.oo else p ** (n - 1) * _phi(p)
    bq = 0 if q == sp.oo else q ** (n - 1) * _phi(q)
    return (n - 1) * truncate(n - 2, p, q) + bp - bq


class NotClosed(Exception):
    pass


def _smooth_piece(e: sp.Expr, v: sp.Symbol, lo, hi):
    """E[e(G) 1{lo < G < hi}] for smooth e in the supported class, else raise NotClosed."""
    e = e.replace(sp.erfc, lambda u: 1 - sp.erf(u))
    e = sp.expand(e, power_exp=True, mul=True, multinomial=True, power_base=False, log=False)
    total = sp.Integer(0)
    for term in sp.Add.make_args(e):
        const, n, beta, erfs = sp.Integer(1), 0, sp.Integer(0), []
        for f in sp.Mul.make_args(term):
            if not f.has(v):
                const *= f
            elif f == v:
                n += 1
            elif f.is_Pow and f.base == v and f.exp.is_Integer and f.exp > 0:
                n += int(f.exp)
            elif isinstance(f, sp.exp) or (f.is_Pow and isinstance(f.base, sp.exp) and f.exp.is_Integer):
                arg = f.args[0] if isinstance(f, sp.exp) else f.base.args[0] * f.exp
                poly = sp.Poly(sp.expand(arg), v) if arg.is_polynomial(v) else None
                if poly is None or poly.degree() > 2:
                    raise NotClosed
                c = poly.all_coeffs()[::-1] + [0, 0, 0]
                if c[1] != 0:
                    raise NotClosed
                const *= sp.exp(c[0])
                beta -= c[2]
            elif isinstance(f, sp.erf) or (f.is_Pow and isinstance(f.base, sp.erf) and f.exp.is_Integer
                                           and f.exp > 0):
                base, k = (f, 1) if isinstance(f, sp.erf) else (f.base, int(f.exp))
                a = sp.simplify(base.args[0] / v)
                if a.has(v):
                    raise NotClosed
                erfs += [a] * k
            else:
                raise NotClosed
        if len(erfs) > 2 or (erfs and (lo != -sp.oo or hi != sp.oo)):
            raise NotClosed
        if beta.is_number and beta <= -sp.Rational(1, 2):
            raise NotClosed  # not integrable
        s = 1 / sp.sqrt(1 + 2 * beta)
        if not erfs:
            val = truncate(n, lo if lo == -sp.oo else lo / s, hi if hi == sp.oo else hi / s)
        elif len(erfs) == 1:
            val = _erf1(n, erfs[0] * s)
        else:
            val = _erf2(n, erfs[0] * s, erfs[1] * s)
        total += const * s ** (n + 1) * val
    return total


def _switches(e: sp.Expr, v: sp.Symbol):
    """Functions of v whose sign changes switch a non-smooth part of e."""
    out = []
    for atom in e.atoms(*_NONSMOOTH):
        if not atom.has(v):
            continue
        if isinstance(atom, (sp.Heaviside, sp.sign, sp.Abs)):
            out.append(atom.args[0])
        elif isinstance(atom, (sp.Max, sp.Min)):
            args = atom.args
            out += [args[i] - args[j] for i in range(len(args)) for j in range(i + 1, len(args))]
        else:  # Piecewise
            for _, cond in atom.args:
                if isinstance(cond, sp.core.relational.Relational):
                    out.append(cond.lhs - cond.rhs)
                elif cond not in (sp.true, sp.false):
                    raise NotClosed
    return out


def breakpoints(e: sp.Expr, v: sp.Symbol) -> list:
    """Real points where a non-smooth part of e switches, sorted (SymPy numbers); raises NotClosed if unknown."""
    pts = set()
    for g in _switches(e, v):
        if g.has(sp.DiracDelta):
            raise NotClosed
        try:
            sols = sp.solve(g, v)
        except Exception:
            raise NotClosed from None
        for s in sols:
            if s.free_symbols:
                raise NotClosed
            sv = complex(sp.N(s))
            if abs(sv.imag) < 1e-14:
                pts.add(s)
    return sorted(pts, key=lambda s: float(sp.N(s)))


def _smooth_at(e: sp.Expr, v: sp.Symbol, t: float) -> sp.Expr:
    """Replace every non-smooth part of e by its smooth branch at the point v = t."""

    def sgn(g):
        val = float(sp.N(g.subs(v, t)))
        return 1 if val > 0 else (-1 if val < 0 else 0)

    def repl(a):
        if isinstance(a, sp.Heaviside):
            return sp.Integer(1 if sgn(a.args[0]) > 0 else 0)
        if isinstance(a, sp.sign):
            return sp.Integer(sgn(a.args[0]))
        if isinstance(a, sp.Abs):
            return a.args[0] * sgn(a.args[0])
        if isinstance(a, (sp.Max, sp.Min)):
            vals = [float(sp.N(arg.subs(v, t))) for arg in a.args]
            i = int(np.argmax(vals) if isinstance(a, sp.Max) else np.argmin(vals))
            return a.args[i]
        for expr_i, cond in a.args:  # Piecewise
            if bool(cond.subs(v, t)):
                return expr_i
        raise NotClosed

    return e.replace(lambda a: isinstance(a, _NONSMOOTH) and a.has(v), repl)


def interior_point(lo, hi) -> float:
    """A float strictly inside the interval (lo, hi); lo may be -oo and hi +oo."""
    flo = None if lo == -sp.oo else float(sp.N(lo))
    fhi = None if hi == sp.oo else float(sp.N(hi))
    if flo is None and fhi is None:
        return 0.0
    if flo is None:
        return fhi - 1.0
    if fhi is None:
        return flo + 1.0
    return (flo + fhi) / 2


def _exact_1d(e: sp.Expr, v: sp.Symbol) -> sp.Expr:
    if e.has(sp.DiracDelta):
        raise NotClosed
    if not any(a.has(v) for a in e.atoms(*_NONSMOOTH)):
        return _smooth_piece(e, v, -sp.oo, sp.oo)
    pts = breakpoints(e, v)
    edges = [-sp.oo] + pts + [sp.oo]
    total = sp.Integer(0)
    for lo, hi in zip(edges[:-1], edges[1:]):
        t = interior_point(lo, hi)
        total += _smooth_piece(_smooth_at(e, v, t), v, lo, hi)
    return total


def _tidy(e: sp.Expr) -> sp.Expr:
    e = sp.nsimplify(e) if e.is_Float else e
    if sp.count_ops(e) < 150:
        try:
            return sp.simplify(e)
        except Exception:
            return e
    return e


def exact_expectation(expr: sp.Expr, variables: Sequence[sp.Symbol]) -> Optional[sp.Expr]:
    """Closed form of E[expr] over independent N(0,1) variables by this module's engine, or None."""
    expr = sp.sympify(expr)
    variables = list(variables)
    if not variables or not any(expr.has(v) for v in variables):
        return expr
    try:
        e = sp.expand(expr, power_exp=True) if not expr.atoms(*_NONSMOOTH) else sp.expand(expr)
        total = sp.Integer(0)
        for term in sp.Add.make_args(e):
            groups = {v: sp.Integer(1) for v in variables}
            const = sp.Integer(1)
            for f in sp.Mul.make_args(term):
                owners = [v for v in variables if f.has(v)]
                if not owners:
                    const *= f
                elif len(owners) == 1:
                    groups[owners[0]] *= f
                else:
                    return None
            val = const
            for v, g in groups.items():
                if g != 1:
                    val *= _exact_1d(g, v)
                    if val == 0:
                        break
            total += val
        return _tidy(total)
    except (NotClosed, RecursionError):
        return None
    except (TypeError, ValueError, NotImplementedError, ZeroDivisionError, AttributeError):
        return None


# --------------------------------------------------------------------------------- sympy.integrate fallback
def _child_worker(fn, args, conn):
    try:
        conn.send(fn(*args))
    except Exception:
        conn.send(None)
    finally:
        conn.close()


class ChildCall:
    """fn(*args) started in a forked child process (:func:`start_in_child`); :meth:`result` waits for it."""

    def __init__(self, fn, args: tuple):
        self.started = time.monotonic()
        self.proc = self.conn = None
        try:
            ctx = mp_proc.get_context("fork")
        except ValueError:
            return
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_child_worker, args=(fn, args, child), daemon=True)
        self.proc.start()
        child.close()

    def result(self, time_limit: float, since_start: bool = False):
        """Its result (picklable), waiting at most ``time_limit`` seconds (counted from the start with
        ``since_start``); None on failure, on timeout, or where fork is unavailable.  The child is killed either way."""
        if self.proc is None:
            return None
        wait = time_limit - (time.monotonic() - self.started if since_start else 0.0)
        res = None
        try:
            if self.conn.poll(max(wait, 0.0)):  # an answer that has arrived is read even with no time left
                try:
                    res = self.conn.recv()
                except EOFError:
                    res = None
        finally:  # also when a wall-clock limit interrupts the wait: never leave the child running
            self.proc.kill()
            self.proc.join(1)
            self.conn.close()
            self.proc = None
        return res

    def ready(self, wait: float = 0.0) -> bool:
        """Whether its answer (or its end) has arrived, waiting at most ``wait`` seconds."""
        return self.proc is not None and self.conn.poll(wait)


def start_in_child(fn, args: tuple) -> ChildCall:
    """fn(*args) in a forked child, running while the caller goes on; collect it with ``.result(limit)``."""
    return ChildCall(fn, args)


def in_child(fn, args: tuple, time_limit: float):
    """fn(*args) in a forked child process, killed after ``time_limit`` seconds: its result (picklable), or None on
    failure, on timeout, or where fork is unavailable.  For SymPy calls that can run for minutes on some inputs
    (integrate, monotonicity with parameters) and that no signal-based limit can interrupt when an outer one governs."""
    if time_limit <= 0:
        return None
    return start_in_child(fn, args).result(time_limit)


def _integrate(expr, v):
    dens = sp.exp(-v ** 2 / 2) / sp.sqrt(2 * sp.pi)
    res = sp.integrate(expr * dens, (v, -sp.oo, sp.oo))
    return None if res.has(sp.Integral) else res


def sympy_integrate(expr: sp.Expr, v: sp.Symbol, time_limit: float) -> Optional[sp.Expr]:
    """E[expr(G)] by ``sympy.integrate`` in a child process, killed after ``time_limit`` seconds; None on failure."""
    return in_child(_integrate, (expr, v), time_limit)


# ------------------------------------------------------------------------------------------------- quadrature
def _numeric_breakpoints(e: sp.Expr, v: sp.Symbol) -> list:
    try:
        return [float(sp.N(p)) for p in breakpoints(e, v)]
    except NotClosed:
        return [0.0]


def quadrature_1d(expr: sp.Expr, v: sp.Symbol, dps: int = 30) -> tuple[float, float]:
    """E[expr(G)] by mpmath tanh-sinh quadrature split at breakpoints; returns (value, error estimate)."""
    if expr.has(sp.DiracDelta):
        raise TheorykitError("the integrand contains a DiracDelta; integrate it against the density explicitly")
    f = sp.lambdify(v, expr, modules=[fn.MPMATH_MODULE, "mpmath"])
    pts = sorted(set(_numeric_breakpoints(expr, v)))
    with mpmath.workdps(dps):
        def g(t):
            return f(t) * mpmath.exp(-t * t / 2) / mpmath.sqrt(2 * mpmath.pi)

        val, err = mpmath.quad(g, [-mpmath.inf] + pts + [mpmath.inf], error=True, maxdegree=10)
    val, err = float(val), float(err)
    if not np.isfinite(val):
        raise TheorykitError(f"E[{expr}] is not finite (quadrature gave {val})")
    return val, max(err, 1e-15 * max(1.0, abs(val)))


#: most terms of an expanded integrand that :func:`quadrature_nd` sums as products of one-variable sums
SEPARABLE_MAX_TERMS = 64


def _separable_terms(expr: sp.Expr, variables: Sequence[sp.Symbol]) -> Optional[list]:
    """expr as a sum of products of one-variable factors, [(coefficient, {variable: factor})], or None when a term
    couples two variables (or the expansion has more than SEPARABLE_MAX_TERMS terms).  Sines and cosines of sums are
    expanded first when the plain expansion couples (sin(z1 - z2) = sin z1 cos z2 - cos z1 sin z2)."""
    got = _separate(expr, variables, trig=False)
    if got is None and expr.has(sp.sin, sp.cos):
        got = _separate(expr, variables, trig=True)
    return got


def _separate(expr: sp.Expr, variables: Sequence[sp.Symbol], trig: bool) -> Optional[list]:
    try:
        terms = sp.Add.make_args(sp.expand(sp.expand_trig(expr) if trig else expr))
    except Exception:
        return None
    if len(terms) > SEPARABLE_MAX_TERMS:
        return None
    out = []
    vs = set(variables)
    for term in terms:
        coef, parts = sp.Integer(1), {}
        for f in sp.Mul.make_args(term):
            own = f.free_symbols & vs
            if len(own) > 1:
                return None
            if not own:
                coef = coef * f
            else:
                (v,) = own
                parts[v] = parts.get(v, sp.Integer(1)) * f
        out.append((coef, parts))
    return out


def _one_variable_sum(g, nodes: np.ndarray, weights: np.ndarray) -> float:
    """sum_i w_i g(x_i) for a lambdified one-variable g (a constant broadcast)."""
    with np.errstate(all="ignore"):
        return float(np.sum(weights * np.broadcast_to(np.asarray(g(nodes), dtype=float), nodes.shape)))


@lru_cache(maxsize=8)
def _tensor_grid(order: int, dim: int) -> tuple:
    """The tensor Gauss-Hermite rule's nodes as ``dim`` arrays of shape (order,) * dim and its weights (read-only),
    built once: the link analysis asks for the same grid for every moment."""
    rule = gauss_hermite(order, dim)
    shape = (order,) * dim
    grids = [np.ascontiguousarray(rule.nodes[:, i]).reshape(shape) for i in range(dim)]
    wts = rule.weights.reshape(shape)
    for a in grids + [wts]:
        a.setflags(write=False)
    return grids, wts


#: grid values of integrand factors shared between integrals, while :func:`shared_grid_values` is open (None: off)
_GRID_VALUES: Optional[dict] = None


@contextlib.contextmanager
def shared_grid_values():
    """Within the block, :func:`quadrature_nd` keeps each integrand factor's (and integer power's) values on the
    tensor grid for the next integrand, and frees them at its end: the link analysis integrates many products of
    the same factors (the link, a latent coordinate, their powers), each grid of 120^3 nodes costing one evaluation."""
    global _GRID_VALUES
    outer = _GRID_VALUES
    if outer is None:
        _GRID_VALUES = {}
    try:
        yield
    finally:
        if outer is None:
            _GRID_VALUES = None


def _grid_values(factor: sp.Expr, variables: tuple, order: int, power: int = 1) -> np.ndarray:
    """factor**power on the tensor grid of :func:`_tensor_grid` (read-only; kept while :func:`shared_grid_values` is
    open), integer powers by repeated products (numpy's float power is several times slower than a product)."""
    key = (factor, variables, order, power)
    if _GRID_VALUES is not None and key in _GRID_VALUES:
        return _GRID_VALUES[key]
    if power > 1:
        base = _grid_values(factor, variables, order)
        v = base * (_grid_values(factor, variables, order, power - 1) if power > 2 else base)
    else:
        grids, wts = _tensor_grid(order, len(variables))
        f = sp.lambdify(list(variables), factor, modules=[fn.NUMPY_MODULE, "scipy", "numpy"])
        with np.errstate(all="ignore"):
            v = np.array(np.broadcast_to(np.asarray(f(*grids), dtype=float), wts.shape))
    v.setflags(write=False)
    if _GRID_VALUES is not None:
        _GRID_VALUES[key] = v
    return v


def _grid_product(expr: sp.Expr, variables: tuple, order: int) -> np.ndarray:
    """expr on the tensor grid as the product of its factors' values (:func:`_grid_values`, positive integer powers
    of a factor from its base's values)."""
    out, coef = None, 1.0
    for fac in sp.Mul.make_args(expr):
        if fac.is_Number:
            coef *= float(fac)
            continue
        base, ex = fac.as_base_exp()
        if ex.is_Integer and int(ex) > 0:
            v = _grid_values(base, variables, order, int(ex))
        else:
            v = _grid_values(fac, variables, order)
        out = v if out is None else out * v
    if out is None:
        return np.full(_tensor_grid(order, len(variables))[1].shape, coef)
    return out * coef if coef != 1.0 else out


def quadrature_nd(expr: sp.Expr, variables: Sequence[sp.Symbol], order: int = 60) -> tuple[float, float]:
    """E[expr] over 2-3 Gaussian variables by tensor Gauss-Hermite (:func:`theorykit.rules.gauss_hermite`, 2*order
    nodes per axis); error from comparing with order nodes per axis (docs/theory.md §3, numerics).  Where expr
    expands into products of one-variable factors (exp(z1) z2 z3 He_2(z2), ...), the tensor sum of each product is
    the product of one-variable sums on the same nodes, computed as such."""
    D = len(variables)
    sep = _separable_terms(expr, variables)
    if sep is not None:  # each factor lambdified once, for both rules
        sep = [(coef, [sp.lambdify([v], f, modules=[fn.NUMPY_MODULE, "scipy", "numpy"]) for v, f in parts.items()])
               for coef, parts in sep]
    vals = []
    for o in (order, 2 * order):
        if sep is not None:
            t = gauss_hermite(o, 1)
            x, w = t.nodes[:, 0], t.weights
            total = 0.0
            for coef, funcs in sep:
                prod = float(coef)
                for g in funcs:
                    prod *= _one_variable_sum(g, x, w)
                total += prod
            vals.append(total)
            continue
        _, wts = _tensor_grid(o, D)
        with np.errstate(all="ignore"):
            fv = _grid_product(expr, tuple(variables), o)
        vals.append(float(np.dot(wts.ravel(), fv.ravel())))
    if not np.all(np.isfinite(vals)):
        raise TheorykitError(f"E[{expr}] is not finite on the quadrature grid")
    return vals[1], abs(vals[1] - vals[0]) + 1e-15


def monte_carlo(expr: sp.Expr, variables: Sequence[sp.Symbol], n: int = 1_000_000, seed: int = 0):
    """E[expr] by Monte Carlo with n samples; returns (mean, standard error)."""
    f = sp.lambdify(list(variables), expr, modules=[fn.NUMPY_MODULE, "scipy", "numpy"])
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((len(variables), n))
    with np.errstate(all="ignore"):
        fv = np.broadcast_to(np.asarray(f(*g), dtype=float), (n,))
    if not np.all(np.isfinite(fv)):
        raise TheorykitError(f"E[{expr}]: the integrand is not finite at some samples")
    return float(fv.mean()), float(fv.std(ddof=1) / np.sqrt(n))


# ----------------------------------------------------------------------------------------- wall-clock limit
#: default wall-clock limit in seconds for one Gaussian expectation, all tiers together (the closed-form engine, the
#: symmetry test, sympy.integrate and quadrature); the environment variable THEORYKIT_WALL_LIMIT overrides it
WALL_LIMIT = 30.0


#: set by a command's --wall-limit (takes precedence over the environment)
OVERRIDE: Optional[float] = None


#: longest time limit accepted (seconds; about 11.6 days): the timers take no more (1e300 s overflows them)
MAX_SECONDS = 1e6


def check_seconds(name: str, value, allow_zero: bool = False) -> float:
    """A time limit in seconds: a finite number > 0 (>= 0 with ``allow_zero``) and <= MAX_SECONDS, else a one-line
    TheorykitError naming ``name``."""
    from .._checks import check_number

    lo = ">= 0" if allow_zero else "> 0"
    return check_number(name, value, lambda v: (v >= 0 if allow_zero else v > 0) and v <= MAX_SECONDS,
                        f"a number of seconds {lo} and <= {MAX_SECONDS:g}")


def default_wall_limit() -> float:
    if OVERRIDE is not None:
        return OVERRIDE
    env = os.environ.get("THEORYKIT_WALL_LIMIT")
    if env:
        try:
            float(env)
        except ValueError:
            raise TheorykitError(f"THEORYKIT_WALL_LIMIT must be a number of seconds, got {env!r}") from None
        return check_seconds("THEORYKIT_WALL_LIMIT", env)
    return WALL_LIMIT


#: after the wall-clock limit, the alarm repeats at this interval until the body has stopped
ALARM_REPEAT = 0.25


class _Alarm(BaseException):
    """Raised by the SIGALRM handler; a BaseException so that no `except Exception` on the way swallows it."""


_active = threading.local()


@contextlib.contextmanager
def wall_clock_limit(seconds: Optional[float], what: str, hint: str = "--wall-limit SECONDS or THEORYKIT_WALL_LIMIT"):
    """Run the body under a wall-clock limit (SIGALRM); past it, raise a one-line :class:`TimeLimitError`.

    Nested limits: the outermost one governs.  Outside the main thread (no signals there) or with ``seconds`` None or
    <= 0 the body runs unlimited.
    """
    if (seconds is None or seconds <= 0 or getattr(_active, "on", False) or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return

    def handler(signum, frame):
        if getattr(_active, "on", False):
            raise _Alarm()

    old = signal.signal(signal.SIGALRM, handler)
    _active.on = True
    try:
        # armed inside the try: a limit so short that the alarm fires at once still ends in the one-line error.  It
        # repeats every ALARM_REPEAT s: an alarm raised where Python ignores exceptions (a __del__, a GC callback) is
        # lost, and a single one left a deep SymPy simplify running for good (a hung CI run)
        signal.setitimer(signal.ITIMER_REAL, float(seconds), ALARM_REPEAT)
        yield
    except _Alarm:
        raise TimeLimitError(f"{what} did not finish within {seconds:g} s (raise the limit with {hint})") from None
    finally:
        while True:  # an alarm landing during the clean-up (the body is over) is ignored, never raised from here
            try:
                _active.on = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
                break
            except _Alarm:
                continue


def _short(expr, n: int = 60) -> str:
    t = str(expr)
    return t if len(t) <= n else t[:n] + "..."


# ------------------------------------------------------------------------------------------------- front door
def _is_odd(expr: sp.Expr, variables) -> bool:
    """True when expr(-v) = -expr(v) jointly in all variables (then E[expr] = 0 exactly)."""
    if not variables:
        return False
    flipped = expr.xreplace({v: -v for v in variables})
    if nonzero_at_points(flipped + expr, expr):  # refuted by numbers: no simplify (Max, Piecewise: seconds each)
        return False
    try:
        return sp.expand(flipped + expr) == 0 or sp.simplify(flipped + expr) == 0
    except Exception:
        return False


def nonzero_at_points(total: sp.Expr, scale: Optional[sp.Expr] = None, points: int = 3) -> bool:
    """True when ``total`` is clearly non-zero (beyond 1e-9 of 1 + |scale|) at one of a few fixed random points, every
    free symbol drawn (positive ones from [0.5, 2]): then no symbolic proof that it vanishes is needed (simplify takes
    seconds on Max or Piecewise, minutes on some trigonometric sums).  False otherwise, also where a value is not a
    finite number: only a symbolic check can then decide."""
    rng = np.random.default_rng(20261207)
    scale = sp.Integer(0) if scale is None else scale
    syms = sorted(total.free_symbols | scale.free_symbols, key=str)
    for _ in range(points):
        pt = {v: sp.Float(rng.uniform(0.5, 2.0) if v.is_positive else rng.standard_normal(), 20) for v in syms}
        try:
            t, e = complex(total.xreplace(pt).evalf(20)), complex(scale.xreplace(pt).evalf(20))
        except Exception:
            continue
        if np.isfinite(t) and np.isfinite(e) and abs(t) > 1e-9 * (1.0 + abs(e)):
            return True
    return False


def expectation(expr, variables: Optional[Sequence[sp.Symbol]] = None, time_limit: float = 3.0,
                allow_sympy: bool = True, seed: int = 0, wall_limit: Optional[float] = None, *,
                variance=1) -> Expectation:
    """E[expr] over independent N(0, 1) ``variables``, by the first tier that succeeds.

    Parameters
    ----------
    expr : a SymPy expression, or (without ``variables``) an activation: a preset name or an expression in x.
    variables : the Gaussian variables (default: x alone).
    variance : with one variable x, E[g(sqrt(q) G)] for G ~ N(0, 1): a number q > 0, or ``"q"`` (or the symbol
        :data:`theorykit.conventions.Q`) for a symbolic q > 0, in which the result is a function of q.
    time_limit, allow_sympy, seed, wall_limit : the closed-form engine is tried first, then (one variable,
        ``allow_sympy``) ``sympy.integrate`` under ``time_limit`` seconds, then quadrature (or Monte Carlo beyond
        three variables).  All of it runs under ``wall_limit`` seconds of wall-clock time (default
        :func:`default_wall_limit`); past it a one-line :class:`~theorykit.errors.TimeLimitError`.

    Returns
    -------
    Expectation : exact (SymPy, or None), value, error, tier and method.

    Examples
    --------
    >>> from theorykit.symbolic import expectation
    >>> expectation("x**2", variance="q").exact
    q
    """
    if variables is None:
        if not isinstance(expr, sp.Basic):
            from .ingredients import activation as make_activation

            expr = make_activation(expr).expr
        variables = [cv.X]
    if not (isinstance(variance, (int, float)) and not isinstance(variance, bool) and variance == 1):
        from .._checks import check_number

        if len(variables) != 1:
            raise TheorykitError("variance= scales one Gaussian variable: give one variable")
        if isinstance(variance, sp.Basic) and variance.is_positive:  # a SymPy number or a positive symbol, as is
            q = variance
        elif isinstance(variance, str) and variance.strip() == "q":
            q = cv.Q
        else:
            q = sp.nsimplify(check_number("variance", variance, lambda v: v > 0, "> 0"))
        expr = sp.sympify(expr).subs(variables[0], sp.sqrt(q) * variables[0])
    limit = default_wall_limit() if wall_limit is None else check_seconds("wall_limit", wall_limit)
    time_limit = check_seconds("time_limit", time_limit, allow_zero=True)
    with wall_clock_limit(limit, f"E[{_short(expr)}]"):
        return _expectation(expr, variables, time_limit, allow_sympy, seed)


def _expectation(expr, variables, time_limit, allow_sympy, seed) -> Expectation:
    expr = sp.sympify(expr)
    variables = [v for v in variables if expr.has(v)]
    if _is_odd(expr, variables):
        return Expectation(sp.Integer(0), 0.0, "exact", 0.0, "odd integrand (symmetry)")
    ex = exact_expectation(expr, variables)
    method = "closed form (Gaussian engine)"
    if ex is None and allow_sympy and len(variables) == 1 and not expr.has(sp.DiracDelta, *_NO_SYMPY):
        ex = sympy_integrate(expr, variables[0], time_limit)
        method = "closed form (sympy.integrate)"
        if ex is not None:
            ex = _tidy(ex)
    if ex is not None:
        value = None
        if not ex.free_symbols:
            value = float(sp.N(ex, 30))
            if not np.isfinite(value):
                raise TheorykitError(f"E[{expr}] is not finite")
        return Expectation(ex, value, "exact", 0.0, method)
    if expr.free_symbols - set(variables):
        raise TheorykitError(f"E[{expr}] has no closed form here and free parameters "
                             f"{sorted(map(str, expr.free_symbols - set(variables)))}: give them values")
    if len(variables) == 1:
        val, err = quadrature_1d(expr, variables[0])
        return Expectation(None, val, "quadrature", err, "mpmath tanh-sinh, 30 digits, split at breakpoints")
    if len(variables) <= 3:
        val, err = quadrature_nd(expr, variables)
        return Expectation(None, val, "quadrature", err, "tensor Gauss-Hermite (60 and 120 nodes per axis)")
    val, err = monte_carlo(expr, variables, seed=seed)
    return Expectation(None, val, "monte-carlo", err, f"Monte Carlo, 10^6 samples, seed {seed}")
