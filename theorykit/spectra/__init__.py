"""Spectra: the spectral core on a weighted law (bulk edge, outlier, overlap) and the classic spectral methods built
on it (docs/theory.md §4, §6).  The Hessian theory at time t (``hessian``: bulk S(z), edge, hard outliers, spikes) reads
its law of (D, zeta) from the DMFT or from a finite-d sample, through this same core for m = 1.  ``multi``: the
spectral methods of a k-index link (k = 2, 3) with a scalar preprocessing; ``matrix_preprocessing``: with a k x k
matrix T(y)."""
from .classic import (SpectralLaw, SpectralPrediction, Threshold, bulk_edge, hessian_law, outlier, spectral_law,
                      spectral_prediction, spectral_start, spectral_threshold)
from .multi import (MultiSpectralLaw, MultiSpectralPrediction, multi_outliers, multi_spectral_law,
                    multi_spectral_prediction, multi_spectral_thresholds)
from .matrix_preprocessing import (MatrixSpectralPrediction, matrix_spectral_law, matrix_spectral_prediction,
                                   matrix_spectral_thresholds)
from .hessian import (HessianLaw, HessianPrediction, Outlier, eigenvalue_counting, expected_extremes, hessian_density,
                      hessian_prediction, kernel_mass, single_sample_spikes, split_spikes, tail_diagnostics, top_edge)

__all__ = ["SpectralLaw", "SpectralPrediction", "Threshold", "bulk_edge", "hessian_law", "outlier", "spectral_law",
           "spectral_prediction", "spectral_threshold", "spectral_start", "HessianLaw", "HessianPrediction", "Outlier",
           "eigenvalue_counting", "expected_extremes", "hessian_density", "hessian_prediction", "single_sample_spikes",
           "kernel_mass", "split_spikes", "tail_diagnostics", "top_edge", "MultiSpectralLaw", "MultiSpectralPrediction",
           "multi_outliers", "multi_spectral_law", "multi_spectral_prediction", "multi_spectral_thresholds",
           "MatrixSpectralPrediction", "matrix_spectral_law", "matrix_spectral_prediction",
           "matrix_spectral_thresholds"]
