"""CLI contracts: --json keys, plain text, one-line errors with exit status 2."""
import json
import subprocess
import sys

import pytest

from theorykit.cli import main


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_hermite_gelu_json(capsys):
    r = run_json(capsys, "hermite", "gelu")
    assert set(r) >= {"activation", "coefficients"}
    c = r["coefficients"]
    assert [x["k"] for x in c] == [0, 1, 2, 3, 4]
    assert c[0]["exact"] == "1/(2*sqrt(pi))" and c[1]["exact"] == "1/2" and c[2]["exact"] == "3/(4*sqrt(pi))"
    assert all(set(x) >= {"k", "exact", "value", "tier"} for x in c)
    assert abs(c[2]["value"] - 0.42314218766081724) < 1e-15


def test_link_phase_retrieval_json(capsys):
    r = run_json(capsys, "link", "phase-retrieval")
    assert {k: r[k] for k in ("k", "information_exponent", "generative_exponent", "easy_dim", "hard_dim")} == \
        {"k": 1, "information_exponent": 2, "generative_exponent": 2, "easy_dim": 0, "hard_dim": 1}
    assert r["delta_alg"]["exact"] == "1/2" and r["delta_alg"]["value"] == 0.5 and r["link"] == "z**2"


def test_derive_json(capsys):
    r = run_json(capsys, "derive", "--activation", "quad", "--loss", "square", "--width", "2", "--a", "1,-1")
    assert len(r["F"]) == 2 and len(r["D"]) == 2 and len(r["D"][0]) == 2
    assert r["D"][0][1] == "-r1*r2" and "r_{1}" in r["F_latex"][0]


def test_text_output(capsys):
    assert main(["hermite", "relu", "--degree", "2"]) == 0
    out = capsys.readouterr().out
    assert "mu_2" in out and "exact" in out


@pytest.mark.parametrize("argv,needle", [
    (["hermite", "__import__('os').system('true')"], "forbidden"),
    (["hermite", "y**2"], "unknown symbol 'y'"),
    (["link", ""], "empty"),
    (["link", "x"], "unknown symbol 'x'"),
    (["derive", "--activation", "gelu", "--loss", "square", "--width", "2", "--a", "1"], "width"),
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
