"""Issue 11: a bad input exits 2 with one stderr line, an internal error exits 1 with one line (traceback with
--debug), and nothing hangs (wall-clock limits, parser caps, derive's width limit)."""
import subprocess
import sys
import time

import pytest

from theorykit import cli
from theorykit._cli import hermite as hermite_cmd


def _run(capsys, argv):
    rc = cli.main(argv)
    err = capsys.readouterr().err
    return rc, err.strip().splitlines()


NESTED_199 = "(" * 199 + "x" + ")" * 199
NESTED_CALLS_199 = "sin(" * 199 + "x" + ")" * 199
NESTED_100 = "x*(1+" * 100 + "x" + ")" * 100
BIG_CONSTANT = "x+" + "9" * 1500


@pytest.mark.parametrize("argv, needle", [
    (["link", "z1**2", "--max-degree", "2"], None),  # handled: z1 alone is the single-index link z**2
    (["hermite", "gelu:c=1"], "takes no parameters"),
    (["derive", "--activation", "gelu", "--loss", "huber:d=2"], "accepts only c"),
    (["hermite", NESTED_199], "nested too deeply"),
    (["hermite", NESTED_CALLS_199], "nested too deeply"),
    (["hermite", NESTED_100], "nested too deeply"),
    (["hermite", BIG_CONSTANT], "too large"),
    (["hermite", "x*1e400"], "too large"),
    (["hermite", "(10**40)**2*x"], "too large"),
    (["derive", "--activation", "gelu", "--loss", "square", "--width", "40"], "--width <= 16"),
    (["derive", "--activation", "relu", "--loss", "square", "--a=0/0"], "not a number"),  # campaign: ZeroDivisionError
    (["derive", "--activation", "relu", "--loss", "square", "--b=1/0"], "not a number"),
])
def test_bad_input_one_line(capsys, argv, needle):
    t0 = time.monotonic()
    rc, lines = _run(capsys, argv)
    assert time.monotonic() - t0 < 60
    if needle is None:
        assert rc == 0 and lines == []
        return
    assert rc == 2
    assert len(lines) == 1 and lines[0].startswith("theorykit: error: ") and needle in lines[0]
    assert len(lines[0]) < 300


def test_link_z1_alone_is_single_index(capsys):
    assert cli.main(["link", "z1**2", "--json"]) == 0
    import json
    r = json.loads(capsys.readouterr().out)
    assert r["k"] == 1 and r["information_exponent"] == 2


def test_wall_limit_in_process(capsys):
    t0 = time.monotonic()
    rc, lines = _run(capsys, ["hermite", "exp(sin(x))", "--degree", "0", "--wall-limit", "2"])
    assert time.monotonic() - t0 < 30
    assert rc == 2 and len(lines) == 1
    assert "did not finish within 2 s" in lines[0] and "--wall-limit" in lines[0]


def test_wall_limit_deep_expression(capsys):
    t0 = time.monotonic()
    rc, lines = _run(capsys, ["hermite", "sin(" * 50 + "x" + ")" * 50, "--degree", "2", "--wall-limit", "2"])
    assert time.monotonic() - t0 < 30
    assert rc in (0, 2)
    if rc == 2:
        assert len(lines) == 1 and "did not finish" in lines[0]


def test_wall_limit_subprocess():
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "theorykit.cli", "hermite", "exp(sin(x))", "--degree", "0",
                        "--wall-limit", "2"], capture_output=True, text=True, timeout=90)
    assert time.monotonic() - t0 < 90
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not finish" in lines[0]


def test_env_wall_limit(capsys, monkeypatch):
    monkeypatch.setenv("THEORYKIT_WALL_LIMIT", "2")
    rc, lines = _run(capsys, ["hermite", "exp(sin(x))", "--degree", "0"])
    assert rc == 2 and len(lines) == 1 and "within 2 s" in lines[0]


def test_internal_error_exit_1(capsys, monkeypatch):
    def boom(args):
        return 1 / 0

    monkeypatch.setattr(hermite_cmd, "run", boom)
    rc, lines = _run(capsys, ["hermite", "quad"])
    assert rc == 1
    assert len(lines) == 1
    assert lines[0].startswith("theorykit: internal error: ZeroDivisionError:") and "--debug" in lines[0]


@pytest.mark.parametrize("argv", [["--debug", "hermite", "quad"], ["hermite", "quad", "--debug"]])
def test_internal_error_debug_raises(monkeypatch, argv):
    def boom(args):
        return 1 / 0

    monkeypatch.setattr(hermite_cmd, "run", boom)
    with pytest.raises(ZeroDivisionError):
        cli.main(argv)


def test_debug_does_not_change_user_errors(capsys):
    rc, lines = _run(capsys, ["--debug", "hermite", "gelu:c=1"])
    assert rc == 2 and len(lines) == 1
