"""The Hessian at time t: bulk, left edge, hard outliers and single-sample spikes from a law of (D, zeta)
(docs/theory.md §4).

H = (1/n) sum_i D_i (x) x_i x_i^T + ridge I  (md x md), n = delta d, D_i (m x m) symmetric.  The law of (D, zeta) is
a weighted sample (:class:`HessianLaw`): the DMFT's paths at time t (:meth:`HessianLaw.from_path_law`) or a finite-d
simulation's own D_i and hard coordinates (:meth:`HessianLaw.from_samples`).  The core never asks which.  For z in C^+
the m x m matrix S(z) solves

    F(S) = S^{-1} + z I - E[g(D, S)] = 0,     g(D, S) = (I + D S / delta)^{-1} D,

and everything below reads S: the bulk density rho(lambda) = (1/(m pi)) lim_{eta -> 0} Im tr S(lambda + i eta), the
real S below the bulk up to the left edge, the hard outliers (roots of det(Phi - lambda I) = 0, Phi = E[(zeta zeta^T)
(x) g]) and the single-sample spikes (roots of det(I + D_i S/delta) = 0).

Modules, one concept each: ``law`` (:class:`HessianLaw`, :func:`tail_diagnostics`, truncation at n,
:func:`kernel_mass`), ``solver`` (the matrix equation F(S) = 0: residual, Jacobian, Phi, domain), ``curve`` (the real
curve S(tau), tau = tr S, and the left edge), ``prediction`` (:func:`hessian_prediction`: edge, outliers, overlaps,
margin; :func:`top_edge`: the bulk's right edge), ``gaps`` (m = 1: the outliers in every gap between single-sample
spikes), ``density`` (:func:`hessian_density`, :func:`eigenvalue_counting`)
and ``spikes`` (:func:`single_sample_spikes`, :func:`split_spikes`, :func:`expected_extremes`).
"""
from .density import eigenvalue_counting, hessian_density
from .law import HessianLaw, kernel_mass, support_tail, tail_diagnostics
from .prediction import HessianPrediction, Outlier, hessian_prediction, top_edge
from .spikes import expected_extremes, single_sample_spikes, split_spikes

__all__ = ["HessianLaw", "HessianPrediction", "Outlier", "eigenvalue_counting", "expected_extremes",
           "hessian_density", "hessian_prediction", "kernel_mass", "single_sample_spikes", "split_spikes",
           "support_tail", "tail_diagnostics", "top_edge"]
