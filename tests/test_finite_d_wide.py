"""Width m >= 3 at finite d (issue 30 point 4; docs/theory.md §5, "Any width"): the symmetry group of the initial
overlap directions (flip, exchange of equal neurons), the orbit distance, the anchors, the interpolated capture
strength, and the matched probability built from them.  The comparison with GD at m = 4 is
tables/finite_d_wide.md."""
import itertools
import math

import numpy as np
import pytest
from scipy.stats import chi2

import theorykit as tk
from theorykit.thresholds.capture import CaptureCurve, capture_curve, capture_probabilities, overlap_cos2
from theorykit.thresholds.directions import (ConeInterpolant, StrengthInterpolant, anchor_directions,
                                             interpolate_strength, invariant_forms, neuron_classes, orbit_cos,
                                             orbit_images, sphere_directions)


def _group(m, flip, classes):
    """Every element of the group as (sign, permutation): brute force."""
    perms = [list(range(m))]
    for cls in classes:
        new = []
        for p in perms:
            for q in itertools.permutations(cls):
                r = list(p)
                for src, dst in zip(cls, q):
                    r[src] = p[dst]
                new.append(r)
        perms = new
    return [(s, p) for s in ((1.0, -1.0) if flip else (1.0,)) for p in perms]


def test_neuron_classes():
    pm = tk.Problem("gelu", "phase-retrieval", width=4, a=[1, -1, 1, -1], delta=4.0, eta=1.0, steps=5)
    assert neuron_classes(pm) == ((0, 2), (1, 3))
    eq = tk.Problem("gelu", "phase-retrieval", width=3, delta=4.0, eta=1.0, steps=5)
    assert neuron_classes(eq) == ((0, 1, 2),)
    # a Sigma_0 that tells neuron 2 apart splits the class; different biases too
    S = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
    assert neuron_classes(eq.replace(Sigma0=S)) == ((0, 1), (2,))
    assert neuron_classes(eq.replace(b=[0.0, 0.5, 0.0])) == ((0, 2), (1,))


@pytest.mark.parametrize("flip,classes", [(True, ((0, 2), (1, 3))), (False, ((0, 1, 2, 3),)),
                                          (True, ((0,), (1, 2), (3,)))])
def test_orbit_cos_is_the_maximum_over_the_group(flip, classes):
    """The sort formula (rearrangement inequality) equals the brute-force maximum of q . g a over the group."""
    rng = np.random.default_rng(3)
    Q = rng.standard_normal((20, 4))
    A = rng.standard_normal((5, 4))
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    brute = np.array([[max(s * q[p] @ a for s, p in _group(4, flip, classes)) for a in A] for q in Q])
    assert np.allclose(orbit_cos(Q, A, flip, classes), brute, atol=1e-13)


def test_anchors_start_with_the_symmetric_directions_and_are_distinct_orbits():
    classes = ((0, 2), (1, 3))
    A = anchor_directions(4, True, classes, 8)
    assert A.shape == (8, 4) and np.allclose(np.linalg.norm(A, axis=1), 1.0)
    r = math.sqrt(0.5)
    want = [[1, 0, 0, 0], [0, 1, 0, 0], [r, 0, -r, 0], [0, r, 0, -r], [0.5] * 4, [r, 0, r, 0], [0, r, 0, r]]
    assert np.allclose(A[:7], want)  # one neuron; a pair with opposite overlaps; all alike; a class alike
    c = orbit_cos(A, A, True, classes)
    assert np.all(c[~np.eye(8, dtype=bool)] < 1 - 1e-6)  # no two anchors on one orbit


def test_interpolated_strength_is_exact_on_every_orbit_image_and_bounded():
    classes, flip = ((0, 2), (1, 3)), True
    A = anchor_directions(4, flip, classes, 9)
    K = len(A)
    s = np.arange(K, dtype=float)[::-1] * 0.7
    imgs = np.array([[sg * a[p] for sg, p in _group(4, flip, classes)] for a in A])  # (K, |G|, 4)
    for k in range(K):
        assert np.allclose(interpolate_strength(imgs[k], A, s, flip, classes), s[k])
    W = sphere_directions(4)
    v = interpolate_strength(W, A, s, flip, classes)
    assert np.all((v >= s.min() - 1e-12) & (v <= s.max() + 1e-12))
    assert np.allclose(interpolate_strength(W, A, np.full(K, 2.5), flip, classes), 2.5)


def _curve(direction, r):
    cos2 = np.array([[0.1], [0.9]])
    return CaptureCurve(t=(0,), m_star=(r,), m0s=(0.001, 0.9), cos2=cos2, m_star_replicas=((r,),),
                        direction=tuple(direction))


def test_width_three_isotropic_is_chi2_3():
    """V = v I and the same m* on every anchor: P = P(chi2_3 > d m*^2 / v) exactly (the direction average of a
    constant)."""
    classes = ((0, 1, 2),)
    A = anchor_directions(3, True, classes, 4)
    V = 1.3 * np.eye(3)[None]
    P, lo, hi = capture_probabilities([(float(i), _curve(a, 0.1)) for i, a in enumerate(A)], True, False, V, 0 * V, 0,
                                      500, classes=classes)
    assert P[0] == pytest.approx(chi2.sf(500 * 0.01 / 1.3, 3), rel=1e-12) and lo[0] <= P[0] <= hi[0]


def test_width_four_against_sampling():
    """m = 4, an anisotropic V_eff and an m* that depends on the direction through an invariant of the group (the
    largest |u_j| of the a = +1 neurons): P from interpolated anchors against the fraction of sampled
    mu_eff ~ N(0, V / d) beyond the exact m*(their direction).  What is tested: the sphere average, the orbit
    images and the interpolation, whose error falls as anchors are added (0.046 with the 7 symmetric directions,
    0.003 with 20; the sampling's s.e. is 0.0008)."""
    classes, flip = ((0, 2), (1, 3)), True
    r_of = lambda U: 0.06 + 0.05 * (1 - np.max(np.abs(U[:, [0, 2]]), axis=1))  # noqa: E731
    L = np.array([[1.2, 0.1, 0.0, 0.2], [0.0, 0.9, 0.1, 0.0], [0.3, 0.0, 1.1, 0.0], [0.0, 0.2, 0.0, 0.8]])
    V = (L @ L.T)[None]
    d = 400
    mu = np.random.default_rng(2).multivariate_normal(np.zeros(4), V[0] / d, size=400_000)
    n = np.linalg.norm(mu, axis=1)
    frac = float(np.mean(n > r_of(mu / n[:, None])))
    err = []
    for K in (7, 20):
        A = anchor_directions(4, flip, classes, K)
        rays = [(float(i), _curve(a, float(r_of(a[None])[0]))) for i, a in enumerate(A)]
        P, _, _ = capture_probabilities(rays, flip, False, V, 0 * V, 0, d, classes=classes)
        err.append(abs(P[0] - frac))
    assert 0.2 < frac < 0.8 and err[1] < 0.006 and err[0] < 0.07 and err[1] < err[0] / 4


def test_capture_curve_bisection_rungs_join_the_ladder():
    """refine = 2 adds two rungs inside the bracket of cos^2(T) = 1/2; m*(T) lies in the narrowed bracket."""
    pr = tk.Problem("gelu", "phase-retrieval", width=1, delta=16.0, eta=1.0, steps=10)
    m0s = [0.01, 0.1, 0.5]
    c = capture_curve(pr, 10, m0s, refine=2, paths=1024, replicas=2)
    assert len(c.m0s) == 5 and "2 bisection rung(s)" in c.method
    ms = c.m_star[10]
    assert ms is not None
    cos2 = np.asarray(c.cos2)[:, 10]
    j = int(np.flatnonzero(cos2 >= 0.5)[0])
    assert c.m0s[j - 1] < ms <= c.m0s[j] and c.m0s[j] / c.m0s[j - 1] < (0.5 / 0.01) ** 0.5


def test_capture_curve_bracket_search_finds_the_ladders_crossing_with_fewer_runs():
    """search="bracket" (common random numbers: every rung is the same function of m0) brackets the crossing of
    cos^2(T) = 1/2 that a fine ladder finds, from the top, from a guess below and from a guess above, with fewer
    DMFT runs; a top rung that never captures is the only run."""
    pr = tk.Problem("gelu", "phase-retrieval", width=1, delta=16.0, eta=1.0, steps=10)
    kw = dict(paths=1024, replicas=2)
    fine = np.geomspace(0.002, 0.5, 17)
    ref = capture_curve(pr, 10, fine, **kw).m_star[10]
    assert ref is not None and 0.004 < ref < 0.25  # inside the range, away from its ends
    spacing = fine[1] / fine[0]
    fine_step = 4.0 ** 0.25
    for guess, step in ((None, 4.0), (ref / 7, 4.0), (ref * 3, 4.0), (ref / 7, fine_step), (ref * 3, fine_step),
                        (ref * 1.1, fine_step)):
        c = capture_curve(pr, 10, [0.002, 0.5], search="bracket", guess=guess, refine=2, step=step, **kw)
        cos2 = np.asarray(c.cos2)[:, 10]
        j = int(np.flatnonzero(cos2 >= 0.5)[0])
        assert j > 0 and c.m0s[j] / c.m0s[j - 1] <= fine_step * (1 + 1e-9)  # the bisected bracket
        assert c.m0s[j - 1] / spacing < ref < c.m0s[j] * spacing  # the fine ladder's crossing lies in it
        assert len(c.m0s) < len(fine) and "bracket" in c.method
        if guess == ref * 1.1:  # a close guess with the final resolution as its first step: two runs
            assert len(c.m0s) == 2
    with pytest.raises(tk.TheorykitError, match="step must be a number > 1"):
        capture_curve(pr, 10, [0.01, 0.5], search="bracket", step=1.0, **kw)
    never = capture_curve(pr.replace(delta=0.5), 10, [0.002, 0.05], search="bracket", refine=2, **kw)
    assert len(never.m0s) == 1 and never.m_star[10] is None
    with pytest.raises(tk.TheorykitError, match="search must be"):
        capture_curve(pr, 10, [0.01, 0.5], search="grid", **kw)


def test_a_solve_stopped_once_captured_is_the_prefix_of_the_full_solve():
    """dmft(stop_overlap=(e, level, hold)): each replica stops once cos^2 with e has been >= level for hold steps; the
    result is, number for number, the prefix of the solve to T (same seed), with status "ok" and the replicas' last
    steps in settings; bad options are one-line errors."""
    pr = tk.Problem("gelu", "phase-retrieval", delta=8.0, eta=1.0, steps=60, M0=[[0.5]])
    kw = dict(paths=1024, replicas=2, seed=0, bias_check=False, hard_process=False)
    full = tk.dmft(pr, **kw)
    cos2 = overlap_cos2(full.M, full.C_theta_tt, np.array([1.0]))
    first = int(np.flatnonzero(cos2 >= 0.9)[0])
    assert first + 2 < 60  # captured well before T: the stop is reached
    stopped = tk.dmft(pr, **kw, stop_overlap=([1.0], 0.9, 3))
    S = len(stopped.t)
    assert stopped.status == "ok" and S < 61 and min(stopped.settings["stopped_at"]) == S - 1
    assert np.all(cos2[S - 3:S] >= 0.9)
    for key in ("M", "C_theta_tt", "train_loss", "test_loss"):
        assert np.array_equal(getattr(stopped, key), getattr(full, key)[:S]), key
    assert full.settings["stopped_at"] == [None, None]
    for bad in (([1.0], 1.5, 3), ([1.0], 0.9, 0), "e"):
        with pytest.raises(tk.TheorykitError, match="stop_overlap"):
            tk.dmft(pr, **kw, stop_overlap=bad)


def test_bracket_runs_stop_once_captured_and_find_the_same_crossing():
    """capture_curve's bracket search stops the runs that capture (cos^2 >= 0.9 held 3 steps): the same rungs and the
    same m*(T) as the runs to T when the crossing's rungs capture late, a flat cos^2 after the stop in the rungs
    that captured early, and none in the runs to T."""
    pr = tk.Problem("gelu", "phase-retrieval", width=1, delta=16.0, eta=1.0, steps=40)
    kw = dict(paths=1024, replicas=2, search="bracket", refine=2)
    a = capture_curve(pr, 40, [0.002, 0.5], stop_captured=False, **kw)
    b = capture_curve(pr, 40, [0.002, 0.5], **kw)
    assert a.m0s == b.m0s
    cos2_a, cos2_b = np.asarray(a.cos2), np.asarray(b.cos2)
    flat = [i for i in range(len(b.m0s)) if cos2_b[i, -1] >= 0.5 and np.all(cos2_b[i, -5:] == cos2_b[i, -1])]
    assert flat and not any(np.all(cos2_a[i, -5:] == cos2_a[i, -1]) for i in range(len(a.m0s)))
    j = int(np.flatnonzero(cos2_a[:, -1] >= 0.5)[0])
    if j not in flat:  # the crossing's upper rung ran to T in both: the same interpolation
        assert b.m_star[40] == a.m_star[40]
    assert abs(b.m_star[40] / a.m_star[40] - 1) < 0.02


def test_finite_d_width_four_runs_and_states_its_method():
    pr = tk.Problem("gelu", "phase-retrieval", width=4, a=[1, -1, 1, -1], delta=8.0, eta=1.0, steps=10)
    fd = tk.finite_d(pr, [4.0, 16.0], [100], 10, paths=1024, replicas=2, rays=3, refine=0)
    assert fd.probability.shape == (2, 1, 11)
    assert np.all((fd.probability >= 0) & (fd.probability <= 1))
    assert fd.probability[1, 0, -1] >= fd.probability[0, 0, -1]
    assert "anchor rays on the sphere" in fd.method and "neuron exchange" in fd.method
    assert [r["direction"] for r in fd.per_delta[0]["rays"]][:2] == [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
    assert "direct responses" in fd.method


def test_a_ray_that_never_captured_at_a_larger_delta_is_not_run(monkeypatch):
    """finite_d at width >= 3 skips, at a root-finding delta and at every grid delta (the grid is solved from its
    largest delta down), every ray whose top rung never captured at a larger delta already solved: no ladder for it
    there, and its record says so.  The ladders are replaced by curves whose
    capture radius falls with delta on the a = +1 neurons' directions (so that P crosses 1/2 inside the grid) and
    that never capture elsewhere; the V_eff runs are real DMFT solves."""
    import theorykit.thresholds.capture as cap

    calls = []

    def ladder(problem, T, m0s=None, *, direction=None, **k):
        u = np.asarray(direction, dtype=float)
        calls.append((problem.delta, tuple(np.round(u, 3))))
        top = float(max(m0s))
        if np.abs(u[[1, 3]]).max() > 1e-9:  # an a = -1 neuron takes part: never captures by T
            return CaptureCurve(t=tuple(range(T + 1)), m_star=(None,) * (T + 1), m0s=(top,),
                                cos2=np.zeros((1, T + 1)), direction=tuple(u))
        r = 0.6 / problem.delta
        return CaptureCurve(t=tuple(range(T + 1)), m_star=(r,) * (T + 1), m0s=(r / 2, 2 * r),
                            cos2=np.tile([[0.0], [1.0]], (1, T + 1)), m_star_replicas=((r,) * (T + 1),) * 2,
                            direction=tuple(u))

    monkeypatch.setattr(cap, "capture_curve", ladder)
    pr = tk.Problem("gelu", "phase-retrieval", width=4, a=[1, -1, 1, -1], delta=8.0, eta=1.0, steps=10)
    fd = tk.finite_d(pr, [2.0, 32.0], [100], 10, paths=1024, replicas=2, refine=1)
    assert len(fd.deltas) == 3 and math.isfinite(fd.midpoints[0]["midpoint"])  # one root-finding delta
    mid = fd.deltas[1]
    rays = {tuple(np.round(r["direction"], 3)): r for r in fd.per_delta[1]["rays"]}
    never = [u for u, r in rays.items() if np.abs(np.asarray(u)[[1, 3]]).max() > 1e-9]
    assert never and all(not rays[u]["run"] for u in never)  # skipped at the root-finding delta ...
    assert all((mid, u) not in calls for u in never)  # ... without a ladder
    assert all((32.0, u) in calls for u in never)  # the largest delta, solved first, ran every ray ...
    assert all((2.0, u) not in calls for u in never)  # ... and the grid below it skips them too
    assert all(rays[u]["run"] for u in rays if u not in never)


def test_cone_interpolant_is_exact_on_anchors_and_linear_on_facets():
    """The hull of the orbit images holds the origin; every anchor image gets its anchor's strength; a direction
    halfway along an edge of a facet gets the mean of the edge's strengths; constants are reproduced."""
    classes, flip = ((0, 2), (1, 3)), True
    A = anchor_directions(4, flip, classes, 7)
    cone = ConeInterpolant(A, flip, classes)
    assert cone.ok
    s = np.array([3.0, 0.0, 5.0, 0.0, 1.0, 2.0, 0.5])
    for k, a in enumerate(A):
        img = orbit_images(a, flip, classes)
        assert np.allclose(cone.evaluate(cone.coordinates(img), s), s[k])
    W = sphere_directions(4)
    assert np.allclose(cone.evaluate(cone.coordinates(W), np.full(7, 1.7)), 1.7)
    i, j = cone.vertices[0][:2]
    P = np.vstack([orbit_images(a, flip, classes) for a in A])
    mid = (P[i] + P[j]) / np.linalg.norm(P[i] + P[j])
    assert cone.evaluate(cone.coordinates(mid[None]), s)[0] == pytest.approx(0.5 * (s[cone.owner[i]]
                                                                                     + s[cone.owner[j]]))
    assert orbit_images(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]), True, ((0, 1, 2, 3, 4, 5, 6, 7),),
                        limit=1000) is None  # 8! images: too many (inverse-distance weighting takes over)


def test_a_cylinder_capture_region_is_interpolated_linearly_not_by_nearest_anchor():
    """Only the a = +1 neurons' overlaps matter (strength |u_+| / 0.05: capture iff |mu_+| > 0.05), and V_eff is
    20 times larger on the a = -1 neurons, as at width 4 with a = +-1 on phase retrieval: most directions Bw lie next
    to the a = -1 plane, where the strength vanishes linearly.  With width 4's default 7 anchors the quadratic gauge
    makes P exact; the cone interpolation of s alone understates it (its exit points lie inside the unit sphere:
    P 0.10 low); inverse-distance weights drive it to the nearest anchor's 0 (0.28 low, with 12 anchors)."""
    classes, flip = ((0, 2), (1, 3)), True
    r_of = lambda U: 0.05 / np.maximum(np.hypot(U[:, 0], U[:, 2]), 1e-9)  # noqa: E731
    V = np.diag([1.0, 20.0, 1.0, 20.0])[None]
    d = 400
    mu = np.random.default_rng(2).multivariate_normal(np.zeros(4), V[0] / d, size=400_000)
    n = np.linalg.norm(mu, axis=1)
    frac = float(np.mean(n > r_of(mu / n[:, None])))
    W = sphere_directions(4)
    Bw = W @ np.sqrt(V[0]).T
    sc = (Bw ** 2).sum(1)
    q = Bw / np.sqrt(sc)[:, None]
    for count in (7, 12):
        A = anchor_directions(4, flip, classes, count)
        rays = [(float(i), _curve(a, float(r_of(a[None])[0]))) for i, a in enumerate(A)]
        P, _, _ = capture_probabilities(rays, flip, False, V, 0 * V, 0, d, classes=classes)
        assert abs(P[0] - frac) < 0.005
    s = np.array([1 / c.m_star[0] for _, c in rays])
    cone = ConeInterpolant(A[:7], flip, classes)
    with np.errstate(divide="ignore"):
        alone = float(np.mean(chi2.sf(d / cone.evaluate(cone.coordinates(q), s[:7]) ** 2 / sc, 4)))
        shepard = float(np.mean(chi2.sf(d / interpolate_strength(q, A, s, flip, classes) ** 2 / sc, 4)))
    assert frac - alone > 0.05 and abs(shepard - frac) > 0.1


@pytest.mark.parametrize("m, count", [(3, 8), (4, 7), (8, 9)])
def test_the_strength_interpolant_is_exact_for_a_quadratic_gauge(m, count):
    """A capture region {mu: mu^T G mu > 1} with G >= 0 invariant under the group (random, with one null direction:
    the neurons of one class all alike never capture) is reproduced everywhere on the sphere from the anchors alone,
    by the hull's rule and by the inverse-distance fallback; a strength that is not of that form (a box, |u_+|_inf)
    is still exact on the anchors' orbits.  The invariant forms span exactly the matrices the group leaves
    unchanged (dimension by brute force over the group)."""
    rng = np.random.default_rng(m)
    classes = tuple(tuple(range(j, m, 2)) for j in range(2))
    flip = True
    E = invariant_forms(m, classes)
    group = _group(m, flip, classes)
    def average(M):
        return sum(np.eye(m)[p].T @ M @ np.eye(m)[p] for _, p in group) / len(group)

    avgs = np.asarray([average(X + X.T).ravel() for X in rng.standard_normal((len(E) + 3, m, m))])
    coef = np.linalg.lstsq(E.reshape(len(E), -1).T, avgs.T, rcond=None)[0]
    assert np.allclose(coef.T @ E.reshape(len(E), -1), avgs)  # the group averages lie in their span ...
    assert np.linalg.matrix_rank(avgs) == np.linalg.matrix_rank(E.reshape(len(E), -1)) == len(E)  # ... and fill it
    L = rng.standard_normal((m, m))
    null = np.zeros(m)
    null[list(classes[1])] = 1.0
    Pn = np.eye(m) - np.outer(null, null) / (null @ null)
    G = average(Pn @ L @ L.T @ Pn)
    A = anchor_directions(m, flip, classes, count)
    s2 = np.einsum("ki,ij,kj->k", A, G, A)
    s = np.sqrt(np.where(s2 < 1e-12 * s2.max(), 0.0, s2))  # rounding's 1e-16 would give a strength of 1e-8
    assert (s == 0).any()
    Q = sphere_directions(m)
    exact = np.sqrt(np.maximum(np.einsum("ni,ij,nj->n", Q, G, Q), 0.0))
    rule = StrengthInterpolant(A, flip, classes)
    assert rule.cone.ok
    np.testing.assert_allclose(rule.evaluate(rule.prepare(Q), s), exact, atol=1e-8 * exact.max())
    rule.cone.ok = False  # the inverse-distance fallback
    np.testing.assert_allclose(rule.evaluate(rule.prepare(Q), s), exact, atol=1e-8 * exact.max())
    rule = StrengthInterpolant(A, flip, classes, always=1e12)
    box = np.abs(A[:, list(classes[0])]).max(1)
    for k, a in enumerate(A):
        img = orbit_images(a, flip, classes)
        np.testing.assert_allclose(rule.evaluate(rule.prepare(img), box), box[k], atol=1e-7 * box.max())
    big = box.copy()
    big[0] = 1e12  # "captured from the bottom rung": left out of the fit, kept on its own orbit
    assert rule.gauge(big) is not None
    assert np.all(rule.evaluate(rule.prepare(orbit_images(A[0], flip, classes)), big) >= 1e12 * (1 - 1e-9))
    np.testing.assert_allclose(rule.evaluate(rule.prepare(A[1:]), big), box[1:], atol=1e-7 * box.max())


def test_threshold_command_at_width_four(capsys):
    """`threshold --d D --horizon T` at width 4 answers (was refused) with the finite-d keys."""
    import json

    from theorykit.cli import main

    rc = main(["threshold", "--activation", "gelu", "--link", "phase-retrieval", "--width", "4", "--a", "1,-1,1,-1",
               "--eta", "1", "--d", "100", "--horizon", "8", "--horizon-deltas", "4", "16", "--rays", "3",
               "--paths", "1024", "--replicas", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["settings"]["width"] == 4
    assert set(out["finite_d"][0]) >= {"d", "horizon", "midpoint", "band"} and out["finite_d"][0]["d"] == 100
    assert "anchor rays on the sphere" in out["finite_d_info"]["method"]
