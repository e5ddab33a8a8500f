"""Classic spectral methods (THEORY.md section 6): theory vs closed forms and vs finite-d matrices."""
import json
import math

import numpy as np
import pytest

import theorykit
from theorykit.referee import spectral_methods as R
from theorykit.spectra import classic as S
from theorykit.errors import TheorykitError

PR = "phase-retrieval"
OPTIMAL = "(y-1)/(y+sqrt(2*delta)-1)"   # optimal for y = z^2, delta_u = 1/2
BOUNDARY_T = "(y-1)/(y+2)"             # Z/(1 - Z) = (y - 1)/3: E[Z^2/(1-Z)^2] = 2/9 < 1/delta for delta < 4.5
INTERIOR_T = "1-exp(-(y-1))"           # sup 1 approached as y -> inf, E[Z^2/(1-Z)^2] = inf: always interior


def _finite_d(T, delta, seeds, d=2000):
    r = np.array([R.finite_d_top(PR, T, delta, d, seed=s) for s in seeds])
    return r[:, 0].mean(), r[:, 1].mean()


# ------------------------------------------------------------------------------------------ thresholds
def test_optimal_threshold_is_one_half_and_matches_delta_alg():
    th = S.spectral_threshold(PR, OPTIMAL)
    assert abs(th.delta_u - 0.5) < 1e-6
    assert th.error < 1e-6
    # below 1/2 this T has a pole at y = 1 - sqrt(2 delta) > 0 (inadmissible): the threshold is the edge of its range
    assert th.domain_edge and th.bracket[0] < 0.5 + 1e-9 <= th.bracket[1] + 1e-9
    delta_alg = theorykit.analyse_link(PR).delta_alg.value
    assert abs(th.delta_u - delta_alg) < 1e-6


def test_optimal_margin_closed_form():
    # for T* the edge is lam_bar = tau = 1 and the margin delta E[Z (G^2-1)/(1-Z)] - 1 equals sqrt(2 delta) - 1
    for delta in (0.75, 2.0, 5.0):
        p = S.spectral_prediction(PR, OPTIMAL, delta)
        assert p.has_outlier and abs(p.lam_bar - 1) < 1e-9
        assert abs(p.margin - (math.sqrt(2 * delta) - 1)) < 1e-8
        assert abs(p.bulk_edge - 1 / delta) < 1e-8  # psi(1) = 1/delta + E[Z/(1-Z)] = 1/delta + E[y - 1]/(1+c)


def test_boundary_threshold_by_brentq():
    # boundary case: margin = delta E[(y-1)^2]/3 - 1 = 2 delta/3 - 1, so delta_u = 3/2 exactly
    th = S.spectral_threshold(PR, BOUNDARY_T)
    assert not th.domain_edge and th.case == "boundary"
    assert abs(th.delta_u - 1.5) < 1e-8
    a, b = th.bracket
    ma, mb = th.margins
    assert a < th.delta_u < b and ma <= 0 < mb


# ------------------------------------------------------------------------------------ finite-d agreement
def test_top_eigenpair_matches_finite_d_at_delta_2():
    """x ~ N(0, I_2000), n = 4000, z = x[:, 0]; top eigenpair of M_n by eigsh, three seeds."""
    p = S.spectral_prediction(PR, OPTIMAL, 2.0)
    assert p.has_outlier and p.top_eigenvalue > 1.15 * p.bulk_edge  # well separated (0.605 vs 0.5)
    lam, ov = _finite_d(OPTIMAL, 2.0, seeds=(0, 1, 2))
    assert abs(lam / p.top_eigenvalue - 1) < 0.03
    assert abs(ov - p.overlap2) < 0.05


def test_boundary_case_example():
    delta = 3.0
    p = S.spectral_prediction(PR, BOUNDARY_T, delta)
    assert p.case == "boundary" and p.lam_bar == p.tau and abs(p.tau - 1) < 1e-9
    law = S.spectral_law(PR, BOUNDARY_T, delta)
    assert law.dpsi(law.tau, delta) > 0.1          # psi'(tau) = 1/3 - 2/9 > 0: minimum at the boundary
    assert abs(p.bulk_edge - 1 / delta) < 1e-8      # psi(1) = 1/delta + E[y - 1]/3
    assert abs(p.margin - (2 * delta / 3 - 1)) < 1e-8
    lam, ov = _finite_d(BOUNDARY_T, delta, seeds=(0, 1))
    assert abs(lam / p.top_eigenvalue - 1) < 0.03
    assert abs(ov - p.overlap2) < 0.05


def test_interior_case_example():
    delta = 2.0
    p = S.spectral_prediction(PR, INTERIOR_T, delta)
    assert p.case == "interior" and p.lam_bar > p.tau + 0.1
    law = S.spectral_law(PR, INTERIOR_T, delta)
    assert abs(law.dpsi(p.lam_bar, delta)) < 1e-9  # E[Z^2/(lam_bar - Z)^2] = 1/delta
    assert p.top_eigenvalue > 1.15 * p.bulk_edge
    lam, ov = _finite_d(INTERIOR_T, delta, seeds=(0, 1))
    assert abs(lam / p.top_eigenvalue - 1) < 0.03
    assert abs(ov - p.overlap2) < 0.05


def test_no_outlier_example():
    p = S.spectral_prediction(PR, "y*exp(-y/2)", 2.0)   # sup 2/e attained at y = 2: interior edge, no outlier
    assert p.case == "no outlier" and p.edge_case == "interior" and p.overlap2 == 0
    assert p.top_eigenvalue == p.bulk_edge
    lam, ov = _finite_d("y*exp(-y/2)", 2.0, seeds=(0, 1))
    assert abs(lam / p.top_eigenvalue - 1) < 0.03 and ov < 0.05


def test_interior_case_with_finite_psi_prime_at_tau():
    # (y-1)/(y+1) at delta = 4: E[Z^2/(1-Z)^2] = E[(y-1)^2]/4 = 1/2 > 1/4 is finite, so psi'(tau) < 0 is finite
    law = S.spectral_law(PR, "(y-1)/(y+1)", 4.0)
    assert math.isfinite(law.dpsi(law.tau, 4.0)) and abs(law.dpsi(law.tau, 4.0) + 0.25) < 1e-8
    p = S.outlier(law, 4.0)
    assert p.case == "interior" and p.lam_bar > 1.1 and abs(law.dpsi(p.lam_bar, 4.0)) < 1e-9


def test_atom_at_tau_gives_interior_case():
    # clipping puts an atom at tau = 2 (P(y >= 3) > 0): psi -> inf at tau+, so the minimum is interior
    p = S.spectral_prediction(PR, "min(y,3)-1", 2.0)
    assert abs(p.tau - 2) < 1e-12 and p.edge_case == "interior" and p.lam_bar > 2.5


# ----------------------------------------------------------------------------------- the generic core
def test_core_on_an_empirical_law_and_hessian_mapping():
    """The core only sees (w, Z, V): an empirical law of 2e5 samples reproduces the quadrature result, and the
    Hessian form (Z = -D) gives the negated eigenvalue."""
    rng = np.random.default_rng(3)
    z = rng.standard_normal(200_000)
    y = z ** 2
    T = theorykit.symbolic.preprocessing(BOUNDARY_T)
    Z = T(y, 3.0)
    w = np.full(len(z), 1 / len(z))
    emp = S.outlier(S.SpectralLaw.from_arrays(w, Z, z ** 2, tau=1.0), 3.0)
    quad = S.spectral_prediction(PR, BOUNDARY_T, 3.0)
    assert abs(emp.top_eigenvalue - quad.top_eigenvalue) < 0.01
    assert abs(emp.overlap2 - quad.overlap2) < 0.02
    hess = S.outlier(S.hessian_law(w, -Z, z ** 2), 3.0)  # D = -Z: bottom of H = -(top of M_n)
    plain = S.outlier(S.SpectralLaw.from_arrays(w, Z, z ** 2), 3.0)
    assert hess.top_eigenvalue == pytest.approx(plain.top_eigenvalue, rel=1e-12)


def test_data_matrix_and_eigsh_agree():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 100))
    y = X[:, 0] ** 2
    M = R.data_matrix(X, y, OPTIMAL, 3.0)
    vals, vecs = R.top_eigenpairs(X, y, OPTIMAL, 3.0, k=2)
    ev = np.linalg.eigvalsh(M)
    assert np.allclose(vals, ev[::-1][:2], rtol=1e-8)


# ---------------------------------------------------------------------------------------------- errors
def test_pole_is_a_one_line_error():
    with pytest.raises(TheorykitError) as e:
        S.spectral_prediction(PR, "(y-1)/(y+sqrt(delta)-1)", 0.5)
    assert "pole" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("T, word", [("y", "unbounded"), ("-1-y", "<= 0")])
def test_inadmissible_T(T, word):
    with pytest.raises(TheorykitError, match=word):
        S.spectral_prediction(PR, T, 2.0)


def test_multi_index_refused():
    with pytest.raises(TheorykitError, match="single-index"):
        S.spectral_law("product", "y", 2.0)


# ------------------------------------------------------------------------------------------------- CLI
def _optimal_by_scipy_quad(delta):
    """(lam_star, top eigenvalue, overlap2) for y = z^2 and T*, by adaptive scipy quadrature over z and brentq on the
    margin: independent of the package's Gauss-Legendre law, its tau search and its root bracketing."""
    from scipy import integrate, optimize

    c = math.sqrt(2 * delta) - 1

    def E(f):
        def g(z):
            V = z * z
            return math.exp(-V / 2) / math.sqrt(2 * math.pi) * f((V - 1) / (V + c), V)
        return integrate.quad(g, -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13, limit=400)[0]

    lam = optimize.brentq(lambda l: delta * E(lambda Z, V: Z * (V - 1) / (l - Z)) - 1, 1 + 1e-12, 100, xtol=1e-14)
    dpsi = 1 / delta - E(lambda Z, V: Z * Z / (lam - Z) ** 2)
    dphi = -E(lambda Z, V: Z * Z * V / (lam - Z) ** 2)
    return lam, lam * (1 / delta + E(lambda Z, V: Z / (lam - Z))), dpsi / (dpsi - dphi)


def test_cli_json(capsys):
    from theorykit import cli

    rc = cli.main(["spectral", "--link", PR, "--preprocess", OPTIMAL, "--delta", "2", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    # closed forms for T* at delta = 2 (see test_optimal_margin_closed_form): tau = lam_bar = 1, bulk edge 1/delta,
    # margin sqrt(2 delta) - 1 = 1, delta_u = 1/2
    assert out["case"] == out["edge_case"] == "boundary" and out["delta"] == 2.0 and out["notes"] == []
    assert abs(out["tau"] - 1) < 1e-9 and abs(out["lam_bar"] - 1) < 1e-9
    assert abs(out["bulk_edge"] - 0.5) < 1e-9 and abs(out["margin"] - 1) < 1e-8
    assert abs(out["delta_u"] - 0.5) < 1e-6 and out["threshold"]["domain_edge"] is True
    # at the top level, not only in a note: delta_u is where T becomes valid, with an outlier already there
    assert out["delta_u_reason"].startswith("below the validity edge") and "margin" in out["delta_u_reason"]
    # outlier and overlap against an independent scipy.integrate.quad computation (measured agreement ~1e-15; the
    # package's 200000-node Gauss-Legendre grid is good to ~1e-10, hence 1e-8)
    lam, top, ov = _optimal_by_scipy_quad(2.0)
    assert abs(out["lam_star"] - lam) < 1e-8 and abs(out["top_eigenvalue"] - top) < 1e-8
    assert abs(out["overlap2"] - ov) < 1e-8
    assert abs(out["top_eigenvalue"] - 0.6047760080) < 1e-8 and abs(out["overlap2"] - 0.4858237121) < 1e-8


def test_spectral_core_is_public_and_matches_closed_form():
    """SpectralLaw, outlier and bulk_edge from theorykit.spectra, on a one-atom law Z = c, V = v, where
    psi(lam) = lam (1/delta + c/(lam - c)): lam_bar = c (1 + sqrt(delta)), edge psi(lam_bar) = c (1 + sqrt(delta))^2
    / delta (Marchenko-Pastur), margin sqrt(delta) (v - 1) - 1, lam* = c (1 + delta (v - 1)),
    top = lam* v / (delta (v - 1)), overlap2 = (delta (v-1)^2 - 1) / (delta (v-1)^2 - 1 + v)."""
    for name in ("SpectralLaw", "SpectralPrediction", "spectral_law", "outlier", "bulk_edge"):
        assert name in theorykit.spectra.__all__ and getattr(theorykit.spectra, name) is getattr(S, name)
    c, v, delta = 1.5, 3.0, 2.0
    law = theorykit.spectra.SpectralLaw.from_arrays([1.0], [c], [v])
    lam_bar, case = theorykit.spectra.bulk_edge(law, delta)
    assert case == "interior" and lam_bar == pytest.approx(c * (1 + math.sqrt(delta)), rel=1e-12)
    p = theorykit.spectra.outlier(law, delta)
    lam_star = c * (1 + delta * (v - 1))
    assert p.bulk_edge == pytest.approx(c * (1 + math.sqrt(delta)) ** 2 / delta, rel=1e-12)
    assert p.margin == pytest.approx(math.sqrt(delta) * (v - 1) - 1, rel=1e-12)
    assert p.lam_star == pytest.approx(lam_star, rel=1e-12)
    assert p.top_eigenvalue == pytest.approx(lam_star * v / (delta * (v - 1)), rel=1e-12)
    q = delta * (v - 1) ** 2 - 1
    assert p.overlap2 == pytest.approx(q / (q + v), rel=1e-12)
    # below the threshold sqrt(delta) (v - 1) = 1 there is no outlier: the top is the bulk edge
    p0 = theorykit.spectra.outlier(theorykit.spectra.SpectralLaw.from_arrays([1.0], [c], [1.5]), delta)
    assert not p0.has_outlier and p0.overlap2 == 0 and p0.top_eigenvalue == pytest.approx(p.bulk_edge, rel=1e-12)
    # the law built from (link, T, delta) goes through the same core
    law_pr = theorykit.spectra.spectral_law(PR, OPTIMAL, 2.0)
    assert theorykit.spectra.outlier(law_pr, 2.0) == theorykit.spectra.spectral_prediction(PR, OPTIMAL, 2.0)


def test_cli_bad_input(capsys):
    from theorykit import cli

    rc = cli.main(["spectral", "--link", PR, "--preprocess", "(y-1)/(y+sqrt(delta)-1)", "--delta", "0.5", "--json"])
    err = capsys.readouterr().err
    assert rc == 2 and "pole" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------ multi-index links (k > 1)
def test_multi_index_reduces_to_the_classic_theory_at_k1():
    from theorykit.spectra.multi import multi_spectral_prediction

    for delta in (0.75, 2.0):
        a, b = multi_spectral_prediction(PR, OPTIMAL, delta), S.spectral_prediction(PR, OPTIMAL, delta)
        assert a.eigenvalues[0] == pytest.approx(b.top_eigenvalue, rel=1e-10)
        assert a.overlap2[0] == pytest.approx(b.overlap2, rel=1e-9) and a.bulk_edge == pytest.approx(b.bulk_edge)


def test_multi_index_margin_matrix_against_one_dimensional_integrals():
    """The k x k margin at a fixed lam against independent 1-D integrals: y = z1^2 + z2^2 ~ Exp(mean 2) is isotropic,
    E[zz^T | y] = (y/2) I; y = z1 z2 has density K0(|y|)/pi, E[z1^2 | y] = |y| K1/K0, E[z1 z2 | y] = y."""
    from scipy import integrate, special

    from theorykit.spectra.multi import multi_spectral_law

    lam, delta = 1.5, 3.0
    law = multi_spectral_law("z1**2 + z2**2", "(y-2)/(y+2)", delta)
    Zf = lambda y: (y - 2) / (y + 2)  # noqa: E731
    m = delta * integrate.quad(lambda y: 0.5 * np.exp(-y / 2) * Zf(y) * (y / 2 - 1) / (lam - Zf(y)), 0, np.inf,
                               epsabs=1e-13)[0] - 1
    assert np.allclose(law.margin_matrix(lam, delta), m * np.eye(2), atol=1e-8)
    law = multi_spectral_law("z1*z2", "y/(abs(y)+1)", delta)
    Zp = lambda y: y / (abs(y) + 1)  # noqa: E731
    dens = lambda y: special.k0(abs(y)) / np.pi  # noqa: E731
    diag = sum(integrate.quad(lambda y: dens(y) * Zp(y) * (abs(y) * special.k1(abs(y)) / special.k0(abs(y)) - 1)
                              / (lam - Zp(y)), a, b, epsabs=1e-12, limit=200)[0]
               for a, b in ((-60, -1), (-1, 0), (0, 1), (1, 60)))
    off = sum(integrate.quad(lambda y: dens(y) * Zp(y) * y / (lam - Zp(y)), a, b, epsabs=1e-12, limit=200)[0]
              for a, b in ((-60, -1), (-1, 0), (0, 1), (1, 60)))
    want = delta * np.array([[diag, off], [off, diag]]) - np.eye(2)
    assert np.allclose(law.margin_matrix(lam, delta), want, atol=1e-5)


def test_multi_index_prediction_against_finite_d():
    """z1 z2 with T = y/(|y| + 1) at delta = 3: one outlier along (1, 1)/sqrt2 (the other direction's margin is
    negative), against the top two eigenpairs of M_n at d = 1500 over 4 seeds (tolerances: 4 standard errors plus the
    O(d^-1/2) finite-size shift measured in tables/spectral_multi_index.md)."""
    from theorykit.spectra.multi import multi_spectral_prediction

    p = multi_spectral_prediction("z1*z2", "y/(abs(y)+1)", 3.0)
    assert p.outliers == 1 and p.margins[1] < 0
    assert np.allclose(np.abs(p.directions[0]), [2 ** -0.5, 2 ** -0.5], atol=1e-6)
    runs = [R.finite_d_spectrum("z1*z2", "y/(abs(y)+1)", 3.0, 1500, top=2, seed=s) for s in range(4)]
    top = np.array([r[0][0] for r in runs])
    ov = np.array([r[1][0] for r in runs])
    assert abs(top.mean() - p.eigenvalues[0]) <= 4 * top.std(ddof=1) / 2 + 0.01
    assert abs(ov.mean() - p.overlap2[0]) <= 4 * ov.std(ddof=1) / 2 + 0.03
    assert all(abs(abs(r[2][0, 0]) - abs(r[2][0, 1])) < 0.15 for r in runs)  # along (1, +-1)/sqrt2, up to noise
    assert abs(np.mean([r[0][1] for r in runs]) - p.bulk_edge) < 0.02  # the second eigenvalue sits at the edge


def test_multi_index_spectral_command(capsys):
    from theorykit.cli import main

    assert main(["spectral", "--link", "z1**2 + z2**2", "--preprocess", "(y-2)/(y+2)", "--delta", "3",
                 "--delta-range", "0.3", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["k"] == 2 and out["outliers"] == 2 and len(out["thresholds"]) == 2
    assert out["eigenvalues"][0] == pytest.approx(out["eigenvalues"][1], rel=1e-8)  # isotropic: a double outlier
    assert out["delta_u"] is not None and out["delta_u"] < 3


def test_three_index_quadrature_converges_with_a_kink_on_the_coordinate_planes():
    """T(y) = (|y| - 0.5)/(|y| + 1) of y = z1 z2 z3 kinks where a z_i = 0: the 3-D rule keeps 0 on a panel edge
    (links.GL_PANELS[3] even), so halving the panels changes the triple outlier by < 1e-6 (with 15 panels it moved
    by 10%, and finite d disagreed: tables/spectral_multi_index_notes.md)."""
    from theorykit.spectra.multi import multi_spectral_prediction
    from theorykit.symbolic.links import GL_PANELS

    assert all(p % 2 == 0 for p in GL_PANELS.values())
    a, b = (multi_spectral_prediction("z1*z2*z3", "(abs(y)-0.5)/(abs(y)+1)", 8.0, level=lv) for lv in (0, 1))
    assert a.outliers == b.outliers == 3
    assert abs(a.eigenvalues[0] - b.eigenvalues[0]) < 1e-6 and abs(a.overlap2[0] - b.overlap2[0]) < 1e-5
