"""The linear model's exact d -> infinity GD curves (Marchenko-Pastur, theorykit.dynamics.linear_gd_limit) against
the simulator and the DMFT: an outside check of the solver, and of its error bars (issue: honest defaults, the
reported standard error must cover the finite-path bias)."""
import numpy as np
import pytest

import theorykit as tk
from theorykit.errors import TheorykitError
from theorykit.dynamics.linear_gd import linear_gd_limit, marchenko_pastur_rule

SETTING = dict(delta=2.0, eta=0.5, ridge=0.1)
NET = dict(activation="linear", link="z + eps/2", loss="square", width=1)
T = 30


def test_marchenko_pastur_rule_moments():
    # E[mu] = 1, E[mu^2] = 1 + gamma, E[mu^3] = 1 + 3 gamma + gamma^2 (gamma = 1/delta), with the atom for delta < 1
    for delta in (0.5, 2.0, 4.0):
        mu, w = marchenko_pastur_rule(delta)
        g = 1 / delta
        assert abs(w.sum() - 1) < 1e-12
        assert abs(w @ mu - 1) < 1e-12 and abs(w @ mu ** 2 - (1 + g)) < 1e-12
        assert abs(w @ mu ** 3 - (1 + 3 * g + g * g)) < 1e-11


def test_one_step_closed_form():
    # t = 1: Theta^1 = (I - eta (Shat + lam)) Theta^0 + eta X^T y / n, so M_1 = eta E[mu] = eta and
    # |Theta^1|^2 = E[(1 - eta (mu + lam))^2] + eta^2 (E[mu^2] + s^2 / delta)   (E[mu] = 1, E[mu^2] = 1 + 1/delta)
    ex = linear_gd_limit(**SETTING, steps=1, noise=0.5)
    eta, lam, d = SETTING["eta"], SETTING["ridge"], SETTING["delta"]
    assert abs(ex.M[1] - eta) < 1e-12
    m2 = 1 + 1 / d
    first = (1 - eta * lam) ** 2 - 2 * eta * (1 - eta * lam) + eta ** 2 * m2
    assert abs(ex.gram[1] - (first + eta ** 2 * (m2 + 0.25 / d))) < 1e-12


def test_bad_arguments():
    with pytest.raises(TheorykitError, match="delta = 1"):
        linear_gd_limit(delta=1.0, eta=0.5, steps=3)
    with pytest.raises(TheorykitError, match="eta"):
        linear_gd_limit(delta=2.0, eta=-1.0, steps=3)


def test_simulator_reaches_the_exact_limit():
    ex = linear_gd_limit(**SETTING, steps=T, noise=0.5)
    sims = [tk.simulate(**NET, **SETTING, d=2000, steps=T, seed=s, n_test=1) for s in range(4)]
    for key, arr, ref in (("M", np.stack([r.M[:, 0, 0] for r in sims]), ex.M),
                          ("gram", np.stack([r.gram[:, 0, 0] for r in sims]), ex.gram),
                          ("train", np.stack([r.train_loss for r in sims]), ex.train_loss),
                          ("test", np.stack([r.population_test_loss for r in sims]), ex.test_loss)):
        se = arr.std(axis=0, ddof=1) / np.sqrt(len(sims))
        for t in (1, 5, 30):
            assert abs(arr[:, t].mean() - ref[t]) <= 4 * se[t] + 2e-3 * abs(ref[t]), (key, t)


def test_dmft_defaults_cover_the_exact_limit():
    """The default solve (direct Jacobians on the whole batch) and a forced Stein solve (bias check on by default):
    the exact value lies within 4 stated standard errors (Stein at 20000 paths, the old default, was 9% low on the
    test loss with a stated 0.6%)."""
    ex = linear_gd_limit(**SETTING, steps=T, noise=0.5)
    for response in ("auto", "stein"):
        r = tk.dmft(**NET, **SETTING, steps=T, response=response)
        assert r.settings["response"] == ("direct" if response == "auto" else "stein")
        assert (r.bias is not None) == (response == "stein")
        for key, ref in (("gram", ex.gram), ("train_loss", ex.train_loss), ("test_loss", ex.test_loss)):
            v = getattr(r, key).reshape(T + 1, -1)[:, 0]
            se = r.stderr[key].reshape(T + 1, -1)[:, 0]
            for t in (1, 5, 10, 30):
                assert abs(v[t] - ref[t]) <= 4 * se[t], (response, key, t, v[t], ref[t], se[t])


def test_informed_start_against_the_closed_form_dmft_and_gd():
    """Theta^0 = M0 theta* + xi: the exact limit at t = 1 equals the exact (polynomial) DMFT of
    theorykit.dynamics.dmft_closed_form, a separate derivation, and the simulator reaches it at t = 5."""
    import sympy as sp

    from theorykit.dynamics import dmft_closed_form

    S = dict(delta=3.0, eta=0.3, ridge=1 / 6)
    ex = linear_gd_limit(**S, steps=5, M0=0.2, Sigma0=1.0)
    cf = dmft_closed_form(activation="linear", link="z", loss="square", delta=sp.Integer(3), eta=sp.Rational(3, 10),
                          ridge=sp.Rational(1, 6), M0=sp.Matrix([[sp.Rational(1, 5)]]), Sigma0=sp.Matrix([[1]]))
    assert float(cf.M1[0, 0]) == pytest.approx(ex.M[1], rel=1e-12)
    assert float(cf.gram1[0, 0]) == pytest.approx(ex.gram[1], rel=1e-12)
    assert float(cf.train_loss1) == pytest.approx(ex.train_loss[1], rel=1e-12)
    assert float(cf.test_loss1) == pytest.approx(ex.test_loss[1], rel=1e-12)
    assert float(cf.train_loss0) == pytest.approx(ex.train_loss[0], rel=1e-12)
    assert ex.gram[0] == pytest.approx(0.2 ** 2 + 1.0) and ex.M[0] == pytest.approx(0.2)
    sims = [tk.simulate(activation="linear", link="z", loss="square", width=1, **S, M0=0.2, d=2000, steps=5, seed=s,
                        n_test=1) for s in range(4)]
    for key, arr, ref in (("M", np.stack([r.M[:, 0, 0] for r in sims]), ex.M),
                          ("train", np.stack([r.train_loss for r in sims]), ex.train_loss),
                          ("test", np.stack([r.population_test_loss for r in sims]), ex.test_loss)):
        se = arr.std(axis=0, ddof=1) / np.sqrt(len(sims))
        assert abs(arr[:, 5].mean() - ref[5]) <= 4 * se[5] + 2e-3 * abs(ref[5]), key
