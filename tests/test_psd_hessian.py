"""Networks whose Hessian is PSD almost surely (sigma'' = 0 off its kinks, l'' >= 0): the spectral criterion cannot
fire, delta_star says so in one line, and `theorykit threshold` answers with the dynamical criterion."""
import json

import numpy as np
import pytest

import theorykit as tk
from theorykit.cli import main
from theorykit.errors import TheorykitError


@pytest.mark.parametrize("act,loss,psd", [("relu", "square", True), ("relu", "logistic", True),
                                          ("abs(x)", "square", True), ("x", "square", True),
                                          ("gelu", "square", False), ("quad", "square", False),
                                          ("tanh", "logistic", False), ("relu", "-(y-yhat)**2", False)])
def test_hessian_psd(act, loss, psd):
    assert tk.symbolic.Network(act, loss, 2).hessian_psd is psd


def test_psd_claim_against_the_finite_d_hessian():
    """The claim checked on the finite-d Hessian itself (dense): ReLU's smallest eigenvalue is >= 0 up to rounding
    at the start and after GD steps; GeLU's, on the same data, is negative."""
    for act, sign in (("relu", 1), ("gelu", -1)):
        r = tk.simulate(act, "phase-retrieval", "square", 2, delta=3.0, d=60, steps=20, eta=0.5, seed=2,
                        hessian_every=10, hessian_k=1, hessian_method="dense")
        lows = [h["eigenvalues"][0] for h in r.hessian]
        if sign > 0:
            assert min(lows) > -1e-10
        else:
            assert min(lows) < -1e-3


def test_delta_star_refuses_with_the_reason():
    p = tk.Problem("relu", "phase-retrieval", "square", 1, delta=5.0, eta=0.5, steps=10)
    with pytest.raises(TheorykitError, match="positive semi-definite.*dynamical criterion"):
        tk.delta_star(p, [10])


def test_threshold_cli_answers_with_the_dynamical_criterion(capsys):
    base = ["threshold", "--activation", "relu", "--link", "phase-retrieval", "--eta", "0.5", "--t", "4"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "positive semi-definite" in err and "--dyn" in err and len(err.strip().splitlines()) == 1
    assert main(base + ["--nn", "8", "--dyn", "4", "8", "--dyn-deltas", "8", "20", "--paths", "512",
                        "--replicas", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["delta_star"] == [] and "positive semi-definite" in out["delta_star_reason"]
    nn = out["delta_nn"]
    assert nn["criterion"] == "dynamical" and set(nn) >= {"value", "criterion", "converged", "evidence"}
    assert nn["value"] == out["delta_dyn"]["value"] or (nn["value"] is None and out["delta_dyn"]["value"] is None)
    assert [g["delta"] for g in out["delta_dyn"]["gamma"]] == [8.0, 20.0]
    assert np.isfinite(out["delta_dyn"]["gamma"][1]["value"])


def test_delta_nn_api_answers_with_the_dynamical_criterion_where_the_hessian_is_psd():
    """The rule "PSD Hessian -> delta_dyn" lives in the API (delta_nn), and the CLI's --nn answer is built by it."""
    p = tk.Problem("relu", "phase-retrieval", "square", 1, delta=5.0, eta=0.5, steps=10)
    with pytest.raises(TheorykitError, match="positive semi-definite.*dyn_range"):
        tk.delta_nn(p, 8, first_t=2)
    nn = tk.delta_nn(p, 8, first_t=2, dyn_range=(4, 8), dyn_deltas=[8.0, 20.0], paths=512, replicas=2)
    dyn = tk.delta_dyn(p, [8.0, 20.0], (4, 8), paths=512, replicas=2)
    assert nn.criterion == "dynamical" and nn.sequence == () and "positive semi-definite" in nn.note
    assert (nn.value == dyn.value or (np.isnan(nn.value) and np.isnan(dyn.value))) and nn.gamma == dyn.gamma
    d = nn.as_dict()
    assert d["converged"] is None and d["evidence"]["gamma"] == [dict(g) for g in dyn.gamma]
