"""theorykit.optimise and `theorykit optimise`: parameters, substitution, the search, its cache, one-line errors, and
an outside check on a family whose optimum is known (docs/optimise.md)."""
import json
import math

import pytest
import sympy as sp

import theorykit as tk
from theorykit.cli import main
from theorykit.errors import TheorykitError
from theorykit.report.optimise import parabola_minimum, quadratic_minimum, parse_params, substitute

CHEAP = dict(paths=1024, replicas=2, delta_range=(1.0, 20.0), deltas=(2.0, 30.0))  # the command's default deltas


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the module: the command reads back the cells the API test computed (same keys)."""
    return str(tmp_path_factory.mktemp("optimise_cache"))


def test_parse_params_and_substitute():
    assert [(p.name, p.low, p.high) for p in parse_params(["c=-1:1", "a=0.5:2"])] == [("c", -1, 1), ("a", 0.5, 2)]
    assert parse_params({"c": (0, 1)})[0].high == 1
    for bad, msg in (("c=1", "NAME=LOW:HIGH"), ("x=0:1", "parameter name"), ("c=1:0", "LOW < HIGH"),
                     ("c=a:1", "numbers"), (["c=0:1", "c=0:2"], "twice"), (["a=0:1", "b=0:1", "c=0:1"], "at most")):
        with pytest.raises(TheorykitError, match=msg):
            parse_params(bad)
    # whole words only: the c of cosh and of the function names is left alone
    assert substitute("cosh(x) + c*x + c**2", {"c": -0.5}) == "cosh(x) + (-0.5)*x + (-0.5)**2"


def test_quadratic_vertices():
    import numpy as np

    w, v = parabola_minimum(np.array([0.0, 1.0, 3.0]), np.array([1.0, 0.0, 4.0]))  # (x - 1)^2 at 0, 1, 3
    assert w[0] == pytest.approx(1.0) and v == pytest.approx(0.0, abs=1e-12)
    assert parabola_minimum(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 0.0])) is None  # a maximum
    X = np.array([[a, b] for a in (-1, 0, 1) for b in (-1, 0, 1)], dtype=float)
    f = (X[:, 0] - 0.3) ** 2 + 2 * (X[:, 1] + 0.2) ** 2 + 0.5 * (X[:, 0] - 0.3) * (X[:, 1] + 0.2) + 1.0
    w, v = quadratic_minimum(X, f)
    assert w == pytest.approx([0.3, -0.2]) and v == pytest.approx(1.0)


def test_an_odd_component_cannot_help_an_even_link_at_t0(cache):
    """sigma = x^2 + c x on phase retrieval, square loss: D(r, y; c) = sigma'^2 + (sigma - y) sigma'' satisfies
    D(-r, y; -c) = D(r, y; c) (SymPy), and at t = 0 r ~ N(0, 1) is symmetric and independent of (z, y), so delta*(0) is
    even in c and c = 0 is stationary.  Measured (tables/optimise_check.md, 21 points): flat within the noise (+-0.04)
    for |c| <= 0.3 and rising beyond (4.07 at |c| = 1).  The search lands in that flat bottom."""
    r, c, y = sp.symbols("r c y", real=True)
    s = r ** 2 + c * r
    D = sp.diff(s, r) ** 2 + (s - y) * sp.diff(s, r, 2)
    assert sp.simplify(D.subs({r: -r, c: -c}, simultaneous=True) - D) == 0
    res = tk.optimise("x**2 + c*x", "phase-retrieval", "c=-1:1", "delta_star@t=0:d=1000", eta=0.05, grid=3,
                      refine=1, baseline=None, ingredients=False, cache=cache, **CHEAP)
    vals = {e["params"]["c"]: e for e in res.evaluations}
    lo, hi = vals[-1.0], vals[1.0]
    assert abs(lo["value"] - hi["value"]) <= 3 * math.hypot(lo["stderr"], hi["stderr"])  # even in c
    assert vals[0.0]["value"] < min(lo["value"], hi["value"])
    assert abs(res.best["params"]["c"]) <= 0.5 and not res.best["at_bound"]
    again = tk.optimise("x**2 + c*x", "phase-retrieval", "c=-1:1", "delta_star@t=0:d=1000", eta=0.05, grid=3,
                        refine=1, baseline=None, ingredients=False, cache=cache, **CHEAP)
    assert all(e["status"] == "cached" for e in again.evaluations) and again.best == res.best


def test_matched_eta_rule(cache):
    """eta_rule="matched": candidate c runs at eta E[gelu'^2] / E[sigma_c'^2]; for sigma = x^2 + c x,
    E[sigma'(G)^2] = E[(2G + c)^2] = 4 + c^2 exactly, and E[gelu'(G)^2] = 0.45585... (quadrature)."""
    from theorykit.report.optimise import slope_energy

    assert slope_energy("x**2 + 0.5*x") == pytest.approx(4.25, rel=1e-12)
    assert slope_energy("relu") == pytest.approx(0.5, rel=1e-12)
    res = tk.optimise("x**2 + c*x", "phase-retrieval", "c=-1:1", "delta_star@t=0:d=1000", eta=0.5, eta_rule="matched",
                      grid=3, refine=0, ingredients=False, cache=cache, **CHEAP)
    g = slope_energy("gelu")
    for e in res.evaluations:
        c = e["params"]["c"]
        assert e["eta"] == pytest.approx(0.5 * g / (4 + c * c), rel=1e-9)
    assert res.baseline["eta"] == pytest.approx(0.5, rel=1e-12) and "matched" in res.settings["eta_rule"]
    with pytest.raises(TheorykitError, match="eta_rule"):
        tk.optimise("x**2 + c*x", "phase-retrieval", "c=-1:1", eta_rule="scaled")


def test_unbuildable_candidates_are_reported_and_skipped(tmp_path):
    # log(c + x**2) at c = 0 is log(x^2): singular at x = 0 -> refused by the admissibility check; the others run
    res = tk.optimise("log(c + x**2)", "phase-retrieval", "c=0:2", "delta_star@t=0:d=1000", grid=3, refine=0,
                      baseline=None, ingredients=False, cache=str(tmp_path), **CHEAP)
    st = {e["params"]["c"]: e["status"] for e in res.evaluations}
    assert st[0.0] in ("refused", "failed") and st[1.0] == "ok" and st[2.0] == "ok"
    assert [e for e in res.evaluations if e["params"]["c"] == 0.0][0]["error"]


def test_optimise_errors():
    with pytest.raises(TheorykitError, match="neither the activation nor the loss"):
        tk.optimise("gelu", "phase-retrieval", "c=0:1", "delta_star@t=0")
    with pytest.raises(TheorykitError, match="objective"):
        tk.optimise("x + c*x**2", "phase-retrieval", "c=0:1", "sim@d=100:T=10")
    with pytest.raises(TheorykitError, match="unknown column"):
        tk.optimise("x + c*x**2", "phase-retrieval", "c=0:1", "delta_starr@t=0")


def test_optimise_command_json(tmp_path, capsys, cache):
    argv = ["optimise", "--activation", "x**2 + c*x", "--param", "c=-1:1", "--link", "phase-retrieval", "--eta",
            "0.05", "--objective", "delta_star@t=0:d=1000", "--grid", "3", "--refine", "0", "--baseline", "gelu",
            "--paths", "1024", "--replicas", "2", "--delta-range", "1", "20", "--cache", cache,
            "--out", str(tmp_path / "search"), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("best", "evaluations", "baseline", "delta_alg", "settings", "gap_to_delta_alg", "ingredients"):
        assert key in out
    assert set(out["best"]) >= {"params", "value", "stderr"} and out["delta_alg"] == 0.5
    assert len(out["evaluations"]) == 3 and all(set(e) >= {"params", "value", "stderr", "status"}
                                                 for e in out["evaluations"])
    assert out["baseline"]["activation"] == "gelu" and out["baseline"]["value"] > 0.5
    assert out["ingredients"]["winner"]["hermite"][2] == pytest.approx(2.0)  # x^2 + c x: mu_2 = 2
    assert any(f.endswith(".png") for f in out["files"]) and (tmp_path / "search.csv").exists()
    assert "theorykit optimise --activation" in (tmp_path / "search.md").read_text()
    assert main(argv[:-1]) == 0  # text output, every evaluation read back from the cache
    text = capsys.readouterr().out
    assert "best: c =" in text and "(cached)" in text


@pytest.mark.parametrize("argv,msg", [
    (["--param", "c=1"], "NAME=LOW:HIGH"),
    (["--param", "c=0:1", "--param", "c=0:2"], "twice"),
    (["--param", "d=0:1"], "neither the activation"),
    (["--param", "c=0:1", "--processes", "2", "--scheduler", "tcp://127.0.0.1:1"], "not both"),
])
def test_optimise_command_one_line_errors(argv, msg, capsys):
    base = ["optimise", "--activation", "x**2 + c*x", "--link", "phase-retrieval", "--objective", "delta_star@t=0"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1
