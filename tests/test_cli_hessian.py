"""Issue 12 point 5: `theorykit hessian` and `theorykit threshold` -- the JSON contracts, strict JSON (no NaN or
Infinity tokens: non-finite values are null), one-line errors with exit status 2 for bad inputs, help text on every
option and an example line.  Tiny settings (2048 DMFT paths in 2 replicas, t <= 3, d = 200) keep the file fast; the
accuracy of the numbers themselves is tested in tests/test_hessian_theory.py and the validation table."""
import contextlib
import io
import json

import pytest

from theorykit.cli import build_parser, main

TINY = ["--paths", "2048", "--replicas", "2"]
HESS = ["hessian", "--activation", "gelu", "--link", "z**2", "--loss", "square", "--delta", "10", "--eta", "1"] + TINY
THR = ["threshold", "--activation", "gelu", "--link", "sign-symmetric", "--loss", "logistic", "--eta", "1"] + TINY

HESSIAN_KEYS = {"t", "edge", "density", "outliers", "unbounded", "truncation_n", "D_tail", "simulated", "settings",
                "seconds"}
THRESHOLD_KEYS = {"delta_alg", "delta_star", "settings", "seconds"}
ENTRY_KEYS = {"t", "value", "stderr", "edge", "outlier", "overlap2", "truncation_n"}


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def strict_json(text):
    def refuse(token):
        raise AssertionError(f"non-finite token {token} in the JSON output")

    return json.loads(text, parse_constant=refuse)


def ok(argv):
    rc, out, err = run_cli(argv + ["--json"])
    assert rc == 0, err
    return strict_json(out)


def refused(argv, *needles):
    rc, out, err = run_cli(argv)
    assert rc == 2, (argv, rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("theorykit: error:"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert out == ""


def numbers(obj):
    """Every number in a JSON value (to check they are all finite floats or ints)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


# ------------------------------------------------------------------------------------------------ hessian
@pytest.fixture(scope="module")
def hessian_d():
    """Phase retrieval with square loss (D unbounded below) at t = 3, truncated at n = 10 * 200 and refereed."""
    return ok(HESS + ["--t", "3", "--d", "200", "--points", "12"])


def test_hessian_contract_with_d(hessian_d):
    r = hessian_d
    assert HESSIAN_KEYS <= set(r)
    assert r["t"] == 3 and isinstance(r["edge"], float)
    assert len(r["density"]["lambda"]) == len(r["density"]["rho"]) == 12
    assert all(v >= 0 for v in r["density"]["rho"])
    for o in r["outliers"]:
        assert {"lambda", "overlap2", "negative"} <= set(o) and o["lambda"] < r["edge"]
    assert r["unbounded"] in (True, False, None)  # the law's tail verdict (its value: tests/test_hessian_theory.py)
    assert r["truncation_n"] == 2000
    assert "min_D" in r["D_tail"]
    sim = r["simulated"]
    assert {"eigenvalues", "overlap2", "d", "n", "constrained"} <= set(sim)
    assert sim["d"] == 200 and sim["n"] == 2000 and sim["constrained"] is True
    assert len(sim["eigenvalues"]) == len(sim["overlap2"]) == 10
    assert sim["eigenvalues"] == sorted(sim["eigenvalues"])
    assert all(0 <= v <= 1 + 1e-9 for v in sim["overlap2"])
    assert 1 <= len(r["spikes"]) <= 5 and all({"lambda_min_D", "lambda"} <= set(q) for q in r["spikes"])
    assert r["settings"]["d"] == 200 and r["settings"]["t"] == 3
    assert all(isinstance(v, (int, float)) for v in numbers(r))


def test_hessian_without_d_and_without_hard_direction():
    """Link z: no hard direction, so no outlier and no margin (-inf in the API) -> null; no --d -> simulated null."""
    r = ok(["hessian", "--activation", "gelu", "--link", "z", "--delta", "3", "--eta", "0.5", "--t", "1",
            "--points", "4"] + TINY)
    assert HESSIAN_KEYS <= set(r)
    assert r["simulated"] is None and r["truncation_n"] is None and "spikes" not in r
    assert r["outliers"] == [] and r["margin"] is None
    assert r["settings"]["hard_dim"] == 0


def test_hessian_text_output():
    rc, out, err = run_cli(["hessian", "--activation", "gelu", "--link", "z", "--delta", "3", "--eta", "0.5",
                            "--t", "0", "--points", "3"] + TINY)
    assert rc == 0, err
    assert "left edge of the bulk" in out and "no hard outlier" in out


@pytest.mark.parametrize("extra, needle", [
    (["--t", "-1"], "--t"), (["--t", "1.5"], "--t"), (["--t", "nan"], "--t"),
    (["--t", "2", "--d", "0"], "--d"), (["--t", "2", "--d", "-5"], "--d"),
    (["--t", "2", "--points", "1"], "--points"), (["--t", "2", "--hessian-k", "0"], "--hessian-k"),
    (["--t", "2", "--width", "9"], "--width"), (["--t", "2", "--width", "0"], "--width"),
    (["--t", "2", "--seed", "-1"], "--seed"), (["--t", "2", "--paths", "1"], "--paths"),
    (["--t", "2", "--replicas", "1"], "--replicas"), (["--t", "2", "--ridge", "-1"], "--ridge"),
    (["--t", "2", "--eta", "0"], "--eta"), (["--t", "2", "--eta", "inf"], "--eta"),
    (["--t", "2", "--d", "100000000"], "simulation needs"),        # the referee refused before the DMFT runs
    (["--t", "1000000000000"], "steps"),                           # the DMFT's kernels: refused up front
])
def test_hessian_bad_inputs(extra, needle):
    refused(HESS + extra, needle)


@pytest.mark.parametrize("delta", ["0", "-1", "nan", "x"])
def test_hessian_bad_delta(delta):
    argv = list(HESS)
    argv[argv.index("--delta") + 1] = delta
    refused(argv + ["--t", "1"], "--delta")


# ------------------------------------------------------------------------------------------------ threshold
@pytest.fixture(scope="module")
def threshold_run():
    return ok(THR + ["--t", "0", "2", "--delta-range", "2", "12", "--points", "3", "--refine", "0"])


def test_threshold_contract(threshold_run):
    r = threshold_run
    assert THRESHOLD_KEYS <= set(r)
    assert r["delta_alg"] == pytest.approx(1.3604593, rel=1e-6)  # sign-symmetric: exact delta_alg
    assert [q["t"] for q in r["delta_star"]] == [0, 2]
    for q in r["delta_star"]:
        assert ENTRY_KEYS <= set(q)
        lo, hi = q["bracket"]
        assert 2 <= lo <= q["value"] <= hi <= 12
        assert q["truncation_n"] is None
        assert q["outlier"] < q["edge"] and 0 < q["overlap2"] <= 1
        assert q["stderr"] is None or q["stderr"] >= 0
    assert r["settings"]["t"] == [0, 2] and r["settings"]["points"] == 3
    assert all(isinstance(v, (int, float)) for v in numbers(r))


def test_threshold_delta_alg_null_with_a_reason(monkeypatch):
    """An infinite delta_alg is null with delta_alg_reason (the scan itself replaced by a stub: the mapping is the
    point here, and links with a hard direction and an infinite delta_alg have no outlier to find)."""
    import dataclasses
    import math

    import theorykit.thresholds as thresholds
    from theorykit._cli import threshold as cmd
    from theorykit.symbolic.links import DeltaAlg

    real = cmd.make_problem

    def infinite_delta_alg(*a, **k):
        p = real(*a, **k)
        p.__dict__["analysis"] = dataclasses.replace(p.analysis, delta_alg=DeltaAlg(None, None, math.inf, "stub"))
        return p

    monkeypatch.setattr(cmd, "make_problem", infinite_delta_alg)
    monkeypatch.setattr(thresholds, "delta_star", lambda *a, **k: [])
    r = ok(["threshold", "--activation", "gelu", "--link", "abs", "--eta", "1", "--t", "1"] + TINY)
    assert r["delta_alg"] is None and r["delta_alg_reason"] and r["delta_star"] == []
    assert r["delta_alg_info"]["value"] is None and r["delta_alg_info"]["error"] is None


@pytest.mark.parametrize("extra, needle", [
    (["--t", "-1"], "--t"), (["--t", "1", "x"], "--t"), (["--t"], "--t"),
    (["--t", "1", "--n", "100", "--d", "100"], "not allowed with"),
    (["--t", "1", "--d", "0"], "--d"), (["--t", "1", "--n", "0"], "--n"),
    (["--t", "1", "--delta-range", "5", "2"], "LO < HI"), (["--t", "1", "--delta-range", "3", "3"], "LO < HI"),
    (["--t", "1", "--delta-range", "0", "2"], "--delta-range"),
    (["--t", "1", "--delta-range", "1", "inf"], "--delta-range"),
    (["--t", "1", "--points", "1"], "--points"), (["--t", "1", "--refine", "51"], "--refine"),
    (["--t", "1", "--refine", "-1"], "--refine"), (["--t", "1", "--eta", "-1"], "--eta"),
    (["--t", "1", "--width", "9"], "--width"),
])
def test_threshold_bad_inputs(extra, needle):
    refused(THR + extra, needle)


def test_threshold_link_without_hard_direction():
    refused(["threshold", "--activation", "gelu", "--link", "z", "--eta", "1", "--t", "1"] + TINY,
            "no hard direction")


def test_threshold_no_sign_change_is_one_line():
    # delta in [2, 2.5] at t = 0: no outlier anywhere on the grid (delta*(0) ~ 3.2) -> not a bad input but no answer:
    # exit 4 with the margins tried and their trend
    rc, out, err = run_cli(THR + ["--t", "0", "--delta-range", "2", "2.5", "--points", "2", "--refine", "0"])
    lines = err.strip().splitlines()
    assert rc == 4 and out == "" and len(lines) == 1, (rc, err)
    assert lines[0].startswith("theorykit: no answer: delta*(t = 0): no hard outlier") and "raise the range" in lines[0]


def test_threshold_progress():
    rc, out, err = run_cli(THR + ["--t", "0", "--delta-range", "2", "12", "--points", "2", "--refine", "0",
                                  "--progress", "--json"])
    assert rc == 0, err
    strict_json(out)
    assert "[" in err  # the bar


# ------------------------------------------------------------------------------------------------ help
@pytest.mark.parametrize("command", ["hessian", "threshold"])
def test_every_option_has_help_and_an_example(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    missing = [a.option_strings for a in sub._actions if a.option_strings and not (a.help or "").strip()]
    assert not missing, missing
    assert sub.epilog and sub.epilog.startswith(f"example: theorykit {command} ")
    assert "example: theorykit" in sub.format_help()
