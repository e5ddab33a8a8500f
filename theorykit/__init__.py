"""theorykit: theory of feature learning in two-layer neural networks (Montanari & Wang 2026).

The public surface (docs/api.md lists every name with its signature)::

    Problem                       the learning problem, passed whole: model (activation, link, loss, width, a, b),
                                  delta, ridge, step sizes, initial law; JSON and a content hash
    activation, link, loss        ingredients from presets or whitelisted expressions
    analyse_link                  exponents, easy and hard subspaces, delta_alg
    hermite_coefficients          mu_k = E[sigma(G) He_k(G)], each with the tier that produced it
    dmft                          the DMFT of full-batch GD (docs/theory.md §3), with standard errors
    simulate, sweep               the finite-d referee: GD at dimension d; success probabilities over seeds and delta
    hessian                       the Hessian at GD time t: bulk edge, hard outliers and their overlaps (§4)
    delta_star, delta_nn          the spectral thresholds delta*(t) and delta_NN = lim delta*(t) (§5)
    delta_dyn                     the dynamical threshold (where the capture growth rate changes sign, §5)
    finite_d                      at your d and horizon: P(GD captures the hard direction by t), delta_1/2, escape times
    check                         a hand calculation checked against theorykit
    table                         one row per setting, the columns above (what ``theorykit table`` prints)
    optimise                      search an activation (or loss) family for the fewest samples (docs/optimise.md)

Everything else lives in the subpackages, in the theory's order: ``symbolic`` (expressions, expectations, Hermite,
links, the per-sample network) -> ``problem`` -> ``dynamics`` (DMFT, its scan, closed forms) -> ``spectra`` (classic
spectral methods, the Hessian law) -> ``thresholds`` (spectral, dynamical, capture and finite-d); ``referee`` (the
finite-d simulator, Hessians, sweeps) beside them, never importing the theory; ``claims`` (check) and ``report``
(table, optimise, figures, the table writer) on top; ``cli``.  The validation studies (``theorykit.validation``, behind
scripts/) are the project's evidence, not API: ``import theorykit`` does not load them.  docs/theory.md states the
equations; theorykit.conventions the normalisations.
"""
from . import dynamics, referee, spectra, symbolic, thresholds  # noqa: F401  (the subpackages, as tk.symbolic, ...)
from .claims import check
from .dynamics import dmft
from .errors import TheorykitError
from .problem import Problem
from .referee import simulate, sweep
from .report.optimise import optimise
from .report.table import table
from .symbolic import activation, analyse_link, hermite_coefficients, link, loss
from .thresholds import delta_dyn, delta_nn, delta_star, finite_d, hessian
from .version import __version__  # noqa: F401  (the package version)

__all__ = ["Problem", "activation", "link", "loss", "analyse_link", "hermite_coefficients", "dmft", "simulate", "sweep",
           "hessian", "delta_star", "delta_nn", "delta_dyn", "finite_d", "check", "table", "optimise",
           "TheorykitError"]
