"""theorykit check / theorykit.check: a hand calculation against theorykit (docs/theory.md §8).

The claims below are derived by hand or taken from outside the project, never from theorykit's own output:
* GeLU mu_2 = E[sigma''(G)] = E[2 phi(G) - G^2 phi(G)] = 1/sqrt(pi) - 1/(4 sqrt(pi)) = 3/(4 sqrt(pi));
* ReLU: E[sigma(G)] = 1/sqrt(2 pi), mu_1 = 1/2, E[sigma''(U)] = phi_q(0) = 1/sqrt(2 pi q) (Dirac mass at the kink),
  E[U sigma'''(U)] = -(x phi)'(0) = -1/sqrt(2 pi);
* E[erf(G)^2] = (2/pi) asin(2/3) (the arcsine kernel, Williams 1997);
* tanh's mu_1 by scipy.integrate.quad (an outside quadrature) and Stein's identity E[sigma'''(G)] = mu_3;
* phase retrieval: delta_alg = 1/2 (Mondelli & Montanari 2018), generative exponent 2; He_3 has information exponent 3;
* x^2, y = z^2, square loss: R_u(0,0) = 4, C_u(0,0) = 48, so Theta^T Theta(1) = (1 - 4 eta)^2 + 48 eta^2 / delta
  (= 67/100 at delta = 4, eta = 1/20: examples/example_hand_check.py derives it step by step).
"""
import json
import math

import pytest
import sympy as sp
from scipy import integrate

import theorykit as tk
from theorykit.cli import main


@pytest.mark.parametrize("kind,claim,kw", [
    ("hermite", "3/(4*sqrt(pi))", dict(activation="gelu", k=2)),
    ("hermite", "1/sqrt(2*pi)", dict(activation="relu", k=0)),
    ("hermite", "1/2", dict(activation="relu", k=1)),
    ("expectation", "1/sqrt(2*pi)", dict(activation="relu", of="sigma2")),
    ("expectation", "1/sqrt(2*pi*q)", dict(activation="relu", of="sigma2", variance="q")),
    ("expectation", "-1/sqrt(2*pi)", dict(activation="relu", of="x*sigma3")),
    ("expectation", "1/2", dict(activation="relu", of="sigma1**2")),
    ("delta_alg", "1/2", dict(link="phase-retrieval")),
    ("exponent", "2", dict(link="phase-retrieval", which="generative")),
    ("exponent", "3", dict(link="z**3 - 3*z", which="information")),
    ("dmft", "67/100", dict(quantity="gram1", activation="quad", link="phase-retrieval", delta=4, eta="1/20")),
    ("dmft", "(1 - 4*eta)**2 + 48*eta**2/delta", dict(quantity="gram1", activation="quad", link="phase-retrieval")),
    ("dmft", "4", dict(quantity="R_u00", activation="quad", link="phase-retrieval", delta=4, eta=0.05)),
    # eta = 0: nothing moves (C_w singular; the campaign found 0**0 raised inside the polynomial ring)
    ("dmft", "1", dict(quantity="gram1", activation="quad", link="z**2", eta=0)),
])
def test_hand_derived_claims_are_equal_exactly(kind, claim, kw):
    r = tk.check(kind, claim, **kw)
    assert r.verdict == "equal" and r.message == "equal (exactly)", (r.message, r.how)
    assert r.computed.tier == "exact" and r.difference_exact == "0"


@pytest.mark.parametrize("kind,claim,kw,diff", [
    ("hermite", "1/(2*sqrt(pi))", dict(activation="gelu", k=2), -1 / (4 * math.sqrt(math.pi))),
    ("expectation", "1/sqrt(2*pi)", dict(activation="relu", of="sigma2", variance=2),
     1 / math.sqrt(2 * math.pi) - 1 / math.sqrt(4 * math.pi)),
    ("dmft", "67/100", dict(quantity="gram1", activation="quad", link="phase-retrieval", delta=2, eta="1/20"), -0.03),
    ("delta_alg", "1/3", dict(link="phase-retrieval"), 1 / 3 - 1 / 2),
])
def test_wrong_claims_differ_by_the_exact_difference(kind, claim, kw, diff):
    r = tk.check(kind, claim, **kw)
    assert r.verdict == "differs" and r.message.startswith("differs by"), r.message
    assert r.difference == pytest.approx(diff, rel=1e-12)


def test_symbolic_difference_is_named():
    r = tk.check("dmft", "(1 - 4*eta)**2 + 47*eta**2/delta", quantity="C_theta11", activation="quad",
                 link="phase-retrieval")
    assert r.verdict == "differs"
    eta, delta = sp.symbols("eta delta", positive=True)
    assert sp.simplify(sp.sympify(r.difference_exact, locals={"eta": eta, "delta": delta}) + eta ** 2 / delta) == 0


def test_a_bounded_activation_with_a_published_closed_form():
    """E[erf(G)^2] = (2/pi) asin(2/3): equal, exactly or to 50 digits (said which)."""
    r = tk.check("expectation", "2/pi*asin(2/3)", activation="erf(x)", of="sigma**2")
    assert r.equal, (r.message, r.how)
    assert r.message in ("equal (exactly)", "equal to 50 digits") or r.digits >= 12
    wrong = tk.check("expectation", "2/pi*asin(1/2)", activation="erf(x)", of="sigma**2")
    assert wrong.verdict == "differs"


def test_quadrature_tier_gives_digits_against_an_outside_quadrature():
    ref, _ = integrate.quad(lambda g: math.tanh(g) * g * math.exp(-g * g / 2) / math.sqrt(2 * math.pi), -40, 40,
                            epsabs=1e-14, epsrel=1e-14)
    r = tk.check("hermite", repr(ref), activation="tanh", k=1)
    assert r.verdict == "agrees" and r.computed.tier == "quadrature"
    assert r.digits >= 12 and r.message == f"equal to {r.digits} digits"
    off = tk.check("hermite", repr(ref + 1e-9), activation="tanh", k=1)  # 17 digits claimed, 9 right
    assert off.verdict == "differs"
    # a decimal claim asserts its own digits: 0.6057 is tanh's mu_1 rounded to 4, 0.6058 is not
    r4 = tk.check("hermite", f"{ref:.4f}", activation="tanh", k=1)
    assert r4.verdict == "agrees" and r4.message == "equal to 4 digits (the claim's precision)"
    assert tk.check("hermite", f"{ref + 1e-4:.4f}", activation="tanh", k=1).verdict == "differs"
    # and likewise against an exact value: sqrt(2/pi) = E[sigma'(G)] for sign(x) (a jump: 2 delta(x))
    assert tk.check("expectation", "0.7979", activation="sign(x)", of="sigma1").verdict == "agrees"
    assert tk.check("expectation", "0.7978", activation="sign(x)", of="sigma1").verdict == "differs"
    assert tk.check("hermite", "0.5", activation="relu", k=1).message == "equal (exactly)"


def test_stein_identity_across_tiers():
    """E[sigma'''(G)] = mu_3 for tanh: the expectation's quadrature against the Hermite coefficient's value."""
    mu3 = tk.hermite_coefficients("tanh", 3).coefficients[3].value
    r = tk.check("expectation", repr(mu3), activation="tanh", of="sigma3")
    assert r.equal and r.digits >= 12


def test_claims_beyond_floating_range_differ(monkeypatch):
    """Found by the campaign: a claim that overflows a float at the evaluation points is a difference, never an
    internal OverflowError, and a NaN difference is never an agreement.  (SymPy's simplify runs into its time limit
    on the first claim; a shorter limit here keeps the test quick and exercises that path too.)"""
    import theorykit.claims

    monkeypatch.setattr(theorykit.claims, "SIMPLIFY_SECONDS", 1.0)
    r = tk.check("expectation", "9**(9**9*q)", activation="relu", of="sigma2", variance="q")
    assert r.verdict == "differs"
    r = tk.check("dmft", "10**40**(delta)", quantity="gram1", activation="quad", link="z**2")
    assert r.verdict == "differs"


def test_undecided_and_infinite():
    assert tk.check("delta_alg", "inf", link="z1*z2").verdict == "differs"
    r = tk.check("exponent", "inf", link="z**2", which="information")
    assert r.verdict == "differs"


@pytest.mark.parametrize("kind,claim,kw,msg", [
    ("hermite", "1", dict(activation="gelu"), "needs k"),
    ("expectation", "1", dict(activation="relu", of="sigma1*sigma2"), "ambiguous"),
    ("expectation", "1", dict(activation="relu", of="sigma2**2"), "two Dirac terms"),
    ("expectation", "1", dict(activation="relu", of="sigma2", variance=-1), "variance"),
    ("hermite", "q", dict(activation="gelu", k=2), "unknown symbol 'q'"),
    ("hermite", "__import__('os')", dict(activation="gelu", k=2), "forbidden"),
    ("dmft", "1", dict(quantity="gram9", activation="quad", link="z**2"), "unknown DMFT quantity"),
    ("dmft", "1", dict(quantity="gram1[3,0]", activation="quad", link="z**2"), "outside"),
    ("dmft", "1", dict(quantity="gram1", activation="gelu", link="z**2"), "polynomial"),
    ("nonsense", "1", {}, "kind must be one of"),
    ("hermite", "sqrt(-1)", dict(activation="gelu", k=1), "not a real number"),
    ("expectation", "1", dict(activation="relu", of="sigma2*exp(1/x)"), "not finite"),
])
def test_bad_input_is_one_line(kind, claim, kw, msg):
    with pytest.raises(tk.TheorykitError) as e:
        tk.check(kind, claim, **kw)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_cli_json_contract_and_exit_status(capsys):
    assert main(["check", "hermite", "3/(4*sqrt(pi))", "--activation", "gelu", "--k", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"kind", "quantity", "claim", "verdict", "message", "digits", "computed", "difference", "how",
                        "seconds"}
    assert out["verdict"] == "equal" and out["computed"]["tier"] == "exact"
    assert main(["check", "dmft", "67/100", "--quantity", "gram1", "--activation", "quad", "--link",
                 "phase-retrieval", "--delta", "2", "--eta", "0.05"]) == 3
    assert "differs by -3/100" in capsys.readouterr().out
    assert main(["check", "delta-alg", "1/2", "--link", "phase-retrieval"]) == 0
    assert main(["check", "exponent", "2", "--link", "z**2", "--which", "generative"]) == 0
    assert main(["check", "expectation", "1/sqrt(2*pi)", "--activation", "relu", "--of", "sigma2"]) == 0
    capsys.readouterr()
    assert main(["check", "expectation", "1", "--activation", "relu", "--of", "sigma2", "--variance",
                 "exec('1')"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("theorykit: error:") and err.count("\n") == 1
