"""Dynamics: the DMFT of gradient descent and its exact special cases (docs/theory.md §3, §3.1, §3.2).

Modules, in the order of a solve: ``plan`` (latent rule, response estimator, memory), ``sample_side`` (one replica
forward in time), ``parameter_side`` (the linear Gaussian recursion), ``hard_process`` (C_mu), ``result``
(:class:`DMFTResult`), ``solver`` (:func:`dmft`, the front door: replicas, standard errors, settings), ``capture``
(:func:`capture_threshold`, :func:`finite_d_curve`), ``schedule`` (:func:`flow_schedule`), ``scan`` (:func:`dmft_scan`: a list of delta with common random numbers); exact cases: ``closed_form`` (t = 0, 1 for
polynomial models) and ``linear_gd`` (the linear model's Marchenko-Pastur limit).
"""
from .capture import capture_curve, capture_threshold, finite_d_curve, growth_rate
from .closed_form import ClosedFormDMFT, dmft_closed_form
from .linear_gd import LinearGDLimit, linear_gd_limit
from .result import CapturePrediction, DMFTResult, PathLaw
from .scan import dmft_scan
from .schedule import flow_schedule
from .solver import dmft

__all__ = ["dmft", "dmft_scan", "PathLaw", "DMFTResult", "CapturePrediction", "capture_threshold", "finite_d_curve", "capture_curve", "growth_rate", "flow_schedule", "dmft_closed_form",
           "ClosedFormDMFT", "linear_gd_limit", "LinearGDLimit"]
