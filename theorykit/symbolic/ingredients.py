"""The three ingredients of a model: activation sigma(x), link y = h(z, eps), loss l(y, yhat).

Each object carries its exact SymPy expression (for derivations) and NumPy functions made once by ``lambdify``
(for numerics), so the finite-d simulator and the asymptotic theory use the same mathematics.
Build them with :func:`activation`, :func:`link` and :func:`loss`, which accept a preset name (see
``theorykit.symbolic.presets``) or an expression string parsed by the whitelist parser.
"""
from __future__ import annotations

import difflib
import inspect
import math
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Optional

import mpmath

import numpy as np
import sympy as sp

from .. import conventions as cv
from ..errors import ParseError, TheorykitError
from . import functions as fn
from ._parse import parse_expression
from .kinks import find_kinks, loss_derivative_jumps
from .lambdify import drop_dirac, lambdify_safe

@dataclass(frozen=True)
class Activation:
    """sigma(x), its first two derivatives, and its Hermite expansion.

    For a non-smooth sigma (ReLU, abs, ...), sigma'' contains DiracDelta terms: as a distribution they matter for
    Gaussian expectations (e.g. mu_2 = E[sigma''(G)], which theorykit computes as E[sigma(G) He_2(G)]), but their
    contribution to the finite-n Hessian vanishes almost surely (no pre-activation sits exactly on a kink), so the
    numerical sigma'' drops them; ``singular_second_derivative`` says so.

    Every Activation is admissible (checked on construction, once per expression: :func:`activation_problem`): sigma
    depends on x only, is real and finite on the line, and E[sigma(G)^2] < infinity.
    """

    name: str
    expr: sp.Expr

    def __post_init__(self):
        problem = activation_problem(self.expr)
        if problem:
            raise TheorykitError(f"activation {self.name!r} {problem}")

    @property
    def x(self):
        return cv.X

    @cached_property
    def d1_expr(self) -> sp.Expr:
        return sp.diff(self.expr, cv.X)

    @cached_property
    def d1_numeric(self) -> sp.Expr:
        """sigma' with DiracDelta terms dropped (e.g. x*Heaviside(x) has sigma' = Heaviside(x) + x*DiracDelta(x)): its
        almost-sure value, the one the vectorised functions evaluate."""
        return drop_dirac(self.d1_expr)[0]

    @cached_property
    def d2_distribution(self) -> sp.Expr:
        """sigma'' including DiracDelta terms."""
        return sp.diff(self.expr, cv.X, 2)

    @cached_property
    def d2_expr(self) -> sp.Expr:
        """sigma'' with DiracDelta terms dropped (the almost-sure value used in Hessians)."""
        return drop_dirac(self.d2_distribution)[0]

    @property
    def singular_second_derivative(self) -> bool:
        return drop_dirac(self.d2_distribution)[1]

    @cached_property
    def kinks(self):
        """Where sigma' jumps: a :class:`theorykit.symbolic.kinks.Kinks` (points x_k, jumps J_k; sigma'' has the Dirac
        terms J_k delta(x - x_k)), found as in docs/theory.md §3.1."""
        return find_kinks(self.expr, cv.X)

    @property
    def note(self) -> str:
        if self.singular_second_derivative:
            return ("sigma'' has DiracDelta terms (a kink); they are dropped from D and the Hessian, where they "
                    "vanish almost surely at finite n, but kept in Gaussian expectations (Hermite coefficients)")
        return ""

    @cached_property
    def numpy(self):
        """u -> (sigma(u), sigma'(u), sigma''(u)), vectorised."""
        return lambdify_safe([cv.X], (self.expr, self.d1_numeric, self.d2_expr), f"sigma_{self.name}")

    def __call__(self, u):
        """sigma(u), vectorised."""
        return self.numpy(u)[0]

    def __str__(self):
        return f"{self.name}: sigma(x) = {self.expr}"


@dataclass(frozen=True)
class Loss:
    """l(y, yhat) with l' = dl/dyhat and l'' = d^2 l/dyhat^2, symbolic and vectorised."""

    name: str
    expr: sp.Expr

    @cached_property
    def d1_expr(self):
        return sp.diff(self.expr, cv.YHAT)

    @cached_property
    def d1_numeric(self):
        """l' with DiracDelta terms dropped (its almost-sure value, evaluated by the vectorised functions)."""
        return drop_dirac(self.d1_expr)[0]

    @cached_property
    def d2_expr(self):
        return drop_dirac(sp.diff(self.expr, cv.YHAT, 2))[0]

    @cached_property
    def derivative_jumps(self) -> bool:
        """Whether l' jumps in yhat (hinge, absolute loss): then l'' has Dirac terms that the DMFT's equal-time
        response must keep (docs/theory.md §3.1)."""
        return loss_derivative_jumps(self.expr, cv.Y, cv.YHAT)

    @cached_property
    def numpy(self):
        """(y, yhat) -> (l, l', l''), vectorised."""
        return lambdify_safe([cv.Y, cv.YHAT], (self.expr, self.d1_numeric, self.d2_expr),
                             f"loss_{self.name}")

    def __str__(self):
        return f"{self.name}: l(y, yhat) = {self.expr}"


@dataclass(frozen=True)
class Link:
    """y = h(z, eps): single index (symbol z, k = 1) or multi-index (z1..zk), optional noise eps ~ N(0, 1)."""

    name: str
    expr: sp.Expr
    k: int
    latent: tuple  # the latent symbols (z,) or (z1, ..., zk)
    #: (("z5", "z"),) when the user's latent indices were renumbered to 1..k (unused ones dropped): (old, new) pairs
    reindexed: tuple = ()

    @property
    def note(self) -> str:
        """One line saying how the latent indices were renumbered ("" when they were not)."""
        if not self.reindexed:
            return ""
        moves = ", ".join(f"{old} -> {new}" for old, new in self.reindexed)
        return (f"latent indices renumbered ({moves}): y depends on {self.k} latent direction"
                f"{'s' if self.k > 1 else ''} only, unused ones are dropped (they would count as hard directions)")

    @property
    def noisy(self) -> bool:
        return self.expr.has(cv.EPS)

    @property
    def variables(self) -> tuple:
        """All Gaussian variables: latent coordinates, then eps if present."""
        return self.latent + ((cv.EPS,) if self.noisy else ())

    @cached_property
    def numpy(self):
        """(z_1, ..., z_k, eps) -> y, vectorised (eps is ignored by noiseless links)."""
        return lambdify_safe(list(self.latent) + [cv.EPS], self.expr, f"link_{self.name}")

    def sample(self, n: int, rng: np.random.Generator):
        """Draw n samples: returns (z of shape (n, k), y of shape (n,)).  Uses rng for z, then (if noisy) eps."""
        z = rng.standard_normal((n, self.k))
        eps = rng.standard_normal(n) if self.noisy else np.zeros(n)
        return z, self.response(z, eps)

    def response(self, z: np.ndarray, eps: Optional[np.ndarray] = None) -> np.ndarray:
        z = np.asarray(z, dtype=float).reshape(-1, self.k)
        eps = np.zeros(len(z)) if eps is None else eps
        y = self.numpy(*[z[:, i] for i in range(self.k)], eps)
        if not np.all(np.isfinite(y)):
            raise TheorykitError(f"link {self.name}: y = {self.expr} is not finite at some samples")
        return np.array(y, dtype=float)

    def __str__(self):
        return f"{self.name}: y = {self.expr}"


# ---------------------------------------------------------------------------------------------- constructors
def _split_params(spec: str, registry: dict) -> tuple[str, dict]:
    """'name:key=value,key=value' -> ('name', {key: Rational(value)}) for a preset name in registry."""
    name, _, rest = spec.partition(":")
    if name.strip() not in registry:
        return spec, {}
    params = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, val = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z]\w*", key.strip()):
            raise TheorykitError(f"bad preset parameter {item!r} in {spec!r} (expected key=value)")
        try:
            params[key.strip()] = sp.Rational(val.strip())
        except (TypeError, ValueError):
            raise TheorykitError(f"bad value {val!r} for parameter {key!r} in {spec!r} (expected a number)") from None
    takes = list(inspect.signature(registry[name.strip()]).parameters)
    unknown = sorted(set(params) - set(takes))
    if unknown:
        accepted = f"accepts only {', '.join(takes)}" if takes else "takes no parameters"
        raise TheorykitError(f"preset {name.strip()!r} {accepted} (got {', '.join(unknown)})")
    return name.strip(), params


def activation(spec) -> Activation:
    """An :class:`Activation` from a preset name ('gelu', 'relu', ...), an expression in x, or an Activation.

    sigma is the activation of the network f(r) = (1/m) sum_j a_j sigma(r_j + b_j) of docs/theory.md §1; its
    Hermite coefficients mu_k = E[sigma(G) He_k(G)] follow the convention of docs/theory.md §1, and a sigma whose
    derivative jumps (ReLU, abs) is handled as in docs/theory.md §3.1.

    Parameters
    ----------
    spec : str, sympy.Expr or Activation
        A preset name ('quad', 'gelu', 'relu', 'tanh', 'erf', 'linear', 'he2', 'he3'), an expression string in x
        (parsed through the whitelist parser), a SymPy expression in x, or an Activation (returned as is).

    Returns
    -------
    Activation
        ``name`` (str) and ``expr`` (the SymPy expression sigma(x)), with the derivatives ``d1_expr``, ``d2_expr``,
        ``kinks`` and vectorised NumPy functions.

    Raises
    ------
    TheorykitError
        Refused with one line: an expression that is not admissible (:func:`activation_problem`), and a name that
        is neither a preset nor an expression (with the nearest preset names when there are any).

    Examples
    --------
    >>> import theorykit as tk
    >>> tk.activation("gelu").expr
    x*(erf(sqrt(2)*x/2)/2 + 1/2)
    >>> tk.activation("x**2").name
    'x**2'
    >>> try:
    ...     tk.activation("gleu")
    ... except tk.TheorykitError as err:  # a ParseError, a subclass
    ...     print(err)
    unknown activation 'gleu': did you mean 'gelu'?
    """
    from . import presets

    if isinstance(spec, Activation):
        return spec
    if isinstance(spec, sp.Expr):
        return Activation(str(spec), spec)
    name, params = _split_params(str(spec), presets.ACTIVATIONS)
    if name in presets.ACTIVATIONS:
        return Activation(name, presets.ACTIVATIONS[name](**params))
    expr = _parse_or_suggest(str(spec), {"x": cv.X}, "activation", presets.ACTIVATIONS)
    return Activation(str(spec).strip(), expr)


#: a name that may be a preset's (letters, digits, '_' and '-', optionally ':key=value,...'): when it is neither a
#: preset nor an expression, the error suggests the nearest preset names
_PRESET_LIKE = re.compile(r"\s*([A-Za-z][\w-]*)\s*(:.*)?", re.DOTALL)


def _parse_or_suggest(text: str, symbols: dict, what: str, registry: dict) -> sp.Expr:
    """parse_expression, but a text that looks like a preset name and does not parse (or parses to a name with '-',
    e.g. 'sign-symetric') is answered with the nearest preset names (difflib; nothing the user typed is evaluated)."""
    m = _PRESET_LIKE.fullmatch(text)
    try:
        expr = parse_expression(text, symbols, what=what)
    except ParseError as e:
        if not m:
            raise
        name = m.group(1)
        close = difflib.get_close_matches(name.lower().replace("_", "-"), list(registry), n=3, cutoff=0.6)
        if close:
            raise ParseError(f"unknown {what} {name!r}: did you mean {' or '.join(map(repr, close))}?") from None
        if "-" in name or m.group(2):
            raise ParseError(f"{e} (and {name!r} is not a preset either; presets: {', '.join(registry)})") from None
        raise ParseError(f"{e}; presets: {', '.join(registry)}") from None
    return expr


_GRID = np.linspace(-5.0, 5.0, 201)


def _finite_problem(expr: sp.Expr, args: list) -> str:
    """Why an expression is not real and finite on a grid of [-5, 5] in every argument ("" when it is)."""
    f = lambdify_safe(args, expr, "check")
    cols = [_GRID if i == 0 else np.resize(_GRID[::7], _GRID.shape) for i in range(len(args))]
    try:
        vals = f(*cols)
    except (TypeError, ValueError, ZeroDivisionError) as e:
        return f"cannot be evaluated numerically ({type(e).__name__})"
    bad = ~np.isfinite(vals)
    if bad.any():
        i = int(np.argmax(bad))
        at = ", ".join(f"{a}={c[i]:g}" for a, c in zip(args, cols))
        return f"is not real and finite at {at}"
    return ""


def _check_finite(what: str, name: str, expr: sp.Expr, args: list) -> None:
    """Refuse an expression that is not real and finite on a grid of [-5, 5] in every argument."""
    problem = _finite_problem(expr, args)
    if problem:
        raise TheorykitError(f"{what} {name!r} {problem}")


#: |x| of the tail points of the admissibility check: 8, 16, ..., 2^20 (and a point 1/7 further out beside each)
_TAIL = tuple(2.0 ** j for j in range(3, 21))
#: log(sigma(x)^2 phi(x)) above this anywhere in the tail: E[sigma(G)^2] is infinite or beyond floating point (e^709)
_LOG_TAIL_MAX = 1000.0
_NOT_L2 = ("is not admissible: E[sigma(G)^2] is infinite for G ~ N(0, 1) ({why}); the theory needs a sigma with "
           "E[sigma(G)^2] < infinity, real on the line")


@lru_cache(maxsize=256)
def activation_problem(expr: sp.Expr) -> str:
    """Why sigma(x) = expr is not an admissible activation, as the end of a one-line error ("" when it is): the one
    check every command's activation passes (on construction of an :class:`Activation`; cached per expression).

    Admissible: depends on x only; real and finite on a grid of [-5, 5], and real at the tail points |x| = 8 ... 2^20
    (mpmath, 30 digits); no real pole (a real root of the denominator of a rational sigma); and E[sigma(G)^2] <
    infinity, judged from the tail: log(sigma(x)^2 phi(x)) stays below 1000 (beyond that E[sigma(G)^2] is infinite or
    beyond floating point) and, between |x| = 2^19 and 2^20, sigma(x)^2 phi(x) decays faster than 1/|x| (local power
    > 1.001; a sigma of polynomial growth decays like exp(-x^2/2)).  Not seen: a sigma that blows up only beyond 2^20
    (e.g. exp(x^4/1e15)), a pole of a non-rational sigma that misses the grid; a tail value that mpmath cannot
    evaluate, or that is not finite there (erfinv(tanh(x)) once tanh rounds to 1), gives no verdict.
    """
    extra = expr.free_symbols - {cv.X}
    if extra:
        return f"must depend on x only (found {sorted(map(str, extra))})"
    problem = _finite_problem(expr, [cv.X])
    if problem or not expr.has(cv.X):
        return problem
    return _pole_problem(expr) or _tail_problem(expr)


def _pole_problem(expr: sp.Expr) -> str:
    if not expr.is_rational_function(cv.X):  # others: the grid and tail checks only (cancel could take long)
        return ""
    try:
        den = sp.denom(sp.cancel(expr))
        if not den.has(cv.X):
            return ""
        coeffs = [complex(c) for c in sp.Poly(den, cv.X).all_coeffs()]
    except Exception:  # SymPy cannot split it: the grid and tail checks only
        return ""
    for r in np.roots(coeffs) if len(coeffs) > 1 else ():
        if abs(r.imag) <= 1e-9 * (1 + abs(r)):
            return _NOT_L2.format(why=f"a pole at x = {r.real:.6g}")
    return ""


def _tail_problem(expr: sp.Expr) -> str:
    try:
        f = sp.lambdify(cv.X, expr, modules=[fn.MPMATH_MODULE, "mpmath"])
    except Exception:
        return ""
    logs = {}  # (sign, R) -> max of log(sigma(x)^2 phi(x)) over x = sign R, sign R (1 + 1/7)
    with mpmath.workdps(30):
        for R in _TAIL:
            for sign in (1, -1):
                best = -mpmath.inf
                for x in (sign * R, sign * R * 8 / 7):
                    try:
                        v = mpmath.mpmathify(f(mpmath.mpf(x)))
                    except Exception:  # mpmath lacks the function or refuses the point: no verdict from the tail
                        return ""
                    re_, im = mpmath.re(v), mpmath.im(v)
                    if not (mpmath.isfinite(re_) and mpmath.isfinite(im)):
                        return ""  # e.g. erfinv(tanh(x)), whose tanh rounds to 1: no verdict from the tail
                    if abs(im) > 1e-12 * max(1, abs(re_)):
                        return f"is not real at x={x:g} (sigma must be real on the whole line)"
                    if re_ != 0:
                        best = max(best, 2 * mpmath.log(abs(re_)) - mpmath.mpf(x) ** 2 / 2)
                if best > _LOG_TAIL_MAX:
                    return _NOT_L2.format(why=f"sigma(x)^2 exp(-x^2/2) grows past e^{_LOG_TAIL_MAX:g} by |x| = {R:g}")
                logs[sign, R] = best
    R1, R2 = _TAIL[-2], _TAIL[-1]
    for sign in (1, -1):
        a, b = logs[sign, R1], logs[sign, R2]
        if b == -mpmath.inf:
            continue
        power = -(b - a) / math.log(R2 / R1) if a != -mpmath.inf else -mpmath.inf
        if power <= 1.001:
            return _NOT_L2.format(why=f"sigma(x)^2 exp(-x^2/2) does not decay faster than 1/|x| as x -> "
                                      f"{'+' if sign > 0 else '-'}infinity")
    return ""


def loss(spec) -> Loss:
    """A :class:`Loss` from a preset name ('square', 'logistic', 'huber') or an expression in y and yhat.

    The loss is l(y, yhat) of the empirical risk L(Theta) = (1/n) sum_i l(y_i, f(r_i)) + (ridge/2) ||Theta||_F^2 of
    docs/theory.md §1, with l' = dl/dyhat and l'' = d^2 l/dyhat^2 entering the per-sample derivatives F and D; a loss
    whose l' jumps is handled as in docs/theory.md §3.1.

    Parameters
    ----------
    spec : str or Loss
        A preset name ('square', 'logistic', 'huber'), an expression string in y and yhat, or a Loss (returned as
        is).

    Returns
    -------
    Loss
        ``name`` and ``expr`` (the SymPy expression l(y, yhat)), with ``d1_expr``, ``d2_expr``,
        ``derivative_jumps`` and vectorised NumPy functions.

    Raises
    ------
    TheorykitError
        An expression that does not depend on yhat, or a text that is neither a preset nor a valid expression.

    Examples
    --------
    >>> import theorykit as tk
    >>> tk.loss("logistic").expr
    softplus(-y*yhat)
    >>> tk.loss("(y - yhat)**2/2").name
    '(y - yhat)**2/2'
    """
    from . import presets

    if isinstance(spec, Loss):
        return spec
    name, params = _split_params(str(spec), presets.LOSSES)
    if name in presets.LOSSES:
        return Loss(name, presets.LOSSES[name](**params))
    expr = _parse_or_suggest(str(spec), {"y": cv.Y, "yhat": cv.YHAT}, "loss", presets.LOSSES)
    if not expr.has(cv.YHAT):
        raise TheorykitError(f"loss {_clip(spec)} does not depend on yhat")
    return Loss(str(spec).strip(), expr)


def link(spec) -> Link:
    """A :class:`Link` from a preset name or an expression in z (or z1..zk) and optionally eps.

    The link is the target y = h(z, eps) of docs/theory.md §1, with latent vector z = Theta*^T x ~ N(0, I_k) and,
    for a noisy link, eps ~ N(0, 1) independent of x; its easy and hard directions are analysed in docs/theory.md
    §2 (:func:`theorykit.analyse_link`).

    Parameters
    ----------
    spec : str or Link
        A preset name ('phase-retrieval', 'noisy-phase-retrieval', 'relu', 'abs', 'sign-symmetric', 'linear',
        'easy-quadratic', 'product', 'staircase'), an expression string in z (single index) or z1..zk (latent indices
        1..16) and optionally eps, or a Link (returned as is).

    Returns
    -------
    Link
        ``name``, ``expr`` (the SymPy expression h), ``k`` (the latent dimension), ``latent`` (its latent symbols),
        ``reindexed`` (the renaming of unused/renumbered latent indices, with a ``note``), ``noisy``, and
        ``response`` / ``sample`` to evaluate or draw it.

    Raises
    ------
    TheorykitError
        A latent index outside z1..z16, or a text that is neither a preset nor a valid expression (with the nearest
        preset names when there are any).

    Examples
    --------
    >>> import theorykit as tk
    >>> lk = tk.link("phase-retrieval")
    >>> lk.expr, lk.k
    (z**2, 1)
    >>> tk.link("z1 + z2**2").k
    2
    """
    from . import presets

    if isinstance(spec, Link):
        return spec
    name, params = _split_params(str(spec), presets.LINKS)
    if name in presets.LINKS:
        expr = presets.LINKS[name](**params)
        label = name if not params else str(spec)
    else:
        text = str(spec)
        names = set(re.findall(r"\bz(\d+)\b", text))
        symbols = {"z": cv.Z, "eps": cv.EPS}
        for i in names:
            if int(i) < 1 or int(i) > 16:
                raise TheorykitError(f"link {_clip(text)}: latent index z{i} out of range (z1..z16)")
            symbols[f"z{int(i)}"] = cv.z_symbol(int(i))
        expr = _parse_or_suggest(text, symbols, "link", presets.LINKS)
        label = text.strip()
    return _make_link(label, expr)


def _make_link(name: str, expr: sp.Expr) -> Link:
    syms = expr.free_symbols
    multi = sorted((s for s in syms if re.fullmatch(r"z\d+", s.name)), key=lambda s: int(s.name[1:]))
    if cv.Z in syms and multi:
        raise TheorykitError(f"link {name!r} mixes z with z1..zk: use z for a single index, z1..zk otherwise")
    if not multi and cv.Z not in syms:
        raise TheorykitError(f"link {name!r} does not depend on the latent variable z (or z1..zk)")
    extra = syms - {cv.Z, cv.EPS} - set(multi)
    if extra:
        raise TheorykitError(f"link {name!r}: unknown symbols {sorted(map(str, extra))}")
    # unused latent indices (y = z5^2, y = z1 z3) are dropped: the used ones are renumbered 1..k, and the Link records
    # the renaming (an unused coordinate would count as a hard direction of y and change k, the subspaces, delta_alg)
    new = [cv.z_symbol(i + 1) for i in range(len(multi))] if len(multi) > 1 else [cv.Z] * len(multi)
    reindexed = tuple((old.name, sym.name) for old, sym in zip(multi, new) if old != sym and old != cv.z_symbol(1))
    # z1 alone is a single-index link: written in z, which the single-index analysis is built on (no renumbering)
    expr = expr.xreplace(dict(zip(multi, new)))
    k = max(1, len(multi))
    latent = tuple(new) if len(multi) > 1 else (cv.Z,)
    lk = Link(name, expr, k, latent, reindexed)
    _check_finite("link", name, expr, list(latent) + [cv.EPS])
    return lk


DELTA = sp.Symbol("delta", positive=True)


@dataclass(frozen=True)
class Preprocessing:
    """A spectral preprocessing T(y) (may depend on the sample ratio delta), e.g. (y - 1)/(y + sqrt(2*delta) - 1)."""

    name: str
    expr: sp.Expr

    @cached_property
    def numpy(self):
        """(y, delta) -> T(y), vectorised."""
        return lambdify_safe([cv.Y, DELTA], self.expr, "T")

    def __call__(self, y, delta):
        out = self.numpy(np.asarray(y, dtype=float), float(delta))
        if not np.all(np.isfinite(out)):
            raise TheorykitError(f"preprocessing T(y) = {self.expr} is not finite at some y (delta = {delta})")
        return np.array(out, dtype=float)


def preprocessing(spec) -> Preprocessing:
    """A :class:`Preprocessing` from an expression in y and delta (whitelist parser)."""
    if isinstance(spec, Preprocessing):
        return spec
    expr = parse_expression(str(spec), {"y": cv.Y, "delta": DELTA}, what="preprocessing")
    return Preprocessing(str(spec).strip(), expr)


def matrix_preprocessing(T, k: int):
    """(y (N,), delta) -> T(y) (N, k, k) from a k x k nested list of expressions in y and delta (strings, numbers
    or :class:`Preprocessing`, parsed by the whitelist parser) or a callable (y, delta) -> (N, k, k).  The values
    are checked: finite, the right shape, symmetric."""
    if callable(T) and not isinstance(T, (str, Preprocessing)):
        fn = T
    else:
        rows = T if isinstance(T, (list, tuple)) else None
        if rows is None or len(rows) != k or any(not isinstance(r, (list, tuple)) or len(r) != k for r in rows):
            raise TheorykitError(f"a matrix preprocessing for k = {k} is a {k} x {k} nested list of expressions in y "
                                 f"and delta (or a callable (y, delta) -> (N, {k}, {k})), got {T!r}"[:300])
        entries = [[preprocessing(str(e) if isinstance(e, (int, float)) else e) for e in r] for r in rows]

        def fn(y, delta):
            y = np.asarray(y, dtype=float)
            return np.stack([np.stack([np.broadcast_to(e(y, delta), y.shape) for e in r], axis=-1) for r in entries],
                            axis=-2)

    def evaluate(y, delta):
        y = np.asarray(y, dtype=float)
        out = np.asarray(fn(y, delta), dtype=float)
        if out.shape != y.shape + (k, k):
            raise TheorykitError(f"T(y) must have shape (N, {k}, {k}) for N values of y, got {out.shape}")
        if not np.all(np.isfinite(out)):
            raise TheorykitError("T(y) is not finite at some y of the support")
        asym = float(np.max(np.abs(out - np.swapaxes(out, -1, -2)), initial=0.0))
        if asym > 1e-12 * max(1.0, float(np.max(np.abs(out), initial=0.0))):
            raise TheorykitError(f"T(y) must be symmetric (T_ij = T_ji); it differs by {asym:.3g} at some y")
        return 0.5 * (out + np.swapaxes(out, -1, -2))

    return evaluate


def _clip(text, n: int = 60) -> str:
    """repr of a user's text cut to about n characters (a one-line error stays readable)."""
    r = repr(text)
    return r if len(r) <= n else f"{r[:n]}... ({len(str(text))} characters)"
