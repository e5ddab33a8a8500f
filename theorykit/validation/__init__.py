"""The validation studies: the project's evidence that the theory predicts finite-d GD, not part of the API (nothing
in theorykit imports this package; scripts/ call it, and ``import theorykit`` does not load it).

* :mod:`.stats` -- the statistics: :func:`binomial` (Wilson interval), :func:`crossing` (P = 1/2 by interpolation),
  :func:`compare` (rel_err, rel_se), :func:`signed`, :func:`per_seed_rms`, :func:`cv_mean` (control variates),
  :func:`fit_over_d` (c/d, b + c/d, power law, verdict), :func:`extrapolate_inverse`, :func:`loglog_slope`, and the
  pass criteria :func:`within`, :func:`within_se`, :func:`within_factor`, :func:`in_band`;
* :func:`run_jobs`, :func:`read_rows`, :func:`check_writable` -- the one resumable runner (:mod:`theorykit.runner`);
* :mod:`.seeds` -- :func:`run_sims`, the studies' view of the one seed runner (``theorykit.referee.sweep``);
* :mod:`.closed_forms` -- closed forms the studies and tests compare numerics with (delta_alg of a chi-square
  plus noise);
* the table writer is :mod:`theorykit.report.writer` (shared with ``theorykit table`` and the benchmarks);
* the studies, each the generator behind one script (``main(argv)``; imported on demand): :mod:`.vs_sim`
  (scripts/dmft_vs_sim.py), :mod:`.dscan`, :mod:`.hessian_check`, :mod:`.delta_nn_table`, :mod:`.paper_comparison`,
  :mod:`.thresholds_vs_sim`.

The studies import the package's subpackages (dynamics, thresholds, referee, ...), never ``theorykit`` itself.
"""
from .stats import (Proportion, binomial, crossing, compare, signed, per_seed_rms, cv_mean, gls, power_fit, fit_over_d,
                    extrapolate_inverse, loglog_slope, within, within_se, within_factor, in_band)
from ..runner import run_jobs, read_rows, check_writable
from .seeds import run_sims, stack, zero_mean_covariates
from ..report.writer import (write_table, write_csv, check_table_writable, notes_path, regenerate_command, md_table,
                             fmt, pct, pm)

__all__ = ["Proportion", "binomial", "crossing", "compare", "signed", "per_seed_rms", "cv_mean", "gls", "power_fit",
           "fit_over_d", "extrapolate_inverse", "loglog_slope", "within", "within_se", "within_factor", "in_band",
           "run_jobs", "read_rows", "check_writable", "run_sims", "stack", "zero_mean_covariates",
           "write_table", "write_csv", "check_table_writable", "notes_path", "regenerate_command", "md_table", "fmt",
           "pct", "pm"]
