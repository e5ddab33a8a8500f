"""Whitelist parser for user expressions.

The text is parsed by Python's :mod:`ast` into a syntax tree (parsing executes nothing); the tree is then walked and
only whitelisted node types are turned into SymPy objects by this module's own code.  Nothing a user types is ever
passed to ``eval``/``exec`` or to ``sympify`` of a string.  Attribute access, subscripts, lambdas, comprehensions,
keyword arguments, strings and unknown names are rejected with a one-line :class:`ParseError`.
"""
import ast
import math
import re

import sympy as sp

from ..errors import ParseError
from . import functions as fn

# name -> (callable building a SymPy expression, allowed numbers of arguments)
FUNCTIONS = {
    "exp": (sp.exp, (1,)), "log": (sp.log, (1,)), "sqrt": (sp.sqrt, (1,)),
    "erf": (sp.erf, (1,)), "erfc": (sp.erfc, (1,)), "erfinv": (sp.erfinv, (1,)),
    "tanh": (sp.tanh, (1,)), "sinh": (sp.sinh, (1,)), "cosh": (sp.cosh, (1,)),
    "sin": (sp.sin, (1,)), "cos": (sp.cos, (1,)), "atan": (sp.atan, (1,)), "arctan": (sp.atan, (1,)),
    "asin": (sp.asin, (1,)), "arcsin": (sp.asin, (1,)), "acos": (sp.acos, (1,)), "arccos": (sp.acos, (1,)),
    "Abs": (sp.Abs, (1,)), "abs": (sp.Abs, (1,)), "sign": (sp.sign, (1,)),
    "Heaviside": (sp.Heaviside, (1,)), "step": (sp.Heaviside, (1,)),
    "Max": (sp.Max, (2, 3, 4)), "max": (sp.Max, (2, 3, 4)), "Min": (sp.Min, (2, 3, 4)), "min": (sp.Min, (2, 3, 4)),
    "sigmoid": (fn.sigmoid, (1,)), "softplus": (fn.softplus, (1,)),
    "Phi": (fn.Phi, (1,)), "phi": (fn.phi, (1,)), "relu": (fn.relu, (1,)),
}



def _preset_functions() -> dict:
    """Every activation preset as a function inside expressions (``gelu(x) + x**2/4``, ``quad(2*x)``): the preset's
    sigma with x replaced by the argument."""
    from .. import conventions as cv
    from .presets import ACTIVATIONS

    return {name: ((lambda e: lambda u: e.xreplace({cv.X: u}))(make()), (1,))
            for name, make in ACTIVATIONS.items() if name.isidentifier() and name not in FUNCTIONS}


FUNCTIONS.update(_preset_functions())
_CONSTANTS = {"pi": sp.pi, "E": sp.E}
_MAX_LEN = 2000
_MAX_POW = 64
#: deepest bracket nesting accepted: real expressions need a handful of levels, while SymPy's recursive algorithms
#: (simplify, integrate, lambdify) take minutes or overflow the stack on a few hundred
_MAX_DEPTH = 50
#: largest number of digits of a literal constant (and of any constant the expression builds, e.g. 10**50**2 would
#: need _MAX_POW): beyond float range the numeric tiers overflow
_MAX_DIGITS = 50
_MAX_MAGNITUDE = 10 ** _MAX_DIGITS
#: functions whose value outgrows exp(|argument|): a constant argument above log(1e50) is a constant beyond the cap
_GROWING = {"exp", "sinh", "cosh"}
_MAX_EXP_ARG = _MAX_DIGITS * math.log(10)


def _describe(node):
    return type(node).__name__


class _Builder:
    def __init__(self, symbols: dict, text: str, what: str):
        self.symbols = symbols
        self.text = text
        self.what = what

    def fail(self, msg):
        raise ParseError(f"{self.what} {_short(self.text)}: {msg}")

    def build(self, node):
        if isinstance(node, ast.Expression):
            return self.build(node.body)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                self.fail(f"only numbers are allowed as constants, not {type(v).__name__}")
            if v != v or abs(v) >= _MAX_MAGNITUDE:  # nan cannot be written; inf is 1e400
                self.fail(f"constant too large (at most {_MAX_DIGITS} digits, |c| < 1e{_MAX_DIGITS})")
            return sp.Integer(v) if isinstance(v, int) else sp.Rational(repr(v))
        if isinstance(node, ast.Name):
            if node.id in self.symbols:
                return self.symbols[node.id]
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            if node.id in FUNCTIONS:
                self.fail(f"'{node.id}' is a function and needs arguments, e.g. {node.id}(...)")
            allowed = ", ".join(sorted(self.symbols)) or "none"
            self.fail(f"unknown symbol '{node.id}' (allowed variables: {allowed}; constants: pi, E)")
        if isinstance(node, ast.UnaryOp):
            v = self.build(node.operand)
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.UAdd):
                return v
            self.fail(f"operator {_describe(node.op)} is not allowed")
        if isinstance(node, ast.BinOp):
            a, b = self.build(node.left), self.build(node.right)
            op = node.op
            if isinstance(op, ast.Add):
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.Mult):
                return a * b
            if isinstance(op, ast.Div):
                if b == 0:
                    self.fail("division by zero")
                return a / b
            if isinstance(op, ast.Pow):
                if b.is_number and abs(float(b)) > _MAX_POW:
                    self.fail(f"exponent {_clip(b)} is too large (|exponent| <= {_MAX_POW})")
                if a.is_number and b.is_number:
                    self._check_power(a, b)
                return a ** b
            self.fail(f"operator {_describe(op)} is not allowed (use + - * / ** ^)")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                self.fail("only plain function names may be called (no attributes, no expressions)")
            name = node.func.id
            if name not in FUNCTIONS:
                self.fail(f"function '{name}' is not allowed (allowed: {', '.join(sorted(FUNCTIONS))})")
            if node.keywords:
                self.fail(f"keyword arguments are not allowed in {name}(...)")
            f, nargs = FUNCTIONS[name]
            if len(node.args) not in nargs:
                self.fail(f"{name} takes {' or '.join(map(str, nargs))} argument(s), got {len(node.args)}")
            args = [self.build(a) for a in node.args]
            if name in _GROWING and args[0].is_number:
                # exp(exp(exp(100))) is a constant with ~1e43 digits in its exponent: SymPy's evalf of it never ends
                v = self._value(args[0])
                if (v.real if name == "exp" else abs(v.real)) > _MAX_EXP_ARG:
                    self.fail(f"constant too large: {name}({v.real:.6g}) exceeds 1e{_MAX_DIGITS}")
            return f(*args)
        self.fail(f"{_describe(node)} syntax is not allowed in an expression")

    def _value(self, c) -> complex:
        """The numeric value of a constant subexpression (bounded by induction: every constant built so far passed
        the checks below, so evaluating it is quick)."""
        try:
            return complex(sp.N(c, 15))
        except (TypeError, ValueError, OverflowError):
            self.fail(f"the constant {_clip(c)} has no finite numeric value")

    def _check_power(self, a, b):
        """Refuse a constant power a**b beyond 1e{_MAX_DIGITS} before SymPy computes it exactly: ((9**64)**64)**64
        would otherwise be built digit by digit (millions of digits, minutes)."""
        va, vb = self._value(a), self._value(b)
        if va == 0:
            if vb.real < 0:
                self.fail("division by zero (0 to a negative power)")
            return
        mag = abs(vb.real) * abs(math.log10(abs(va)))
        growing = (abs(va) > 1) == (vb.real > 0)
        if growing and mag > _MAX_DIGITS:
            self.fail(f"constant too large: ({_clip(a)})**({_clip(b)}) has about {mag:.3g} digits "
                      f"(at most {_MAX_DIGITS}, |c| < 1e{_MAX_DIGITS})")


def _bracket_depth(text: str) -> int:
    depth = best = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            best = max(best, depth)
        elif ch in ")]}":
            depth -= 1
    return best


def _clip(obj, n: int = 30) -> str:
    """str(obj), cut to about n characters (a constant named in a one-line error)."""
    t = str(obj)
    return t if len(t) <= n else f"{t[:n]}... ({len(t)} characters)"


def _short(text: str, n: int = 60) -> str:
    """repr of text, shortened to about n characters (error messages stay one readable line)."""
    t = text.strip()
    return repr(t) if len(t) <= n else repr(t[:n]) + f"... ({len(t)} characters)"


def parse_expression(text: str, symbols: dict, what: str = "expression") -> sp.Expr:
    """Parse ``text`` into a SymPy expression using only ``symbols`` (name -> Symbol) and whitelisted functions.

    >>> import sympy as sp
    >>> x = sp.Symbol('x', real=True)
    >>> parse_expression("x*erf(x)", {"x": x})
    x*erf(x)
    """
    if not isinstance(text, str):
        raise ParseError(f"{what} must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ParseError(f"{what} is empty")
    if len(stripped) > _MAX_LEN:
        raise ParseError(f"{what} is too long ({len(stripped)} characters, at most {_MAX_LEN})")
    if "__" in stripped or re.search(r"[;\n\\`$@]", stripped):
        raise ParseError(f"{what} {_short(text)}: forbidden characters (dunder names, ';', newlines, backslashes)")
    depth = _bracket_depth(stripped)
    if depth > _MAX_DEPTH:
        raise ParseError(f"{what} {_short(text)}: nested too deeply ({depth} levels of brackets, at most {_MAX_DEPTH})")
    stripped = stripped.replace("^", "**")  # '^' is power, as in mathematics (with power's precedence)
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as e:
        raise ParseError(f"{what} {_short(text)}: syntax error at column {e.offset}") from None
    try:
        expr = _Builder(symbols, text, what).build(tree)
    except ParseError:
        raise
    except (RecursionError, MemoryError):
        raise ParseError(f"{what} {_short(text)}: too deeply nested") from None
    except Exception as e:  # SymPy refused to build the object (e.g. Max of complex values)
        raise ParseError(f"{what} {_short(text)}: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}") from None
    if not isinstance(expr, sp.Basic):
        raise ParseError(f"{what} {_short(text)}: not an expression")
    if expr.has(sp.zoo, sp.oo, -sp.oo, sp.nan):
        raise ParseError(f"{what} {_short(text)}: it contains an infinite or undefined constant (e.g. a division by "
                         "zero)")
    for c in expr.atoms(sp.Rational, sp.Float):
        if not c.is_finite or abs(c) >= _MAX_MAGNITUDE or \
                (c.is_Rational and abs(c.q) >= _MAX_MAGNITUDE):
            raise ParseError(f"{what} {_short(text)}: a constant in it is too large or has too many digits "
                             f"(|c| < 1e{_MAX_DIGITS}, at most {_MAX_DIGITS} digits: {sp.N(c, 6)})")
    return fn.stabilise(sp.sympify(expr))
