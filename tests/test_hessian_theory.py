"""The Hessian theory's core (theorykit.spectra.hessian, docs/theory.md §4) against things no one here wrote: the
Marchenko-Pastur law (constant D), the union of two scalar spectra (block-diagonal D), THEORY's exact bounded
delta*(0) = 3.243, and dense finite-d Hessians of synthetic laws (m = 1 and 2).  The DMFT -> law -> spectrum chain is
checked against the simulator in tests/test_hessian_validation.py (slow) and tables/hessian_vs_finite_d.md."""
import math

import numpy as np
import pytest
from scipy import optimize, stats

from theorykit.errors import TheorykitError
from theorykit.spectra.hessian import (HessianLaw, eigenvalue_counting, hessian_density, hessian_prediction,
                                       single_sample_spikes, split_spikes, tail_diagnostics, top_edge)

X_GH, W_GH = np.polynomial.hermite_e.hermegauss(120)
W_GH = W_GH / W_GH.sum()


def f_bounded(z):  # a smooth D(z) bounded below by -3 (not attained), negative for |z| > 1.1
    return 1 - 1.2 * z ** 2 / (1 + 0.3 * z ** 2)


@pytest.mark.parametrize("delta", [1.5, 4.0])
@pytest.mark.parametrize("c", [1.0, 2.5])
def test_constant_D_is_marchenko_pastur(delta, c):
    law = HessianLaw.from_samples(np.full(5, c), None, delta)
    p = hessian_prediction(law)
    a, b = c * (1 - 1 / math.sqrt(delta)) ** 2, c * (1 + 1 / math.sqrt(delta)) ** 2
    assert p.edge == pytest.approx(a, rel=1e-9, abs=1e-12)
    assert p.outliers == ()
    lam = np.linspace(a, b, 7)[1:-1]
    _, rho = hessian_density(law, lam)
    exact = delta * np.sqrt((b - lam) * (lam - a)) / (2 * math.pi * lam * c)
    np.testing.assert_allclose(rho, exact, rtol=1e-6)
    F = eigenvalue_counting(law, [b + 0.1 * c, 0.5 * (a + b)], edge=p.edge)
    assert F[0] == pytest.approx(1.0, abs=2e-3)
    # the MP distribution function at the midpoint, by an independent quadrature
    from scipy.integrate import quad
    mid = quad(lambda x: delta * math.sqrt((b - x) * (x - a)) / (2 * math.pi * x * c), a, 0.5 * (a + b))[0]
    assert F[1] == pytest.approx(mid, abs=1e-4)


@pytest.mark.parametrize("delta", [0.5, 1.5, 8.437])
@pytest.mark.parametrize("c", [1.0, 2.5])
def test_top_edge_of_constant_D_is_the_marchenko_pastur_right_edge(delta, c):
    law = HessianLaw.from_samples(np.full(5, c), None, delta)
    assert top_edge(law) == pytest.approx(c * (1 + 1 / math.sqrt(delta)) ** 2, rel=1e-10)
    ridged = HessianLaw.from_samples(np.full(5, c), None, delta, ridge=0.3)
    assert top_edge(ridged) == pytest.approx(c * (1 + 1 / math.sqrt(delta)) ** 2 + 0.3, rel=1e-10)


@pytest.mark.parametrize("m", [1, 2])
def test_top_edge_matches_a_dense_matrix(m):
    """The bulk's right edge of a bounded law against the largest eigenvalue of the dense H at d = 800, delta = 2:
    within 2% (the m = 2 law's density thins out towards its edge, so the largest eigenvalue sits below it by more
    than the Tracy-Widom scale: 1.3% here, 2.8% at d = 400); for m = 1 the edge moves with the law (more than 10%
    above the constant-D edge of the same mean), so this is not the MP edge."""
    delta, d = 2.0, 800
    rng = np.random.default_rng(5)
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    z = X[:, 0]
    Di = np.empty((n, m, m))
    Di[:, 0, 0] = 1.0 + 0.8 * np.tanh(2 * z)
    if m == 2:
        Di[:, 1, 1] = 1.0 + 0.2 * np.cos(z)
        Di[:, 0, 1] = Di[:, 1, 0] = 0.3 * np.tanh(z)
    law = HessianLaw.from_samples(Di, None, delta)
    H = np.zeros((d, m, d, m))
    for j in range(m):
        for k in range(m):
            H[:, j, :, k] = (X.T * Di[:, j, k]) @ X / n
    top = np.linalg.eigvalsh(H.reshape(d * m, d * m))[-1]
    lam = top_edge(law)
    assert lam == pytest.approx(top, rel=0.02)
    if m == 1:
        assert lam > 1.1 * float(Di.mean()) * (1 + 1 / math.sqrt(delta)) ** 2


@pytest.mark.parametrize("delta", [1.0, 1.5, 2.0])
def test_a_kernel_is_the_exact_marchenko_pastur_atom(delta):
    """ReLU with square loss: D = sigma'(u)^2 = 1{u > 0}, 0 on half the samples.  H = (1/n) sum_{D_i = 1} x_i x_i^T is
    (1/2) x an MP matrix of n/2 samples: ratio c = 2/delta, an atom 1 - 1/c at 0 when c >= 1, continuous part on
    (1/2)(1 -+ sqrt(c))^2 (closed forms, no code of ours).  Before the kernel case the continuation ran away
    (raised)."""
    law = HessianLaw.from_samples(np.array([0.0, 1.0]), np.array([1.0, 1.0]), delta)
    p = hessian_prediction(law)
    c = 2.0 / delta
    a, b = 0.5 * (1 - math.sqrt(c)) ** 2, 0.5 * (1 + math.sqrt(c)) ** 2
    assert p.edge_case == "atom" and p.edge == 0.0 and p.outliers == () and p.margin <= 0
    assert p.atom_mass == pytest.approx(max(0.0, 1 - 1 / c), abs=1e-12)
    lam = np.linspace(a, b, 7)[1:-1]
    _, rho = hessian_density(law, lam)
    # MP density of W = (1/n') X^T X (d x d, ratio c = d/n') is sqrt((b'-x)(x-a'))/(2 pi c x); here H = W/2
    exact = 2 * np.sqrt((b - lam) * (lam - a)) / (2 * math.pi * c * lam)  # rho_H(l) = 2 rho_W(2 l)
    np.testing.assert_allclose(rho, exact, rtol=1e-5)
    F = eigenvalue_counting(law, [0.0, 0.5 * (a + b), b + 0.1])
    assert F[0] == pytest.approx(p.atom_mass, abs=1e-12)
    assert F[2] == pytest.approx(1.0, abs=3e-3)
    # the default density grid starts above the atom, and the finite-d spectrum has the kernel
    lam_d, rho_d = hessian_density(law, points=6)
    assert lam_d[0] > 0 and np.all(np.isfinite(rho_d))
    rng = np.random.default_rng(1)
    d = 400
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    keep = rng.random(n) < 0.5
    ev = np.linalg.eigvalsh(X[keep].T @ X[keep] / n)
    assert int((ev < 1e-9).sum()) == pytest.approx(p.atom_mass * d, abs=0.1 * d)


def test_ridge_shifts_everything():
    law = HessianLaw.from_samples(f_bounded(X_GH), X_GH, 4.0, weights=W_GH)
    law_r = HessianLaw.from_samples(f_bounded(X_GH), X_GH, 4.0, weights=W_GH, ridge=0.3)
    p, pr = hessian_prediction(law), hessian_prediction(law_r)
    assert pr.edge == pytest.approx(p.edge + 0.3, abs=1e-12)
    assert pr.outliers[0].lam == pytest.approx(p.outliers[0].lam + 0.3, abs=1e-12)


def test_scalar_core_equals_matrix_continuation():
    rng = np.random.default_rng(0)
    z = rng.standard_normal(3000)
    D = f_bounded(z) + 0.2 * rng.standard_normal(3000)
    law = HessianLaw.from_samples(D, z, 6.0)
    a, b = hessian_prediction(law, solver="classic"), hessian_prediction(law, solver="continuation")
    assert "classic" in a.method and "continuation" in b.method
    assert a.edge == pytest.approx(b.edge, rel=1e-9)
    assert a.margin == pytest.approx(b.margin, rel=1e-8)
    assert len(a.outliers) == len(b.outliers) == 1
    assert a.outliers[0].lam == pytest.approx(b.outliers[0].lam, rel=1e-9)
    assert a.outliers[0].overlap2 == pytest.approx(b.outliers[0].overlap2, rel=1e-7)


def test_block_diagonal_m2_is_the_union_of_two_scalar_spectra():
    """D = diag(D1, D2): H is block-diagonal, its spectrum the union of the two scalar ones (half the mass each)."""
    z = X_GH
    D1, D2 = f_bounded(z), 1 + 0.3 * z + 0.1 * z ** 2
    D = np.zeros((len(z), 2, 2))
    D[:, 0, 0], D[:, 1, 1] = D1, D2
    law2 = HessianLaw.from_samples(D, z, 5.0, weights=W_GH)
    l1 = HessianLaw.from_samples(D1, z, 5.0, weights=W_GH)
    l2 = HessianLaw.from_samples(D2, z, 5.0, weights=W_GH)
    p2, p1, q = hessian_prediction(law2), hessian_prediction(l1), hessian_prediction(l2, solver="continuation")
    assert p2.edge == pytest.approx(min(p1.edge, q.edge), rel=1e-8)
    hard1 = [o.lam for o in p1.outliers if o.lam < q.edge]
    assert [o.lam for o in p2.outliers] == pytest.approx(sorted(hard1 + [o.lam for o in q.outliers]), rel=1e-8)
    assert p2.outliers[0].overlap2 == pytest.approx(p1.outliers[0].overlap2, rel=1e-6)
    lam = np.linspace(p2.edge + 0.05, 1.5, 6)
    _, r2 = hessian_density(law2, lam)
    _, ra = hessian_density(l1, lam)
    _, rb = hessian_density(l2, lam)
    np.testing.assert_allclose(r2, 0.5 * (ra + rb), rtol=1e-6, atol=1e-9)


def _bounded_exact_law(delta):
    """THEORY's bounded setting at random init: GeLU, m = 1, a = 1, logistic loss, y = sign(|z| - median|z|).
    r ~ N(0, 1) independent of z; D depends on z only through y, so zeta^2 enters as E[z^2 | y] exactly."""
    import theorykit as tk

    net = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=delta, eta=1.0, steps=0).network
    x, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / w.sum()
    c = stats.norm.ppf(0.75)
    k = 4 * c * stats.norm.pdf(c)  # E[z^2 | |z| > c] = 1 + k, E[z^2 | |z| < c] = 1 - k
    y = np.concatenate([np.ones_like(x), -np.ones_like(x)])
    r = np.concatenate([x, x])
    D = net.evaluate(r[:, None], y).D.reshape(-1)
    V = np.where(y > 0, 1 + k, 1 - k)
    return HessianLaw.from_samples(D, np.sqrt(V), delta, weights=np.concatenate([w, w]) / 2)


def test_bounded_delta_star_at_init_is_theorys_exact_value():
    def margin(dl):
        return hessian_prediction(_bounded_exact_law(dl)).margin

    assert margin(3.0) < 0 < margin(3.5)
    ds = optimize.brentq(margin, 3.0, 3.5, xtol=1e-8)
    assert ds == pytest.approx(3.243, abs=1e-3)  # THEORY §5: exact 3.243 at random initialisation


@pytest.mark.parametrize("m", [1, 2])
def test_dense_finite_d_hessian_of_a_synthetic_law(m):
    """The random-matrix check: the law taken from the sample's own D_i (weights 1/n) predicts the dense Hessian's
    counts in the lower tail within +-2, the hard outlier within 4% and its overlap^2 within 0.06.  (The quadrature
    law of the same D(z) misses the counts by up to 6 here: the sample's extreme D_i move the edge.)"""
    delta, d = 4.0, 700 if m == 1 else 400

    def Dfun(z):
        if m == 1:
            return f_bounded(z)[:, None, None]
        out = np.empty((len(z), 2, 2))
        out[:, 0, 0] = f_bounded(z)
        out[:, 1, 1] = 1.0 + 0.2 * np.tanh(z)
        out[:, 0, 1] = out[:, 1, 0] = 0.3 * np.tanh(z)
        return out

    rng = np.random.default_rng(11)
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    Di = Dfun(X[:, 0])
    law = HessianLaw.from_samples(Di, X[:, 0], delta)
    p = hessian_prediction(law)
    assert len(p.outliers) == 1
    qs = p.edge + np.array([0.02, 0.1, 0.3])
    expected = m * d * eigenvalue_counting(law, qs, edge=p.edge) + 1
    # H = (1/n) sum_i D_i (x) x_i x_i^T in the (a, j) -> a*m + j order
    H = np.zeros((d, m, d, m))
    for j in range(m):
        for k in range(m):
            H[:, j, :, k] = (X.T * Di[:, j, k]) @ X / n
    H = H.reshape(d * m, d * m)
    ev, V = np.linalg.eigh(H)
    counts = [(ev <= q).sum() for q in qs]
    assert np.all(np.abs(np.array(counts) - expected) <= 2), (counts, expected)
    o = p.outliers[0]
    assert ev[0] == pytest.approx(o.lam, rel=0.04)
    ov = float(np.sum(V.reshape(d, m, -1)[0, :, 0] ** 2))  # hard direction e_1 (x) R^m
    assert ov == pytest.approx(o.overlap2, abs=0.06)


def test_single_sample_spikes_match_a_dense_matrix():
    law = HessianLaw.from_samples(f_bounded(X_GH), X_GH, 4.0, weights=W_GH)
    pred = single_sample_spikes(law, [-12.0, -6.0, 0.5])
    assert pred[2] is None  # inside the bulk
    d = 800
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3200, d))
    Dv = f_bounded(X[:, 0])
    Dv[5], Dv[6] = -12.0, -6.0
    ev = np.linalg.eigvalsh((X.T * Dv) @ X / 3200)
    assert ev[0] == pytest.approx(pred[0], rel=0.1)
    assert ev[1] == pytest.approx(pred[1], rel=0.05)


def test_tail_diagnostic_tells_unbounded_from_bounded():
    x, w = np.polynomial.hermite_e.hermegauss(64)
    w = w / w.sum()
    unb = tail_diagnostics(w, 1 - 2 * x ** 2, np.abs(x))
    bnd = tail_diagnostics(w, f_bounded(x), np.abs(x))
    assert unb["unbounded"] is True and bnd["unbounded"] is False
    z = np.random.default_rng(0).standard_normal(200000)
    w = np.full(len(z), 1 / len(z))
    assert tail_diagnostics(w, 1 - 2 * z ** 2, np.abs(z))["unbounded"] is True
    assert tail_diagnostics(w, np.tanh(z) - 1, np.abs(z))["unbounded"] is False
    assert tail_diagnostics(w, 1 - 2 * z ** 2, np.full(len(z), np.nan))["unbounded"] is None


def test_truncation_removes_the_one_over_n_tail():
    z = np.random.default_rng(1).standard_normal(10000)
    law = HessianLaw.from_samples(1 - 2 * z ** 2, z, 4.0, radius=np.abs(z))
    t = law.truncated(1000)
    assert t.truncation_n == 1000
    assert len(law.weights) - len(t.weights) == 9  # weight 1e-4 each: 9 paths stay below 1/n = 1e-3
    assert t.lam_min_D.min() >= np.sort(law.lam_min_D)[9]
    assert hessian_prediction(t).edge > hessian_prediction(law).edge


@pytest.mark.parametrize("bad, msg", [
    (dict(D=np.ones((3, 2, 3))), "shape"),
    (dict(D=np.array([1.0, np.nan])), "non-finite"),
    (dict(D=np.ones(3), zeta=np.ones(4)), "zeta"),
    (dict(D=np.ones(3), weights=[1, -1, 1]), "weights"),
    (dict(D=np.ones(3), delta=0), "delta"),
])
def test_bad_laws_are_one_line_errors(bad, msg):
    args = dict(D=np.ones(3), zeta=None, delta=2.0)
    args.update(bad)
    with pytest.raises(TheorykitError, match=msg):
        HessianLaw.from_samples(args.pop("D"), args.pop("zeta"), args.pop("delta"), **args)


def test_a_zero_law_is_a_one_line_error():
    """D = 0 on every sample (H = ridge I) made the continuation take log(0): a ValueError from deep inside."""
    law = HessianLaw.from_samples(np.zeros(10), None, 2.0)
    for f in (hessian_prediction, top_edge):
        with pytest.raises(TheorykitError, match="identically zero"):
            f(law)


@pytest.mark.parametrize("m, delta", [(1, 1.5), (2, 2.0)])
def test_relu_kernel_through_the_dmft_law_matches_the_finite_d_hessian(m, delta):
    """The whole chain for a kinked sigma where H is singular: DMFT law at t = 2 -> kernel mass (an atom at 0, the
    bottom of the spectrum, case "atom") against the number of zero eigenvalues of the constrained-GD Hessian at
    d = 300 (dense).  ReLU: D = 1{u > 0} (m = 1), rank one (m = 2).  The hessian command used to fail here ("the real
    continuation did not reach the edge")."""
    import theorykit as tk
    from theorykit.referee import dense_hessian, simulate
    from theorykit.referee.gd import training_data
    from theorykit.thresholds import law_at

    pr = tk.Problem("relu", "phase-retrieval", "square", m, delta=delta, eta=0.5, steps=2)
    law = law_at(tk.dmft(pr, keep_law_at=[2], bias_check=False, paths=8192, replicas=2), 2)
    p = hessian_prediction(law)
    assert p.edge_case == "atom" and p.edge == 0.0 and p.outliers == () and p.margin <= 0
    assert 0.1 < p.atom_mass < 0.5
    d = 300
    sim = simulate(pr, d=d, seed=0, constrained=True, n_test=1)
    X, y = training_data(pr, d, 0)
    ev = np.linalg.eigvalsh(dense_hessian(X, pr.network.evaluate(X @ sim.theta, y), 0.0))
    zeros = int((np.abs(ev) < 1e-9 * np.abs(ev).max()).sum())
    # the finite-d kernel is m d - rank, rank = the sum of the n samples' ranks: binomial sd <= sqrt(n)/2
    assert zeros == pytest.approx(p.atom_mass * m * d, abs=3 * math.sqrt(delta * d) / 2 + 2)
    assert ev[0] > -1e-9 * np.abs(ev).max()


def _planted_sample(r, delta=10.0, d=600):
    """A sample of D = 1 - 0.35 |z|^2 (two hard coordinates z = x_1, x_2: unbounded below, two outliers) with sample 0
    planted at |z| = r along (1, 1)/sqrt 2, so that it makes a single-sample spike near the outliers; with the dense
    Hessian's eigenvalues and hard overlap^2."""
    rng = np.random.default_rng(0)
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    X[0, :2] = r / math.sqrt(2)
    D = 1.0 - 0.35 * (X[:, :2] ** 2).sum(1)
    ev, V = np.linalg.eigh((X.T * D) @ X / n)
    return HessianLaw.from_samples(D, X[:, :2], delta), ev, (V[:2] ** 2).sum(0)


def test_outliers_in_every_gap_between_spikes_match_a_dense_matrix():
    """A spike between the two outliers couples to one of them: the dense Hessian has three eigenvalues below the
    bulk carrying hard overlap^2 (0.25, 0.67, 0.46).  The continuation on the whole sample stops at the fold below the
    spike and finds the lowest only; sample=True finds all three (m = 1: every gap between the spikes), each within
    3% and 0.05, and their total below the edge within 0.05."""
    law, ev, ov = _planted_sample(5.5)
    plain, p = hessian_prediction(law), hessian_prediction(law, sample=True)
    assert len(plain.outliers) == 1 and len(p.spikes) == 2 and p.outliers_from == "sample"
    assert [o.lam for o in p.outliers] == pytest.approx(list(ev[:3]), rel=0.03)
    assert [o.overlap2 for o in p.outliers] == pytest.approx(list(ov[:3]), abs=0.05)
    assert p.overlap2_below_edge == pytest.approx(float(ov[ev < p.edge].sum()), abs=0.05)
    assert p.edge == pytest.approx(hessian_prediction(split_spikes(law)[0]).edge, rel=1e-12)


def test_an_outlier_within_a_spikes_stretch_is_reported_in_the_total():
    """The spike nearer the pair: an outlier that does not couple to it falls within the spike's stretch of the curve
    and is no root there.  The prediction says so in a note, and overlap2_below_edge (the law's with the spikes split
    off) still gives the dense Hessian's total below the edge."""
    law, ev, ov = _planted_sample(5.0)
    p = hessian_prediction(law, sample=True)
    assert sum(o.overlap2 for o in p.outliers) < p.overlap2_below_edge - 0.5
    assert any("within a spike's stretch" in s for s in p.notes)
    assert p.overlap2_below_edge == pytest.approx(float(ov[ev < p.edge].sum()), abs=0.05)


@pytest.mark.parametrize("kH", [1, 2])
def test_the_explicit_curve_without_spikes_is_the_continuation(kH):
    from theorykit.spectra.hessian.gaps import gap_outliers

    rng = np.random.default_rng(0)
    z = rng.standard_normal((20000, 2))
    D = 1.0 - 0.4 * ((z ** 2).sum(1) - 2)
    law = HessianLaw.from_samples(D, z[:, :kH], 10.0)
    ref = hessian_prediction(law, solver="classic" if kH == 1 else "continuation")
    outs, edge = gap_outliers(law, np.array([]), -10.0 / D.min())
    assert edge == pytest.approx(ref.edge, rel=1e-9)
    assert len(outs) == len(ref.outliers) == kH
    for (lam, o2, _), o in zip(outs, ref.outliers):
        assert lam == pytest.approx(o.lam, rel=1e-9) and o2 == pytest.approx(o.overlap2, rel=1e-8)


def test_roots_of_the_law_with_its_atoms_above_the_bulk_edge_are_dropped():
    """The truncated law with its expected extremes as atoms folds a little above the truncated law's own edge, and
    a root of the law with the atoms can fall between the two (y = z1^2 + z2^2 - 2 at t = 0, delta = 10, n = 10^4: a
    root at -0.758 above the edge -0.775).  It is no outlier of the bulk: every reported outlier lies below the edge,
    a note names the dropped root, and the total below the edge stays the law's without the atoms."""
    from dataclasses import replace

    import theorykit as tk
    from theorykit.thresholds import law_at

    r = tk.dmft(activation="gelu", link="z1**2 + z2**2 - 2", loss="square", width=1, delta=10.0, eta=1.0, steps=0,
                paths=65536, keep_law_at=[0])
    law = law_at(r, 0, d=1000)
    p = hessian_prediction(law)
    assert p.outliers and all(o.lam < p.edge for o in p.outliers)
    assert any("at or above the bulk's edge" in s for s in p.notes)
    q = hessian_prediction(replace(law, extremes=None))
    assert p.overlap2_below_edge == pytest.approx(sum(o.overlap2 for o in q.outliers), rel=1e-12)
