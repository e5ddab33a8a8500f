"""The DMFT's stationary (t = infinity) state and delta*(infinity) (docs/theory.md §3.3, §5)."""
import dataclasses
import math

import numpy as np
import pytest

import theorykit as tk
from theorykit.dynamics import linear_gd_limit
from theorykit.dynamics.stationary import stationary_state
from theorykit.errors import TheorykitError
from theorykit.thresholds.stationary import stationary_law


def test_ridge_regression_matches_the_exact_long_time_limit():
    """The linear model's t -> infinity state is the ridge estimator's: the Marchenko-Pastur closed form run to
    convergence (theorykit.dynamics.linear_gd, no part of the stationary solver) agrees to 1e-9."""
    p = tk.Problem("linear", "z", delta=3.0, ridge=1 / 6, eta=0.2, steps=10)
    st = stationary_state(p)
    ex = linear_gd_limit(delta=3.0, eta=0.2, steps=4000, ridge=1 / 6)
    assert st.status == "ok"
    assert abs(st.M[0, 0] - ex.M[-1]) < 1e-9
    assert abs(st.gram[0, 0] - ex.gram[-1]) < 1e-9
    assert abs(st.train_loss - ex.train_loss[-1]) < 1e-9
    assert abs(st.test_loss - ex.test_loss[-1]) < 1e-9
    assert max(st.error.values()) < 1e-9


def test_noisy_ridge_with_few_nodes():
    p = tk.Problem("linear", "z + 0.5*eps", delta=2.0, ridge=0.1, eta=0.2, steps=10)
    st = stationary_state(p, order=12, check_order=10)
    ex = linear_gd_limit(delta=2.0, eta=0.2, steps=4000, ridge=0.1, noise=0.5)
    assert abs(st.test_loss - ex.test_loss[-1]) < 1e-8 and abs(st.gram[0, 0] - ex.gram[-1]) < 1e-8


def test_below_interpolation_the_state_depends_on_the_initialisation():
    p = tk.Problem("linear", "z", delta=0.5, eta=0.2, steps=10)
    st = stationary_state(p, order=16)
    assert st.status == "init-dependent"
    assert "initialisation" in st.message and "\n" not in st.message
    with pytest.raises(TheorykitError, match="no law"):
        stationary_law(st)


def test_unknown_selection_is_refused():
    with pytest.raises(TheorykitError, match="select must be"):
        stationary_state(tk.Problem("linear", "z", delta=3.0, eta=0.2, steps=10), select="lowest")


def test_width_three_and_a_global_selection_at_width_two_are_refused_in_one_line():
    with pytest.raises(TheorykitError, match="m <= 2"):
        stationary_state(tk.Problem("gelu", "phase-retrieval", width=3, delta=8.0, eta=1.0, steps=10))
    with pytest.raises(TheorykitError, match="width 1"):
        stationary_state(tk.Problem("gelu", "phase-retrieval", width=2, delta=8.0, eta=1.0, steps=10),
                         select="global")


@pytest.mark.parametrize("a", [(1.0, 1.0), (1.0, -1.0)])
def test_width_two_linear_model_is_the_ridge_estimator_with_twice_the_ridge(a):
    """Two linear neurons, f = (a1 theta1 + a2 theta2)^T x / 2: at the fixed point ridge (theta1 - a1 a2 theta2) = 0,
    so theta_j = a_j w with w the one-neuron ridge estimator at ridge 2 lambda (the exact long-time limit of
    theorykit.dynamics.linear_gd, no part of the stationary solver).  The neurons' difference is forgotten, so Q is
    singular: the equations' relative form must still converge.  (1, 1) runs the exchange-symmetric unknowns, (1, -1)
    the general ones."""
    p = tk.Problem("linear", "z", delta=3.0, ridge=1 / 6, eta=0.2, steps=10, width=2, a=list(a))
    st = stationary_state(p, order=8, check_order=0, g_nodes=32)
    ex = linear_gd_limit(delta=3.0, eta=0.2, steps=4000, ridge=2 / 6)
    sign = np.array(a)
    assert st.status == "ok" and st.M.shape == (1, 2) and st.gram.shape == (2, 2)
    assert np.abs(st.M[0] - sign * ex.M[-1]).max() < 1e-7
    assert np.abs(st.gram - np.outer(sign, sign) * ex.gram[-1]).max() < 1e-7
    assert abs(st.train_loss - ex.train_loss[-1]) < 1e-7 and abs(st.test_loss - ex.test_loss[-1]) < 1e-7


def test_exchangeable_neurons_give_an_exchange_symmetric_state_and_a_law_of_width_two():
    """a = (1, 1), b = 0: the state is invariant under the exchange of the neurons (the quadrature in the sum and
    difference coordinates of g keeps the symmetry exactly), every equation holds (not only the symmetric ones), and
    the static law feeds the width-2 Hessian theory."""
    from theorykit.spectra.hessian import hessian_prediction

    p = tk.Problem("gelu", "sign-symmetric", "logistic", width=2, delta=8.0, eta=1.0, steps=10)
    st = stationary_state(p, order=16, check_order=12, g_nodes=32)
    assert st.status == "ok" and st.residual < 1e-8
    for X in (st.c, st.q, st.chi_u):
        assert X.shape == (2, 2) and abs(X[0, 0] - X[1, 1]) < 1e-10 * abs(X[0, 0]) and X[0, 1] == X[1, 0]
    assert st.nonconvex > 0.1  # GeLU with a logistic loss: the per-sample problem is not convex everywhere
    assert st.error["q"] < 0.1 * abs(st.q).max()
    law = stationary_law(st)
    assert law.m == 2 and law.D.shape[1:] == (2, 2)
    pred = hessian_prediction(law)
    assert np.isfinite(pred.edge)


def test_convex_per_sample_problem_has_no_branch_jumps():
    """Where phi(r) is convex (linear activation, logistic loss) the proximal point is smooth in omega, so the Stein
    form E[g u] / sqrt(q) of the integrated response equals E[D / (1 + c D)]; with GeLU on phase retrieval (phi not
    convex for some samples) the two differ, and only the Stein form keeps the branch's jumps."""
    convex = stationary_state(tk.Problem("linear", "sign-symmetric", "logistic", delta=4.0, eta=1.0, steps=10),
                              order=32)
    assert abs(convex.chi_u - convex.chi_u_smooth) < 1e-6 * convex.chi_u
    assert convex.nonconvex == 0
    jumps = stationary_state(tk.Problem("gelu", "phase-retrieval", delta=10.0, eta=1.0, steps=10), order=32)
    assert jumps.residual < 1e-8 and jumps.nonconvex > 0.1
    assert abs(jumps.chi_u - jumps.chi_u_smooth) > 0.2 * jumps.chi_u


def test_quadrature_error_is_small_for_a_kinked_activation():
    st = stationary_state(tk.Problem("relu", "phase-retrieval", delta=10.0, eta=1.0, steps=10))
    assert st.status == "ok" and st.residual < 1e-8
    assert st.error["q"] < 1e-3 * st.q
    law = stationary_law(st, d=1000)
    assert law.truncation_n == 10000


@pytest.mark.slow
def test_stationary_state_matches_converged_gd():
    """GeLU on centred phase retrieval, delta 8: GD at d = 1000 run to convergence with the hard direction projected
    out (3 seeds) gives the stationary train loss and Gram within 4 standard errors plus 1/sqrt(d)."""
    p = tk.Problem("gelu", "z**2 - 1", delta=8.0, eta=1.0, steps=1500)
    st = stationary_state(p)
    runs = [tk.simulate(p, d=1000, seed=s, constrained=True) for s in range(3)]
    for key, val in (("train_loss", st.train_loss), ("gram", st.gram[0, 0])):
        g = np.array([float(np.ravel(np.asarray(getattr(r, key))[-1])[0]) for r in runs])
        se = g.std(ddof=1) / math.sqrt(len(g))
        assert abs(g.mean() - val) < 4 * se + 1000 ** -0.5, (key, g, val)


@pytest.mark.slow
def test_delta_star_infinity_brackets_its_root():
    from theorykit.thresholds.stationary import delta_star_infinity

    p = tk.Problem("gelu", "sign-symmetric", "logistic", delta=5.0, eta=1.0, steps=10)
    r = delta_star_infinity(p, deltas=[2.0, 4.0, 8.0, 16.0, 32.0])
    assert r.error == "" and r.bracket[0] <= r.value <= r.bracket[1]
    assert r.outlier < min(r.edge, 0.0) and r.edge >= 0  # a minimum in the complement, a saddle along e
    assert r.separation < r.value  # the outlier separates at a positive eigenvalue first


def test_threshold_nn_alone_is_the_stationary_delta_star(capsys):
    """`threshold --nn` with no T: delta_NN = delta*(infinity), criterion "stationary", converged, with its bracket
    and error bound; the same number as the API."""
    import json

    from theorykit.cli import main
    from theorykit.thresholds import delta_star_infinity

    argv = ["threshold", "--activation", "gelu", "--link", "sign-symmetric", "--loss", "logistic", "--eta", "1",
            "--nn", "--delta-range", "6", "12", "--points", "2"]
    assert main([*argv, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    nn = r["delta_nn"]
    assert nn["criterion"] == "stationary" and nn["converged"] is True and nn["stderr"] is None
    lo, hi = nn["evidence"]["bracket"]
    assert lo <= nn["value"] <= hi and nn["error_bound"] >= hi - lo
    assert nn["evidence"]["outlier"] < 0 and nn["evidence"]["separation"] < nn["value"]
    api = delta_star_infinity(tk.Problem("gelu", "sign-symmetric", "logistic", delta=5.0, eta=1.0, steps=1),
                              deltas=[6.0, 12.0])
    assert api.value == pytest.approx(nn["value"], rel=1e-12)
    from theorykit._cli.threshold import text  # the text output of the same result (no second solve)

    assert "delta_NN (stationary) = delta*(infinity)" in text(r)


def test_threshold_nn_alone_refuses_width_three_and_a_psd_hessian(capsys):
    from theorykit.cli import main

    base = ["threshold", "--link", "phase-retrieval", "--eta", "1", "--nn"]
    assert main([*base, "--activation", "gelu", "--width", "3"]) == 2
    assert "needs --width <= 2" in capsys.readouterr().err
    assert main([*base, "--activation", "relu"]) == 2
    assert "--dyn" in capsys.readouterr().err


@pytest.mark.parametrize("case", ["bounded-m2", "bounded-m1"])
def test_merged_static_law_gives_the_same_hessian_prediction(case, monkeypatch):
    """Without easy directions D depends on the latent only through y, and the Hessian's hard block is linear in
    zeta zeta^T: the law with the latent nodes of equal y merged (what a large width-2 law is handed over as) predicts
    the same edge, outliers and overlaps as the paths themselves.  (Truncated at a finite n the two differ by the
    paths of weight below the law's floor, which merging lifts above it: the discretisation's tail, not the law.)"""
    import theorykit.dynamics.stationary as stationary_module
    from theorykit.spectra.hessian import hessian_prediction

    if case == "bounded-m2":
        p, kw, d = tk.Problem("gelu", "sign-symmetric", "logistic", width=2, delta=12.0, eta=1.0, steps=1), \
            dict(order=16, g_nodes=32), None
    else:
        p, kw, d = tk.Problem("gelu", "sign-symmetric", "logistic", delta=12.0, eta=1.0, steps=1), dict(order=24), None
    st = stationary_state(p, check_order=0, **kw)
    monkeypatch.setattr(stationary_module, "LAW_MERGE_ABOVE", 10 ** 9)
    whole = hessian_prediction(stationary_law(st, d=d))
    monkeypatch.setattr(stationary_module, "LAW_MERGE_ABOVE", 0)
    merged_law = stationary_law(st, d=d)
    assert len(merged_law.weights) < len(st.weights)
    merged = hessian_prediction(merged_law)
    assert merged.edge == pytest.approx(whole.edge, rel=1e-8, abs=1e-10)
    assert len(merged.outliers) == len(whole.outliers) >= 1
    for a, b in zip(merged.outliers, whole.outliers):
        assert a.lam == pytest.approx(b.lam, rel=1e-7, abs=1e-9)
        assert a.overlap2 == pytest.approx(b.overlap2, rel=1e-6, abs=1e-8)


@pytest.mark.slow
def test_delta_star_infinity_at_width_two_brackets_its_root():
    """Width 2 (bounded GeLU/logistic, a = (1, 1)) on a small rule: delta*(infinity) inside its bracket, the state a
    minimum in the complement (edge >= 0) and a saddle along the hard direction there, separated before."""
    from theorykit.thresholds.stationary import delta_star_infinity

    p = tk.Problem("gelu", "sign-symmetric", "logistic", width=2, delta=5.0, eta=1.0, steps=1)
    r = delta_star_infinity(p, deltas=[6.0, 16.0], order=16, g_nodes=32)
    assert r.error == "" and r.bracket[0] <= r.value <= r.bracket[1] and 6.0 < r.value < 16.0
    assert r.outlier < 0 <= r.edge and r.separation < r.value


def test_delta_star_infinity_records_a_singular_delta_and_answers_from_the_rest(monkeypatch):
    """A singular linear system at one delta of the grid (seen once at width 2 on phase retrieval, where it ended the
    whole threshold with "internal error: LinAlgError") is recorded for that delta; the root comes from the others."""
    import theorykit.thresholds.stationary as ts

    real = ts.stationary_state

    def flaky(problem, **kw):
        if problem.delta == 24.0:
            raise np.linalg.LinAlgError("Singular matrix")
        return real(problem, **kw)

    monkeypatch.setattr(ts, "stationary_state", flaky)
    p = tk.Problem("gelu", "sign-symmetric", "logistic", delta=5.0, eta=1.0, steps=1)
    r = ts.delta_star_infinity(p, deltas=[6.0, 12.0, 24.0])
    assert r.error == "" and 6.0 <= r.value <= 12.0
    assert r.states[24.0].startswith("no-solution (singular system")


def test_a_failed_hessian_inside_the_bracket_is_recorded_and_the_bracket_answers(monkeypatch):
    """Found on centred phase retrieval at width 2 (d = 400): the Hessian theory failed at one delta of the secant's
    refinement and delta*(infinity) stopped with that error after 8.5 min.  Now such a delta is recorded (as a delta
    without a state is) and the root is read from the tightest bracket the finite values give."""
    import theorykit.thresholds.stationary as ts

    real, calls = ts.hessian_prediction, []

    def flaky(law, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # the first delta inside the bracket [6, 12] (the grid's two come first)
            raise TheorykitError("hessian: a synthetic failure")
        return real(law, *args, **kwargs)

    monkeypatch.setattr(ts, "hessian_prediction", flaky)
    p = tk.Problem("gelu", "sign-symmetric", "logistic", delta=8.0, eta=1.0, steps=1)
    r = ts.delta_star_infinity(p, deltas=[6.0, 12.0])
    failed = [dl for dl, why in r.states.items() if "no Hessian prediction (hessian: a synthetic failure)" in str(why)]
    assert len(failed) == 1 and 6.0 < failed[0] < 12.0
    assert r.separation_bracket == (6.0, 12.0) and 6.0 < r.separation < 12.0  # the bracket's interpolation
    assert math.isfinite(r.value) and r.bracket[1] - r.bracket[0] < 0.1  # the other root refined as before


def test_a_search_running_toward_infinite_c_is_read_as_init_dependent_at_once(monkeypatch):
    """Below the interpolation threshold, started from a state above it: the root search runs C past C_INIT c_ref, and
    the verdict is "init-dependent" from that one search, without a restart from the default start (which only
    follows C to infinity more slowly: 300 s for one verdict at width 2 on phase retrieval before)."""
    import scipy.optimize

    p = tk.Problem("gelu", "z**2 - 1", "square", delta=2.87, eta=1.0, steps=1)
    above = stationary_state(p, order=16, check_order=0)
    assert above.status == "ok"
    real_root, searches = scipy.optimize.root, []

    def counted_root(*args, **kwargs):
        searches.append(1)
        return real_root(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "root", counted_root)
    # without the search's Jacobian the start is hybr's alone; with it a quasi-Newton search runs first and at most
    # one hybr search follows
    for start, most in ((dataclasses.replace(above, search_jacobian=None), 1), (above, 1)):
        searches.clear()
        below = stationary_state(p.replace(delta=1.69), order=16, check_order=0, start=start)
        assert below.status == "init-dependent" and "\n" not in below.message
        assert len(searches) <= most
        if start.search_jacobian is None:
            assert len(searches) == 1


def test_a_start_from_solved_states_reaches_the_cold_solve_without_hybr(monkeypatch):
    """Started from states solved at two deltas that bracket this one (their unknowns interpolated in log delta, the
    nearest one's search Jacobian), the quasi-Newton search reaches the state the cold search finds, to the root
    finder's tolerance, and scipy's hybr is not called."""
    import scipy.optimize

    p = tk.Problem("gelu", "sign-symmetric", "logistic", width=2, delta=10.0, eta=1.0, steps=1)
    kw = dict(order=16, g_nodes=32, check_order=0)
    lo, hi = (stationary_state(p.replace(delta=dl), **kw) for dl in (8.0, 12.0))
    assert lo.status == hi.status == "ok" and lo.search_jacobian is not None
    cold = stationary_state(p, **kw)
    real_root, searches = scipy.optimize.root, []

    def counted_root(*args, **kwargs):
        searches.append(1)
        return real_root(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "root", counted_root)
    warm = stationary_state(p, start=[lo, hi], **kw)
    assert warm.status == "ok" and warm.residual < 1e-9 and not searches
    for a, b in ((warm.c, cold.c), (warm.q, cold.q), (warm.M, cold.M)):
        assert np.abs(np.asarray(a) - np.asarray(b)).max() < 1e-8 * (1 + np.abs(np.asarray(b)).max())
    assert warm.train_loss == pytest.approx(cold.train_loss, rel=1e-8)


def test_pushed_law_of_exchangeable_neurons_solves_half_and_mirrors():
    """Exchangeable neurons (a = (1, 1)): the pushed law's smallest eigenvalues are computed on half the g block and
    mirrored (the other half holds the neurons swapped: the same eigenvalues); with a = (1, 1 + 1e-9) the neurons are
    not exchangeable and every path is solved -- the two agree to the perturbation's order."""
    kw = dict(order=12, g_nodes=32, check_order=0)
    base = dict(width=2, delta=10.0, eta=1.0, steps=1)
    sym = stationary_state(tk.Problem("gelu", "phase-retrieval", "square", a=[1.0, 1.0], **base), **kw)
    full = stationary_state(tk.Problem("gelu", "phase-retrieval", "square", a=[1.0, 1.0 + 1e-9], **base), **kw)
    assert sym.status == full.status == "ok"
    for factor in (1.0, 1.3):
        a, b = sym.lam_min_pushed(factor), full.lam_min_pushed(factor)
        assert a.shape == b.shape == sym.weights.shape
        assert np.abs(a - b).max() < 1e-6 * (1 + np.abs(b).max())
