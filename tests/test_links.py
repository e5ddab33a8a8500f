"""Link analysis: exponents, easy/hard subspaces, delta_alg (exact where the integrals close)."""
import json

import numpy as np
import pytest
import sympy as sp

import theorykit as tk
from theorykit.symbolic.links import delta_alg_grid, delta_alg_monte_carlo, delta_alg_additive


@pytest.mark.parametrize("spec,info,gen,easy,hard", [
    ("phase-retrieval", 2, 2, 0, 1),
    ("linear", 1, 1, 1, 0),
    ("relu", 1, 1, 1, 0),
    ("abs", 2, 2, 0, 1),
    ("sign-symmetric", 2, 2, 0, 1),
    ("he3(z)" if False else "z**3 - 3*z", 3, 1, 1, 0),
    ("easy-quadratic", 1, 1, 1, 0),
    ("noisy-phase-retrieval", 2, 2, 0, 1),
    ("tanh(z)**2", 2, 2, 0, 1),
])
def test_single_index(spec, info, gen, easy, hard):
    a = tk.analyse_link(spec)
    assert (a.information_exponent, a.generative_exponent, a.easy_dim, a.hard_dim) == (info, gen, easy, hard)


def test_phase_retrieval_delta_alg_exactly_half():
    da = tk.analyse_link("phase-retrieval").delta_alg
    assert da.exact == sp.Rational(1, 2) and da.value == 0.5
    # the numerical routes agree with the exact value within their stated errors
    lk = tk.link("phase-retrieval")
    for num in (delta_alg_grid(lk), delta_alg_monte_carlo(lk, n=400_000, replicas=4)):
        assert abs(num.value - 0.5) <= num.error + 1e-12, num


def test_sign_symmetric_exact_vs_quadrature():
    da = tk.analyse_link("sign-symmetric").delta_alg
    assert da.exact is not None and da.exact.has(sp.erfinv)
    num = delta_alg_grid(tk.link("sign-symmetric"))
    assert abs(num.value - da.value) <= num.error
    assert abs(num.value - da.value) < 1e-3


def test_noisy_link_two_methods_agree():
    lk = tk.link("noisy-phase-retrieval")
    q = delta_alg_additive(lk, 0.5)
    mc = delta_alg_monte_carlo(lk, n=1_000_000, replicas=6)
    assert q.exact is None and q.error < 1e-6
    assert 0.5 < q.value < 0.6  # noise makes weak recovery harder than the noiseless 1/2
    assert abs(q.value - mc.value) <= mc.error + q.error


@pytest.mark.parametrize("spec,easy,hard,easy_vec", [
    ("product", 0, 2, None),
    ("staircase", 1, 1, [1, 0]),
    ("z1 + z2", 1, 1, [1, 1]),          # y depends on z1 + z2 only: the other direction is unidentifiable ("hard")
    ("z2 + z1**2", 1, 1, [0, 1]),
    ("z2 + z1*z2**2", 2, 0, None),      # E[z1 y^3] = 54: the sign of z1 shows in y's skew
    ("z1**2 + z2**2 + z3", 1, 2, [0, 0, 1]),
    ("z1 + z1*z2", 2, 0, None),         # z1 easy, then z2 through E[z2 | y, z1]
])
def test_multi_index_subspaces(spec, easy, hard, easy_vec):
    a = tk.analyse_link(spec)
    assert (a.easy_dim, a.hard_dim) == (easy, hard)
    if easy_vec is not None:
        v = np.array(easy_vec, float) / np.linalg.norm(easy_vec)
        assert abs(abs(a.easy_basis[:, 0] @ v) - 1) < 1e-12
    assert np.allclose(np.hstack([a.easy_basis, a.hard_basis]).T @ np.hstack([a.easy_basis, a.hard_basis]),
                       np.eye(a.k))


def test_multi_index_sup_formula_exact_case():
    """y = z2^2 with k = 2 (z1 absent; a Link built directly, since a parsed one drops unused indices): the sup
    formula must reduce to the single-index 1/E[(z^2-1)^2] = 1/2."""
    from theorykit.conventions import z_symbol
    from theorykit.symbolic.ingredients import Link

    z1, z2 = z_symbol(1), z_symbol(2)
    a = tk.analyse_link(Link("z2**2", z2 ** 2, 2, (z1, z2)))
    assert a.k == 2 and (a.easy_dim, a.hard_dim) == (0, 2)
    assert a.delta_alg.exact is None and a.delta_alg.error < 0.01
    assert abs(a.delta_alg.value - 0.5) <= a.delta_alg.error


def test_product_delta_alg_bounds():
    """y = z1 z2: with G = [[A, y], [y, A]], A = E[z1^2|y] - 1, M = I/sqrt2 gives rho >= 1 + E[A^2] > 1, and
    rho <= E||zz^T - I||_F^2 = 6, so 1/6 < delta_alg < 1."""
    da = tk.analyse_link("product").delta_alg
    assert da.exact is None and 0 < da.error < 0.01
    assert 1 / 6 < da.value - da.error and da.value + da.error < 1


def test_json_shape():
    d = tk.analyse_link("phase-retrieval").as_dict()
    assert {key: d[key] for key in ("link", "name", "k", "information_exponent", "generative_exponent", "easy_dim",
                                    "hard_dim", "easy_basis", "hard_basis")} == \
        {"link": "z**2", "name": "phase-retrieval", "k": 1, "information_exponent": 2, "generative_exponent": 2,
         "easy_dim": 0, "hard_dim": 1, "easy_basis": [[]], "hard_basis": [[1.0]]}
    assert (d["delta_alg"]["exact"], d["delta_alg"]["value"], d["delta_alg"]["error"]) == ("1/2", 0.5, 0.0)
    json.dumps(d, allow_nan=False)  # the dict is the JSON contract: plain types only


def test_analyse_link_is_memoised_and_hands_out_copies():
    """The symbolic delta_alg of a Piecewise link takes seconds; the simulator asks once per seed.  A second call is
    served from the cache, and mutating one result's basis does not reach the next caller."""
    import time

    from theorykit import analyse_link

    first = analyse_link("sign-symmetric")
    t0 = time.perf_counter()
    again = analyse_link("sign-symmetric")
    assert time.perf_counter() - t0 < 0.5
    assert again.delta_alg == first.delta_alg and np.array_equal(again.hard_basis, first.hard_basis)
    again.hard_basis[:] = 7.0
    assert np.array_equal(analyse_link("sign-symmetric").hard_basis, first.hard_basis)
