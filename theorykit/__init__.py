"""theorykit: theory of feature learning in two-layer neural networks (Montanari & Wang 2026).

Public API (everything else is implementation):

    activation, link, loss            build ingredients from presets or whitelisted expressions
    Network                           per-sample derivatives F(r, y), D(r, y) of the loss
    hermite_coefficients              mu_k = E[sigma(G) He_k(G)] with the tier that produced each
    gaussian_expectation, expectation Gaussian expectations (closed form -> quadrature -> Monte Carlo)
    analyse_link                      exponents, easy/hard subspaces, delta_alg
Conventions (Hermite normalisation, scalings): theorykit.conventions.
"""
from .errors import TheorykitError, ParseError, DivergenceError
from .symbolic.ingredients import Activation, Link, Loss, Preprocessing, activation, link, loss, preprocessing
from .symbolic.network import Network, Derivatives
from .symbolic.hermite import hermite_coefficients, gaussian_expectation, HermiteExpansion, HermiteCoefficient
from .symbolic.gaussian import expectation, Expectation
from .symbolic.links import analyse_link, LinkAnalysis, DeltaAlg

__version__ = "0.1.0"

__all__ = ["TheorykitError", "ParseError", "DivergenceError", "Activation", "Link", "Loss", "Preprocessing", "preprocessing", "activation", "link",
           "loss", "Network", "Derivatives", "hermite_coefficients", "gaussian_expectation", "HermiteExpansion",
           "HermiteCoefficient", "expectation", "Expectation", "analyse_link", "LinkAnalysis", "DeltaAlg"]
