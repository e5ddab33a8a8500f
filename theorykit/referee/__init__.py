"""The finite-d referee (docs/theory.md §7): full-batch GD at dimension d (``gd``), the finite-d Hessian by Lanczos
(``hessian``), classic spectral methods at finite d (``spectral_methods``) and success-probability sweeps (``sweeps``).
It never imports the asymptotic theory (theorykit.dynamics, theorykit.spectra); tests/test_layering.py checks it."""
from .gd import SimulationResult, simulate
from .hessian import HessianSpectrum, dense_hessian, hessian_bottom, hessian_matvec
from .spectral_methods import (data_matrix, finite_d_matrix_spectrum, finite_d_spectrum, finite_d_top,
                               matrix_data_operator, top_eigenpairs)
from .sweeps import read_csv, summarise, sweep
from .kick import kick_growth_rate

__all__ = ["simulate", "SimulationResult", "kick_growth_rate", "hessian_bottom", "hessian_matvec", "dense_hessian",
           "HessianSpectrum",
           "data_matrix", "top_eigenpairs", "finite_d_top", "finite_d_spectrum", "matrix_data_operator",
           "finite_d_matrix_spectrum", "sweep", "summarise", "read_csv"]
