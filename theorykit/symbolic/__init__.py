"""Symbolic: the exact mathematics of a model, before any dynamics (docs/theory.md §1, §2).

Modules: ``_parse`` (the whitelist parser: nothing a user types is evaluated), ``functions`` (sigmoid, softplus, Phi,
...), ``presets`` (named activations, links, losses), ``ingredients`` (:class:`Activation`, :class:`Link`,
:class:`Loss`, :class:`Preprocessing` and their admissibility), ``lambdify`` (SymPy to safe NumPy functions),
``kinks`` (where sigma' or l' jumps), ``gaussian`` (:func:`expectation`, in tiers: closed form -> quadrature ->
Monte Carlo), ``hermite`` (:func:`hermite_coefficients`), ``links`` (:func:`analyse_link`: exponents, easy and hard
subspaces, delta_alg), ``network`` (:class:`Network`: per-sample derivatives F, D), ``admissible`` (spectral
preprocessings).
"""
from .gaussian import Expectation, expectation
from .hermite import HermiteCoefficient, HermiteExpansion, hermite_coefficients
from .ingredients import Activation, Link, Loss, Preprocessing, activation, link, loss, preprocessing
from .links import DeltaAlg, LinkAnalysis, analyse_link
from .network import Derivatives, Network

__all__ = ["activation", "link", "loss", "preprocessing", "Activation", "Link", "Loss", "Preprocessing", "expectation",
           "Expectation", "hermite_coefficients", "HermiteExpansion", "HermiteCoefficient", "analyse_link",
           "LinkAnalysis", "DeltaAlg", "Network", "Derivatives"]
