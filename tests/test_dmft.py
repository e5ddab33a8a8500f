"""The DMFT solver (THEORY.md sections 3, 3b): exact values, internal consistency, numerics, errors.

Agreement with the finite-d simulator at scale lives in tests/test_dmft_validation.py (slow) and
scripts/dmft_vs_sim.py (tables/dmft_vs_sim.md); closed forms at t = 0, 1 in tests/test_dmft_closed.py.
"""
import json
import math
import subprocess
import sys

import mpmath as mp
import numpy as np
import pytest

from theorykit import Problem, dmft
from theorykit.dynamics import flow_schedule
from theorykit.dynamics.hard_process import hard_tangents as _hard_tangents
from theorykit.dynamics.parameter_side import ParameterSide as _ParameterSide
from theorykit.dynamics.plan import hermite_rule as _hermite_rule
from theorykit.errors import TheorykitError

EASY = dict(activation="tanh", link="z+z**2/2", loss="square", width=2, a="1,-1", delta=2.0)


def within(value, exact, se, k=4.0, floor=1e-12):
    return abs(value - exact) <= k * se + floor


# ------------------------------------------------------------------------------------------------ exact values
def test_t0_train_loss_is_the_gaussian_integral():
    """t = 0: r = w ~ N(0, I_m) independent of z, so train = test = E[(y - f(w))^2 / 2] (mpmath quadrature)."""
    r = dmft(**EASY, eta=1.0, steps=1, paths=8192, replicas=4)
    Ef2 = mp.quad(lambda w: mp.tanh(w) ** 2 * mp.npdf(w), [-mp.inf, mp.inf]) / 2  # E[f^2], f = (tanh w1 - tanh w2)/2
    exact = float((mp.mpf(7) / 4 + Ef2) / 2)  # E[y^2] = 1 + 3/4, E[y f] = 0
    assert r.train_loss[0] == r.test_loss[0]
    assert within(r.train_loss[0], exact, r.stderr["train_loss"][0], floor=1e-4)
    assert np.allclose(r.gram[0], np.eye(2)) and np.allclose(r.M[0], 0)


def test_first_step_signal_is_minus_eta_E_z_u():
    """M_1 = -eta E[z F(w, y)]: for f = (tanh w1 - tanh w2)/2, square loss, F_j = (f - y) a_j tanh'(w_j)/2, and
    E[z (f - y)] = -E[z y] = -1, so M_1 = eta * a_j E[tanh'(w)] / 2."""
    r = dmft(**EASY, eta=1.0, steps=1, paths=8192, replicas=4)
    Etp = float(mp.quad(lambda w: (1 - mp.tanh(w) ** 2) * mp.npdf(w), [-mp.inf, mp.inf]))
    expect = np.array([1.0, -1.0]) * Etp / 2
    for j in range(2):
        assert within(r.M[1, 0, j], expect[j], r.stderr["M"][1, 0, j], floor=1e-5)


def test_parameter_side_recursion_by_hand():
    """Two steps of the parameter side with constant kernels, against the formulas written out."""
    eta, delta = 0.3, 2.0
    ps = _ParameterSide(2, 1, np.eye(1), np.array([eta, eta]), delta, ridge=0.0)
    Ru = np.zeros((3, 3, 1, 1))
    Cu = np.zeros((3, 3, 1, 1))
    Ru[0, 0], Cu[0, 0] = 0.5, 0.7
    ps.advance(0, Ru, Cu)
    ps.advance(1, Ru, Cu)
    P1 = 1 - eta * 0.5
    assert math.isclose(ps.C[1, 1, 0, 0], P1 ** 2 + eta ** 2 / delta * 0.7)
    assert math.isclose(ps.C[1, 0, 0, 0], P1)
    assert math.isclose(ps.R[1, 0, 0, 0], -eta / delta)
    Ru[1, 1], Ru[1, 0], Cu[1, 1], Cu[1, 0], Cu[0, 1] = 0.4, -0.1, 0.9, 0.2, 0.2
    ps.advance(2, Ru, Cu)
    P2 = P1 - eta * (0.4 * P1 - 0.1 * 1.0)
    R21 = -eta / delta
    R20 = -eta / delta - eta * (0.4 * (-eta / delta))
    C22 = P2 ** 2 + delta * (R20 ** 2 * 0.7 + 2 * R20 * R21 * 0.2 + R21 ** 2 * 0.9)
    assert math.isclose(ps.R[2, 0, 0, 0], R20) and math.isclose(ps.R[2, 1, 0, 0], R21)
    assert math.isclose(ps.C[2, 2, 0, 0], C22)


def _brute_force_hard_process(D, zeta, w, R, Cuz, etas, delta, ridge, Sigma0):
    """THEORY 3b written out: per-path Jacobians J^t_s, kernel R_u^zeta(t, s) = E[zeta^2 D^t J^t_s], then the
    parameter-side recursion with (R_u^zeta, C_u^zeta)."""
    S, N, m = D.shape[:3]
    J = np.zeros((S, S, N, m, m))
    for t in range(S):
        J[t, t] = np.eye(m)
        for s in range(t):
            for sp in range(s, t):
                J[t, s] += np.einsum("ab,nbc->nac", R[t, sp], np.einsum("nab,nbc->nac", D[sp], J[sp, s]))
    Ruz = np.einsum("n,tnab,tsnbc->tsac", w * zeta ** 2, D, J)
    ps = _ParameterSide(S - 1, m, Sigma0, etas, delta, ridge)
    for t in range(S):
        ps.advance(t, Ruz, Cuz)
    return ps.C[np.arange(S), np.arange(S)]


@pytest.mark.parametrize("m", [1, 2])
def test_hard_tangents_equal_the_kernel_recursion(m):
    """The pathwise tangents give exactly C_mu of the kernel recursion on the same paths (all drives exact), and
    the truncated eigen-expansion plus random residual drives is unbiased."""
    rng = np.random.default_rng(3)
    S, N = 9, 40
    D = rng.normal(size=(S, N, m, m))
    D = 0.5 * (D + np.swapaxes(D, 2, 3))
    zeta, w = rng.normal(size=N), rng.random(N)
    w /= w.sum()
    R = np.zeros((S, S, m, m))
    for t in range(S):
        for s in range(t):
            R[t, s] = 0.3 * rng.normal(size=(m, m))
    u = rng.normal(size=(S, N, m))
    Cuz = np.einsum("n,tna,snb->tsab", w * zeta ** 2, u, u)
    etas, delta, ridge = np.full(S, 0.3), 2.0, 0.1
    Sigma0 = np.array([[1.0, 0.3], [0.3, 0.5]])[:m, :m]
    ref = _brute_force_hard_process(D, zeta, w, R, Cuz, etas, delta, ridge, Sigma0)
    C, info = _hard_tangents(D, zeta, w, R, Cuz, etas, delta, ridge, Sigma0, rank=10 ** 6, residual=0,
                             dtype=np.float64)
    assert info["exact_fraction"] == 1.0 and np.allclose(C, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    C32, _ = _hard_tangents(D, zeta, w, R, Cuz, etas, delta, ridge, Sigma0, rank=10 ** 6, residual=0)
    assert np.allclose(C32, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())  # the default float32 history
    est = [_hard_tangents(D, zeta, w, R, Cuz, etas, delta, ridge, Sigma0, rank=2, residual=50,
                          rng=np.random.default_rng(i), dtype=np.float64)[0] for i in range(40)]
    est = np.array(est)
    se = est.std(axis=0, ddof=1) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - ref) <= 5 * se + 1e-9 * np.abs(ref).max())
    C2, info2 = _hard_tangents(D, zeta, w, R, Cuz, etas, delta, ridge, Sigma0, rank=2, residual=0,
                               dtype=np.float64)
    assert info2["exact_fraction"] < 1 and np.all(np.einsum("taa->t", C2) <= np.einsum("taa->t", ref) + 1e-9)
    # time blocks (the sum over the history before a block as one GEMM) and tangent groups (a memory budget of two
    # tangents' history) compute the same recursion: every block size, including ones that do not divide S
    for block in (1, 2, 3, 4, 100):
        Cb, infob = _hard_tangents(D, zeta, w, R, Cuz, etas, delta, ridge, Sigma0, rank=10 ** 6, residual=0,
                                   dtype=np.float64, block=block, memory=2 * S * m * N * 8)
        assert np.allclose(Cb, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
        assert np.allclose(infob["ess"], info["ess"], rtol=1e-12) and np.allclose(infob["P_half"], info["P_half"])


def test_hermite_rule_integrates_polynomials_exactly():
    nodes, w = _hermite_rule(8, 2)
    assert math.isclose(w.sum(), 1.0)
    assert math.isclose(w @ (nodes[:, 0] ** 4 * nodes[:, 1] ** 2), 3.0)
    assert abs(w @ nodes[:, 0] ** 3) < 1e-12


# ------------------------------------------------------------------------------------------------ consistency
def test_stein_and_direct_responses_agree():
    """R_u from Stein's lemma on the whole batch vs propagated Jacobians: the parameter-side kernels built from them
    (C_theta, R_theta) agree.  Stein's single entries R_u(t, s) are noisy (the triangular solve with the Cholesky
    factor amplifies), but their errors cancel in the smooth combinations the dynamics uses."""
    kw = dict(**EASY, eta=1.0, steps=6, paths=16384, replicas=8, kernels=True)
    a = dmft(**kw, response="stein")
    b = dmft(**kw, response="direct", response_paths=16384)
    assert a.settings["response"] == "stein" and b.settings["response"] == "direct"
    for key in ("C_theta", "R_theta"):
        A, B = a.kernels[key], b.kernels[key]
        se = np.hypot(a.kernels[key + "_stderr"], b.kernels[key + "_stderr"])
        assert np.all(np.abs(A - B) <= 5 * se + 2e-3), (key, float(np.max(np.abs(A - B) - 5 * se)))
    assert np.max(np.abs(b.kernels["R_u"][np.tril_indices(7, -1)])) > 1e-2  # the memory kernel is not trivial
    assert np.allclose(a.gram, b.gram, rtol=0.03)


def test_gauss_hermite_latents_beat_monte_carlo():
    """Integrating z by Gauss-Hermite (and QMC paths) cuts the standard error of phase retrieval's DMFT by > 3x
    (variance by > 9x) at equal paths."""
    kw = dict(activation="gelu", link="z**2", width=1, delta=4.0, eta=1.0, steps=5, paths=8192, replicas=8)
    gh = dmft(**kw, latent="gauss-hermite")
    mc = dmft(**kw, latent="monte-carlo", sampler="random")
    assert gh.settings["latent"] == "gauss-hermite" and mc.settings["latent"] == "monte-carlo"
    for key in ("train_loss", "gram", "C_mu"):  # pooled over t >= 1: standard errors are themselves noisy
        rms = [float(np.sqrt(np.mean(np.square(r.stderr[key][1:])))) for r in (mc, gh)]
        assert rms[0] > 3 * rms[1], (key, rms)
    se = np.hypot(gh.stderr["gram"][5], mc.stderr["gram"][5])
    assert np.all(np.abs(gh.gram[5] - mc.gram[5]) < 4 * se)


def test_reproducible_and_seeded():
    kw = dict(**EASY, eta=1.0, steps=3, paths=2048, replicas=2)
    a, b, c = dmft(**kw, seed=3), dmft(**kw, seed=3), dmft(**kw, seed=4)
    assert np.array_equal(a.gram, b.gram) and np.array_equal(a.train_loss, b.train_loss)
    assert not np.array_equal(a.gram, c.gram)
    assert a.settings["seed"] == 3


def test_bias_check_keeps_the_main_replicas_and_reports_a_bias():
    """bias_check adds replicas with half the paths: the reported means are those of the plain solve (same seeds), and
    the bias is (half-path mean) - (mean), exactly zero at t = 0 where nothing is sampled for the gram."""
    kw = dict(**EASY, eta=1.0, steps=4, paths=4096, replicas=4, sampler="random", seed=5)
    plain, checked = dmft(**kw), dmft(**kw, bias_check=True)
    assert np.array_equal(plain.gram, checked.gram) and plain.bias is None
    b = checked.bias
    assert b["gram"].shape == checked.gram.shape and b["stderr"]["train_loss"].shape == (5,)
    assert np.allclose(b["gram"][0], 0) and np.all(b["stderr"]["train_loss"][1:] > 0)
    assert checked.settings["bias_check"] is True and "more replicas of 512 paths" in checked.method["bias_check"]
    assert "bias" in checked.as_dict() and checked.as_dict()["method"] == checked.method


def test_hard_process_starts_at_sigma0_and_grows_for_phase_retrieval():
    r = dmft("gelu", "z**2", "square", 1, delta=4.0, eta=1.0, steps=10, paths=4096, replicas=4)
    assert r.C_mu.shape == (11, 1, 1, 1) and math.isclose(r.C_mu[0, 0, 0, 0], 1.0)
    assert r.C_mu[10, 0, 0, 0] > 5 * r.C_mu[0, 0, 0, 0]  # the hard overlap grows (THEORY 3b)
    assert np.allclose(r.M, 0)  # no easy direction
    assert r.hard_ess.shape == (11,) and np.all((r.hard_ess > 0) & (r.hard_ess <= 1))
    assert r.method["hard_process"]["exact_fraction"] > 0.99 and len(r.as_dict()["hard"]["ess"]) == 11


def test_singular_initial_covariance_is_handled_by_the_jitter():
    """Sigma0 of rank one: C_theta is singular from the start; the jittered factor samples it without repairs."""
    r = dmft(**EASY, eta=1.0, steps=8, paths=2048, replicas=2, Sigma0=[[1, 1], [1, 1]])
    assert r.status == "ok" and np.all(np.isfinite(r.gram))
    assert np.allclose(r.gram[0], [[1, 1], [1, 1]])
    assert r.settings["cholesky_repairs"] == 0


def test_ridge_and_initial_overlap_enter_the_signal():
    M0 = [[0.5, -0.5]]
    r0 = dmft(**EASY, eta=0.5, steps=2, paths=4096, replicas=2, M0=M0)
    r1 = dmft(**EASY, eta=0.5, steps=2, paths=4096, replicas=2, M0=M0, ridge=0.2)
    assert np.allclose(r0.M[0], M0) and np.allclose(r0.gram[0], np.eye(2) + np.array(M0).T @ np.array(M0))
    # one ridge step shrinks M_0 by (1 - eta ridge) on top of the same gradient term
    assert np.allclose(r1.M[1] - r0.M[1], -0.5 * 0.2 * np.array(M0), atol=5 * r0.stderr["M"][1].max() + 1e-6)


# ------------------------------------------------------------------------------------------------ schedules
def test_flow_schedule():
    s = flow_schedule(10.0, eta0=0.1, eta_max=0.4, doubling_every=5)
    assert math.isclose(s.sum(), 10.0) and s[0] == 0.1 and s.max() == 0.4
    assert np.all(np.diff(s[:-1]) >= 0)
    with pytest.raises(TheorykitError):
        flow_schedule(1.0, eta0=0.5, eta_max=0.1)


def test_gradient_flow_grid_convergence():
    """Halving every step of the grid changes the state at flow time 4 by O(eta): the error at least halves."""
    kw = dict(**EASY, paths=4096, replicas=2, seed=1)
    res = [dmft(**kw, schedule=flow_schedule(4.0, eta0=h, eta_max=4 * h, doubling_every=4)) for h in (0.2, 0.1, 0.05)]
    g = [r.gram[-1] for r in res]
    assert all(math.isclose(r.time[-1], 4.0) for r in res)
    e1, e2 = np.abs(g[0] - g[2]).max(), np.abs(g[1] - g[2]).max()
    assert e2 < 0.7 * e1 and e1 > 1e-3


# ------------------------------------------------------------------------------------------------ bad input
def test_divergence_is_reported_with_a_hint():
    r = dmft("gelu", "z**2", "square", 1, delta=4.0, eta=40.0, steps=30, paths=1024, replicas=2)
    assert r.status == "diverged" and r.diverged_at["step"] <= 30
    assert "eta" in r.diverged_at["hint"] and "curvature" in r.diverged_at["hint"]
    assert len(r.t) == r.diverged_at["step"]
    for arr in (r.gram, r.train_loss, r.test_loss, r.M):
        assert np.all(np.isfinite(arr))


@pytest.mark.parametrize("kw, msg", [
    (dict(eta=-1.0, steps=3), "eta"),
    (dict(eta=1.0, steps=-1), "steps"),
    (dict(eta=1.0), "eta and steps"),
    (dict(eta=1.0, steps=3, schedule=[0.1]), "not both"),
    (dict(schedule=[0.1, -0.2]), "positive"),
    (dict(eta=1.0, steps=3, Sigma0=[[1, 0]]), "Sigma0"),
    (dict(eta=1.0, steps=3, latent="magic"), "latent"),
    (dict(eta=1.0, steps=3, response="guess"), "response"),
    (dict(eta=1.0, steps=3, replicas=1), "replicas"),
])
def test_bad_input_one_line_errors(kw, msg):
    with pytest.raises(TheorykitError, match=msg):
        dmft(**EASY, paths=1024, **kw)


def test_cli_json_contract_and_errors():
    cmd = [sys.executable, "-m", "theorykit.cli", "dmft", "--activation", "gelu", "--link", "z**2", "--delta", "4",
           "--eta", "1", "--steps", "3", "--paths", "1024", "--replicas", "2", "--kernels", "--json"]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    for key in ("t", "M", "gram", "train_loss", "test_loss", "stderr", "hard", "D_tail", "kernels", "settings",
                "seconds"):
        assert key in out, key
    assert set(out["kernels"]) >= {"C_theta", "R_theta", "C_u", "R_u"}
    assert "C_mu" in out["hard"] and set(out["D_tail"][0]) == {"t", "min", "q1e-5", "q1e-4", "q1e-3"}
    assert set(out["stderr"]) >= {"M", "gram", "train_loss", "test_loss"}
    # values, not just keys.  (1) The CLI run is the API run with the same settings, bit for bit (JSON keeps a
    # float's shortest repr): a mis-parsed or dropped option changes them.
    r = dmft("gelu", "z**2", "square", 1, delta=4.0, eta=1.0, steps=3, paths=1024, replicas=2, kernels=True)
    assert out["t"] == [0, 1, 2, 3]
    for key, val in (("M", r.M), ("gram", r.gram), ("train_loss", r.train_loss), ("test_loss", r.test_loss)):
        np.testing.assert_array_equal(out[key], val, err_msg=key)
        np.testing.assert_array_equal(out["stderr"][key], r.stderr[key], err_msg=key)
    np.testing.assert_array_equal(out["hard"]["C_mu"], r.C_mu)
    np.testing.assert_array_equal(out["kernels"]["C_theta"], r.kernels["C_theta"])
    # (2) t = 0 is known exactly: Sigma_0 = 1 (gram = C_mu = 1), train = test loss (no data seen yet); y = z^2 has
    # no easy direction, so M stays 0
    # within its Monte-Carlo error (measured: exactly 0 on the symmetric Gauss-Hermite latent rule)
    assert out["gram"][0] == [[1.0]] and out["hard"]["C_mu"][0] == [[[1.0]]] and out["stderr"]["gram"][0] == [[0.0]]
    assert out["train_loss"][0] == out["test_loss"][0]
    assert np.all(np.abs(out["M"]) <= 4 * np.array(out["stderr"]["M"]) + 1e-12)
    # (3) the t = 0 loss against its closed form E[(z^2 - gelu(w))^2]/2 = (3 - 2 E[gelu] + E[gelu^2])/2, z, w
    # independent N(0, 1) (200-node Gauss-Hermite: exact to 1e-15) = 1.43052; measured 1.42786 +- 0.0130, 0.2 s.e.
    x, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / math.sqrt(2 * math.pi)
    gelu = x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) / 2
    exact0 = (3 - 2 * np.dot(w, gelu) + np.dot(w, gelu * gelu)) / 2
    assert abs(out["train_loss"][0] - exact0) <= 4 * out["stderr"]["train_loss"][0] + 1e-12
    bad = subprocess.run(cmd[:10] + ["--eta", "0", "--steps", "3"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "eta" in bad.stderr


# ------------------------------------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("case", [
    # sigma = x^2 with y = z^2: C_u has E[w^6] terms, whose Sobol replica means are right-skewed (see
    # theorykit.dynamics.sample_side.driving_normals): i.i.d. paths give honest standard errors there
    dict(activation="quad", link="z**2", width=1, delta=4.0, eta=0.05, sampler="random"),
    dict(activation="x+x**2/2", link="z+z**2/2", width=2, a="1,-1", delta=2.0, eta=1.0),
])
def test_solver_against_exact_t0_t1(case):
    """The numerical DMFT against theorykit.dynamics.dmft_closed_form (exact SymPy, polynomial sigma, square loss) at
    t = 0, 1 (and M_2): within 4 standard errors (+1e-9 for exact zeros)."""
    import theorykit as tk

    ex = tk.dynamics.dmft_closed_form(case["activation"], case["link"], "square", case["width"], a=case.get("a"),
                             delta=case["delta"], eta=case["eta"]).numeric()
    r = dmft(**case, steps=2, paths=131072, replicas=16, kernels=True, response="direct", response_paths=4096)
    k, se = r.kernels, {key[:-7]: v for key, v in r.kernels.items() if key.endswith("_stderr")}
    pairs = [
        ("Ezu0", r.Ezu[0], r.stderr["Ezu"][0]), ("M1", r.M[1], r.stderr["M"][1]), ("M2", r.M[2], r.stderr["M"][2]),
        ("C_u00", k["C_u"][0, 0], se["C_u"][0, 0]), ("R_u00", k["R_u"][0, 0], se["R_u"][0, 0]),
        ("C_theta11", k["C_theta"][1, 1], se["C_theta"][1, 1]), ("C_theta10", k["C_theta"][1, 0], se["C_theta"][1, 0]),
        ("gram1", r.gram[1], r.stderr["gram"][1]),
        ("train_loss0", r.train_loss[0], r.stderr["train_loss"][0]),
        ("train_loss1", r.train_loss[1], r.stderr["train_loss"][1]),
        ("test_loss1", r.test_loss[1], r.stderr["test_loss"][1]),
        ("C_u11", k["C_u"][1, 1], se["C_u"][1, 1]), ("C_u10", k["C_u"][1, 0], se["C_u"][1, 0]),
        ("R_u11", k["R_u"][1, 1], se["R_u"][1, 1]), ("R_u10", k["R_u"][1, 0], se["R_u"][1, 0]),
    ]
    for name, value, err in pairs:
        exact = ex[name]
        assert np.all(np.abs(value - exact) <= 4 * err + 1e-9), (name, value, exact, err)


def test_window_covering_every_lag_is_the_direct_method():
    """With window >= steps every R_u(t, s) comes from per-path Jacobians on the whole batch: the same numbers as
    response="direct" with the response batch = the whole batch (float32 there: 1e-5 agreement)."""
    kw = dict(**EASY, eta=1.0, steps=6, paths=4096, replicas=2, seed=5, kernels=True)
    a = dmft(**kw, window=6)
    b = dmft(**kw, response="direct", response_paths=4096)
    assert a.settings["window"] == 6 and b.settings["response_paths_per_replica"] == a.settings["paths_per_replica"]
    assert np.allclose(a.kernels["R_u"], b.kernels["R_u"], rtol=1e-4, atol=1e-6)
    assert np.allclose(a.gram, b.gram, rtol=1e-5)


# ------------------------------------------------------------------------------------------------ capture (matched)
PR = dict(activation="gelu", link="z**2", loss="square", width=1)


def test_C_mu_init_is_the_linear_growth_of_an_initial_overlap():
    """C_mu_init = P_t Sigma_0 P_t^T from the tangents equals (M_t / m0)^2 of the nonlinear DMFT started from a small
    hard overlap m0 = 0.05, within 5%: the nonlinear correction is O((m0 P_t)^2) with m0 P_8 ~ 0.3, and a smaller m0
    drowns M_t in the Monte-Carlo noise of E[z u] (measured: max deviation 3% at m0 = 0.05, 6% at 0.02, 19% at 0.01)."""
    kw = dict(**PR, delta=9.0, eta=1.0, steps=8, paths=16384, replicas=2, seed=4)
    r = dmft(**kw)
    m0 = 0.05
    lin = dmft(**kw, M0=[[m0]])
    grown = (lin.M[:, 0, 0] / m0) ** 2
    assert np.allclose(r.C_mu_init[:, 0, 0, 0], grown, rtol=0.05)
    assert grown[8] > 10 and np.all(r.C_mu[:, 0, 0, 0] >= r.C_mu_init[:, 0, 0, 0] - 1e-9)


def test_v_eff_is_the_ratio_of_replica_means_with_a_jackknife_error():
    """v_eff = C_mu Sigma_0 / C_mu_init; at t = 0 it is Sigma_0 (the initial overlap's d Var) with zero jackknife
    error (no noise has entered yet),
    positive after, and of the size of the spread of independent ratios (within a factor 3)."""
    r = dmft(**PR, delta=9.0, eta=1.0, steps=6, paths=8192, replicas=4, seed=3, Sigma0=[[2.0]])
    assert np.allclose(r.v_eff, r.C_mu[:, 0, 0, 0] * 2.0 / r.C_mu_init[:, 0, 0, 0], rtol=1e-12)
    assert abs(r.v_eff[0] - 2) < 1e-5 and r.stderr["v_eff"][0] < 1e-5
    assert np.all(np.diff(r.v_eff) > 0) and np.all(r.stderr["v_eff"][1:] > 0)
    # independent pairs of replicas of the same size: std(pair ratio) = std(one replica) / sqrt(2)
    pairs = [dmft(**PR, delta=9.0, eta=1.0, steps=6, paths=4096, replicas=2, seed=10 + s, Sigma0=[[2.0]]).v_eff[6]
             for s in range(8)]
    ratio = r.stderr["v_eff"][6] / (np.std(pairs, ddof=1) * math.sqrt(2) / 2)
    assert 1 / 3 < ratio < 3, ratio
    h = r.as_dict()["hard"]
    assert len(h["v_eff"]) == 7 and len(h["v_eff_stderr"]) == 7


def test_capture_threshold_bisection_and_bracket_checks():
    """GeLU phase retrieval, delta = 11, horizon 40: the captured/not-captured evaluations are consistent with one
    threshold inside the returned bracket; an uncaptured hi is refused with a one-line error."""
    from theorykit.thresholds import capture_threshold

    kw = dict(**PR, delta=11.0, eta=1.0, steps=40, paths=4096, replicas=2, seed=1, response="stein")
    c = capture_threshold(**kw, lo=0.0, hi=0.4, tol=0.05)
    lo, hi = c.bracket
    assert hi - lo <= 0.05 and lo < c.m_star < hi
    for m0, cos2 in c.evaluations:
        assert (cos2 > 0.5) == (m0 >= hi)
    # 2048 paths per replica with Stein's responses: the replicas' noise on M_T along e is large, and the result says
    # so; direct Jacobians on the whole batch (the 'auto' choice here) are quieter
    assert c.M_rel_stderr > 0.25 and c.noise_limited is True
    quiet = capture_threshold(**{**kw, "response": "auto"}, lo=0.0, hi=0.4, tol=0.05)
    assert quiet.M_rel_stderr < 0.25 and quiet.noise_limited is False
    fine = capture_threshold(**kw, lo=0.0, hi=0.4, tol=1e-6, rtol=0.3)  # geometric refinement once lo > 0
    flo, fhi = fine.bracket
    assert 0 < flo < fhi <= 1.3 * flo and math.isclose(fine.m_star, math.sqrt(flo * fhi))
    assert flo <= hi and fhi >= lo  # the same threshold (same seed and paths)
    with pytest.raises(TheorykitError, match="not captured") as info:
        capture_threshold(**kw, lo=0.0, hi=0.005, tol=0.001)
    assert info.value.hi == 0.005  # NotCaptured: m* > hi (the comparison scripts turn it into an upper bound on P)
    with pytest.raises(TheorykitError, match="rtol must be"):
        capture_threshold(**kw, rtol=0)
    with pytest.raises(TheorykitError, match="width m = 1"):
        capture_threshold(**dict(kw, width=2), lo=0.0, hi=0.4)
    with pytest.raises(TheorykitError, match="hi must be"):
        capture_threshold(**kw, lo=0.3, hi=0.2)
    with pytest.raises(TheorykitError, match="tol must be"):
        capture_threshold(**kw, tol="small")


def test_auto_response_falls_back_to_direct_when_stein_blows_up(monkeypatch):
    """response='auto' picks Stein at eta >= 0.25; a numerical blow-up with a stable per-sample curvature is re-solved
    with direct Jacobians, and the settings say so.  Forced here by a tiny divergence limit (so 'direct' also stops,
    which shows that the returned solve is the fallback's)."""
    import sys

    # M_3 = 1.015 > 1 (M_2 = 0.89)
    monkeypatch.setattr(sys.modules["theorykit.dynamics.sample_side"], "DIVERGENCE_LIMIT", 1.0)
    monkeypatch.setattr(sys.modules["theorykit.dynamics.plan"], "DIRECT_AUTO_FLOPS", 0.0)  # so 'auto' starts with Stein
    r = dmft("tanh", "z + z**2/2", "square", 1, delta=8.0, eta=1.0, steps=4, paths=2048, replicas=2)
    assert r.status == "diverged" and r.diverged_at["step"] == 3 and r.settings["response"] == "direct"
    assert "re-solved with 'direct'" in r.method["response_auto"]
    assert "the other replicas were stopped" in r.method["response_auto"]  # the first blow-up decided it
    s = dmft("tanh", "z + z**2/2", "square", 1, delta=8.0, eta=1.0, steps=4, paths=2048, replicas=2, response="stein")
    assert s.settings["response"] == "stein" and s.method["response_auto"] is None


def test_auto_latent_refuses_gauss_hermite_for_a_link_that_jumps():
    """y = sign(|z| - median|z|) jumps in z: 32 Gauss-Hermite nodes misplace the jump (moment error 4e-2) and the
    DMFT drifts far from GD; latent='auto' sees it and takes Gauss-Legendre between the link's breakpoints (moment
    error 3e-15), which agrees with constrained GD (d = 500, 8 seeds) on C_theta(30, 30) within 4 s.e. + 3%, as do
    Monte-Carlo latents, while the forced Gauss-Hermite solve does not."""
    net = dict(activation="gelu", link="sign-symmetric", loss="logistic", width=1)
    kw = dict(**net, delta=8.0, eta=1.0, steps=30, paths=16384, replicas=4, seed=2)
    auto = dmft(**kw)
    assert auto.settings["latent"] == "gauss-legendre" and "not smooth" in auto.method["latent_auto"]
    assert "breakpoints -0.67449, 0, 0.67449" in auto.method["latent_auto"]
    mc = dmft(**kw, latent="monte-carlo")
    gh = dmft(**kw, latent="gauss-hermite")
    from theorykit import simulate

    sims = [simulate(**net, delta=8.0, d=500, steps=30, eta=1.0, seed=s, constrained=True, n_test=1) for s in range(8)]
    g = np.array([s.gram[30, 0, 0] for s in sims])
    for r in (auto, mc):
        se = math.hypot(g.std(ddof=1) / math.sqrt(len(g)), r.stderr["C_theta_tt"][30, 0, 0])
        assert abs(r.C_theta_tt[30, 0, 0] - g.mean()) <= 4 * se + 0.03 * g.mean()
    se = math.hypot(g.std(ddof=1) / math.sqrt(len(g)), gh.stderr["C_theta_tt"][30, 0, 0])
    assert abs(gh.C_theta_tt[30, 0, 0] - g.mean()) > 4 * se + 0.03 * g.mean()
    with pytest.raises(TheorykitError, match="gauss-legendre.*breakpoints"):
        dmft("gelu", "z**2", "square", 1, delta=4.0, eta=1.0, steps=1, paths=2048, replicas=2, latent="gauss-legendre")
    smooth = dmft("gelu", "z**2", "square", 1, delta=4.0, eta=1.0, steps=1, paths=2048, replicas=2)
    assert smooth.settings["latent"] == "gauss-hermite" and "e-1" in smooth.method["latent_auto"]


def test_auto_latent_sees_a_multi_index_link_kinked_across_the_axes():
    """y = sign(z1 z2): every single-coordinate moment of y vanishes, so only the cross moments show that 16
    Gauss-Hermite nodes per axis integrate it badly (they put E[y z1 z2] = E|z1| E|z2| = 2/pi 5% high, and the
    Hessian law's hard outlier with it: tables/hessian_vs_finite_d_k2_notes.md).  The link kinks only on the axes, so
    latent='auto' cuts the rule there (Gauss-Legendre on each half-line of each axis), whose law at t = 0 has
    E[y z1 z2] = 2/pi to 1e-6; sign(z1 - z2), kinked on a diagonal, takes Monte-Carlo latents (within 4 s.e.); forced
    Gauss-Hermite misses it by 0.034."""
    from theorykit.dynamics.plan import HERMITE_MOMENT_TOL, latent_moment_error
    from theorykit.symbolic.ingredients import link
    from theorykit.thresholds import law_at

    assert latent_moment_error(link("sign(z1*z2)"), 16) > 10 * HERMITE_MOMENT_TOL
    assert latent_moment_error(link("z1*z2"), 16) < 1e-12
    kw = dict(activation="gelu", link="sign(z1*z2)", loss="logistic", width=1, delta=9.0, eta=1.0, steps=1,
              paths=8192, replicas=4, keep_law_at=[0])
    auto, gh = dmft(**kw), dmft(**kw, latent="gauss-hermite")
    assert auto.settings["latent"] == "gauss-legendre" and "z1 at 0; z2 at 0" in auto.method["latent_auto"]
    diag = dmft(**{**kw, "link": "sign(z1 - z2)"})
    assert diag.settings["latent"] == "monte-carlo" and "not smooth" in diag.method["latent_auto"]

    def moment(r, y):  # E[y(zeta)] on the law at t = 0 (zeta: the hard coordinates), with its standard error
        law = law_at(r, 0)
        w = law.weights / law.weights.sum()
        v = y(law.zeta)
        return float(w @ v), math.sqrt(float(w @ (v - w @ v) ** 2) / len(w))

    def prod(z):
        return np.abs(z[:, 0] * z[:, 1])

    assert moment(auto, prod)[0] == pytest.approx(2 / math.pi, abs=1e-6)
    # sign(z1 - z2) has one hard direction, (1, 1)/sqrt 2, independent of y: E|zeta| = sqrt(2/pi)
    mean, se = moment(diag, lambda z: np.abs(z[:, 0]))
    assert abs(mean - math.sqrt(2 / math.pi)) <= 4 * se
    assert abs(moment(gh, prod)[0] - 2 / math.pi) > 0.03  # the deterministic rule's own error (5% of 2/pi)


# ------------------------------------------------------------------------------------------------ rare paths
# (issue: sigma = x + x^2/2, y = z^2, delta = 8.23, eta = 0.5 diverged at step 6 with "GD is unstable, eta <~ 0.00219",
# while simulate at d = 400 and 1600 ran past step 38 in every seed: the blow-up came from paths at latent |z| >= 4.2,
# unstable as single samples, which no sample of realistic size holds)
RARE = dict(activation="x + 0.5*x**2", link="phase-retrieval", loss="square", delta=8.23, steps=200, paths=8192,
            replicas=2, processes=1)


def test_divergence_through_rare_paths_is_unreliable_not_gd_instability():
    r = dmft(**RARE, eta=0.5)
    assert r.status == "unreliable" and r.diverged_at["step"] == 6
    hint = r.diverged_at["hint"]
    assert hint.startswith("DMFT unreliable: driven by paths beyond the 1/n quantile at step 6")
    assert "GD is unstable" not in hint and "eta <~" not in hint and len(hint.splitlines()) == 1
    rare = r.diverged_at["rare_paths"]
    assert rare["n"] == 10_000 and 0 < rare["weight"] < 1e-4 and rare["latent_radius"] > 4
    assert rare["truncated_diverged_at"] is None and rare["truncated_reaches"] == 12
    assert len(r.t) == 6 and np.all(np.isfinite(r.gram))


def test_genuine_instability_is_still_gd_unstable():
    """eta = 5: GD diverges at step 2 in simulate too (d = 400); the truncated check diverges as early."""
    r = dmft(**RARE, eta=5.0)
    assert r.status == "diverged" and r.diverged_at["step"] == 2
    assert "GD is unstable" in r.diverged_at["hint"] and "rare_paths" not in r.diverged_at


def test_d_truncates_the_latent_tail_at_n_equal_delta_d():
    """With d, unstable paths beyond the latent 1/n quantile (n = delta d) are excluded where they go unstable: the
    solve passes step 6, and what it excluded weighs at most 1/n and is recorded."""
    r = dmft(**RARE, eta=0.5, d=400)
    tr = r.settings["truncation"]
    assert tr["n"] == round(8.23 * 400) and tr["d"] == 400 and tr["latent_radius"] > 4
    assert len(r.t) > 12 and 0 < r.settings["excluded_weight"] <= 1 / tr["n"]
    assert "beyond the latent 1/n quantile (n = 3292:" in r.method["excluded"]
    if r.status != "ok":  # a divergence with d given is the finite-n DMFT's own: GD's instability
        assert r.status == "diverged" and "truncated" in r.diverged_at["hint"]


def test_beyond_reach_paths_go_at_the_one_sample_bound(monkeypatch):
    """With d, a path beyond the latent 1/n quantile goes once eta D / delta > 2 (the one-sample bound). At the old
    bound 4, x + x^2/2 on phase retrieval (eta 0.25, delta 8.437, d 400: GD ran 200 steps in 16 of 16 seeds at
    d 400 and 1600) kept tail nodes at eta D / delta ~ 3-4 whose Jacobians grow like |1 - eta D / delta|^lag, and the
    DMFT diverged (step 110 here); at 2 it reaches T with a negligible excluded weight.  Which kept path blows up
    first, and when, moves with the rounding of the machine's compiled kernels: with the innovations drawn to 160
    steps the old bound diverged at step 95 on one VM and not by step 160 on another.  Drawn to 400 steps
    (horizon = 400, the paths used here), it diverges at step 110, and at step 85 in the solve to 400."""
    from theorykit.dynamics import sample_side

    kw = dict(activation="x + x**2/2", link="phase-retrieval", loss="square", eta=0.25, delta=8.437, steps=160,
              paths=8192, replicas=4, seed=0, bias_check=False, mirror=True, d=400, processes=2, horizon=400)
    assert sample_side.unstable_bound(3375) == 2.0 and sample_side.unstable_bound(None) == 4.0
    r = dmft(**kw)
    assert r.status == "ok" and len(r.t) == 161 and 0 < r.settings["excluded_weight"] < 1e-6
    assert "eta D / delta > 2," in r.method["excluded"]
    monkeypatch.setattr(sample_side, "REACH_UNSTABLE_BOUND", 4.0)
    old = dmft(**kw)
    assert old.status == "diverged" and old.diverged_at["step"] < 160


def test_bounded_smooth_case_is_unchanged_by_the_truncation():
    """GeLU on the sign link: no path is unstable, so d changes no number and the solve is ok."""
    kw = dict(activation="gelu", link="sign-symmetric", delta=8.0, eta=1.0, steps=20, paths=4096, replicas=2,
              processes=1)
    a, b = dmft(**kw), dmft(**kw, d=400)
    assert a.status == b.status == "ok" and a.settings["truncation"] is None
    for key in ("M", "gram", "train_loss", "test_loss", "C_theta_tt", "C_mu"):
        assert np.array_equal(getattr(a, key), getattr(b, key))


@pytest.mark.parametrize("kw, msg", [(dict(d=0), "d must be an integer >= 1"),
                                     (dict(d=1.5), "d must be an integer"),
                                     (dict(d=10, reach=5), "give d or reach")])
def test_bad_reach_is_refused(kw, msg):
    from theorykit.dynamics.numerics import DMFTNumerics

    with pytest.raises(TheorykitError, match=msg):
        DMFTNumerics(**kw).checked(3)


def test_cli_says_unreliable_with_its_own_exit_status(capsys):
    from theorykit.cli import main

    args = ["dmft", "--activation", "x + 0.5*x**2", "--link", "phase-retrieval", "--delta", "8.23", "--steps", "200",
            "--paths", "8192", "--replicas", "2"]
    assert main(args + ["--eta", "0.5"]) == 4
    out = capsys.readouterr().out
    assert "status: unreliable\nDMFT unreliable: driven by paths beyond the 1/n quantile at step 6" in out
    assert "GD is unstable" not in out
    assert main(args + ["--eta", "5"]) == 0
    out = capsys.readouterr().out
    assert "status: diverged" in out and "GD is unstable" in out
    assert main(args + ["--eta", "0.5", "--d", "400"]) == 0
    out = capsys.readouterr().out
    assert "truncated at the 1/n quantile (n = 3292 = delta d, d = 400)" in out


# ------------------------------------------------------------------------------------------------ mirrored paths
def _hard_overlaps(m0, mirror, activation="gelu", **kw):
    """Per-replica hard overlap M_t . e of phase retrieval (delta 11, eta 1) from M0 = m0 e."""
    pr = Problem(activation, "phase-retrieval", "square", 1, delta=11.0, eta=1.0, steps=30)
    r = dmft(pr.replace(M0=[[m0]]), paths=2048, replicas=3, seed=0, bias_check=False, mirror=mirror, **kw)
    return np.asarray(r.per_replica["M"])[:, :, 0, 0]


def test_mirrored_paths_remove_the_hard_overlaps_noise_floor():
    """Independent paths give the hard overlap an O(1/sqrt(paths)) Monte-Carlo drift: from m0 = 1e-6 the replicas
    wander to |M| ~ 1e-2 with random signs.  With mirrored latent nodes sharing their paths the drift vanishes at
    M = 0 for a link even along e, so M stays proportional to m0: positive in every replica, and twice m0 gives twice
    M (linear phase)."""
    free = _hard_overlaps(1e-6, False)
    assert np.abs(free[:, -1]).max() > 1e-3 and len(set(np.sign(free[:, -1]))) > 1
    one, two = _hard_overlaps(1e-6, True), _hard_overlaps(2e-6, True)
    assert (one[:, -1] > 0).all() and np.abs(one).max() < 1e-3
    np.testing.assert_allclose(two[:, -1], 2 * one[:, -1], rtol=1e-3)


def test_mirrored_paths_with_a_kinked_activation():
    """ReLU (Stein responses): independent paths drive the hard overlap from m0 = 1e-6 to |M_30| ~ 0.1; mirrored,
    it stays of order m0 and linear in it."""
    assert np.abs(_hard_overlaps(1e-6, False, "relu")[:, -1]).max() > 1e-2
    one, two = _hard_overlaps(1e-6, True, "relu"), _hard_overlaps(2e-6, True, "relu")
    assert np.abs(one).max() < 1e-5
    np.testing.assert_allclose(two, 2 * one, rtol=1e-4, atol=1e-14)  # linear: second order is O(m0)


@pytest.mark.parametrize("link, kw, msg", [
    ("phase-retrieval", {"latent": "monte-carlo"}, "deterministic latent rule"),
    ("z1*z2", {"latent": "gauss-hermite"}, "even along the hard direction"),
])
def test_mirror_is_refused_where_it_does_not_apply(link, kw, msg):
    pr = Problem("gelu", link, "square", 1, delta=4.0, eta=1.0, steps=3)
    with pytest.raises(TheorykitError, match=msg):
        dmft(pr, paths=256, replicas=2, bias_check=False, mirror=True, **kw)


def test_an_overflowing_hard_process_is_nan_without_warnings():
    """Centred phase retrieval at delta = 30 over 200 steps: the linear hard process grows past float range late in
    the run; V_eff is NaN there (not a LinAlgError) and nothing is printed (no NumPy RuntimeWarning)."""
    import warnings

    pr = Problem("gelu", "z**2 - 1", "square", 1, delta=30.0, eta=1.0, steps=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = dmft(pr, paths=1024, replicas=2, bias_check=False)
    V = np.asarray(r.V_eff)[:, 0, 0]
    assert r.status == "ok" and np.isfinite(V[:10]).all() and np.isnan(V[-1])


def test_a_short_solve_runs_its_replicas_in_this_process_with_the_same_numbers():
    """Below SERIAL_WORK path-steps the default runs the replicas here (a forked pool costs more than such a solve,
    tables/dmft_bench.md); a larger solve still forks.  Either way the
    numbers are those of any explicit process count (one job and one seed per replica)."""
    import os

    from theorykit.dynamics.plan import SERIAL_WORK

    pr = Problem("gelu", "phase-retrieval", "square", 2, delta=8.0, eta=1.0, steps=5)
    assert 1024 * 6 * 2 < SERIAL_WORK
    auto = dmft(pr, paths=1024, replicas=2, bias_check=False)
    forked = dmft(pr, paths=1024, replicas=2, bias_check=False, processes=2)
    assert auto.settings["processes"] == 1 and forked.settings["processes"] == 2
    assert np.array_equal(auto.gram, forked.gram) and np.array_equal(auto.C_mu, forked.C_mu)
    if (os.cpu_count() or 1) >= 2:
        big = Problem("gelu", "phase-retrieval", "square", 1, delta=8.0, eta=1.0, steps=40)
        assert 8192 * 41 >= SERIAL_WORK
        assert dmft(big, paths=16384, replicas=2, bias_check=False).settings["processes"] == 2



def test_a_dmft_that_diverges_at_its_first_step_says_so_in_one_line():
    """An initial covariance above the divergence limit stops the solve at t = 0: one line, not a shape error from
    the hard process of an empty run."""
    with pytest.raises(TheorykitError, match="cannot start: the DMFT diverged at step 0"):
        dmft("gelu", "sign-symmetric", "logistic", 1, delta=8.0, eta=1.0, steps=5, paths=1024, replicas=2,
             Sigma0=[[1e9]])


def test_divergence_hint_bounds_eta_by_the_curvature_before_the_blow_up():
    """sigma = x + x^2/2 on phase retrieval at eta = 0.5, delta = 2.515 (d = 400) diverges at step 4, as GD does.  The
    hint's step-size bound 2 delta / D used the quantile of D at the blow-up itself (D ~ 3e7: "eta <~ 1.9e-07"); it
    reads the per-sample curvature of the steps before it (D of order 30-70 there), so the bound is one a user can
    try."""
    import re

    p = Problem("x + 0.5*x**2", "phase-retrieval", "square", delta=2.515, eta=0.5, steps=20)
    r = dmft(p, d=400, paths=4096, replicas=2, bias_check=False)
    assert r.status == "diverged" and r.diverged_at["step"] <= 6
    bound = float(re.search(r"eta <~ ([0-9.e+-]+)\)", r.diverged_at["hint"]).group(1))
    assert 0.01 < bound < 0.5, r.diverged_at["hint"]
