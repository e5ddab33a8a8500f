"""Issue 11 (4, 7): every numeric option of dmft, simulate, sweep and spectral is range-checked on the command line
(one line on stderr, exit status 2), huge requests are refused up front from an estimate, and every option has help
text and every command an example line."""
import contextlib
import io
import json

import pytest

from theorykit.cli import build_parser, main

DMFT = ["dmft", "--activation", "relu", "--link", "phase-retrieval", "--delta", "2", "--paths", "256",
        "--replicas", "2"]
SIM = ["simulate", "--activation", "relu", "--link", "phase-retrieval", "--delta", "2", "--d", "10", "--eta", "0.5"]
SWEEP = ["sweep", "--activation", "relu", "--link", "phase-retrieval", "--d", "10", "--eta", "0.5", "--steps", "2"]
SPEC = ["spectral", "--link", "phase-retrieval", "--preprocess", "(y-1)/(y+sqrt(2*delta)-1)"]


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def refused(argv, *needles):
    rc, out, err = run_cli(argv)
    assert rc == 2, (argv, rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("theorykit: error:"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# ------------------------------------------------------------------------------------------------ dmft
def test_dmft_steps_zero_is_a_valid_answer_at_t0():
    rc, out, err = run_cli(DMFT + ["--eta", "0.5", "--steps", "0", "--json"])
    assert rc == 0, err
    r = json.loads(out)
    assert r["t"] == [0] and r["status"] == "ok"


@pytest.mark.parametrize("extra, needle", [
    (["--eta", "0.5", "--steps", "1000000000"], "steps"),               # 10^9 steps: kernels' memory
    (["--eta", "0.5", "--steps", "1000000000000"], "steps"),            # must not allocate np.full(10^12)
    (["--eta", "0.5", "--steps", "100000"], "two-time kernels"),
    (["--eta", "0.5", "--steps", "2", "--paths", "10000000000000"], "GiB"),  # 10^13 paths
])
def test_dmft_huge_requests_are_refused_up_front(extra, needle):
    refused(DMFT + extra, needle)


@pytest.mark.parametrize("option, value", [
    ("--predict-d", "0"), ("--predict-d", "-3"), ("--predict-d", "2.5"),
    ("--capture", "0"), ("--capture", "1.5"),
    ("--order", "0"), ("--order", "-1"), ("--order", "1001"),
    ("--eta", "0"), ("--eta", "-1"), ("--eta", "nan"), ("--eta", "inf"),
    ("--delta", "0"), ("--delta", "nan"), ("--delta", "-inf"),
    ("--steps", "-1"), ("--steps", "1.5"), ("--steps", "1e3"),
    ("--paths", "1"), ("--paths", "nan"), ("--replicas", "1"), ("--replicas", "2.0"),
    ("--ridge", "-1e-9"), ("--ridge", "inf"),
    ("--seed", "-1"), ("--seed", "1.5"), ("--seed", "nan"), ("--seed", str(2 ** 64)),
    ("--capture-hi", "0"), ("--capture-hi", "nan"),
    ("--width", "0"), ("--width", "1.5"),
])
def test_dmft_ranges(option, value):
    argv = DMFT + ["--eta", "0.5", "--steps", "2"]
    if option in argv:
        i = argv.index(option)
        argv = argv[:i] + argv[i + 2:]
    refused(argv + [option, value], option)


@pytest.mark.parametrize("option, value", [
    ("--flow-time", "0"), ("--flow-time", "-2"), ("--flow-time", "nan"), ("--flow-time", "inf"),
    ("--eta0", "0"), ("--eta-max", "-1"), ("--doubling-every", "0"), ("--doubling-every", "2.5"),
])
def test_dmft_flow_ranges(option, value):
    argv = DMFT + (["--flow-time", "1"] if option != "--flow-time" else []) + [option, value]
    refused(argv, option)


# ------------------------------------------------------------------------------------------------ simulate
@pytest.mark.parametrize("option, value", [
    ("--d", "0"), ("--d", "-5"), ("--d", "2.5"), ("--steps", "-1"), ("--steps", "nan"),
    ("--eta", "0"), ("--eta", "inf"), ("--delta", "0"), ("--delta", "nan"),
    ("--seed", "-1"), ("--seed", "0.5"), ("--hessian-every", "-1"), ("--ridge", "-1"), ("--ridge", "nan"),
    ("--n-test", "0"), ("--width", "0"), ("--width", "5000"),
])
def test_simulate_ranges(option, value):
    argv = SIM + ["--steps", "2"]
    if option in argv:
        i = argv.index(option)
        argv = argv[:i] + argv[i + 2:]
    refused(argv + [option, value], option)


@pytest.mark.parametrize("d, steps", [(5, 10 ** 9), (1000, 10 ** 8), (10 ** 6, 10)])
def test_simulate_huge_requests_are_refused_up_front(d, steps):
    argv = [a for a in SIM]
    argv[argv.index("--d") + 1] = str(d)
    refused(argv + ["--steps", str(steps)])


def test_simulate_steps_zero():
    rc, out, err = run_cli(SIM + ["--steps", "0", "--json"])
    assert rc == 0, err
    assert json.loads(out)["t"] == [0]


# ------------------------------------------------------------------------------------------------ sweep
@pytest.mark.parametrize("extra, needle", [
    (["--deltas", "2,2", "--seeds", "2"], "duplicate delta"),
    (["--deltas", "2,4", "--seeds", "1,1"], "duplicate seed"),
    (["--deltas", "2", "--seeds", "0.5,1"], "--seeds"),
    (["--deltas", "2", "--seeds", "-1,2"], "--seeds"),
    (["--deltas", "2", "--seeds", "2.5"], "--seeds"),
    (["--deltas", "2", "--seeds", "0"], "--seeds"),
    (["--deltas", "2", "--seeds", "10000000000000"], "--seeds"),
    (["--deltas", "nan", "--seeds", "2"], "--deltas"),
    (["--deltas", "-1,2", "--seeds", "2"], "--deltas"),
    (["--deltas", "0", "--seeds", "2"], "--deltas"),
    (["--deltas", "inf", "--seeds", "2"], "--deltas"),
    (["--deltas", ",", "--seeds", "2"], "--deltas"),
    (["--deltas", "2", "--seeds", "2", "--processes", "0"], "--processes"),
])
def test_sweep_ranges(extra, needle):
    refused(SWEEP + extra, needle)


# ------------------------------------------------------------------------------------------------ spectral
@pytest.mark.parametrize("extra, needle", [
    (["--delta", "0"], "--delta"), (["--delta", "nan"], "--delta"), (["--delta", "-2"], "--delta"),
    (["--delta", "x"], "--delta"),
    (["--delta", "2", "--delta-range", "5", "1"], "LO < HI"),
    (["--delta", "2", "--delta-range", "3", "3"], "LO < HI"),
    (["--delta", "2", "--delta-range", "0", "3"], "--delta-range"),
    (["--delta", "2", "--delta-range", "1", "inf"], "--delta-range"),
])
def test_spectral_ranges(extra, needle):
    refused(SPEC + extra, needle)


# ------------------------------------------------------------------------------------------------ help
@pytest.mark.parametrize("command", ["dmft", "simulate", "sweep", "spectral"])
def test_every_option_has_help_and_each_command_an_example(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    missing = [a.option_strings for a in sub._actions if a.option_strings and not (a.help or "").strip()]
    assert not missing, missing
    assert sub.epilog and sub.epilog.startswith(f"example: theorykit {command} ")
    assert "example: theorykit" in sub.format_help()


@pytest.mark.parametrize("order", [47, 128, 370])
def test_dmft_accepts_every_usable_gauss_hermite_order(order):
    """--order is accepted up to the largest usable rule (370): the latent check compares against min(8 order, 370)
    nodes (it used to ask for 8 x order and refuse order > 46 with 'got 1024' for --order 128)."""
    rc, out, err = run_cli(["dmft", "--activation", "gelu", "--link", "phase-retrieval", "--delta", "4", "--eta", "1",
                            "--steps", "1", "--paths", "512", "--replicas", "2", "--order", str(order), "--json"])
    assert rc == 0, err
    assert json.loads(out)["status"] == "ok"
    refused(["dmft", "--activation", "gelu", "--link", "phase-retrieval", "--delta", "4", "--eta", "1", "--steps", "1",
             "--order", "371"], "371")
