"""delta_alg of a link of three Gaussian variables by slices (theorykit/symbolic/slices.py): against values computed
another way -- the quadrature on the sphere (homogeneous links, z1 z2 z3's closed form among them), the
additive-noise quadrature (two-index links with Gaussian noise) -- on a smooth, a kinked (with an atom), a bounded and
an unbounded link; the stated error covers the difference.  Before, these links went to Monte Carlo (issue 30
point 1)."""
import functools
import math

import numpy as np
import pytest

import theorykit as tk
from theorykit.symbolic.links import (delta_alg_additive, delta_alg_monte_carlo, delta_alg_simplex, delta_alg_slices,
                                      delta_alg_sphere, make_link)
from theorykit.symbolic.slices import degenerate_slices, outer_rule


@functools.cache
def _reference(spec, route):
    """delta_alg of ``spec`` by the sphere's quadrature or the additive-noise route (computed once per module)."""
    lk = make_link(spec)
    return delta_alg_sphere(lk) if route == "sphere" else delta_alg_additive(lk, route)


@pytest.mark.parametrize("spec,route", [
    ("z1*z2*z3", "sphere"),  # smooth, unbounded; the slice z1 = 0 is constant (the outer rule is graded there)
    ("Max(z1, 0)*z2*z3", "sphere"),  # kinked; an atom of mass 1/2 at y = 0, and every slice z1 <= 0 constant
    ("tanh(z1*z2) + 0.2*eps", 0.2),  # bounded, noisy (eps the third variable)
    ("z1**2 + z1*z2 + 0.3*eps", 0.3),  # unbounded, noisy
])
def test_slices_agree_with_other_routes_within_the_stated_error(spec, route):
    lk = make_link(spec)
    da = delta_alg_slices(lk)
    ref = _reference(spec, route)
    assert da is not None and da.method.startswith("deterministic")
    assert abs(da.value - ref.value) <= da.error + ref.error, (da.value, ref.value, da.error)
    assert da.error <= 0.02 * ref.value  # and the error is small
    if spec.startswith("Max"):
        assert "atoms of y" in da.method


def test_a_non_homogeneous_link_with_a_known_value():
    """y = u + u^3 with u = z1 z2 z3 is not homogeneous (the analysis would peel the cubic; the rule sees only y):
    its delta_alg is z1 z2 z3's (the heavy tails cost accuracy: the stated error is larger, and still covers)."""
    lk = make_link("z1*z2*z3 + (z1*z2*z3)**3")
    ref = _reference("z1*z2*z3", "sphere")
    da = delta_alg_slices(lk)
    assert abs(da.value - ref.value) <= da.error


@pytest.mark.parametrize("spec,route", [
    ("sign(z3)*z1*z2", "sphere"),  # a jump across z3 = 0: z3 is sliced (the variables permuted)
    ("sign(z1**2 - 1)*z1*z2 + 0.3*eps", 0.3),  # jumps at z1 = -1 and 1: panel edges there
])
def test_jumps_across_one_variable_are_sliced_along_it(spec, route):
    """A link whose jumps all lie across one variable is sliced along that variable with panel edges where it
    jumps, so no triangle straddles a jump: it agrees with the other routes within the stated error."""
    lk = make_link(spec)
    da = delta_alg_slices(lk)
    ref = _reference(spec, route)
    assert da is not None and "panels cut where y jumps" in da.method
    assert abs(da.value - ref.value) <= da.error + ref.error, (da.value, ref.value, da.error)
    assert da.error <= 0.01 * ref.value


def test_degenerate_slices_are_found():
    """The slices where y is constant: cos(z1) z2 z3 at z1 = pi/2 + j pi (those with |z1| <= 6), z1 z2 z3 at 0,
    relu(z1) z2 z3 at the end of the interval z1 <= 0; none for z1 z2 + z3^2."""
    got = degenerate_slices(lambda p: np.cos(p[:, 0]) * p[:, 1] * p[:, 2])
    assert np.allclose(sorted(got), [-1.5 * math.pi, -0.5 * math.pi, 0.5 * math.pi, 1.5 * math.pi], atol=1e-9)
    assert np.allclose(degenerate_slices(lambda p: p[:, 0] * p[:, 1] * p[:, 2]), [0.0], atol=1e-12)
    assert np.allclose(degenerate_slices(lambda p: np.maximum(p[:, 0], 0) * p[:, 1] * p[:, 2]), [0.0], atol=1e-7)
    assert degenerate_slices(lambda p: p[:, 0] * p[:, 1] + p[:, 2] ** 2) == []


def test_outer_rule_integrates_the_normal_law_and_is_graded():
    """Gauss-Legendre panels times the normal density: E[z^2] = 1, E[z^4] = 3, E[cos z] = e^-1/2 to rounding, with
    and without a graded point; the nodes crowd toward the point geometrically."""
    for pts in ([], [0.3]):
        x, w = outer_rule(pts, 6)
        assert abs(w.sum() - 1) < 1e-14 and abs(w @ x ** 2 - 1) < 1e-12 and abs(w @ x ** 4 - 3) < 1e-11
        assert abs(w @ np.cos(x) - math.exp(-0.5)) < 1e-12
    x, _ = outer_rule([0.3], 6)
    assert np.min(np.abs(x - 0.3)) < 1e-4 < np.min(np.abs(outer_rule([], 6)[0] - 0.3))


def test_three_variable_links_no_longer_use_monte_carlo():
    """A non-homogeneous three-index link and a two-index link with multiplicative noise get the deterministic rule in
    the analysis, and agree with Monte Carlo (cross-fitted, a smaller sample than the default) within both errors;
    jumps and four variables keep their other tiers."""
    for spec in ("exp(z1)*z2*z3", "z1*z2*(1 + 0.3*eps**2)"):
        da = tk.analyse_link(spec).delta_alg if "eps" in spec else delta_alg_slices(make_link(spec))
        assert da.method.startswith("deterministic") and np.isfinite(da.value) and da.error < 0.01 * da.value
        mc = delta_alg_monte_carlo(make_link(spec), n=500_000, replicas=8)
        assert abs(da.value - mc.value) <= da.error + mc.error, (spec, da.value, mc.value)
    assert delta_alg_slices(make_link("sign(z1*z2 - 0.5)*z3")) is None  # a jump across a curve: smeared
    assert delta_alg_slices(make_link("z1*z2*z3*z4")) is None  # four variables
    assert delta_alg_simplex(make_link("z1*z2 + 0.5*eps")) is None  # three variables are the slices' job
