"""Comparisons of the theory against finite-d GD as a product feature (issue 10, point 5).

* :mod:`.stats` -- the statistics: :func:`binomial` (Wilson interval), :func:`midpoint` (P = 1/2 by interpolation),
  :func:`compare` (rel_err, rel_se), :func:`signed`, :func:`per_seed_rms`, :func:`cv_mean` (control variates),
  :func:`fit_over_d` (c/d, b + c/d, power law, verdict), :func:`extrapolate_inverse`, :func:`loglog_slope`, and the
  pass criteria :func:`within`, :func:`within_se`, :func:`within_factor`, :func:`in_band`;
* :func:`run_jobs`, :func:`read_rows`, :func:`check_writable` -- the one resumable runner (rows appended as jobs
  finish, settings recorded and checked, failures recorded, Ctrl-C safe), re-exported from the shared
  :mod:`theorykit.runner` (the referee's sweeps use it too);
* :mod:`.seeds` -- :func:`run_sims`, the simulator seed runner built on it;
* :mod:`.tables` -- :func:`write_table`: CSV + Markdown stating the regenerating command, date, machine and wall
  time; hand-written notes live in ``<stem>_notes.md``, which the writer never touches;
* :mod:`.vs_sim`, :mod:`.dscan` -- the table generators behind scripts/dmft_vs_sim.py and scripts/dmft_dscan.py
  (``main(argv)``; imported on demand).

Only the top-level API of theorykit (``tk.dmft``, ``tk.simulate``, ...) is used, at call time.
"""
from .stats import (Proportion, binomial, midpoint, compare, signed, per_seed_rms, cv_mean, gls, power_fit, fit_over_d,
                    extrapolate_inverse, loglog_slope, within, within_se, within_factor, in_band)
from ..runner import run_jobs, read_rows, check_writable
from .seeds import run_sims, gd_run, stack, zero_mean_covariates
from .tables import write_table, write_csv, check_table_writable, notes_path, regenerate_command, md_table, fmt, pct, pm

__all__ = ["Proportion", "binomial", "midpoint", "compare", "signed", "per_seed_rms", "cv_mean", "gls", "power_fit",
           "fit_over_d", "extrapolate_inverse", "loglog_slope", "within", "within_se", "within_factor", "in_band",
           "run_jobs", "read_rows", "check_writable", "run_sims", "gd_run", "stack", "zero_mean_covariates",
           "write_table", "write_csv", "check_table_writable", "notes_path", "regenerate_command", "md_table", "fmt",
           "pct", "pm"]
