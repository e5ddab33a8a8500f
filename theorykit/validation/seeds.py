"""The validation studies' view of the one seed runner (:func:`theorykit.referee.sweep` with ``keep``): GD at one
setting for many seeds, with the trajectories the comparisons need, as one dict per seed.

With ``cache=DIR`` the sweep's file is ``DIR/sims_d<d>_<hash>.csv`` (:func:`cache_file`: the hash covers every
simulate argument but the seed, what is kept and the theorykit version), so an interrupted or extended run reuses
every seed already done; without it the rows go to a temporary file.
"""
from __future__ import annotations

import os
import time
from typing import Iterable, Optional, Sequence

import numpy as np

from ..cache import content_key
from ..errors import TheorykitError
from ..report.writer import log as _log

__all__ = ["run_sims", "cache_file", "stack", "zero_mean_covariates"]

#: the seed dicts' keys for the sweep's trajectory columns
_KEYS = {"overlap_t": ("overlap", float), "success_t": ("success", bool), "M_t": ("M", float),
         "gram_t": ("gram", float), "train_loss_t": ("train", float), "test_loss_t": ("test", float)}


def cache_file(cache: str, base: dict, keep=("full",)) -> str:
    """The sweep file of this setting (``base``: simulate's keyword arguments, delta included) in the folder
    ``cache``."""
    from ..version import __version__

    h = content_key({"simulate": {k: v for k, v in base.items() if k != "seed"}, "keep": sorted(keep),
                     "theorykit": __version__}, 12)
    return os.path.join(cache, f"sims_d{base.get('d')}_{h}.csv")


def run_sims(base: dict, seeds: Iterable[int], keep: Sequence[str] = ("full",), processes: int = 2, label: str = "",
             *, cache: Optional[str] = None, deadline: Optional[float] = None, progress: Optional[bool] = None,
             verbose: bool = True) -> list:
    """GD with ``base`` (simulate's keyword arguments, delta included) for every seed: :func:`theorykit.referee.sweep`
    over the one delta, keeping ``keep`` ("overlap" and/or "full").

    Returns one dict per seed that ran (in seed order): seed, status ("ok" / "diverged"), escape_time, steps, seconds
    and the kept arrays (overlap, success; M, gram, train, test = the population test loss, test_kind).  n_test
    defaults to 1 (the population test loss is used).  Seeds not started before ``deadline`` (a ``time.time()``
    value) are left out.  A run that raises is recorded as failed in the sweep's file and reported here as a
    TheorykitError (after every other seed ran, so a rerun resumes).
    """
    from ..referee.sweeps import failure_message, sweep

    t0 = time.perf_counter()
    keep = tuple(sorted(set(keep)))
    base = dict(base)
    base.setdefault("n_test", 1)  # the population test loss (or success only) is used: no test set to speak of
    delta = base.pop("delta")
    seeds = [int(s) for s in seeds]
    csv = None if cache is None else cache_file(cache, dict(base, delta=delta), keep)
    df = sweep([delta], seeds, processes=processes, csv=csv, progress=progress, quiet=True, keep=keep,
               label=f"sims {label}".strip(), deadline=deadline, **base)
    bad = failure_message(df)
    if bad:
        raise TheorykitError(f"{label + ': ' if label else ''}{bad}" + (f" (in {csv})" if csv else ""))
    res = []
    for rec in df.to_dict("records"):
        r = {"seed": int(rec["seed"]), "status": rec["status"], "steps": int(rec["steps_run"]) + 1,
             "escape_time": None if _missing(rec["escape_time"]) else int(rec["escape_time"]),
             "seconds": float(rec["seconds"])}
        for col, (key, typ) in _KEYS.items():
            if rec.get(col) is not None and not _missing(rec[col]):
                r[key] = np.asarray(rec[col], dtype=typ)
        if isinstance(rec.get("test_kind"), str):
            r["test_kind"] = rec["test_kind"]
        res.append(r)
    if verbose:
        summary = df.attrs["summary"]
        n_div = sum(r["status"] != "ok" for r in res)
        _log(f"  sims {label}: {len(seeds)} seeds, d = {base['d']}, {time.perf_counter() - t0:.0f} s"
             + (f" ({summary['skipped']} reused from {csv})" if summary["skipped"] else "")
             + (f", {n_div} diverged" if n_div else "")
             + (f", {len(summary['not_started'])} not started (deadline)" if summary["not_started"] else ""))
    return res


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and not np.isfinite(v))


def stack(sims: Sequence[dict], key: str) -> np.ndarray:
    """(seeds, T, ...) array of the per-seed trajectories ``key``, cut to the shortest run."""
    T = min(s["steps"] for s in sims)
    return np.stack([np.asarray(s[key])[:T] for s in sims])


def zero_mean_covariates(sims: Sequence[dict]) -> np.ndarray:
    """Per-seed control variates with an exactly known mean (0) at every d, for :func:`cv_mean`: train_0 - population
    test loss_0 (the data are independent of Theta(0), so E[train_0 | Theta(0)] = the population loss at Theta(0)),
    the upper triangle of gram_0 - I (Theta(0) ~ N(0, I/d)) and M_0.  Shape (S, 1 + m(m+1)/2 + q m)."""
    tr, te = stack(sims, "train")[:, 0], stack(sims, "test")[:, 0]
    g, M = stack(sims, "gram")[:, 0], stack(sims, "M")[:, 0]
    m = g.shape[-1]
    iu = np.triu_indices(m)
    return np.column_stack([tr - te, (g - np.eye(m)[None])[:, iu[0], iu[1]], M.reshape(len(sims), -1)])
