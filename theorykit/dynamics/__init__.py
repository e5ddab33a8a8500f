"""Dynamics: the DMFT of gradient descent and its exact special cases (docs/theory.md §3, §3.1, §3.2).

Modules, in the order of a solve: ``plan`` (latent rule, response estimator, memory), ``sample_side`` (one replica
forward in time), ``parameter_side`` (the linear Gaussian recursion), ``hard_process`` (C_mu), ``result``
(:class:`DMFTResult`), ``solver`` (:func:`dmft`, the front door: replicas, standard errors, settings), ``schedule``
(:func:`flow_schedule`), ``scan`` (:func:`dmft_scan`: a list of delta with common random numbers); exact cases:
``closed_form`` (t = 0, 1 for polynomial models) and ``linear_gd`` (the linear model's Marchenko-Pastur limit);
the t -> infinity state from stationary equations: ``stationary`` (:func:`stationary_state`, m <= 2).
What the DMFT predicts at a finite d (capture) is a threshold question: :mod:`theorykit.thresholds.capture`.
"""
from .closed_form import ClosedFormDMFT, dmft_closed_form
from .linear_gd import LinearGDLimit, linear_gd_limit
from .result import DMFTResult, PathLaw
from .scan import dmft_scan
from .schedule import flow_schedule
from .solver import dmft
from .stationary import StationaryState, stationary_state

__all__ = ["dmft", "dmft_scan", "PathLaw", "DMFTResult", "flow_schedule", "dmft_closed_form", "ClosedFormDMFT",
           "linear_gd_limit", "LinearGDLimit", "stationary_state", "StationaryState"]
