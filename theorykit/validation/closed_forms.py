"""Closed forms that validation studies and tests compare theorykit's numerics with (not part of the public API)."""
from __future__ import annotations

import math

from scipy import integrate, special


def delta_alg_chi2_plus_noise(k: int, s: float) -> tuple:
    """delta_alg of y = |z|^2 + s eps, z ~ N(0, I_k), by nested adaptive quadrature: E[zz^T | y] = (E[x | y] / k) I
    with x = |z|^2 ~ chi2_k, so rho = E_y[(E[x | y] / k - 1)^2]; x = r^2 in the inner integrals (smooth in r).
    Returns (delta_alg, error estimate of the outer quadrature)."""
    c = 1.0 / (2 ** (k / 2 - 1) * special.gamma(k / 2))

    def inner(y, power):
        def f(r):
            return c * r ** (k - 1) * math.exp(-r * r / 2) * r ** (2 * power) * math.exp(-0.5 * ((y - r * r) / s) ** 2)
        top = math.sqrt(max(y, 0.0) + 12 * s) + 12
        pts = [math.sqrt(y)] if y > 0 else None
        val = integrate.quad(f, 0, top, points=pts, epsabs=0, epsrel=1e-13, limit=400)[0]
        return val / (s * math.sqrt(2 * math.pi))

    def outer(y):
        p = inner(y, 0)
        if p <= 0:
            return 0.0
        g = inner(y, 1) / p / k - 1
        return p * g * g

    rho, err = 0.0, 0.0
    for a, b in [(-12 * s, 0.0), (0.0, 2.0), (2.0, 10.0), (10.0, 40.0), (40.0, 200.0)]:
        v, e = integrate.quad(outer, a, b, epsabs=0, epsrel=1e-12, limit=400)
        rho, err = rho + v, err + e
    return 1 / rho, err / rho ** 2


def delta_alg_chi2_threshold(k: int, s: float, c: float) -> float:
    """delta_alg of y = 1{|z|^2 + s eps > c}, z ~ N(0, I_k): y takes two values, E[zz^T | y = v] = (E[x | v] / k) I
    with x = |z|^2 ~ chi2_k, and P(y = 1 | x) = Phi((x - c) / s); rho = sum_v P_v (E[x | v] / k - 1)^2 by adaptive
    quadrature in r = sqrt(x)."""
    norm = 1.0 / (2 ** (k / 2 - 1) * special.gamma(k / 2))

    def moment(power, upper):
        def f(r):
            p = special.ndtr((r * r - c) / s)
            return norm * r ** (k - 1) * math.exp(-r * r / 2) * r ** (2 * power) * (p if upper else 1 - p)
        pts = [math.sqrt(c)] if c > 0 else None
        return integrate.quad(f, 0, 40, points=pts, epsabs=0, epsrel=1e-13, limit=400)[0]

    rho = 0.0
    for upper in (True, False):
        P = moment(0, upper)
        rho += P * (moment(1, upper) / P / k - 1) ** 2
    return 1 / rho
