"""theorykit: theory of feature learning in two-layer neural networks (Montanari & Wang 2026).

Public API (everything else is implementation):

    activation, link, loss            build ingredients from presets or whitelisted expressions
    Network                           per-sample derivatives F(r, y), D(r, y) of the loss
    hermite_coefficients              mu_k = E[sigma(G) He_k(G)] with the tier that produced each
    gaussian_expectation, expectation Gaussian expectations (closed form -> quadrature -> Monte Carlo)
    analyse_link                      exponents, easy/hard subspaces, delta_alg
    Problem                           the learning problem once (model, delta, ridge, steps, initial law): JSON, key
    simulate, sweep, summarise        finite-d full-batch GD (the referee) and success-probability scans
    spectral_prediction/_threshold    classic spectral methods (top eigenvalue, overlap, delta_u)
    spectral_start                    a Problem started from the spectral method (M0, Sigma0 from its overlap)
    HessianLaw, hessian_prediction    the Hessian at time t (docs/theory.md §4): a law of (D, zeta) from a PathLaw or
                                      a sample -> edge, hard outliers (lambda, overlap^2), margin; hessian_density,
                                      eigenvalue_counting; truncation at 1/n and single-sample spikes
    delta_star                        delta*(t) for a list of t from one DMFT scan (docs/theory.md §5)
    SpectralLaw, spectral_law         the spectral core's input: a weighted discrete law of (Z = T(Y), V = G^2), tau
    outlier, bulk_edge                the core on any SpectralLaw at ratio delta: outlier -> SpectralPrediction (top
                                      eigenvalue, overlap, bulk edge); bulk_edge -> (lam_bar = argmin psi_delta, case)
    hessian_bottom, hessian_matvec    bottom Hessian eigenpairs by Lanczos on a matrix-free product
    population_loss                   population (fresh-sample) test loss from M = Theta*^T Theta, C
    dmft, flow_schedule               DMFT of GD (docs/theory.md §3, §3.2) with standard errors; gradient-flow grids
    dmft_scan, PathLaw                one setting at a list of delta (common random numbers, frozen choices); the DMFT's
                                      law of (r, y, z, D, zeta) at requested times (keep_law_at), for the Hessian theory
    capture_threshold                 initial hard overlap the nonlinear DMFT captures by a horizon (m*)
    dmft_closed_form                  exact t = 0, 1 DMFT quantities (polynomial sigma, square loss)
    linear_gd_limit                   exact d -> infinity GD curves of the linear model (Marchenko-Pastur)
    finite_d, FiniteD                 at your d and horizon (m = 1, 2): P(GD captures the hard direction by t) for every t,
                                      the midpoint delta_1/2(d, T) and escape times t_1/2(delta, d) (docs/theory.md §5)
    check, CheckResult                a hand calculation checked: a claimed closed form (Hermite coefficient, Gaussian
                                      expectation in sigma and its derivatives, delta_alg, exponent, t <= 1 DMFT
                                      quantity) -> "equal (exactly)", "equal to N digits" or "differs by ..." and how
Layout (the theory's order): symbolic -> problem -> dynamics (DMFT) -> spectra -> thresholds; the finite-d referee (referee/) beside
it, never importing the theory; report/ (table, figures) and claims (check) use both; cli.  The validation studies
(theorykit.validation, behind scripts/) are the project's evidence, not API: nothing here imports them.  docs/theory.md states the equations.
Conventions (Hermite normalisation, scalings): theorykit.conventions.
"""
from .errors import TheorykitError, ParseError, DivergenceError
from .symbolic.ingredients import Activation, Link, Loss, Preprocessing, activation, link, loss, preprocessing
from .symbolic.network import Network, Derivatives
from .symbolic.hermite import hermite_coefficients, gaussian_expectation, HermiteExpansion, HermiteCoefficient
from .symbolic.gaussian import expectation, Expectation
from .symbolic.links import analyse_link, LinkAnalysis, DeltaAlg
from .problem import Problem
from .population import population_loss
from .dynamics import (ClosedFormDMFT, DMFTResult, LinearGDLimit, PathLaw, dmft, dmft_closed_form, dmft_scan,
                       flow_schedule, linear_gd_limit)
from .spectra import (SpectralLaw, SpectralPrediction, bulk_edge, outlier, spectral_law, spectral_prediction,
                      spectral_start, spectral_threshold, HessianLaw, HessianPrediction, hessian_prediction,
                      hessian_density, eigenvalue_counting)
from .thresholds import DeltaDyn, DeltaNN, DeltaStar, FiniteD, capture_threshold, delta_dyn, delta_nn, delta_star, finite_d
from .referee import (HessianSpectrum, SimulationResult, hessian_bottom, hessian_matvec, simulate, summarise, sweep)
from .claims import CheckResult, check

from .version import __version__  # noqa: F401  (the package version)

__all__ = ["TheorykitError", "ParseError", "DivergenceError", "Activation", "Link", "Loss", "Preprocessing", "preprocessing", "activation", "link",
           "loss", "Network", "Derivatives", "hermite_coefficients", "gaussian_expectation", "HermiteExpansion",
           "HermiteCoefficient", "expectation", "Expectation", "analyse_link", "LinkAnalysis", "DeltaAlg", "Problem",
           "simulate", "SimulationResult", "sweep", "summarise", "spectral_prediction", "spectral_threshold", "SpectralLaw",
           "SpectralPrediction", "spectral_law", "outlier", "bulk_edge",
           "hessian_bottom", "hessian_matvec", "HessianSpectrum", "population_loss",
           "dmft_closed_form", "ClosedFormDMFT", "dmft", "flow_schedule", "DMFTResult", "capture_threshold",
           "linear_gd_limit", "LinearGDLimit", "dmft_scan", "PathLaw", "spectral_start",
           "HessianLaw", "HessianPrediction", "hessian_prediction", "hessian_density", "eigenvalue_counting",
           "DeltaStar", "delta_star", "DeltaNN", "delta_nn", "DeltaDyn", "delta_dyn", "FiniteD", "finite_d", "check",
           "CheckResult"]
