"""The whitelist parser: accepted syntax, rejected code (never evaluated), clear one-line errors."""
import pytest
import sympy as sp

import theorykit as tk
from theorykit import conventions as cv
from theorykit.errors import ParseError, TheorykitError

x = cv.X


@pytest.mark.parametrize("text,expected", [
    ("x*erf(x)", x * sp.erf(x)),
    ("tanh(x)", sp.tanh(x)),
    ("Max(0, x)", sp.Max(0, x)),
    ("x^2 + 0.5*x", x ** 2 + x / 2),            # ^ is power, floats become exact rationals
    ("x*Phi(x)", x * (1 + sp.erf(x / sp.sqrt(2))) / 2),
    ("log(1 + exp(-x))", tk.symbolic.functions.softplus(-x)),  # stabilised automatically
])
def test_accepted_expressions(text, expected):
    assert sp.simplify(tk.activation(text).expr - expected) == 0


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "x.real", "(lambda: 1)()", "[x]", "x if x else 1", "open('f')",
    "exec('1')", "x; x", "globals()", "x.__class__", "f'{x}'", "'abc'", "x == 1", "erf(x=1)",
])
def test_code_is_rejected_not_evaluated(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ParseError) as e:
        tk.activation(text)
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_os_system_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ParseError):
        tk.activation(f"__import__('os').system('touch {marker}')")
    assert not marker.exists()


@pytest.mark.parametrize("maker,text,needle", [
    (tk.activation, "", "empty"),
    (tk.activation, "y", "unknown symbol 'y'"),
    (tk.activation, "foo(x)", "function 'foo' is not allowed"),
    (tk.activation, "x +", "syntax error"),
    (tk.link, "x**2", "unknown symbol 'x'"),
    (tk.link, "z + z1", "mixes z with z1..zk"),
    (tk.link, "eps", "does not depend on the latent"),
    (tk.loss, "y**2", "does not depend on yhat"),
    (tk.loss, "(y - x)**2", "unknown symbol 'x'"),
    (tk.activation, "x**100", "too large"),
    (tk.activation, "log(x)", "not real and finite at x=-5"),
    (tk.activation, "1/x", "not real and finite at x=0"),
    (tk.link, "sqrt(z)", "not real and finite"),
])
def test_clear_errors(maker, text, needle):
    with pytest.raises(TheorykitError) as e:
        maker(text)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_presets_and_parameters():
    assert tk.link("phase-retrieval").expr == cv.Z ** 2
    assert tk.link("noisy-phase-retrieval:s=0.3").expr == cv.Z ** 2 + sp.Rational(3, 10) * cv.EPS
    assert tk.link("z1*z2").k == 2 and tk.link("z1 + z2**2").latent == (cv.z_symbol(1), cv.z_symbol(2))
    assert tk.loss("huber:c=2").expr.has(sp.Piecewise)
    with pytest.raises(TheorykitError, match="expected a number"):
        tk.link("noisy-phase-retrieval:s=abc")
    for name in ["quad", "gelu", "relu", "tanh", "erf", "linear", "he2", "he3"]:
        assert tk.activation(name).expr.free_symbols <= {x}
