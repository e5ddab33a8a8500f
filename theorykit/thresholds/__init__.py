"""Thresholds (docs/theory.md §5): one module per question.

* :mod:`.spectral` -- the Hessian at GD time t (:func:`hessian`), delta*(t), the smallest delta with a hard outlier
  below its bulk (:func:`delta_star`), and delta_NN = lim delta*(t) with its convergence rule (:func:`delta_nn`);
* :mod:`.stationary` -- delta*(infinity), the Hessian threshold at the DMFT's stationary state
  (:func:`delta_star_infinity`): delta_NN converged by construction (m = 1);
* :mod:`.dynamical` -- delta_dyn, where the capture growth rate gamma(delta) = -d ln m*/dT changes sign
  (:func:`delta_dyn`); delta_NN where the Hessian is PSD;
* :mod:`.capture` -- everything at a finite d: the capture threshold m*, its curve in t and growth rate, the one
  matched probability P(GD at d captures the hard direction by t), and :func:`finite_d` (midpoints delta_1/2(d, T),
  escape times t_1/2(delta, d));
* :mod:`.midpoint` -- delta_1/2(d, T) alone, fast, by root finding on the DMFT run from the median effective initial
  overlap (m = 1, a link even along its hard direction): :func:`finite_d_midpoint`.
"""
from ..defaults import THRESHOLD_PATHS, THRESHOLD_REPLICAS
from .capture import (FINITE_D_RAYS, CaptureCurve, FiniteD, NotCaptured, capture_curve, capture_probabilities,
                      finite_d_paths,
                      capture_threshold, finite_d, growth_rate)
from .dynamical import DeltaDyn, delta_dyn
from .midpoint import FiniteDMidpoint, finite_d_midpoint, median_start_applies
from .spectral import (NN_FIRST_T, NN_POINTS, THRESHOLD_DELTA_RANGE, THRESHOLD_DIRECT_FROM_T, THRESHOLD_POINTS,
                       THRESHOLD_REFINE, DeltaNN, DeltaStar, HessianAt, delta_nn, delta_nn_from, delta_star,
                       geometric_times, hessian, hessian_at, law_at, spectral_inapplicable)
from .stationary import DeltaStarInfinity, delta_star_infinity, stationary_law

__all__ = ["DeltaStar", "DeltaStarInfinity", "delta_star_infinity", "stationary_law",
           "DeltaNN", "DeltaDyn", "FiniteD", "CaptureCurve", "NotCaptured", "delta_star", "delta_nn",
           "delta_nn_from", "delta_dyn", "finite_d",
           "finite_d_midpoint", "FiniteDMidpoint", "median_start_applies", "finite_d_paths", "capture_threshold",
           "capture_curve",
           "growth_rate",
           "capture_probabilities", "geometric_times", "hessian", "HessianAt", "law_at", "hessian_at",
           "spectral_inapplicable",
           "THRESHOLD_PATHS", "THRESHOLD_REPLICAS", "THRESHOLD_REFINE", "THRESHOLD_POINTS", "THRESHOLD_DELTA_RANGE",
           "THRESHOLD_DIRECT_FROM_T", "NN_FIRST_T", "NN_POINTS", "FINITE_D_RAYS"]
