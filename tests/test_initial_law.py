"""The initial law (M0, Sigma0) on the command line for simulate and dmft alike, and the spectral start (issue 10
point 4)."""
import json
import math

import numpy as np
import pytest

import theorykit as tk
from theorykit.cli import main


def _json(capsys, *argv):
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_dmft_and_simulate_start_from_the_same_initial_law(capsys):
    net = ["--activation", "tanh", "--link", "z+z**2/2", "--delta", "2", "--eta", "1", "--steps", "2",
           "--M0", "0.3", "--Sigma0", "0.5"]
    dm = _json(capsys, "dmft", *net, "--paths", "2048", "--replicas", "2")
    assert dm["M"][0] == [[0.3]] and math.isclose(dm["gram"][0][0][0], 0.09 + 0.5, rel_tol=1e-12)
    sim = _json(capsys, "simulate", *net, "--d", "2000", "--seed", "1")
    # Theta(0) = Theta* M0 + G Sigma0^(1/2) / sqrt(d): M_0 and the Gram within a few 1/sqrt(d) of the law
    assert abs(sim["M"][0][0][0] - 0.3) < 4 * math.sqrt(0.5 / 2000)
    assert abs(sim["gram"][0][0][0] - 0.59) < 4 * 0.5 * math.sqrt(2 / 2000)
    assert main(["dmft", *net[:-4], "--M0", "a,b", "--json"]) == 2


def test_approximate_spectral_start_takes_the_spectral_overlap():
    pr = tk.Problem("gelu", "phase-retrieval", delta=2.0, eta=1.0, steps=1)
    start, pred = tk.spectra.spectral_start(pr)
    assert math.isclose(start.M0[0][0] ** 2, pred.overlap2) and math.isclose(start.Sigma0[0][0], 1 - pred.overlap2)


def test_exact_spectral_start_converges_to_the_classic_overlap_and_matches_gd(capsys):
    """dmft(init='spectral') runs the power iteration inside the DMFT: its converged overlap is the classic theory's
    sqrt(overlap2) (docs/theory.md §6) and its t = 0 train loss, which remembers that the eigenvector was built from
    the data, is the simulator's; the independent-remainder approximation misses the latter by ~25%."""
    pr = tk.Problem("gelu", "phase-retrieval", delta=2.0, eta=1.0, steps=1)
    start, pred = tk.spectra.spectral_start(pr)
    out = _json(capsys, "dmft", "--activation", "gelu", "--link", "phase-retrieval", "--delta", "2", "--eta", "1",
                "--steps", "1", "--init", "spectral", "--paths", "16384", "--replicas", "4")
    sp = out["settings"]["spectral_start"]
    assert abs(sp["overlap"] - math.sqrt(pred.overlap2)) < 4 * sp["overlap_stderr"] + 1e-3
    assert math.isclose(out["gram"][0][0][0], 1.0, rel_tol=1e-9)
    sims = [tk.simulate(pr.replace(steps=0), d=1000, init="spectral", seed=s, n_test=1) for s in range(6)]
    train0 = np.array([r.train_loss[0] for r in sims])
    se = train0.std(ddof=1) / math.sqrt(len(train0))
    assert abs(out["train_loss"][0] - train0.mean()) < 4 * se + 0.02
    approx = tk.dmft(start, paths=4096, replicas=2)
    assert abs(approx.train_loss[0] - train0.mean()) > 8 * se
    with pytest.raises(tk.TheorykitError, match="width m = 1"):
        tk.dmft(pr.replace(width=2), init="spectral")


def test_spectral_overlap_matches_the_simulator_initial_overlap():
    # the t = 0 part of the spectral start is the classic theory of docs/theory.md §6 at finite d: the simulator's top
    # eigenvector overlap at d = 1000 (4 seeds) matches sqrt(overlap2) within 4 standard errors + 1/sqrt(d)
    pr = tk.Problem("gelu", "phase-retrieval", delta=2.0, eta=1.0, steps=0)
    _, pred = tk.spectra.spectral_start(pr)
    m0 = np.array([abs(tk.simulate(pr, d=1000, init="spectral", seed=s, n_test=1).M[0, 0, 0]) for s in range(4)])
    assert abs(m0.mean() - math.sqrt(pred.overlap2)) < 4 * m0.std(ddof=1) / 2 + 1 / math.sqrt(1000)
