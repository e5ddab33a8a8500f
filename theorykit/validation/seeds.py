"""The simulator seed runner of the comparison tables: GD (``theorykit.simulate``) at one setting for many seeds, on
the resumable runner (:func:`theorykit.runner.run_jobs`).

With ``cache=DIR`` the per-seed results (status, escape time, and the trajectories asked for) are appended to
``DIR/sims_d<d>_<hash>.csv`` (the hash covers every simulate argument but the seed, what is kept and the theorykit
version), so an interrupted or extended run reuses every seed already done; without it they go to a temporary file.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Iterable, Optional, Sequence

import numpy as np

from ..cache import content_key
from ..errors import TheorykitError
from ..runner import normalise, run_jobs
from ..report.writer import log as _log

__all__ = ["run_sims", "gd_run", "stack", "zero_mean_covariates", "has_population_test_loss", "SIM_COLUMNS"]

#: columns of a seed-runner file (trajectories as JSON)
SIM_COLUMNS = ["seed", "status", "escape_time", "steps", "overlap", "success", "M", "gram", "train", "test",
               "test_kind"]
_JSON = ["overlap", "success", "M", "gram", "train", "test"]
_ARRAYS = {"overlap": float, "success": bool, "M": float, "gram": float, "train": float, "test": float}


def has_population_test_loss() -> bool:
    """Whether the simulator's result has the population test loss (a property, not a dataclass field)."""
    from ..referee import SimulationResult

    return hasattr(SimulationResult, "population_test_loss")


def gd_run(sim: dict, keep: Sequence[str] = ("full",)) -> dict:
    """One simulator run (the runner's worker): ``tk.simulate(**sim)``; keeps status, escape_time, steps, and with
    "overlap" in ``keep`` the hard overlap and success per step, with "full" M, gram, train and test loss per step
    (test = the population test loss when the simulator has one, else the fresh-test-set average)."""
    from ..referee import simulate

    r = simulate(**sim)
    out = {"seed": sim.get("seed"), "status": r.status, "escape_time": r.escape_time, "steps": len(r.t)}
    if "overlap" in keep:
        out["overlap"] = np.asarray(r.overlap)
        out["success"] = np.asarray(r.success)
    if "full" in keep:
        pop = getattr(r, "population_test_loss", None)
        out.update(M=np.asarray(r.M), gram=np.asarray(r.gram), train=np.asarray(r.train_loss),
                   test=np.asarray(pop if pop is not None else r.test_loss),
                   test_kind=("population" if pop is not None else "fresh test set"))
    return out


def _settings(base: dict, keep) -> dict:
    from ..version import __version__

    return normalise({"simulate": {k: v for k, v in base.items() if k != "seed"}, "keep": sorted(keep),
                       "theorykit": __version__})


def cache_file(cache: str, base: dict, keep=("full",)) -> str:
    """The runner file of this setting in the folder ``cache``."""
    h = content_key(_settings(base, keep), 12)
    return os.path.join(cache, f"sims_d{base.get('d')}_{h}.csv")


def run_sims(base: dict, seeds: Iterable[int], keep: Sequence[str] = ("full",), processes: int = 2, label: str = "",
             *, cache: Optional[str] = None, deadline: Optional[float] = None, progress: Optional[bool] = None,
             verbose: bool = True) -> list:
    """Run the simulator with ``base`` (simulate's keyword arguments) for every seed, in parallel, resumably.

    Returns one dict per seed that ran (in seed order): seed, status ("ok" / "diverged"), escape_time, steps, seconds
    and the kept arrays (overlap, success; M, gram, train, test, test_kind).  n_test defaults to 1 (the population test
    loss, or success only, is used).  Seeds not started before ``deadline`` (a ``time.time()`` value) are left out.
    A run that raises is recorded in the file and then reported here as a TheorykitError (after every other seed
    ran, so a rerun resumes).
    """
    t0 = time.perf_counter()
    keep = tuple(keep)
    base = dict(base)
    if "full" not in keep or has_population_test_loss():
        base.setdefault("n_test", 1)  # the population test loss (or success only) is used: no fresh test set
    seeds = [int(s) for s in seeds]
    jobs = [{"key": f"seed={s}", "sim": dict(base, seed=s), "keep": keep} for s in seeds]
    tmp = None
    if cache is None:
        tmp = tempfile.mkdtemp(prefix="theorykit_sims_")
        out = os.path.join(tmp, "sims.csv")
    else:
        out = cache_file(cache, base, keep)
    try:
        df = run_jobs(jobs, gd_run, out, SIM_COLUMNS, settings=_settings(base, keep), processes=processes,
                      json_columns=_JSON, progress=progress, label=f"sims {label}".strip(), deadline=deadline,
                      quiet=True)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = df.attrs["summary"]
    if summary["failed"]:
        f = summary["failed"]
        raise TheorykitError(f"{len(f)} of {len(seeds)} simulator runs failed ({label}; recorded in {out}); first "
                             f"{f[0]['key']}: {f[0]['error']}")
    res = []
    for rec in df.to_dict("records"):
        r = {"seed": int(rec["seed"]), "status": rec["status"], "steps": int(rec["steps"]),
             "escape_time": None if _missing(rec["escape_time"]) else int(rec["escape_time"]),
             "seconds": float(rec["seconds"])}
        for k, typ in _ARRAYS.items():
            if rec.get(k) is not None:
                r[k] = np.asarray(rec[k], dtype=typ)
        if isinstance(rec.get("test_kind"), str):
            r["test_kind"] = rec["test_kind"]
        res.append(r)
    if verbose:
        bad = sum(r["status"] != "ok" for r in res)
        _log(f"  sims {label}: {len(seeds)} seeds, d = {base['d']}, {time.perf_counter() - t0:.0f} s"
             + (f" ({summary['skipped']} reused from {out})" if summary["skipped"] else "")
             + (f", {bad} diverged" if bad else "")
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
