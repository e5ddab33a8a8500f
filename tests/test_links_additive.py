"""delta_alg of links with additive Gaussian noise, y = h(z) + s eps, for k = 1, 2, 3 latent variables
(theorykit.symbolic.links.delta_alg_additive; docs/theory.md §2, "Additive Gaussian noise")."""
import pytest

import theorykit as tk
from theorykit.symbolic.links import delta_alg_additive, make_link
from theorykit.validation.closed_forms import delta_alg_chi2_plus_noise, delta_alg_chi2_threshold


@pytest.mark.parametrize("spec,k,s", [("z**2 + 0.5*eps", 1, 0.5), ("z1**2 + z2**2 + 0.5*eps", 2, 0.5),
                                      ("z1**2 + z2**2 + 0.1*eps", 2, 0.1),
                                      ("z1**2 + z2**2 + z3**2 + 0.5*eps", 3, 0.5)])
def test_chi_square_plus_noise_matches_its_closed_form(spec, k, s):
    # |z|^2 + s eps: E[zz^T | y] = (E[x | y] / k) I with x ~ chi2_k, a nested one-dimensional quadrature
    ref, ref_err = delta_alg_chi2_plus_noise(k, s)
    da = delta_alg_additive(make_link(spec), s)
    assert abs(da.value - ref) <= da.error + ref_err
    assert da.error < 1e-5


def test_a_noisy_product_link_is_computed_by_quadrature_and_is_rotation_invariant():
    # before: k = 2 with additive noise went to Monte Carlo (error ~1e-2).  z1 z2 = (u^2 - v^2) / 2 in the rotated
    # coordinates u, v = (z1 +- z2) / sqrt(2): the same law of (y, z) up to a rotation, hence the same delta_alg, from a
    # different integrand on the tensor rule
    a = tk.analyse_link("z1*z2 + 0.5*eps").delta_alg
    b = tk.analyse_link("(z1**2 - z2**2)/2 + 0.5*eps").delta_alg
    assert "additive Gaussian noise" in a.method and "Monte Carlo" not in a.method
    assert a.error < 1e-8
    assert abs(a.value - b.value) <= a.error + b.error + 1e-12


def test_small_noise_approaches_the_noiseless_link():
    # s -> 0: the noisy product link tends to the noiseless z1 z2 (sphere quadrature), monotonically here
    noiseless = tk.analyse_link("z1*z2").delta_alg.value
    gaps = [abs(delta_alg_additive(make_link(f"z1*z2 + {s}*eps"), s).value - noiseless) for s in (0.4, 0.2, 0.1)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.02


def test_a_monotone_function_of_an_additive_noise_link_is_conditioned_through_its_argument():
    # y = tanh(z1 z2 + 0.5 eps) determines u = z1 z2 + 0.5 eps: E[zz^T | y] = E[zz^T | u], the same delta_alg
    # (before: Monte Carlo for the tanh, with an error ~1e-2)
    a = tk.analyse_link("tanh(z1*z2 + 0.5*eps)").delta_alg
    b = tk.analyse_link("z1*z2 + 0.5*eps").delta_alg
    assert "strictly monotone" in a.method and "additive Gaussian noise" in a.method
    assert a.value == b.value and a.error < 1e-8


@pytest.mark.parametrize("spec,k,s,c", [("sign(z**2 - 1 + 0.5*eps)", 1, 0.5, 1.0),
                                        ("Heaviside(z1**2 + z2**2 - 2 + 0.5*eps)", 2, 0.5, 2.0)])
def test_a_jump_of_a_noisy_argument_matches_its_closed_form(spec, k, s, c):
    # y = 1(|z|^2 + s eps > c) (sign is an affine function of it): two values, each an integral of a normal CDF
    # (before: Monte Carlo, error ~1e-2)
    da = tk.analyse_link(spec).delta_alg
    assert "piecewise-constant function of u" in da.method
    assert abs(da.value - delta_alg_chi2_threshold(k, s, c)) <= da.error + 1e-10
    assert da.error < 1e-8
