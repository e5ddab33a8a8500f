"""Conventions shared by every part of theorykit (stated once, here).

Hermite normalisation
    Probabilists' Hermite polynomials He_k (He_0 = 1, He_1 = x, He_2 = x^2 - 1, ...), orthogonal under
    G ~ N(0, 1) with E[He_j(G) He_k(G)] = k! 1{j = k}.  The Hermite coefficients of a function sigma are
        mu_k = E[sigma(G) He_k(G)] = E[sigma^(k)(G)]      (Stein's lemma / Gaussian integration by parts),
    and sigma = sum_k mu_k He_k / k!.  Examples: x^2 -> (1, 0, 2, 0, ...); GeLU x Phi(x) -> mu_0 = 1/(2 sqrt(pi)),
    mu_1 = 1/2, mu_2 = 3/(4 sqrt(pi)); ReLU -> mu_0 = 1/sqrt(2 pi), mu_1 = 1/2, mu_2 = 1/sqrt(2 pi).

Scalings (docs/theory.md §1)
    x_i ~ N(0, I_d), n = delta * d samples; latent z = Theta*^T x with orthonormal Theta* (d x k).
    Network f(x) = (1/m) sum_j a_j sigma(theta_j^T x + b_j); only Theta (d x m) is trained.
    Empirical risk L(Theta) = (1/n) sum_i loss(y_i, f(x_i)) + (ridge/2) ||Theta||_F^2.
    Full-batch GD: Theta <- Theta - eta * grad L, eta = O(1), so one step moves Theta by O(1) in norm.
    Random initialisation theta_j(0) ~ N(0, I_d / d): Theta(0)^T Theta(0) -> I_m.

Symbols
    activation: ``x``; link: ``z`` (single index) or ``z1..zk`` (multi-index) and the noise ``eps ~ N(0,1)``;
    loss: ``y`` (response) and ``yhat`` (network output).
"""
import sympy as sp

#: Hermite family used everywhere (probabilists').
HERMITE = "probabilists"

# Canonical symbols.  All are real; Gaussian variables are unrestricted reals.
X = sp.Symbol("x", real=True)
Z = sp.Symbol("z", real=True)
EPS = sp.Symbol("eps", real=True)
Y = sp.Symbol("y", real=True)
YHAT = sp.Symbol("yhat", real=True)
Q = sp.Symbol("q", positive=True)  # a variance, in Gaussian expectations E[g(sqrt(q) G)]


def z_symbol(i: int) -> sp.Symbol:
    """The i-th latent coordinate z_i (1-based) of a multi-index link."""
    return sp.Symbol(f"z{i}", real=True)


def r_symbol(j: int) -> sp.Symbol:
    """Pre-activation r_j = theta_j^T x (1-based)."""
    return sp.Symbol(f"r{j}", real=True)


def hermite_he(k: int, x=X) -> sp.Expr:
    """Probabilists' Hermite polynomial He_k(x)."""
    return sp.hermite_prob(k, x)


def init_scale(d: int) -> float:
    """Standard deviation of each entry of Theta(0) at random initialisation: theta_j(0) ~ N(0, I_d/d)."""
    return 1.0 / d ** 0.5
