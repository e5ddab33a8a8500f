"""The fused kernel's branch-free exp and erf (theorykit/referee/_vecmath.py) against NumPy, SciPy and mpmath, called
alone and inlined into a loop compiled with the kernel's fast-math flags (reassociation there once merged the two
parts of ln 2 and cost 100 units in the last place at |x| ~ 700), and that such a loop is vectorised."""
import math

import mpmath as mp
import numba
import numpy as np
import pytest
import scipy.special as ss

from theorykit.referee._fused import FASTMATH
from theorykit.referee._vecmath import erf, exp

TINY = 5e-324  # the smallest subnormal


@numba.njit(fastmath=set(FASTMATH))
def _in_kernel_loop(x, which):
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = erf(x[i]) if which == 0 else exp(x[i])
    return out


def _plain(x, which):
    f = erf if which == 0 else exp
    return np.array([f(float(v)) for v in x])


SPECIAL = [0.0, -0.0, 1e-300, -1e-300, TINY, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("evaluate", [_in_kernel_loop, _plain], ids=["kernel-flags", "plain"])
def test_exp_to_one_unit_in_the_last_place(evaluate):
    x = np.concatenate([np.linspace(-750.0, 709.78, 200_001 if evaluate is _plain else 2_000_001),
                        [709.8, -708.5, -744.9, -745.2, 1e-20, -1e-20] + SPECIAL])
    got = evaluate(x, 1)
    with np.errstate(all="ignore"):
        want = np.exp(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf]) and got[-2] == 0.0  # overflow to inf; exp(-inf) = 0
    normal = np.isfinite(want) & (want >= 2.3e-308)
    assert np.max(np.abs(got[normal] - want[normal]) / want[normal]) <= 2.3e-16
    sub = np.isfinite(want) & (want < 2.3e-308)
    assert np.max(np.abs(got[sub] - want[sub])) <= TINY  # the subnormals and the underflow to 0: one unit
    assert got[-8] == 1.0 and got[-7] == 1.0  # exp(+-0)


@pytest.mark.parametrize("evaluate", [_in_kernel_loop, _plain], ids=["kernel-flags", "plain"])
def test_erf_to_a_few_units_in_the_last_place(evaluate):
    x = np.concatenate([np.linspace(-40.0, 40.0, 200_001 if evaluate is _plain else 2_000_001),
                        [1.5, -1.5, np.nextafter(1.5, 0), 6.0, 5.9, 27.0] + SPECIAL])
    got = evaluate(x, 0)
    want = ss.erf(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.max(np.abs(got[ok] - want[ok]) / np.maximum(np.abs(want[ok]), 1e-300)) <= 1e-15
    assert math.copysign(1.0, got[-7]) == -1.0  # erf(-0) = -0
    mp.mp.dps = 30
    for v in (1e-8, 0.3, 1.2, 1.4999, 1.5, 2.5, 4.0, 5.5):  # against 30-digit values, either side of the split
        assert abs(erf(v) - float(mp.erf(v))) <= 4.5e-16 * float(mp.erf(v))


def test_a_loop_over_them_is_vectorised():
    """The point of the module: once inlined, the loop evaluates several values per instruction (LLVM's vector
    types in the compiled loop).  The math module's erf is a call per value and leaves the loop scalar."""
    x = np.linspace(-3.0, 3.0, 64)
    _in_kernel_loop(x, 0)
    ir = _in_kernel_loop.inspect_llvm(_in_kernel_loop.signatures[0])
    assert "x double>" in ir, "the loop over erf and exp was not vectorised"
