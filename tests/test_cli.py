"""CLI contracts: --json keys, plain text, one-line errors with exit status 2."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import sympy as sp
from scipy import special

import theorykit
from theorykit import cli
from theorykit.cli import main


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_hermite_gelu_json(capsys):
    r = run_json(capsys, "hermite", "gelu")
    assert r["activation"] == "x*(erf(sqrt(2)*x/2)/2 + 1/2)" and r["name"] == "gelu"
    c = r["coefficients"]
    assert [x["k"] for x in c] == [0, 1, 2, 3, 4]
    assert [x["exact"] for x in c] == ["1/(2*sqrt(pi))", "1/2", "3/(4*sqrt(pi))", "0", "-5/(8*sqrt(pi))"]
    assert [(x["tier"], x["error"]) for x in c] == [("exact", 0.0)] * 5
    # each value is its exact form in floating point, and an independent 200-node Gauss-Hermite quadrature of
    # E[G Phi(G) He_k(G)] (gelu is entire: measured agreement ~1e-15; 1e-12 leaves room for BLAS summation order)
    x, w = np.polynomial.hermite_e.hermegauss(200)
    gelu = x * (1 + special.erf(x / np.sqrt(2))) / 2
    for k, coef in enumerate(c):
        assert abs(coef["value"] - float(sp.sympify(coef["exact"]))) < 1e-15
        quad = np.dot(w, gelu * np.polynomial.hermite_e.hermeval(x, [0] * k + [1])) / np.sqrt(2 * np.pi)
        assert abs(coef["value"] - quad) < 1e-12, k
    assert abs(c[2]["value"] - 0.42314218766081724) < 1e-15


def test_link_phase_retrieval_json(capsys):
    r = run_json(capsys, "link", "phase-retrieval")
    assert {k: r[k] for k in ("k", "information_exponent", "generative_exponent", "easy_dim", "hard_dim")} == \
        {"k": 1, "information_exponent": 2, "generative_exponent": 2, "easy_dim": 0, "hard_dim": 1}
    assert r["delta_alg"]["exact"] == "1/2" and r["delta_alg"]["value"] == 0.5 and r["link"] == "z**2"
    assert r["delta_alg"]["error"] == 0.0 and r["hard_basis"] == [[1.0]] and r["name"] == "phase-retrieval"


def test_derive_json(capsys):
    r = run_json(capsys, "derive", "--activation", "quad", "--loss", "square", "--width", "2", "--a", "1,-1")
    assert r["activation"] == "x**2" and r["width"] == 2 and r["a"] == ["1", "-1"] and r["b"] == ["0", "0"]
    assert len(r["F"]) == 2 and len(r["D"]) == 2 and len(r["D"][0]) == 2
    assert r["D"][0][1] == "-r1*r2" and "r_{1}" in r["F_latex"][0]
    # F and D against an independent derivation: f = (r1^2 - r2^2)/2, l = (y - f)^2/2
    r1, r2, y = sp.symbols("r1 r2 y")
    f = (r1 ** 2 - r2 ** 2) / 2
    loss = (y - f) ** 2 / 2
    assert sp.simplify(sp.sympify(r["f"]) - f) == 0 and sp.simplify(sp.sympify(r["loss"]).subs("yhat", f) - loss) == 0
    for i, ri in enumerate((r1, r2)):
        assert sp.expand(sp.sympify(r["F"][i]) - sp.diff(loss, ri)) == 0
        for j, rj in enumerate((r1, r2)):
            assert sp.expand(sp.sympify(r["D"][i][j]) - sp.diff(loss, ri, rj)) == 0
            assert sp.latex(sp.sympify(r["D"][i][j])) == r["D_latex"][i][j]


def test_text_output(capsys):
    assert main(["hermite", "relu", "--degree", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    # relu: mu_0 = mu_2 = 1/sqrt(2 pi) = 0.398942280401433 (15 significant digits), mu_1 = 1/2
    assert out[0].startswith("sigma(x) = Max(0, x)") and len(out) == 4
    assert out[1].split() == ["mu_0", "=", "0.398942280401433", "exact:", "sqrt(2)/(2*sqrt(pi))", "[exact]"]
    assert out[2].split() == ["mu_1", "=", "0.5", "exact:", "1/2", "[exact]"]
    assert out[3].split() == ["mu_2", "=", "0.398942280401433", "exact:", "sqrt(2)/(2*sqrt(pi))", "[exact]"]


@pytest.mark.parametrize("argv,needle", [
    (["hermite", "__import__('os').system('true')"], "forbidden"),
    (["hermite", "y**2"], "unknown symbol 'y'"),
    (["link", ""], "empty"),
    (["link", "x"], "unknown symbol 'x'"),
    (["derive", "--activation", "gelu", "--loss", "square", "--width", "2", "--a", "1,2,3"], "width"),
    (["hermite", "gelu", "--degree", "-2"], "degree"),
    (["hermite"], "required"),
])
def test_errors_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) if argv == ["hermite"] else _nullcontext():
        rc = main(argv)
        assert rc == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_console_script_installed():
    out = subprocess.run([sys.executable, "-m", "theorykit.cli", "link", "abs", "--json"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout)["delta_alg"]["exact"] == "1/2"


# ------------------------------------------------------------------------------------------ the command registry
EXPECTED_COMMANDS = ["hermite", "link", "derive", "simulate", "spectral", "sweep", "dmft", "hessian", "threshold",
                     "table", "optimise", "plot", "check"]


def test_static_registry_lists_every_command_module():
    """The registry is a static dict of imported modules (no dynamic import, no stand-in for a broken command)."""
    import importlib
    import pkgutil
    import types

    import theorykit._cli as pkg

    assert list(cli.COMMANDS) == EXPECTED_COMMANDS
    for name, mod in cli.COMMANDS.items():
        assert isinstance(mod, types.ModuleType) and mod is importlib.import_module(f"theorykit._cli.{name}")
        assert all(callable(getattr(mod, fn)) for fn in ("add_parser", "run", "text")), name
    on_disk = {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}
    assert on_disk == set(EXPECTED_COMMANDS)  # a new command file must be registered here
    assert not hasattr(cli, "_Broken") and not hasattr(cli, "importlib")


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if re.match(r"    \S", line)]
    assert listed == EXPECTED_COMMANDS


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert capsys.readouterr().out.startswith("usage: theorykit")


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"theorykit {theorykit.__version__}\n"
    assert theorykit.__version__ == "0.1.0"


_BOOM = """
import importlib.abc, sys
class Boom(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "theorykit._cli.sweep":
            raise RuntimeError("boom in sweep")
sys.meta_path.insert(0, Boom())
import theorykit.cli
"""
_MISSING = "import sys; sys.modules['theorykit._cli.sweep'] = None\nimport theorykit.cli"


@pytest.mark.parametrize("code,needle", [(_BOOM, "RuntimeError: boom in sweep"),
                                         (_MISSING, "ModuleNotFoundError: import of theorykit._cli.sweep")],
                         ids=["raises", "missing"])
def test_broken_command_module_fails_loudly(code, needle):
    """A command module that cannot be imported (raises, or is missing) is an internal bug: `theorykit.cli` itself
    fails to import with the original error (before, a missing module was silently dropped and a raising one was
    turned into an 'unavailable' stub)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and needle in out.stderr and "Traceback" in out.stderr
