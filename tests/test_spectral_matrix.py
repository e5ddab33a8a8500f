"""Spectral methods with a matrix-valued preprocessing for multi-index links (theorykit/spectra/matrix_preprocessing.py,
docs/theory.md §6 "A matrix preprocessing"): a scalar T times the identity reproduces the scalar multi-index theory;
a T whose eigenvectors turn with y against the finite-d data matrix; refusals."""
import numpy as np
import pytest

from theorykit.errors import TheorykitError
from theorykit.referee.spectral_methods import finite_d_matrix_spectrum, matrix_data_operator
from theorykit.spectra import multi_spectral_prediction
from theorykit.spectra.matrix_preprocessing import matrix_spectral_prediction, matrix_spectral_thresholds

SCALAR = "y/(1 + Abs(y))"


def test_block_diagonal_is_two_scalar_methods():
    """T(y) = diag(t(y), t(y)/2): M_n is the scalar data matrix of t beside half of it, so its bulk edge is the scalar
    one and its only outlier the scalar one (half of it lies inside the first block's bulk): the Hessian theory's
    2 x 2 law against the classic multi-index margin, two different solvers."""
    link, delta = "z1*z2", 3.0
    scalar = multi_spectral_prediction(link, SCALAR, delta, level=2)
    mat = matrix_spectral_prediction(link, [[SCALAR, 0], [0, f"({SCALAR})/2"]], delta)
    assert scalar.outliers == 1 and mat.outliers == 1
    assert mat.eigenvalues[0] == pytest.approx(scalar.eigenvalues[0], rel=1e-6)
    assert mat.overlap2[0] == pytest.approx(scalar.overlap2[0], rel=1e-5)
    assert mat.bulk_edge == pytest.approx(scalar.bulk_edge, rel=1e-6)
    # the outlier lives in the first block: its latent part A has no second column
    A = np.reshape(mat.directions[0], (2, 2))
    assert np.abs(A[:, 1]).max() < 1e-6 * np.abs(A).max()


TURNING = [["tanh(y)", "tanh(y)**2"], ["tanh(y)**2", "0"]]  # eigenvectors that turn with y


@pytest.mark.parametrize("link,T,delta", [
    ("z1*z2", TURNING, 6.0),  # smooth, y unbounded
    ("Max(z1, 0)*z2", TURNING, 6.0),  # kinked, an atom of y at 0
])
def test_against_the_finite_d_data_matrix(link, T, delta):
    """A T whose eigenvectors turn with y (not a scalar method in disguise): the top eigenvalue and its overlap with
    the latent subspace at d = 1200 (3 seeds) against the theory, within 4 standard errors plus the O(d^-1/2)
    finite-size effect."""
    pred = matrix_spectral_prediction(link, T, delta)
    assert pred.outliers >= 1
    vals, ovs = [], []
    for seed in range(3):
        v, o, _ = finite_d_matrix_spectrum(link, T, delta, 1200, top=1, seed=seed)
        vals.append(v[0])
        ovs.append(o[0])
    se_v, se_o = np.std(vals, ddof=1) / np.sqrt(3), np.std(ovs, ddof=1) / np.sqrt(3)
    assert abs(np.mean(vals) - pred.eigenvalues[0]) <= 4 * se_v + 0.03 * abs(pred.eigenvalues[0])
    assert abs(np.mean(ovs) - pred.overlap2[0]) <= 4 * se_o + 0.05


def test_threshold_brackets_the_outlier():
    link, T = "z1*z2", TURNING
    rows = matrix_spectral_thresholds(link, T, delta_range=(0.5, 2.0), points=5)
    th = rows[0]
    assert th["outlier"] == 1 and th["delta_u"] is not None and th["error"] < 1e-2
    assert rows[-1]["delta_u"] is None and "no outlier 2" in rows[-1]["note"]  # one outlier only, up to delta = 2
    lo, hi = th["delta_u"] * 0.9, th["delta_u"] * 1.1
    assert matrix_spectral_prediction(link, T, lo).margin < 0 < matrix_spectral_prediction(link, T, hi).margin


def test_operator_is_the_block_matrix():
    rng = np.random.default_rng(0)
    n, d = 50, 6
    X = rng.standard_normal((n, d))
    y = X[:, 0] * X[:, 1]
    T = [["tanh(y)", "y**2/(1 + y**2)"], ["y**2/(1 + y**2)", "cos(y)"]]
    op = matrix_data_operator(X, y, T, 2)
    dense = np.zeros((2 * d, 2 * d))
    for i in range(n):
        Ti = np.array([[np.tanh(y[i]), y[i] ** 2 / (1 + y[i] ** 2)], [y[i] ** 2 / (1 + y[i] ** 2), np.cos(y[i])]])
        dense += np.kron(np.outer(X[i], X[i]), Ti) / n  # vec(V) row-major: index (row of V) * k + column
    M = np.stack([op.matvec(e) for e in np.eye(2 * d)], axis=1)
    assert np.allclose(M, dense, atol=1e-12)


@pytest.mark.parametrize("T,match", [
    ([["tanh(y)", "y"], ["0", "1"]], "symmetric"),
    ([["y", "0"], ["0", "0"]], "not bounded above"),
    ([["tanh(y)"]], "2 x 2 nested list"),
    ([["tanh(y)", "0"], ["0", "log(-1 - y**2)"]], "not finite"),
    ([["tanh(y)", "0"], ["0", "tanh(y)"]], "scalar preprocessing"),
])
def test_refusals(T, match):
    with pytest.raises(TheorykitError, match=match):
        matrix_spectral_prediction("z1*z2", T, 2.0)


def test_spectral_command_with_a_matrix(capsys):
    import json

    from theorykit.cli import main

    assert main(["spectral", "--link", "z1*z2", "--preprocess", "[[tanh(y), tanh(y)**2], [tanh(y)**2, 0]]",
                 "--delta", "6", "--delta-range", "1", "1.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["k"] == 2 and out["outliers"] == 1 and out["margin"] > 0 and out["margins"][0] == out["margin"]
    assert out["thresholds"][0]["outlier"] == 1 and out["preprocessing"] == "matrix"
    assert out["top_eigenvalue"] == pytest.approx(out["eigenvalues"][0]) and out["top_eigenvalue"] > out["bulk_edge"]
    # the threshold is 0.751 (tables/spectral_matrix.md): below this range, which the reason says
    assert out["delta_u"] is None and "already at delta = 1" in out["delta_u_reason"]
    assert main(["spectral", "--link", "z1*z2", "--preprocess", "[[tanh(y), Max(y, 0)], [Max(y, 0), 0]",
                 "--delta", "6"]) == 2
    assert "unbalanced" in capsys.readouterr().err


def test_double_outlier_has_two_equal_thresholds():
    """z1^2 - z2^2 with T = [tanh y, tanh^2 y; tanh^2 y, -tanh y] has a double outlier (the symmetry z1 <-> z2,
    y -> -y): both margins turn positive at the same delta (tables/spectral_matrix.md: 1.7702)."""
    T = [["tanh(y)", "tanh(y)**2"], ["tanh(y)**2", "-tanh(y)"]]
    rows = matrix_spectral_thresholds("z1**2 - z2**2", T, delta_range=(1.2, 2.4), points=4)
    assert rows[0]["delta_u"] == pytest.approx(1.7702, abs=1e-3)
    assert rows[1]["delta_u"] == pytest.approx(rows[0]["delta_u"], abs=1e-4)
