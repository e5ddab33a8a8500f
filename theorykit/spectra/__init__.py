"""Spectra: the spectral core on a weighted law (bulk edge, outlier, overlap) and the classic spectral methods built
on it (docs/theory.md §4, §6).  The Hessian theory at time t (issue: the Hessian at time t) reads its law of D from the
DMFT through this same core."""
from .classic import (SpectralLaw, SpectralPrediction, Threshold, bulk_edge, hessian_law, outlier, spectral_law,
                      spectral_prediction, spectral_start, spectral_threshold)

__all__ = ["SpectralLaw", "SpectralPrediction", "Threshold", "bulk_edge", "hessian_law", "outlier", "spectral_law",
           "spectral_prediction", "spectral_threshold", "spectral_start"]
