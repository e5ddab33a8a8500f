"""Finite-d answers from the DMFT (issue 14 points 3-4; docs/theory.md §5): P(capture by t) for every t from one
capture ladder per delta, the midpoint delta_1/2(d, T), escape times t_1/2(delta, d), and the threshold command's
--d D [D ...] --horizon T.  The measured comparison with GD is tables/thresholds_vs_sim.md; here: the construction
(exact in its inputs), its monotonicity, and its contract."""
import json
import math

import numpy as np
import pytest
from scipy.stats import chi2

import theorykit as tk
from theorykit.cli import main
from theorykit.thresholds import finite_d
from theorykit.thresholds.capture import CaptureCurve, capture_probabilities, overlap_cos2, ray_angles


def _curve(m_star, reps, cos2_top):
    T = len(m_star) - 1
    cos2 = np.full((3, T + 1), 0.1)
    cos2[-1] = cos2_top
    return CaptureCurve(t=tuple(range(T + 1)), m0s=(0.01, 0.1, 0.5), cos2=cos2, m_star=tuple(m_star),
                        m_star_replicas=tuple(tuple(r) for r in reps))


def testcapture_probabilities_are_the_matched_chi2_formula():
    """P(t) = P(chi2_1 > d m*(t)^2 / v_eff(min(t, t_match))), the band from the replicas' m* and v_eff +- 2 se; where
    m* is above the ladder P = 0 with the top rung's P as its upper end."""
    v, se = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.1, 0.1, 0.2, 0.2])
    curve = _curve([None, 0.2, 0.1, 0.05], [[None, 0.25, 0.12, 0.04], [None, 0.18, 0.09, 0.06]], [0.3, 0.6, 0.7, 0.8])
    V, Vse = v[:, None, None], se[:, None, None]
    P, lo, hi = capture_probabilities([(0.0, curve)], True, False, V, Vse, t_match=2, d=100)
    assert P[0] == 0.0 and lo[0] == 0.0 and hi[0] == pytest.approx(chi2.sf(100 * 0.25 / 1.2, 1))
    for t, m, reps in ((1, 0.2, (0.18, 0.25)), (2, 0.1, (0.09, 0.12)), (3, 0.05, (0.04, 0.06))):
        k = min(t, 2)  # v_eff frozen after t_match
        assert P[t] == pytest.approx(chi2.sf(100 * m * m / v[k], 1), rel=1e-12)
        assert lo[t] == pytest.approx(chi2.sf(100 * max(reps) ** 2 / (v[k] - 2 * se[k]), 1), rel=1e-12)
        assert hi[t] == pytest.approx(chi2.sf(100 * min(reps) ** 2 / (v[k] + 2 * se[k]), 1), rel=1e-12)
        assert lo[t] <= P[t] <= hi[t]
    # captured from the bottom rung: P = 1 with the bottom rung's P as the lower end
    below = _curve([None], [[None]], [0.9])
    below.cos2[:, 0] = 0.9
    P, lo, hi = capture_probabilities([(0.0, below)], True, False, V, Vse, 0, 100)
    assert P[0] == 1.0 and hi[0] == 1.0 and lo[0] == pytest.approx(chi2.sf(100 * 0.01 ** 2 / 0.8, 1))


def testcapture_probabilities_without_the_sign_symmetry_average_both_signs():
    """m = 1, a link not even along e: the rays +1 and -1 have their own m*, and P is the mean of their chi2 tails."""
    v, se = np.array([2.0]), np.array([0.0])
    plus, minus = _curve([0.1], [[0.1]], [0.8]), _curve([0.3], [[0.3]], [0.8])
    P, _, _ = capture_probabilities([(0.0, plus), (math.pi, minus)], False, False, v[:, None, None],
                                     se[:, None, None], 0, 50)
    assert P[0] == pytest.approx(0.5 * (chi2.sf(50 * 0.01 / 2, 1) + chi2.sf(50 * 0.09 / 2, 1)), rel=1e-12)


def _rays_m2(angles, r_of):
    return [(a, _curve([r_of(a)], [[r_of(a)]], [0.8])) for a in angles]


def testcapture_probabilities_a_ray_that_never_captures():
    """m = 2: a ray that never captures (1/m* = 0) between rays that do: m* grows like 1/|angle| towards it, so the
    directions next to it still capture a large overlap -- P is the circle average of chi2_2 tails with 1/m* linear in
    the angle, above what the half of the circle next to the capturing rays alone gives."""
    from scipy.integrate import quad

    V = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    never = _curve([None], [[None]], [0.3])
    rays = [(math.pi / 4, never), (math.pi / 2, _curve([0.1], [[0.1]], [0.8])),
            (3 * math.pi / 4, _curve([0.1], [[0.1]], [0.8]))]
    d = 400
    P, lo, hi = capture_probabilities(rays, True, True, V, 0 * V, 0, d)
    # on [pi/4, pi/2]: 1/m* = 10 (phi - pi/4) / (pi/4); on [pi/2, 3pi/4]: 10; the rest by the symmetries
    f = lambda p: chi2.sf(d * (((p - math.pi / 4) / (math.pi / 4) * 10) ** -2 if p > math.pi / 4 else np.inf), 2)  # noqa: E731
    want = (quad(f, math.pi / 4, math.pi / 2)[0] + chi2.sf(d * 0.01, 2) * math.pi / 4) / (math.pi / 2)
    assert P[0] == pytest.approx(want, rel=2e-3)
    assert P[0] > 0.5 * chi2.sf(d * 0.01, 2) * 1.1 and lo[0] <= P[0] <= hi[0]


def testcapture_probabilities_width_two_isotropic_is_chi2_2():
    """m = 2 with V = v I and the same m* on every ray: mu_eff's length^2 is v chi2_2 / d, so P = P(chi2_2 >
    d m*^2 / v) -- and the same from the rays of the smallest fundamental domain with both symmetries."""

    V = np.array([[[1.5, 0.0], [0.0, 1.5]]])
    for flip, swap in ((True, True), (True, False), (False, True), (False, False)):
        rays = _rays_m2(ray_angles(2, flip, swap, 5), lambda a: 0.12)
        P, lo, hi = capture_probabilities(rays, flip, swap, V, 0 * V, 0, 300)
        assert P[0] == pytest.approx(chi2.sf(300 * 0.0144 / 1.5, 2), rel=1e-9)


def testcapture_probabilities_width_two_against_sampling():
    """m = 2, an anisotropic V_eff and an m* that depends on the ray's angle (with the symmetries phi -> phi + pi and
    phi -> pi/2 - phi, as for equal neurons and an even link): P from the rays on [pi/4, 3pi/4] equals the fraction
    of sampled mu_eff ~ N(0, V / d) beyond m*(their angle) (1/m* interpolated the same way, so only the circle
    average and the symmetry images are tested), to 3 standard errors."""

    V = np.array([[[2.0, -0.8], [-0.8, 1.2]]])
    r_of = lambda a: 0.05 + 0.04 * np.cos(2 * a) ** 2 + 0.03 * np.sin(4 * a) ** 2  # noqa: E731 (both symmetries)
    angles = ray_angles(2, True, True, 9)
    P, _, _ = capture_probabilities(_rays_m2(angles, r_of), True, True, V, 0 * V, 0, 400)
    rng = np.random.default_rng(1)
    mu = rng.multivariate_normal([0, 0], V[0] / 400, size=200_000)
    phi = np.arctan2(mu[:, 1], mu[:, 0])
    # the piecewise-linear capture strength 1/m* on the rays' images over the whole circle, as the construction does
    xs = np.concatenate([angles + s for s in (0, math.pi)]
                        + [math.pi / 2 - angles + s for s in (0, math.pi)]) % (2 * math.pi)
    ys = 1.0 / np.tile(r_of(angles), 4)
    o = np.argsort(xs)
    r = 1.0 / np.interp(phi % (2 * math.pi), xs[o], ys[o], period=2 * math.pi)
    frac = float(np.mean(np.hypot(mu[:, 0], mu[:, 1]) > r))
    assert abs(P[0] - frac) < 3 * math.sqrt(frac * (1 - frac) / len(mu)) + 1e-3


@pytest.fixture(scope="module")
def small():
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    return finite_d(pr, [8.0, 17.0], [200, 800], 40, paths=2048, replicas=2, refine=0)


def test_finite_d_midpoint_is_a_root_of_p_not_an_interpolation_across_the_grid():
    """The midpoint is found by root finding on P(capture by T) = 1/2: a separate solve at the reported midpoint
    gives P = 1/2 within its band, while the linear interpolation across the grid alone misses by more."""
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    kw = dict(paths=2048, replicas=2)
    fine = finite_d(pr, [4.0, 32.0], [400], 40, refine=3, **kw)
    assert len(fine.deltas) > 2
    # the linear interpolation across the user's grid alone (what refine=0 answers: common random numbers give the
    # grid's P the same values with and without the refinement)
    ends = [fine.deltas.index(4.0), fine.deltas.index(32.0)]
    mid = fine.midpoints[0]["midpoint"]
    lin = float(np.interp(0.5, fine.probability[ends, 0, 40], [4.0, 32.0]))
    at_mid = finite_d(pr, [mid], [400], 40, refine=0, **kw)
    p, lo, hi = (float(a[0, 0, 40]) for a in (at_mid.probability, at_mid.low, at_mid.high))
    assert lo <= 0.5 <= hi and abs(p - 0.5) < 0.05
    at_lin = finite_d(pr, [lin], [400], 40, refine=0, **kw)
    assert abs(float(at_lin.probability[0, 0, 40]) - 0.5) > abs(p - 0.5)
    band = fine.midpoints[0]["band"]
    assert band[0] <= mid <= band[1] and math.isfinite(fine.midpoints[0]["interpolation_error"])


def test_finite_d_monotone_in_delta_t_and_d(small):
    r = small
    P = r.probability
    assert P.shape == (2, 2, 41) and np.all((P >= 0) & (P <= 1))
    assert np.all(r.low <= P + 1e-12) and np.all(P <= r.high + 1e-12)
    # more samples capture more; a larger d starts from a smaller overlap (1/sqrt(d)) and captures less by t
    assert np.all(P[1, :, -1] >= P[0, :, -1]) and np.all(P[:, 0, -1] >= P[:, 1, -1])
    # escape times: the first t with P >= 1/2; later at larger d (the ~ln d growth), none below the threshold
    esc = {(e["delta"], e["d"]): e for e in r.escape_time}
    hi200, hi800 = esc[(17.0, 200)], esc[(17.0, 800)]
    assert hi200["t"] is not None and hi800["t"] is not None and hi200["t"] <= hi800["t"]
    assert P[1, 0, hi200["t"]] >= 0.5 > P[1, 0, hi200["t"] - 1]
    assert hi200["band"][0] <= hi200["t"] <= hi200["band"][1]
    assert esc[(8.0, 800)]["t"] is None and "horizon 40" in esc[(8.0, 800)]["note"]
    for m in r.midpoints:  # delta_1/2 inside the grid and inside its band
        assert 8.0 < m["midpoint"] < 17.0 and m["band"][0] <= m["midpoint"] <= m["band"][1]
    assert r.midpoints[0]["midpoint"] < r.midpoints[1]["midpoint"]  # d = 800 needs more samples per dimension
    c = r.curve(17.0, 200)
    assert c["probability"][hi200["t"]] == P[1, 0, hi200["t"]] and len(c["t"]) == 41
    assert "chi2_1" in r.method and "ladder of 16" in r.method


def test_finite_d_refuses_what_it_cannot_answer():
    pr = tk.Problem("gelu", "phase-retrieval", "square", 3, delta=10.0, eta=1.0, steps=1)
    with pytest.raises(tk.TheorykitError, match="rays"):
        finite_d(pr.replace(width=2, a=None), [8.0], [200], 10, rays=1)
    one = tk.Problem("gelu", "z", "square", 1, delta=10.0, eta=1.0, steps=1)
    with pytest.raises(tk.TheorykitError, match="no hard direction"):
        finite_d(one, [8.0], [200], 10)
    with pytest.raises(tk.TheorykitError, match="horizon"):
        finite_d(pr.replace(width=1, a=None), [8.0], [200], 0)


def test_finite_d_records_a_delta_where_the_dmft_diverges(monkeypatch):
    import theorykit.thresholds.capture as dyn

    def boom(*a, **k):
        raise tk.errors.DivergenceError("the DMFT from m0 = 0.002 stopped at step 3 (GD is unstable)")

    monkeypatch.setattr(dyn, "capture_curve", boom)
    pr = tk.Problem("quad", "phase-retrieval", "square", 1, delta=3.0, eta=0.05, steps=1)
    r = finite_d(pr, [3.0], [200], 10)
    assert "stopped at step 3" in r.per_delta[0]["error"] and np.isnan(r.probability).all()
    assert math.isnan(r.midpoints[0]["midpoint"]) and r.escape_time == ()


def test_finite_d_bisect_scan_solves_few_deltas_and_answers_as_the_whole_grid(monkeypatch):
    """scan="bisect" solves only the grid deltas that bracket the crossings of P and of its band's ends (P
    monotone in delta): the midpoint and band equal the whole grid's, from about log2(points) + 1 deltas (3 for a
    threshold near the grid's middle); a P that stays below 1/2 walks up to the grid's top and says so; a failed
    delta is stepped over."""
    import theorykit.thresholds.capture as cap

    solved = []

    def at_for(root, fail=()):
        def at(problem, dl, H, dims, *a, **k):
            solved.append(dl)
            p = 1.0 / (1.0 + (root / dl) ** 3)
            arr = lambda v: np.full((len(dims), H + 1), v)  # noqa: E731
            if dl in fail:
                return {"delta": dl, "error": "diverged", "rays": []}, arr(np.nan), arr(np.nan), arr(np.nan)
            return {"delta": dl, "error": "", "rays": []}, arr(p), arr(p ** 1.5), arr(p ** 0.6)
        return at

    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=3.0, eta=1.0, steps=1)
    grid = list(np.geomspace(1.0, 40.0, 16))
    for fail in ((), (grid[10],)):
        monkeypatch.setattr(cap, "_finite_d_at", at_for(10.3, fail))
        solved.clear()
        whole = finite_d(pr, grid, [200], 5, refine=0)
        assert len(solved) == 16
        solved.clear()
        bis = finite_d(pr, grid, [200], 5, refine=0, scan="bisect")
        assert len(solved) == len(set(solved)) <= 8 and "bisection over its indices" in bis.method
        assert bis.midpoints[0]["midpoint"] == pytest.approx(whole.midpoints[0]["midpoint"], rel=1e-12)
        assert bis.midpoints[0]["band"] == pytest.approx(whole.midpoints[0]["band"], rel=1e-12)
    def at_roots(*roots):  # P, its band's low curve and high curve cross 1/2 at the roots
        def at(problem, dl, H, dims, *a, **k):
            solved.append(dl)
            arr = lambda r: np.full((len(dims), H + 1), 1.0 / (1.0 + (r / dl) ** 3))  # noqa: E731
            return {"delta": dl, "error": "", "rays": []}, arr(roots[0]), arr(roots[2]), arr(roots[1])
        return at

    # a threshold near the middle of the command's own 8-point grid, its band wider below than above: the middle
    # delta, one step up for P, one step down for the band's low end -- 3 grid deltas
    grid8 = list(np.geomspace(1.0, 40.0, 8))
    monkeypatch.setattr(cap, "_finite_d_at", at_roots(10.45, 5.0, 10.82))
    solved.clear()
    mid = finite_d(pr, grid8, [200], 5, refine=0, scan="bisect")
    assert solved == [grid8[4], grid8[5], grid8[3]]
    assert mid.midpoints[0]["band"][0] == pytest.approx(5.0, abs=0.1)
    monkeypatch.setattr(cap, "_finite_d_at", at_for(100.0))
    solved.clear()
    low = finite_d(pr, grid, [200], 5, refine=0, scan="bisect")
    assert max(solved) == 40.0 and len(solved) <= 6 and "does not cross 1/2" in low.midpoints[0]["note"]
    with pytest.raises(tk.TheorykitError, match="scan must be"):
        finite_d(pr, grid, [200], 5, scan="all")


def test_finite_d_root_finding_stops_when_the_interpolation_error_is_small_against_the_band(monkeypatch):
    """The secant steps stop once the midpoint's interpolation error is below a tenth of the band's width: a wide
    band (the replicas disagree) takes fewer new deltas than a narrow one, and the interpolation error it reports
    is within that tenth."""
    import theorykit.thresholds.capture as cap

    def at_for(spread):
        def at(problem, dl, H, dims, *a, **k):
            p = 1.0 / (1.0 + (10.3 / dl) ** 4)
            arr = lambda v: np.full((len(dims), H + 1), v)  # noqa: E731
            return {"delta": dl, "error": "", "rays": []}, arr(p), arr(p ** (1 + spread)), arr(p ** (1 - spread))
        return at

    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=3.0, eta=1.0, steps=1)
    runs = {}
    for spread in (0.8, 0.01):
        monkeypatch.setattr(cap, "_finite_d_at", at_for(spread))
        r = finite_d(pr, [4.0, 7.0, 25.0], [200], 5, refine=8)
        mp = r.midpoints[0]
        runs[spread] = len(r.deltas) - 3
        assert abs(mp["midpoint"] - 10.3) < max(mp["interpolation_error"], 0.1) * 3
    assert 1 <= runs[0.8] < runs[0.01]
    monkeypatch.setattr(cap, "_finite_d_at", at_for(0.8))
    mp = finite_d(pr, [4.0, 7.0, 25.0], [200], 5, refine=8).midpoints[0]
    width = (mp["band"][1] - mp["band"][0]) - 2 * mp["interpolation_error"]
    assert mp["interpolation_error"] <= 0.1 * width


def test_finite_d_midpoint_band_says_when_an_end_lies_beyond_the_grid(monkeypatch):
    """P crosses 1/2 on the grid but the band's high curve is above 1/2 everywhere and its low curve never reaches
    it: the midpoint stands, both band ends are NaN, and the note says on which side of the grid each lies."""
    import theorykit.thresholds.capture as cap

    def at(problem, dl, H, dims, *a, **k):
        p = 0.3 + 0.1 * (dl - 2.0)  # 0.3 at delta 2, 0.7 at delta 6
        arr = lambda v: np.full((len(dims), H + 1), v)  # noqa: E731
        return {"delta": dl, "error": "", "rays": []}, arr(p), arr(p - 0.3), arr(p + 0.3)

    monkeypatch.setattr(cap, "_finite_d_at", at)
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=3.0, eta=1.0, steps=1)
    r = finite_d(pr, [2.0, 6.0], [200], 5, refine=0)
    mp = r.midpoints[0]
    assert mp["midpoint"] == pytest.approx(4.0) and all(math.isnan(v) for v in mp["band"])
    assert "low end lies below the grid's smallest delta 2" in mp["note"]
    assert "high end lies above the grid's largest delta 6" in mp["note"]


def test_threshold_cli_horizon_contract(capsys):
    argv = ["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", "--d", "200", "800",
            "--horizon", "20", "--horizon-deltas", "10", "17", "--paths", "1024", "--replicas", "2", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["delta_star"] == [] and {f["d"] for f in out["finite_d"]} == {200, 800}
    assert set(out["finite_d"][0]) >= {"d", "horizon", "midpoint", "band"}
    # every delta of the grid and of the root finding (which adds deltas near the midpoint) has its escape times
    deltas = out["finite_d_info"]["deltas"]
    assert {10.0, 17.0} <= set(deltas) and set(out["finite_d"][0]) >= {"interpolation_error"}
    assert set(out["escape_time"][0]) >= {"delta", "d", "t"} and len(out["escape_time"]) == 2 * len(deltas)
    assert out["finite_d_info"]["horizon"] == 20 and out["settings"]["horizon"] == 20
    for bad, msg in ((["--horizon", "20"], "--d"),
                     (["--d", "200", "--horizon", "20", "--rays", "4"], "only with --width >= 2"),
                     (["--horizon-deltas", "3", "--t", "0"], "only with --horizon"), ([], "nothing to compute")):
        rc = main(["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", *bad])
        err = capsys.readouterr().err
        assert rc == 2 and msg in err and err.count("\n") == 1, (bad, err)


def test_cos2_is_the_simulators_success_statistic():
    """overlap_cos2 from (M, C_theta) equals cos^2 between e and the top left singular vector of an explicit Theta (what
    theorykit/referee/gd.py counts), for widths 1-3 and a latent space with an easy direction."""

    rng = np.random.default_rng(3)
    for m in (1, 2, 3):
        Theta = rng.standard_normal((40, m)) * np.array([3.0, 1.0, 0.5][:m])
        e = np.array([0.6, 0.8])  # the hard direction in a k = 2 latent space (the first 2 coordinates)
        U = np.linalg.svd(Theta, full_matrices=False)[0][:, 0]
        want = float((U[:2] @ e) ** 2)
        M, C = Theta[:2], Theta[2:].T @ Theta[2:]
        assert float(overlap_cos2(M, C, e)) == pytest.approx(want, rel=1e-10)


def test_finite_d_width_two_end_to_end():
    """m = 2 (equal neurons, phase retrieval: both symmetries, so the rays span [pi/4, 3pi/4]): P in [0, 1] inside
    its band, more samples capture more, a larger d less; per delta the rays and V_eff (2 x 2) are reported."""
    pr = tk.Problem("gelu", "phase-retrieval", "square", 2, delta=5.0, eta=1.0, steps=1)
    r = finite_d(pr, [2.0, 12.0], [100, 1000], 25, paths=1024, replicas=2, m0s=[0.01, 0.05, 0.2, 0.6], rays=3)
    P = r.probability
    assert np.all((P >= 0) & (P <= 1)) and np.all(r.low <= P + 1e-12) and np.all(P <= r.high + 1e-12)
    assert np.all(P[1, :, -1] >= P[0, :, -1]) and P[1, 0, -1] >= P[1, 1, -1] and P[1, 0, -1] > P[0, 0, -1]
    info = r.per_delta[1]
    assert np.asarray(info["V"]).shape == (2, 2) and len(info["rays"]) == 3 and math.isnan(info["v"])
    dirs = np.array([q["direction"] for q in info["rays"]])
    assert np.allclose(dirs[0], [2 ** -0.5, 2 ** -0.5]) and np.allclose(dirs[-1], [-(2 ** -0.5), 2 ** -0.5])
    assert "e -> -e, neuron exchange" in r.method


def test_effective_overlap_covariance_inverts_the_propagator():
    """C_mu = P Sigma0 P^T + N (the initial overlap carried by P_t plus a noise-driven part N): V_eff = P^-1 C_mu P^-T
    = Sigma0 + P^-1 N P^-T exactly, from the tangents P B and C_init = P Sigma0 P^T (any B with B B^T = Sigma0);
    m = 1: C_mu Sigma0 / C_init."""
    from theorykit.dynamics.hard_process import effective_overlap_covariance

    rng = np.random.default_rng(5)
    P = rng.standard_normal((3, 2, 2)) + 3 * np.eye(2)
    S0 = np.array([[1.5, 0.3], [0.3, 0.8]])
    B = np.linalg.cholesky(S0)
    N = np.array([[2.0, -0.5], [-0.5, 1.0]])
    C_init = P @ S0 @ P.transpose(0, 2, 1)
    V = effective_overlap_covariance(C_init + N, P @ B, B, C_init)
    for t in range(3):
        Pi = np.linalg.inv(P[t])
        assert np.allclose(V[t], S0 + Pi @ N @ Pi.T, rtol=1e-10, atol=1e-12)
    v1 = effective_overlap_covariance(np.array([[[5.0]]]), np.array([[[-2.0]]]), np.array([[0.5]]),
                                      np.array([[[1.0]]]))
    assert v1[0, 0, 0] == pytest.approx(5.0 * 0.25 / 1.0)
    # an overflowed linear process (inf / NaN tangents at late times) leaves V NaN there, not a LinAlgError
    Pbad, Cbad = (P @ B).copy(), (C_init + N).copy()
    Pbad[2] = np.nan
    Cbad[1] = np.inf
    Vb = effective_overlap_covariance(Cbad, Pbad, B, C_init)
    assert np.allclose(Vb[0], V[0]) and np.isnan(Vb[1:]).all()


def test_median_start_midpoint_equals_the_ladders_root():
    """The median start's root (two DMFT runs per delta) is the ladder's midpoint (16 runs per delta): P(capture by
    T) = 1/2 exactly where the run from the median effective overlap sits at cos^2 = 1/2."""
    from theorykit.thresholds import finite_d_midpoint

    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    kw = dict(paths=1024, replicas=2)
    ladder = finite_d(pr, [4.0, 16.0], [100], 10, refine=6, **kw).midpoints[0]
    fm = finite_d_midpoint(pr, [100], 10, delta_range=(4.0, 16.0), **kw)
    mid = fm.midpoints[0]
    assert abs(mid["midpoint"] - ladder["midpoint"]) < 0.1
    assert mid["band"][0] <= ladder["midpoint"] <= mid["band"][1]
    assert mid["band"][0] < mid["midpoint"] < mid["band"][1] and mid["stderr"] > 0
    # every delta evaluated has its escape time from the same run; the root finding stopped on its tolerance
    assert len(fm.escape_time) == len(fm.evaluations) <= 12
    near = min(fm.evaluations, key=lambda e: abs(e["delta"] - mid["midpoint"]))
    assert abs(near["cos2"] - 0.5) < 0.05 and near["m_half"] == pytest.approx(math.sqrt(chi2.ppf(0.5, 1)
                                                                                         * near["v_eff"] / 100))


def test_median_start_refuses_what_it_cannot_answer_and_reports_a_range_without_the_root():
    from theorykit.thresholds import finite_d_midpoint, median_start_applies

    m2 = tk.Problem("gelu", "phase-retrieval", "square", 2, delta=10.0, eta=1.0, steps=1)
    assert "width m = 1" in median_start_applies(m2)
    assert median_start_applies(tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)) \
        is None
    with pytest.raises(tk.TheorykitError, match="width m = 1"):
        finite_d_midpoint(m2, [100], 10)
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    with pytest.raises(tk.TheorykitError, match="delta_range"):
        finite_d_midpoint(pr, [100], 10, delta_range=(5.0, 2.0))
    fm = finite_d_midpoint(pr, [100], 3, delta_range=(1.5, 2.0), paths=1024, replicas=2)
    mid = fm.midpoints[0]
    assert math.isnan(mid["midpoint"]) and "below 1/2 over the whole delta_range" in mid["note"]


def test_secant_root_finds_brackets_and_reports_one_sign():
    from theorykit.rules import secant_root

    calls = []

    def f(x):
        calls.append(x)
        return x ** 3 - 2.0

    r = secant_root(f, 0.0, 4.0, tol=1e-6, max_evaluations=60)
    assert abs(r.value - 2 ** (1 / 3)) < 1e-6 and r.side == 0 and len(calls) < 40
    (a, fa), (b, fb) = r.bracket
    assert fa * fb <= 0 and b - a <= 1e-6 or min(abs(fa), abs(fb)) == 0
    none = secant_root(f, 2.0, 4.0, tol=1e-6, max_evaluations=60)
    assert none.value is None and none.bracket is None and none.side == 1 and len(none.tried) == 2
    capped = secant_root(f, 0.0, 4.0, tol=1e-12, max_evaluations=5)
    assert len(capped.tried) == 5 and capped.value is not None
    with pytest.raises(tk.TheorykitError, match="nan"):
        secant_root(lambda x: math.nan, 0.0, 1.0, tol=1e-3, max_evaluations=5)


def test_threshold_cli_horizon_without_deltas_uses_the_median_start(capsys):
    argv = ["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", "--d", "100",
            "--horizon", "10", "--delta-range", "4", "16", "--paths", "1024", "--replicas", "2", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    f = out["finite_d"][0]
    assert f["d"] == 100 and 4 < f["midpoint"] < 16 and f["band"][0] < f["midpoint"] < f["band"][1]
    assert "median start" in out["finite_d_info"]["method"]
    assert len(out["escape_time"]) == len(out["finite_d_info"]["per_delta"])


def test_median_start_moves_a_bracket_end_where_the_dmft_diverges(monkeypatch):
    """A lower end where the DMFT raises (a solve that diverges at its first step raises DivergenceError; a later
    divergence is a run that stops early, counted as GD counts it: the test below) moves inwards and is named in the
    note; the midpoint comes from the rest."""
    from theorykit.errors import DivergenceError
    from theorykit.thresholds import finite_d_midpoint, midpoint as mod

    real = mod.dmft

    def flaky(problem, **kw):
        if problem.delta < 3.0:
            raise DivergenceError("diverged at step 4 (test)")
        return real(problem, **kw)

    monkeypatch.setattr(mod, "dmft", flaky)
    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    fm = finite_d_midpoint(pr, [100], 10, delta_range=(1.0, 16.0), paths=1024, replicas=2)
    mid = fm.midpoints[0]
    assert 4.0 < mid["midpoint"] < 16.0 and "delta = 1: diverged at step 4" in mid["note"]
    assert min(e["delta"] for e in fm.evaluations) >= 3.0


def test_midpoint_runs_the_dmft_of_n_equal_delta_d_samples(monkeypatch):
    """x + x^2/2 on phase retrieval, eta 0.5: the d -> infinity DMFT is unreliable through paths no sample of
    n = delta d points holds (issue 27 point 4); the median start runs the DMFT of n = delta d samples at every delta
    (recorded as truncated_at_n), so no delta costs a d -> infinity solve, a rare-path probe and a truncated one."""
    import theorykit.thresholds.midpoint as mod

    real, seen = mod.dmft, []

    def spy(problem, **kw):
        seen.append(kw.get("d"))
        return real(problem, **kw)

    monkeypatch.setattr(mod, "dmft", spy)
    p = tk.Problem("x + x**2/2", "phase-retrieval", delta=8.0, eta=0.5, steps=10)
    fm = tk.thresholds.finite_d_midpoint(p, [400], 12, delta_range=(8.0, 12.0), paths=2048, replicas=2)
    evals = fm.as_dict()["evaluations"]
    assert evals and all(e["truncated_at_n"] == round(e["delta"] * 400) for e in evals)
    assert all(np.isfinite(e["cos2"]) for e in evals)
    assert seen and set(seen) == {400}


def _fake_dmft(root_delta, v_scale, kept=1.0, c_mu=1e30):
    """A stand-in for the DMFT with known answers: V_eff = v_scale delta^2 (constant in t) and cos^2 at the horizon
    1 / (1 + exp(-(delta - root_delta))), whatever M0; the linear process's variance C_mu = c_mu (median-start tests
    of the range logic only)."""
    class R:
        def __init__(self, pr):
            H, dl = pr.steps, pr.delta
            self.status, self.diverged_at = "ok", None
            v = v_scale * dl ** 2
            self.V_eff = np.full((H + 1, 1, 1), v)
            self.stderr = {"V_eff": np.full((H + 1, 1, 1), 1e-3 * v)}
            p = min(1.0 / (1.0 + math.exp(-(dl - root_delta))), 1 - 1e-9)
            self.M = np.zeros((H + 1, 1, 1))
            self.M[:, 0, 0] = math.sqrt(p / (1 - p))
            self.C_theta_tt = np.ones((H + 1, 1, 1))
            self.C_mu_init = kept ** (np.arange(H + 1) / H)[:, None, None]  # C_init(H) = kept (< 1: contracting)
            self.C_mu = np.full((H + 1, 1, 1, 1), float(c_mu))
            self.per_replica = {"M": np.stack([self.M * 0.99, self.M * 1.01]),
                                "C_theta_tt": np.stack([self.C_theta_tt] * 2)}

    return lambda pr, **kw: R(pr)


def test_median_start_moves_the_top_in_where_the_median_overlap_reaches_one(monkeypatch, capsys):
    """Where m_1/2 >= 1 (the linear phase alone brings the overlap to O(1) at this d, or the initial overlap decays)
    the range's top moves in and the note says so (and which of the two); a root below it is still found, one above
    it is reported as no midpoint (not an error, not exit 2)."""
    import theorykit.thresholds.midpoint as mp

    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    # m_1/2 = sqrt(0.455 * 2 delta^2 / 100) = 0.095 delta: >= 1 at 40 and 17.6, < 1 at 9.5 (the third try)
    monkeypatch.setattr(mp, "dmft", _fake_dmft(3.0, 2.0))
    mid = mp.finite_d_midpoint(pr, [100], 5, delta_range=(1.5, 40.0)).midpoints[0]
    assert abs(mid["midpoint"] - 3.0) < 0.1
    assert "m_1/2 is >= 1" in mid["note"] and "moved in to 9.5" in mid["note"]
    assert "the hard direction contracts)" not in mid["note"]
    # where the initial overlap has decayed by t_match, the note says that V_eff grew through the decay
    monkeypatch.setattr(mp, "dmft", _fake_dmft(3.0, 2.0, kept=1e-3))
    mid = mp.finite_d_midpoint(pr, [100], 5, delta_range=(1.5, 40.0)).midpoints[0]
    assert "(m_1/2 = 3.82; the initial overlap's variance is x0.001 at t_match = 5: the hard direction contracts)" in (
        mid["note"])
    monkeypatch.setattr(mp, "dmft", _fake_dmft(12.0, 2.0))
    mid = mp.finite_d_midpoint(pr, [100], 5, delta_range=(1.5, 40.0)).midpoints[0]
    assert math.isnan(mid["midpoint"]) and mid["note"].startswith("no midpoint at d = 100")
    assert "up to delta = 9.5" in mid["note"]
    # the text output names the reason (a NaN midpoint is undefined, with its note), and the exit code is 0
    argv = ["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--eta", "1", "--d", "100",
            "--horizon", "5", "--delta-range", "1.5", "40", "--paths", "1024", "--replicas", "2"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "delta_1/2 = undefined (no midpoint at d = 100" in text


def test_median_start_answers_by_the_linear_process_where_the_hard_direction_contracts(monkeypatch):
    """Where m_1/2 >= 1 but the linear process's own median cos^2 (q_1/2 C_mu(T) / d over the Gram) stays below 1/2
    up to T -- the hard direction contracts, so V_eff = C_mu / C_init is no initial overlap -- that delta is answered
    by the linear process (P(capture by T) < 1/2 there), not by moving the range's top in (softplus(2x)/2 on the sign
    link with the square loss: GD at d = 400 never escapes up to delta = 40, tables/finite_d_midpoint_vs_gd.md)."""
    import theorykit.thresholds.midpoint as mp

    pr = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=1)
    # m_1/2 = 0.095 delta >= 1 at 40; there C_mu = 1: median cos^2 = 0.00455 / (0.00455 + 1 / (1 - p)) < 1/2
    monkeypatch.setattr(mp, "dmft", _fake_dmft(12.0, 2.0, kept=1e-3, c_mu=1.0))
    fm = mp.finite_d_midpoint(pr, [100], 5, delta_range=(1.5, 40.0))
    mid, last = fm.midpoints[0], fm.evaluations[-1]
    assert math.isnan(mid["midpoint"]) and "below 1/2 over the whole delta_range [1.5, 40]" in mid["note"]
    assert "so the linear process answers, at delta = 40 (m_1/2 = 3.82" in mid["note"]
    assert "moved in" not in mid["note"]
    p40 = min(1.0 / (1.0 + math.exp(-(40.0 - 12.0))), 1 - 1e-9)  # the fake's clipped P
    x = mp.CHI2_1_MEDIAN / 100
    assert last["delta"] == 40.0 and last["from"] == "linear process"
    assert abs(last["cos2"] - x / (x + 1 / (1 - p40))) < 1e-6 * x / (x + 1 / (1 - p40))
    # with the same decay but a linear process that reaches cos^2 = 1/2 (C_mu large, or overflowed to inf: no
    # RuntimeWarning, cos^2 -> 1), the top moves in as before
    import warnings

    for c_mu in (1e30, math.inf):
        monkeypatch.setattr(mp, "dmft", _fake_dmft(12.0, 2.0, kept=1e-3, c_mu=c_mu))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mid = mp.finite_d_midpoint(pr, [100], 5, delta_range=(1.5, 40.0)).midpoints[0]
        assert "moved in to 9.5" in mid["note"] and mid["note"].startswith("no midpoint at d = 100")


def test_finite_d_paths_gives_a_kinked_problem_enough_paths_per_replica():
    """The median start's default budget: THRESHOLD_PATHS for a smooth problem; for a kinked activation or loss (Stein
    responses, whose noise biases C_theta upwards) at least KINKED_REPLICA_PATHS per replica; a given budget is
    kept.  (ReLU phase retrieval at d = 400: 4096 paths per replica never captured from the median start at delta = 14,
    where GD succeeds in more than half the runs; tables/finite_d_midpoint_vs_gd.md, pr-relu.)"""
    from theorykit import defaults
    from theorykit.thresholds import finite_d_paths

    smooth = tk.Problem("gelu", "phase-retrieval", delta=10.0, eta=1.0, steps=10)
    kinked = tk.Problem("relu", "phase-retrieval", delta=10.0, eta=0.5, steps=10)
    kinked_loss = tk.Problem("gelu", "sign-symmetric", "Max(0, 1 - y*yhat)", delta=10.0, eta=0.5, steps=10)
    assert finite_d_paths(smooth, 4) == defaults.THRESHOLD_PATHS
    assert finite_d_paths(kinked, 4) == 4 * defaults.KINKED_REPLICA_PATHS == 65536
    assert finite_d_paths(kinked, 2) == max(defaults.THRESHOLD_PATHS, 2 * defaults.KINKED_REPLICA_PATHS)
    assert finite_d_paths(kinked_loss, 4) == 65536  # the hinge loss: l' jumps
    assert finite_d_paths(kinked, 4, paths=2048) == 2048


def test_finite_d_ladders_of_a_kinked_problem_get_enough_paths_per_replica(monkeypatch):
    """finite_d's ladders (the nonlinear runs from M0 = m0 e) of a kinked activation take at least
    KINKED_REPLICA_PATHS paths per replica whatever ``paths`` says; the V_eff run keeps a given ``paths`` (without
    one, finite_d_paths raises it too); a smooth activation's ladders keep ``paths``."""
    import theorykit.thresholds.capture as mod
    from theorykit import defaults

    real, seen = mod.dmft, []

    def spy(problem, **kw):
        seen.append((problem.M0 is not None, kw.get("paths"), kw.get("replicas")))
        return real(problem, **kw)

    monkeypatch.setattr(mod, "dmft", spy)
    for act, ladder in (("relu", 2 * defaults.KINKED_REPLICA_PATHS), ("gelu", 1024)):
        seen.clear()
        p = tk.Problem(act, "phase-retrieval", delta=10.0, eta=0.5, steps=3)
        tk.thresholds.finite_d(p, [10.0], [200], 3, m0s=[0.05, 0.5], paths=1024, replicas=2)
        assert {s[1:] for s in seen if s[0]} == {(ladder, 2)}, seen
        assert {s[1:] for s in seen if not s[0]} == {(1024, 2)}, seen


def test_capture_curve_default_paths_of_a_kinked_problem(monkeypatch):
    """capture_curve (and so delta_dyn) without ``paths``: the DMFT's default budget, raised for a kinked activation
    to KINKED_REPLICA_PATHS per replica (the Stein-noise bias of the median start is the same bias from a ladder
    rung); a given ``paths`` is kept; the method string says the budget."""
    import theorykit.thresholds.capture as mod
    from theorykit import defaults

    real, seen = mod.dmft, []

    def spy(problem, **kw):
        seen.append(kw.get("paths"))
        return real(problem, **kw)

    monkeypatch.setattr(mod, "dmft", spy)
    assert 8 * defaults.KINKED_REPLICA_PATHS > defaults.DMFT_PATHS
    for act, paths, want in (("relu", None, 8 * defaults.KINKED_REPLICA_PATHS), ("relu", 1024, 1024),
                             ("gelu", None, defaults.DMFT_PATHS)):
        seen.clear()
        p = tk.Problem(act, "phase-retrieval", delta=10.0, eta=0.5, steps=2)
        c = tk.thresholds.capture_curve(p, 2, [0.1, 0.5], replicas=8, paths=paths)
        assert set(seen) == {want}, (act, paths, seen)
        assert f"({want} paths in 8 replicas)" in c.method


def test_finite_d_midpoint_counts_a_divergence_as_gd_counts_it():
    """GD's success counts an escape before a divergence (theorykit.referee.sweeps.SUCCESS).  x + x^2/2 on phase
    retrieval at eta = 0.5 diverges at small delta from the random start (GD at d = 400: steps 2-4 at delta = 1) and,
    near its midpoint, blows up after escaping: a DMFT run that stops early is captured iff cos^2 passed 1/2 before
    it, so the midpoint exists (it had none: every such run raised) and the note names each such run."""
    # horizon 120: the runs from m_1/2 blow up at steps 70-110 here; at horizon 60 whether any of them blows up
    # depends on the machine's rounding (a clean-clone CI on one VM had none, on another one)
    p = tk.Problem("x + x**2/2", "phase-retrieval", "square", delta=8.0, eta=0.5, steps=120)
    fm = tk.thresholds.finite_d_midpoint(p, [400], 120, delta_range=(1.0, 16.0), paths=4096, replicas=2)
    ev = {round(e["delta"], 6): e for e in fm.evaluations}
    assert ev[1.0]["from"].startswith("random start, diverged at step") and ev[1.0]["cos2"] < 0.5
    stopped = [e for e in fm.evaluations if e["from"].startswith("median start, diverged")]
    assert stopped, fm.evaluations
    for e in stopped:  # the verdict follows cos^2 before the blow-up
        assert (e["cos2"] >= 0.5) == ("after cos^2 reached 1/2" in e["from"]), e
    mid = fm.midpoints[0]
    assert 4.5 < mid["midpoint"] < 16.0 and mid["band"][0] < mid["midpoint"] < mid["band"][1]
    assert "count as captured iff cos^2 passed 1/2 first" in mid["note"] and "delta = 1: " in mid["note"]
