"""Three defects a new user hits (issue 27): unused latent indices, inadmissible activations accepted by some commands
but not others, and preset typos without a suggestion."""
import json
import time
import warnings

import pytest
import sympy as sp

from theorykit import conventions as cv
from theorykit.cli import main
from theorykit.errors import TheorykitError
from theorykit.symbolic.hermite import hermite_coefficients
from theorykit.symbolic.ingredients import Link, activation, link, loss
from theorykit.symbolic.links import analyse_link
from theorykit.symbolic.network import Network


def one_line_error(capsys, argv) -> str:
    """Run the CLI: exit status 2, nothing on stdout, exactly one line on stderr (no traceback, no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning on the way is a failure, not a printed line
        assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("theorykit: error: "), err
    return err.strip()


# ------------------------------------------------------------------------------ 1. unused latent indices
def test_unused_latent_indices_are_reindexed_and_the_renaming_is_recorded():
    z1, z2 = cv.z_symbol(1), cv.z_symbol(2)
    lk = link("z5**2")
    assert (lk.k, lk.latent, lk.expr) == (1, (cv.Z,), cv.Z ** 2)
    assert lk.reindexed == (("z5", "z"),) and "z5 -> z" in lk.note
    lk = link("z1*z3")
    assert (lk.k, lk.latent, lk.expr) == (2, (z1, z2), z1 * z2)
    assert lk.reindexed == (("z3", "z2"),) and "z3 -> z2" in lk.note
    lk = link("z2 + z4**2 + eps/2")
    assert (lk.k, lk.expr) == (2, z1 + z2 ** 2 + cv.EPS / 2) and lk.reindexed == (("z2", "z1"), ("z4", "z2"))
    # links that use 1..k (and presets) are unchanged and say nothing
    for spec in ("z**2", "z1", "z1*z2", "product", "staircase", "z1**2 + z2**2 + z3"):
        assert link(spec).reindexed == () and link(spec).note == ""


def test_reindexed_link_analysis_equals_the_compact_one():
    a, b = analyse_link("z5**2"), analyse_link("z**2")
    for key in ("k", "information_exponent", "generative_exponent", "easy_dim", "hard_dim"):
        assert getattr(a, key) == getattr(b, key), key
    assert (a.delta_alg.exact, a.delta_alg.value, a.delta_alg.error) == (sp.Rational(1, 2), 0.5, 0.0)
    assert any("z5 -> z" in n for n in a.notes)


def test_link_cli_says_it_reindexed(capsys):
    assert main(["link", "z5**2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["reindexed"] == {"z5": "z"} and r["k"] == 1 and r["hard_dim"] == 1
    assert r["delta_alg"]["exact"] == "1/2" and r["information_exponent"] == 2 and r["name"] == "z5**2"
    assert main(["link", "z**2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["reindexed"] == {}
    assert main(["link", "z5**2"]) == 0
    out = capsys.readouterr().out
    assert "(k = 1)" in out and "note: " in out and "z5 -> z" in out


# ------------------------------------------------------------------------------ 2. one admissibility check
BAD = "exp(x**2/2)"


def test_inadmissible_activation_refused_by_every_constructor():
    msgs = set()
    for build in (activation, lambda s: Network(s, "square"), lambda s: hermite_coefficients(s, 2),
                  lambda s: activation(sp.exp(cv.X ** 2 / 2))):
        with pytest.raises(TheorykitError) as e:
            build(BAD)
        msgs.add(str(e.value).replace("'exp(x**2/2)'", "NAME"))
    assert len(msgs) == 1, msgs
    (msg,) = msgs
    assert "E[sigma(G)^2] is infinite" in msg and "\n" not in msg


@pytest.mark.parametrize("spec", ["exp(x**2/4)", "exp(x**2)", "exp(exp(x))", "x*exp(x**2/3)", "sqrt(30 - x**2)",
                                  "1/(x - 1/100)", "exp(40*x)"])
def test_other_inadmissible_activations(spec):
    with pytest.raises(TheorykitError):
        activation(spec)


@pytest.mark.parametrize("spec", ["gelu", "relu", "tanh", "x**2", "x + 0.5*x**2", "x*tanh(x)", "softplus(x)",
                                  "sigmoid(x)", "exp(x)", "x*erf(x)", "quad", "erf", "linear", "he2", "he3",
                                  "exp(x**2/5)", "abs(x)", "sin(x)", "Max(0, x)", "x**3 - x", "Heaviside(x)",
                                  "1/(1 + x**2)", "log(1 + x**2)", "exp(-x**2)"])
def test_legitimate_activations_accepted(spec):
    a = activation(spec)
    Network(a, "square")
    t0 = time.perf_counter()
    for _ in range(20):
        activation(spec)
    assert time.perf_counter() - t0 < 0.5  # the check is cached: a construction costs no re-derivation


@pytest.mark.parametrize("argv", [
    ["threshold", "--activation", BAD, "--link", "phase-retrieval", "--loss", "square", "--eta", "1", "--t", "0"],
    ["hermite", BAD],
    ["derive", "--activation", BAD, "--loss", "square"],
    ["hessian", "--activation", BAD, "--link", "phase-retrieval", "--delta", "4", "--t", "0", "--eta", "1"],
    ["dmft", "--activation", BAD, "--link", "phase-retrieval", "--delta", "2", "--eta", "1", "--steps", "2"],
    ["simulate", "--activation", BAD, "--link", "phase-retrieval", "--delta", "2", "--d", "20", "--steps", "2",
     "--eta", "1"],
])
def test_every_command_refuses_with_the_same_line(capsys, argv):
    err = one_line_error(capsys, argv)
    assert "activation 'exp(x**2/2)'" in err and "E[sigma(G)^2] is infinite" in err, err


# ------------------------------------------------------------------------------ 3. preset typos
@pytest.mark.parametrize("build,spec,want", [
    (link, "sign-symetric", "unknown link 'sign-symetric': did you mean 'sign-symmetric'?"),
    (link, "phase-retreival", "unknown link 'phase-retreival': did you mean 'phase-retrieval'"),
    (link, "noisy-phase-retreival:s=0.3", "did you mean 'noisy-phase-retrieval'"),
    (link, "phase_retrieval", "did you mean 'phase-retrieval'"),
    (activation, "gleu", "unknown activation 'gleu': did you mean 'gelu'?"),
    (loss, "sqaure", "unknown loss 'sqaure': did you mean 'square'?"),
    # a preset-like name with no near preset gets the list; anything else keeps the parser's reason
    (link, "totally-unknown", "presets: "),
    (link, "z-epsilon", "unknown symbol 'epsilon'"),
    (activation, "y**2", "unknown symbol 'y'"),
    (activation, "__import__('os')", "forbidden characters"),
    (link, "open-file('x')", "unknown symbol 'open'"),
])
def test_unknown_names_get_a_suggestion_or_the_parsers_reason(build, spec, want):
    with pytest.raises(TheorykitError) as e:
        build(spec)
    assert want in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("argv,want", [
    (["link", "sign-symetric"], "did you mean 'sign-symmetric'?"),
    (["link", "phase-retreival"], "did you mean 'phase-retrieval'"),
    (["hermite", "gleu"], "did you mean 'gelu'?"),
])
def test_preset_typos_cli(capsys, argv, want):
    assert want in one_line_error(capsys, argv)


def test_a_directly_built_link_keeps_its_unused_coordinate():
    """The renumbering belongs to the constructor: a Link built with an unused coordinate stays as built, so the
    multi-index sup formula can still be checked on y = z2^2 with k = 2 (it reduces to the single-index 1/2)."""
    z1, z2 = cv.z_symbol(1), cv.z_symbol(2)
    a = analyse_link(Link("z2**2", z2 ** 2, 2, (z1, z2)))
    assert a.k == 2 and (a.easy_dim, a.hard_dim) == (0, 2) and a.link.reindexed == ()
    assert a.delta_alg.exact is None and a.delta_alg.error < 0.01
    assert abs(a.delta_alg.value - 0.5) <= a.delta_alg.error
