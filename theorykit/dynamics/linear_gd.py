"""Exact d -> infinity limit of gradient descent on the linear model (docs/theory.md §3, "an exact limit").

sigma(x) = x, width m = 1, a = 1, b = 0, square loss l = (y - yhat)^2 / 2, link y = z + s eps (eps ~ N(0, 1)),
ridge lambda >= 0, constant step eta, Theta^0 = M_0 theta* + xi, xi ~ N(0, Sigma_0 I_d / d) (default M_0 = 0,
Sigma_0 = 1).  Then GD is linear:

    Theta^t - theta* = A^t Theta^0 - (I - q(Shat) Shat) theta* + s q(Shat) X^T eps / n,
    Shat = X^T X / n,  A = I - eta (Shat + lambda I),  q(mu) = (1 - a_t(mu)) / (mu + lambda),
    a_t(mu) = (1 - eta (mu + lambda))^t,

and every overlap is an integral against the Marchenko-Pastur law of Shat with ratio gamma = d / n = 1 / delta
(rotation invariance of the Wishart matrix: theta*, Theta^0 are generic directions for Shat):

    M_t            = M_0 int a_t dMP + int q mu dMP
    Theta^T Theta  = (M_0^2 + Sigma_0) int a_t^2 dMP + 2 M_0 int a_t q mu dMP + int q^2 mu^2 dMP
                     + (s^2 / delta) int mu q^2 dMP
    train loss     = (1/2) [Sigma_0 int a_t^2 mu + int (M_0 a_t - 1 + q mu)^2 mu + (s^2/delta) int mu^2 q^2
                            - 2 (s^2/delta) int mu q + s^2]
    test loss      = (1/2) [Theta^T Theta - 2 M_t + 1 + s^2]       (population loss, fresh sample)

This is a closed form no part of the DMFT solver uses: the DMFT (theorykit.dmft with activation 'linear', link
'z + s*eps', loss 'square') must reproduce it, which tests the solver's kernels, memory terms, ridge and losses.
The Marchenko-Pastur integrals use Gauss-Chebyshev quadrature of the second kind on the support (the density is
sqrt((mu+ - mu)(mu - mu-)) / (2 pi gamma mu)) plus the atom 1 - delta at 0 when delta < 1; ``nodes`` sets the rule
(error below 1e-13 with the default for delta != 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import TheorykitError


@dataclass(frozen=True)
class LinearGDLimit:
    """t (T+1,); M, gram, train_loss, test_loss (T+1,): the exact d -> infinity values (see the module docstring)."""

    t: np.ndarray
    M: np.ndarray
    gram: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    method: str = "exact: Marchenko-Pastur integrals (Gauss-Chebyshev quadrature of the second kind)"


def marchenko_pastur_rule(delta: float, nodes: int = 400):
    """Nodes and weights (summing to 1) integrating against the Marchenko-Pastur law of X^T X / n, n = delta d."""
    gamma = 1.0 / delta
    lo, hi = (1 - math.sqrt(gamma)) ** 2, (1 + math.sqrt(gamma)) ** 2
    i = np.arange(1, nodes + 1)
    x = np.cos(i * np.pi / (nodes + 1))
    wx = np.pi / (nodes + 1) * np.sin(i * np.pi / (nodes + 1)) ** 2  # int g(x) sqrt(1 - x^2) dx on [-1, 1]
    c, h = 0.5 * (hi + lo), 0.5 * (hi - lo)
    mu = c + h * x
    w = wx * h * h / (2 * np.pi * gamma * mu)
    if delta < 1:
        mu = np.append(mu, 0.0)
        w = np.append(w, 1.0 - delta)
    return mu, w


def linear_gd_limit(*, delta: float, eta: float, steps: int, ridge: float = 0.0, noise: float = 0.0,
                    M0: float = 0.0, Sigma0: float = 1.0, nodes: int = 400) -> LinearGDLimit:
    """The exact d -> infinity GD curves of the linear model (module docstring); ``noise`` is s in y = z + s eps;
    M0 and Sigma0 the initial overlap and the initial variance orthogonal to theta* (gram(0) = M0^2 + Sigma0)."""
    for name, v, ok in (("delta", delta, delta > 0), ("eta", eta, eta > 0), ("ridge", ridge, ridge >= 0),
                        ("noise", noise, noise >= 0), ("M0", M0, True), ("Sigma0", Sigma0, Sigma0 >= 0)):
        if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and ok):
            want = {"delta": "> 0", "eta": "> 0", "M0": "any real"}.get(name, ">= 0")
            raise TheorykitError(f"{name} must be a finite number ({want}), got {v!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise TheorykitError(f"steps must be an integer >= 0, got {steps!r}")
    if abs(delta - 1.0) < 1e-9:
        raise TheorykitError("delta = 1 puts the Marchenko-Pastur edge at 0 (an integrable singularity this rule does "
                             "not resolve): use delta != 1")
    mu, w = marchenko_pastur_rule(float(delta), nodes)
    lam, s2 = float(ridge), float(noise) ** 2
    T = int(steps)
    M, gram, train, test = (np.zeros(T + 1) for _ in range(4))
    for t in range(T + 1):
        a = (1 - eta * (mu + lam)) ** t
        q = (1 - a) / (mu + lam) if lam > 0 else np.where(mu > 0, (1 - a) / np.where(mu > 0, mu, 1), eta * t)
        M[t] = M0 * (w @ a) + w @ (q * mu)
        gram[t] = ((M0 ** 2 + Sigma0) * (w @ (a ** 2)) + 2 * M0 * (w @ (a * q * mu)) + w @ (q ** 2 * mu ** 2)
                   + s2 / delta * (w @ (mu * q ** 2)))
        train[t] = 0.5 * (Sigma0 * (w @ (a ** 2 * mu)) + w @ ((M0 * a - 1 + q * mu) ** 2 * mu)
                          + s2 / delta * (w @ (mu ** 2 * q ** 2)) - 2 * s2 / delta * (w @ (mu * q)) + s2)
        test[t] = 0.5 * (gram[t] - 2 * M[t] + 1 + s2)
    return LinearGDLimit(t=np.arange(T + 1), M=M, gram=gram, train_loss=train, test_loss=test)
