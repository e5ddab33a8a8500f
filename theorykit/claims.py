"""Checking a hand calculation: a claimed closed form against what theorykit computes (docs/theory.md §8).

One mechanism for every kind of quantity: each kind computes the quantity as an :class:`~theorykit.Expectation`-like
record (a closed form when one exists, else a value with its error and the tier that produced it), and
:func:`_decide` compares the user's claim with it:

* both exact: ``claim - computed`` is reduced by ``sympy.cancel`` and then ``sympy.simplify`` (under a time limit);
  0 -> "equal (exactly)".  Otherwise the difference is evaluated at 60 significant digits (at 5 random points of its
  free symbols, if any): all below 1e-50 in relative terms -> "equal to 50 digits" (SymPy could not reduce the
  difference to 0, so this is a numerical verdict, and says so); else "differs by ...", the exact difference with
  its value;
* computed numerically (quadrature, Monte Carlo) with error e: the claim's value v and the computed value c agree
  when |v - c| <= 3 e (3 standard errors for Monte Carlo) -> "equal to N digits", N the number of significant
  digits both the agreement and the method's accuracy support; else "differs by v - c (K x the error estimate)".

Kinds (the quantity each checks):

* ``hermite``: mu_k = E[sigma(G) He_k(G)] of an activation (probabilists' Hermite, theorykit.conventions);
* ``expectation``: E[g(U)], U ~ N(0, q), for g an expression in x and sigma, sigma1, sigma2, sigma3 (sigma and its
  derivatives at x).  A kinked sigma's derivatives carry Dirac terms, integrated exactly:
  E[A(U) J delta^(j)(U - c)] = J (-1)^j (A phi_q)^(j)(c) (A must be smooth enough at c, else the expectation is
  ambiguous and refused);
* ``delta_alg``: the weak-recovery threshold of a link (:func:`theorykit.analyse_link`); ``inf`` claims an infinite
  one;
* ``exponent``: the information or generative exponent of a single-index link (an integer, or ``inf``);
* ``dmft``: a t = 0 or t = 1 quantity of the exact DMFT (:func:`theorykit.dmft_closed_form`: gram1, train_loss1,
  C_theta11[0, 0], ...); delta, eta, ridge left unset are symbols that the claim may use.
"""
from __future__ import annotations

import math
import random
import re
import time
from dataclasses import dataclass, field
from typing import Optional, cast

import sympy as sp

from . import conventions as cv
from .errors import ParseError, TheorykitError, TimeLimitError

__all__ = ["check", "CheckResult", "KINDS"]

KINDS = ("hermite", "expectation", "delta_alg", "exponent", "dmft")
#: digits of the numerical test of an exact difference SymPy could not reduce to 0
EXACT_DIGITS = 60
AGREE_DIGITS = 50
#: points at which a symbolic difference is evaluated
POINTS = 5
#: agreement band of a numerical value, in units of its error estimate (standard errors for Monte Carlo)
BAND = 3.0
#: seconds for sympy.simplify of a difference before the numerical test decides
SIMPLIFY_SECONDS = 10.0
_INFINITE = {"inf", "infinity", "oo", "+inf"}


@dataclass(frozen=True)
class Computed:
    """What theorykit computed: exact (SymPy or None), value (float or None when it has free symbols or is
    infinite), error (absolute; 0 for exact), tier ("exact", "quadrature", "monte-carlo", ...), method (words),
    symbols (name -> Symbol a claim may use), undecided_above (an exponent not found up to this degree)."""

    exact: Optional[sp.Expr]
    value: Optional[float]
    error: float
    tier: str
    method: str
    symbols: dict = field(default_factory=dict)
    undecided_above: Optional[int] = None


@dataclass(frozen=True)
class CheckResult:
    """The verdict on a claim.

    verdict: "equal" (exactly), "agrees" (equal to ``digits`` significant digits: numerically), "differs" or
    "undecided"; message: the verdict in words ("equal (exactly)", "equal to 14 digits", "differs by ...");
    difference: claim - computed (exact as a string where both are exact, and its value); how: how it was decided.
    """

    kind: str
    quantity: str
    claim: str
    verdict: str
    message: str
    digits: Optional[int]
    computed: Computed
    difference_exact: Optional[str]
    difference: Optional[float]
    how: str
    seconds: float = 0.0

    @property
    def equal(self) -> bool:
        return self.verdict in ("equal", "agrees")

    def as_dict(self) -> dict:
        c = self.computed
        return {"kind": self.kind, "quantity": self.quantity, "claim": self.claim, "verdict": self.verdict,
                "message": self.message, "digits": self.digits,
                "computed": {"exact": None if c.exact is None else str(c.exact), "value": c.value, "error": c.error,
                             "tier": c.tier, "method": c.method},
                "difference": {"exact": self.difference_exact, "value": self.difference}, "how": self.how,
                "seconds": self.seconds}


# ------------------------------------------------------------------------------------------------- the quantities
def _from_expectation(e, symbols=None) -> Computed:
    exact = None if e.exact is None else sp.sympify(e.exact)
    value = None if e.value is None else float(e.value)
    return Computed(exact, value, float(e.error), e.tier, e.method, dict(symbols or {}))


def _hermite(activation, k, time_limit, wall_limit) -> tuple:
    from .symbolic.hermite import hermite_coefficients
    from .symbolic.ingredients import activation as make_activation

    act = make_activation(activation)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 40:
        raise TheorykitError(f"k must be an integer in 0..40, got {k!r}")
    c = hermite_coefficients(act, k, time_limit=time_limit, wall_limit=wall_limit).coefficients[k]
    comp = Computed(None if c.exact is None else sp.sympify(c.exact), float(c.value), float(c.error), c.tier,
                    c.method)
    return f"mu_{k} = E[sigma(G) He_{k}(G)] of sigma(x) = {act.expr}", comp


def _derivatives(act, order: int) -> list:
    return [sp.diff(act.expr, cv.X, j) for j in range(order + 1)]


def _dirac_terms(expr: sp.Expr) -> tuple:
    """expr = smooth + sum_i coef_i DiracDelta(arg_i, j_i): (smooth, [(coef_i, arg_i, j_i)]); a product of two Dirac
    terms is refused."""
    expr = sp.expand(expr)
    smooth, terms = sp.Integer(0), []
    for term in sp.Add.make_args(expr):
        deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.DiracDelta)
                  or (isinstance(f, sp.Pow) and isinstance(f.base, sp.DiracDelta))]
        if not deltas:
            smooth += term
            continue
        if len(deltas) > 1 or isinstance(deltas[0], sp.Pow):
            raise TheorykitError("the expression multiplies two Dirac terms of sigma's derivatives (e.g. sigma2**2 "
                                 "for a kinked sigma): its expectation is not defined")
        dd = deltas[0]
        j = int(dd.args[1]) if len(dd.args) > 1 else 0
        terms.append((term / dd, dd.args[0], j))
    return smooth, terms


def _dirac_expectation(coef: sp.Expr, arg: sp.Expr, j: int, q: sp.Expr) -> sp.Expr:
    """E[coef(U) delta^(j)(arg(U))] for U ~ N(0, q) and arg linear in x: with arg = a (x - c),
    int f(x) delta^(j)(a (x - c)) dx = (-1)^j f^(j)(c) / (|a| a^j), f = coef phi_q."""
    x = cv.X
    poly = sp.Poly(arg, x) if arg.is_polynomial(x) else None
    if poly is None or poly.degree() != 1:
        raise TheorykitError(f"a Dirac term at {arg} = 0 that is not linear in x: its expectation is not "
                             "implemented")
    a_, b_ = poly.all_coeffs()
    c = -b_ / a_
    dens = sp.exp(-x ** 2 / (2 * q)) / sp.sqrt(2 * sp.pi * q)
    for i in range(j + 1):  # the coefficient and its derivatives up to j must be finite and continuous at c
        f = sp.diff(coef, x, i)
        try:
            # the one-sided values (the point itself may be a removable 0 * Heaviside(0))
            lo, hi = (_value(f, 20, {x: c + s * sp.Rational(1, 10 ** 9), cv.Q: 1}) for s in (-1, 1))
        except (TypeError, ValueError, OverflowError):
            lo = hi = complex("nan")
        if not all(math.isfinite(abs(v)) for v in (lo, hi)):
            raise TheorykitError(f"the expression multiplies a Dirac term at x = {c} by a factor that is not finite "
                                 "there: its expectation is not defined")
        if abs(lo - hi) > 1e-6 * max(1.0, abs(lo), abs(hi)):
            raise TheorykitError(f"the expression multiplies a Dirac term at x = {c} by a factor that jumps there "
                                 f"(e.g. sigma1*sigma2 for ReLU): its expectation is ambiguous")
    val = sp.diff(coef * dens, x, j).subs(x, c)
    # the factor's own jumps at c are excluded above, so its one-sided value is its value (Heaviside(0) aside)
    val = val.replace(sp.Heaviside, lambda *args: sp.Heaviside(args[0], sp.Rational(1, 2)))
    return sp.simplify((-1) ** j * val / (sp.Abs(a_) * a_ ** j))


def _expectation(activation, of, variance, time_limit, wall_limit) -> tuple:
    from .symbolic._parse import parse_expression
    from .symbolic.gaussian import expectation, wall_clock_limit
    from .symbolic.ingredients import activation as make_activation

    act = make_activation(activation)
    names = {"x": cv.X, "sigma": sp.Symbol("sigma"), "sigma1": sp.Symbol("sigma1"), "sigma2": sp.Symbol("sigma2"),
             "sigma3": sp.Symbol("sigma3")}
    g = parse_expression(of, names, "the expression (--of)") if isinstance(of, str) else sp.sympify(of)
    order = max([j for j, n in enumerate(("sigma", "sigma1", "sigma2", "sigma3")) if names[n] in g.free_symbols],
                default=0)
    ders = _derivatives(act, order)
    g = g.subs({names[n]: ders[j] for j, n in enumerate(("sigma", "sigma1", "sigma2", "sigma3")[:order + 1])})
    symbols = {}
    if variance is None or (isinstance(variance, str) and variance.strip() == "q"):
        q = cv.Q
        symbols = {"q": cv.Q}
    else:
        if isinstance(variance, bool) or not isinstance(variance, (str, int, float, sp.Basic)):
            raise TheorykitError(f"variance must be a number > 0 or 'q' (symbolic), got {variance!r}")
        q = _number(variance, "variance")
        if not (q.is_number and q.is_positive):
            raise TheorykitError(f"variance must be a number > 0 or 'q' (symbolic), got {variance!r}")
    smooth, terms = _dirac_terms(g)
    with wall_clock_limit(wall_limit, "the expectation"):
        e = expectation(smooth, [cv.X], time_limit=time_limit, variance=q)
        dirac = sp.Add(*[_dirac_expectation(cf, arg, j, q) for cf, arg, j in terms])
    quantity = f"E[{of}] for sigma(x) = {act.expr}, x ~ N(0, {q})"
    comp = _from_expectation(e, symbols)
    if dirac != 0:
        how = f"{comp.method}; Dirac terms of sigma's derivatives integrated exactly ({dirac})"
        exact = None if comp.exact is None else sp.simplify(comp.exact + dirac)
        if comp.value is None:
            value = None
        else:
            dv = _value(dirac) if not dirac.free_symbols else None
            value = None if dv is None else comp.value + dv.real
        comp = Computed(exact, value, comp.error, comp.tier, how, symbols)
    return quantity, comp


def _link_analysis(link):
    from .symbolic.links import analyse_link

    return analyse_link(link)


def _delta_alg(link) -> tuple:
    an = _link_analysis(link)
    da = an.delta_alg
    if da.infinite:
        comp = Computed(sp.oo, None, 0.0, "exact" if da.error == 0 else "numerical", da.method)
    else:
        comp = Computed(None if da.exact is None else sp.sympify(da.exact), float(da.value), float(da.error),
                        "exact" if da.exact is not None else "numerical", da.method)
    return f"delta_alg of y = {an.link.expr}", comp


def _exponent(link, which) -> tuple:
    an = _link_analysis(link)
    names = {"information": "information_exponent", "generative": "generative_exponent"}
    if which not in names:
        raise TheorykitError(f"which must be 'information' or 'generative', got {which!r}")
    v = getattr(an, names[which])
    quantity = f"{which} exponent of y = {an.link.expr}"
    if v is not None:
        return quantity, Computed(sp.Integer(v), float(v), 0.0, "exact", an.method)
    reason = an.exponent_reasons()[names[which]]
    top = 8 if which == "information" else 6
    if an.k != 1:
        raise TheorykitError(f"the {which} exponent is {reason}")
    return quantity, Computed(None, None, 0.0, "exact", f"{an.method}; {reason}", undecided_above=top)


_QUANTITY = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[\s*(\d+)\s*(?:,\s*(\d+)\s*)?\])?\s*$")


def _dmft(problem, quantity, spec) -> tuple:
    from .dynamics.closed_form import ClosedFormDMFT, dmft_closed_form
    from .problem import Problem

    match = _QUANTITY.match(quantity) if isinstance(quantity, str) else None
    if match is None:
        raise TheorykitError(f"quantity must be a name of theorykit.dmft_closed_form's result, optionally indexed "
                             f"(gram1, train_loss1, C_theta11[0,0]), got {quantity!r}")
    name, i, j = match.groups()
    fields = [f for f in ClosedFormDMFT.__dataclass_fields__]
    if name not in fields:
        raise TheorykitError(f"unknown DMFT quantity {name!r}: one of {', '.join(fields)}")
    symbols = {}
    if isinstance(problem, Problem):
        cf = dmft_closed_form(problem)
        what = f"{problem.activation}, {problem.link}, {problem.loss}, m = {problem.width}, delta = {problem.delta}"
    else:
        kw = dict(spec)
        for s, assumptions in (("delta", {"positive": True}), ("eta", {"positive": True})):
            if kw.get(s) is None:
                symbols[s] = sp.Symbol(s, **assumptions)
                kw[s] = symbols[s]
            else:
                kw[s] = _number(kw[s], s)
        kw["ridge"] = _number(kw.get("ridge") or 0, "ridge")
        if kw.get("link") is None or kw.get("activation") is None:
            raise TheorykitError("a dmft check needs an activation and a link (or a Problem)")
        cf = dmft_closed_form(kw.pop("activation"), kw.pop("link"), kw.pop("loss", "square"), kw.pop("width", 1),
                              **kw)
        what = ", ".join(f"{k} = {v}" for k, v in spec.items() if v is not None)
    v = getattr(cf, name)
    if isinstance(v, sp.MatrixBase):
        if i is None:
            if v.shape != (1, 1):
                raise TheorykitError(f"{name} is a {v.shape[0]} x {v.shape[1]} matrix: name one entry, e.g. "
                                     f"{name}[0,0]")
            i, j = 0, 0
        i, j = int(i), int(j if j is not None else 0)
        if not (i < v.shape[0] and j < v.shape[1]):
            raise TheorykitError(f"{name}[{i},{j}] is outside its {v.shape[0]} x {v.shape[1]} shape")
        v = v[i, j]
        quantity = f"{name}[{i},{j}]"
    elif i is not None:
        raise TheorykitError(f"{name} is a scalar: no index")
    exact = sp.sympify(v)
    value = None if exact.free_symbols else float(sp.N(exact, 20))
    return (f"{quantity} of the exact t <= 1 DMFT ({what})",
            Computed(exact, value, 0.0, "exact", "theorykit.dmft_closed_form: exact Gaussian moments of polynomials",
                     symbols))


def _number(v, name: str) -> sp.Expr:
    """An exact number from an int, a float (its shortest repr: 0.05 -> 1/20), a SymPy expression or text such as
    '1/20' or '0.05' (parsed by the whitelist, which reads decimals exactly)."""
    from .symbolic._parse import parse_expression

    if isinstance(v, str):
        return parse_expression(v, {}, name)
    if isinstance(v, bool) or not isinstance(v, (int, float, sp.Basic)):
        raise TheorykitError(f"{name} must be a number, got {v!r}")
    if isinstance(v, float):
        if not math.isfinite(v):
            raise TheorykitError(f"{name} must be finite, got {v!r}")
        return sp.Rational(repr(v))
    e = sp.sympify(v)
    return e.xreplace({f: sp.Rational(repr(float(f))) for f in e.atoms(sp.Float)})


# ------------------------------------------------------------------------------------------------- the verdict
def _parse_claim(claim, symbols: dict) -> sp.Expr:
    from .symbolic._parse import parse_expression

    if isinstance(claim, str):
        if claim.strip().lower() in _INFINITE:
            return sp.oo
        allowed = ", ".join(sorted(symbols)) or "none: a number or closed-form constant"
        try:
            return parse_expression(claim, symbols, "the claim")
        except ParseError as e:
            raise ParseError(f"{e} (symbols allowed here: {allowed})") from None
    if isinstance(claim, bool) or not isinstance(claim, (int, float, sp.Basic)):
        raise TheorykitError(f"the claim must be an expression (text), a number or a SymPy expression, got "
                             f"{type(claim).__name__}")
    if isinstance(claim, float):
        if not math.isfinite(claim):
            return sp.oo if claim > 0 else sp.nan
        return sp.Float(claim, 17)
    expr = sp.sympify(claim)
    stray = expr.free_symbols - set(symbols.values())
    if stray:
        raise TheorykitError(f"the claim has symbols {sorted(map(str, stray))} the quantity does not have (allowed: "
                             f"{', '.join(sorted(symbols)) or 'none'})")
    return expr


def _value(e, digits: int = 30, at: Optional[dict] = None) -> complex:
    """e's numerical value (at the point ``at`` of its symbols) as a complex number; beyond floating range (or
    undefined) -> complex(inf) / nan, never an OverflowError from deep inside the conversion.  The point is
    substituted by evalf, numerically: an exact substitution would build 9**(9**9 * 16/13) digit by digit."""
    try:
        v = complex(sp.sympify(e).evalf(digits, subs=at or {}))
    except OverflowError:
        return complex(math.inf, 0.0)
    except (TypeError, ValueError, ZeroDivisionError):
        return complex(math.nan, math.nan)
    return v


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _points(syms) -> list:
    rng = random.Random(20261202)
    return [{s: sp.Rational(rng.randint(11, 97), rng.randint(7, 31)) for s in syms} for _ in range(POINTS)]


def _exact_difference(claim: sp.Expr, exact: sp.Expr) -> tuple:
    """(verdict, message, digits, difference string, difference value, how) for two exact expressions."""
    from .symbolic.gaussian import wall_clock_limit

    if claim == sp.oo or exact == sp.oo:
        same = claim == exact
        return ("equal" if same else "differs", "equal (exactly)" if same else f"differs: claim {claim}, computed "
                f"{exact}", None, None if same else f"{claim} - ({exact})", None, "compared as extended reals")
    diff = sp.cancel(sp.together(claim - exact))
    how = "sympy.cancel reduces claim - computed to 0"
    if diff != 0:
        try:
            with wall_clock_limit(SIMPLIFY_SECONDS, "sympy.simplify of the difference"):
                diff = sp.simplify(diff)
            how = "sympy.simplify reduces claim - computed to 0"
        except TimeLimitError:
            how = f"sympy.simplify did not finish in {SIMPLIFY_SECONDS:g} s"
    if diff == 0:
        return "equal", "equal (exactly)", None, "0", 0.0, how
    syms = sorted(diff.free_symbols, key=str)
    pts = _points(syms) if syms else [{}]
    worst, scale, first = 0.0, 0.0, None
    for p in pts:
        d = _value(diff, EXACT_DIGITS, p)
        c = _value(exact, EXACT_DIGITS, p)
        # a difference that is not finite (the claim overflows or is undefined there) is no agreement
        worst = math.inf if not math.isfinite(abs(d)) else max(worst, abs(d))
        scale = max(scale, abs(c)) if math.isfinite(abs(c)) else scale
        first = d.real if first is None else first
    at = f" at {POINTS} random rational points of ({', '.join(map(str, syms))})" if syms else ""
    if worst <= 10.0 ** -AGREE_DIGITS * max(scale, 1.0):
        return ("agrees", f"equal to {AGREE_DIGITS} digits", AGREE_DIGITS, None, 0.0,
                f"SymPy did not reduce claim - computed to 0 ({how.split(' reduces')[0] if 'reduces' in how else how});"
                f" evaluated at {EXACT_DIGITS} digits{at}, |difference| <= 1e-{AGREE_DIGITS} relative")
    text = str(diff) if len(str(diff)) <= 200 else str(diff)[:200] + "..."
    first = cast(float, first)  # set by the loop: pts has at least one point
    val = None if syms else first
    num = (("" if diff.is_Rational else f" ≈ {_fmt(first)}") if not syms
           else f" (e.g. {_fmt(first)} at {', '.join(f'{k} = {v}' for k, v in pts[0].items())})")
    return ("differs", f"differs by {text}{num}", None, str(diff), val,
            f"exact: claim - computed = {text}, nonzero{' (evaluated' + at + ')' if syms else ''}")


def _numeric_difference(claim: sp.Expr, comp: Computed) -> tuple:
    if claim.free_symbols:
        raise TheorykitError(f"the claim depends on {sorted(map(str, claim.free_symbols))}, but the computed value "
                             f"is a number ({comp.tier}): give the claim at the same numbers")
    v = _value(claim)
    if abs(v.imag) > 1e-12 * max(1.0, abs(v.real)) or not math.isfinite(v.real):
        raise TheorykitError(f"the claim {claim} is not a finite real number ({v})")
    c = cast(float, comp.value)  # a number here: _decide comes here only when there is no exact value
    v, err = v.real, max(comp.error, 2.2e-16 * abs(c))
    diff = v - c
    band = "standard errors" if comp.tier == "monte-carlo" else "error estimates"
    scale = max(abs(c), abs(v))
    if abs(diff) <= BAND * err:
        if scale == 0:
            return "agrees", "equal (both 0 to the method's accuracy)", None, None, diff, f"{comp.tier}"
        digits = int(math.floor(-math.log10(max(abs(diff), err) / scale)))
        digits = max(digits, 0)
        return ("agrees", f"equal to {digits} digits", digits, None, diff,
                f"{comp.tier} ({comp.method}) gives {c!r} ± {err:.1e}; the claim's value {v!r} lies within "
                f"{BAND:g} {band}, so the two agree to {digits} significant digits (the method's accuracy bounds it)")
    k = abs(diff) / err
    rel = f", relative {abs(diff) / scale:.2g}" if scale else ""
    return ("differs", f"differs by {_fmt(diff)} (claim {_fmt(v)}, computed {_fmt(c)} ± {err:.1e}{rel})", None, None,
            diff, f"{comp.tier} ({comp.method}): the difference is {k:.3g} {band}, outside the band of {BAND:g}")


_DECIMAL = re.compile(r"^\s*[+-]?(\d*)\.?(\d*)(?:[eE][+-]?\d+)?\s*$")


def decimal_digits(text) -> Optional[int]:
    """The significant digits of a claim written as a decimal number ('0.6057' -> 4, '1.50e-3' -> 3), None for
    anything else (an integer, a fraction, an expression): a decimal claim asserts its digits, not an exact value."""
    if not isinstance(text, str) or not any(ch in text for ch in ".eE"):
        return None
    m = _DECIMAL.match(text)
    if not m or not (m.group(1) or m.group(2)):
        return None
    digits = (m.group(1) + m.group(2)).lstrip("0")
    return max(len(digits), 1)


def _decimal_verdict(claim: sp.Expr, comp: Computed, digits: int) -> tuple:
    """A decimal claim with ``digits`` significant digits agrees when it is the computed value rounded to them: within
    half a unit of its last digit (plus the method's error)."""
    v = float(claim)
    c = comp.value if comp.value is not None else float(sp.N(comp.exact, 30))
    err = comp.error
    half_ulp = 0.5 * 10.0 ** (math.floor(math.log10(abs(v))) - digits + 1) if v != 0 else 0.5 * 10.0 ** (-digits)
    diff = v - c
    how = (f"the claim is a decimal with {digits} significant digits: it agrees when it lies within half a unit of its "
           f"last digit ({half_ulp:.1e}) of the computed value {c!r}" + (f" ± {err:.1e}" if err else " (exact)"))
    if abs(diff) <= half_ulp + BAND * err:
        return "agrees", f"equal to {digits} digits (the claim's precision)", digits, None, diff, how
    rel = f", relative {abs(diff) / abs(c):.2g}" if c else ""
    return ("differs", f"differs by {_fmt(diff)} (claim {v!r}, computed {_fmt(c)}{rel})", None, None, diff,
            how + "; it does not")


def _decide(claim: sp.Expr, comp: Computed) -> tuple:
    if comp.undecided_above is not None:  # an exponent not found up to its top degree
        n = comp.undecided_above
        if claim == sp.oo or (claim.is_Integer and claim > n):
            return ("undecided", f"undecided: no exponent up to {n}, so it is > {n} or infinite", None, None, None,
                    comp.method)
        return ("differs", f"differs: the exponent is > {n} (or infinite), not {claim}", None, None, None,
                comp.method)
    if comp.exact is not None:
        return _exact_difference(claim, comp.exact)
    if claim == sp.oo:
        return ("differs", f"differs: claim infinite, computed {comp.value!r}", None, None, None, comp.method)
    return _numeric_difference(claim, comp)


def check(kind: str, claim, *, activation=None, k: Optional[int] = None, of=None, variance=1, link=None,
          which: Optional[str] = None, quantity: Optional[str] = None, loss: str = "square", width: int = 1, a=None,
          b=None, delta=None, eta=None, ridge=0, problem=None, time_limit: float = 3.0,
          wall_limit: Optional[float] = None) -> CheckResult:
    """Check a claimed closed form for one quantity (module docstring).

    The claim is compared with what theorykit computes: a Hermite coefficient mu_k = E[sigma(G) He_k(G)], a Gaussian
    expectation E[g(U)], U ~ N(0, q), delta_alg of a link, an information or generative exponent, or a t = 0 or t = 1
    quantity of the exact DMFT; exactly when both sides are exact, else within the computed error
    (docs/theory.md §8, "Checking a hand calculation").

    Parameters
    ----------
    kind : str
        "hermite", "expectation", "delta_alg", "exponent" or "dmft".
    claim : str, number or sympy.Expr
        The claimed closed form (text through the whitelist parser, a number, or a SymPy expression).
    activation, k
        ``check("hermite", "3/(4*sqrt(pi))", activation="gelu", k=2)``.
    of, variance
        ``check("expectation", "1/4 + 1/(2*pi)*...", activation="gelu", of="sigma1**2")`` (variance: number, or
        "q"/None for a symbolic q the claim may use).
    link, which
        ``check("delta_alg", "1/2", link="phase-retrieval")``; ``check("exponent", 2, link="z**2",
        which="generative")``.
    quantity, loss, width, a, b, delta, eta, ridge, problem
        ``check("dmft", "...", quantity="gram1", activation="quad", link="z**2", eta="1/20")`` (or ``problem=``;
        delta, eta unset are symbols).
    time_limit, wall_limit : float
        Limits of the symbolic computation (seconds).

    Returns
    -------
    CheckResult
        ``verdict`` ("equal", "agrees", "differs" or "undecided"), ``message`` (the verdict in words), ``digits``,
        ``computed``, ``difference_exact``, ``difference``, ``how``.

    Raises
    ------
    TheorykitError
        Bad input raises a one-line TheorykitError.

    Examples
    --------
    >>> import theorykit as tk
    >>> tk.check("delta_alg", "1/2", link="phase-retrieval").message
    'equal (exactly)'
    >>> tk.check("hermite", "3/(4*sqrt(pi))", activation="gelu", k=2).verdict
    'equal'
    """
    t0 = time.time()
    if kind not in KINDS:
        raise TheorykitError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    need = {"hermite": ("activation", "k"), "expectation": ("activation", "of"), "delta_alg": ("link",),
            "exponent": ("link", "which"), "dmft": ()}[kind]
    given = {"activation": activation, "k": k, "of": of, "link": link, "which": which}
    missing = [n for n in need if given[n] is None]
    if missing:
        raise TheorykitError(f"a {kind} check needs {', '.join(missing)}")
    if kind == "hermite":
        what, comp = _hermite(activation, k, time_limit, wall_limit)
    elif kind == "expectation":
        what, comp = _expectation(activation, of, variance, time_limit, wall_limit)
    elif kind == "delta_alg":
        what, comp = _delta_alg(link)
    elif kind == "exponent":
        what, comp = _exponent(link, which)
    else:
        if quantity is None:
            raise TheorykitError("a dmft check needs quantity (e.g. gram1, train_loss1, C_theta11[0,0])")
        spec = {"activation": activation, "link": link, "loss": loss, "width": width, "a": a, "b": b, "delta": delta,
                "eta": eta, "ridge": ridge}
        what, comp = _dmft(problem, quantity, spec)
    c = _parse_claim(claim, comp.symbols)
    if c.is_number and c != sp.oo and c.is_real is False:
        raise TheorykitError(f"the claim {claim!s} is not a real number")
    verdict, message, digits, dexact, dval, how = _decide(c, comp)
    places = decimal_digits(claim)
    if verdict == "differs" and places is not None and not c.free_symbols and comp.undecided_above is None and \
            (comp.value is not None or (comp.exact is not None and not comp.exact.free_symbols)) and c != sp.oo:
        verdict, message, digits, dexact, dval, how = _decimal_verdict(c, comp, places)
    # the user's text, except a spelling of infinity (JSON outputs carry no bare "inf" strings): SymPy's oo
    text = claim.strip() if isinstance(claim, str) and c != sp.oo else str(c)
    return CheckResult(kind, what, text, verdict, message, digits, comp, dexact, dval, how, time.time() - t0)
