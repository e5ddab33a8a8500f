"""Success probability of finite-d GD versus delta, over seeds, in parallel processes, on the resumable runner
(:func:`theorykit.runner.run_jobs`).

Every (delta, seed) pair is one call of :func:`theorykit.simulate` with exactly that seed (no hidden
reseeding: the seed is recorded on its row).  A run that raises is recorded with status "failed" and its one-line
error, never dropped; a diverged run keeps status "diverged".  Results come back as a pandas DataFrame (one row per
run).  With ``csv=PATH`` no work is lost:

* PATH is checked writable before anything is computed;
* its ``#`` header lines record every setting as JSON, and each row is appended as its run finishes;
* rerunning the same sweep resumes it: runs with a row in PATH are not computed again (failed ones are retried);
  the same settings with other deltas or seeds extend it (a row is one (delta, seed) run; the rows returned are
  those asked for); a PATH written with other settings (simulate's arguments, what is kept) is refused;
* Ctrl-C stops the worker processes at once; the rows written stay, ready to resume.

With ``keep`` each row also holds the run's trajectories (JSON arrays, :data:`TRAJECTORIES`): "overlap" the hard
overlap and success per step, "full" the overlaps M_t, gram_t, train loss and population test loss per step.  This
is the one seed runner: the validation studies call it too (``theorykit.validation.seeds.run_sims``).

Summaries (:func:`summarise`) give the success fraction per delta with its binomial standard error and Wilson 95%
interval: successes / (ok + diverged) runs (a diverged run is a run that did not succeed); failed runs (errors) are
excluded from the fraction and reported in their own column.
"""
from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import TheorykitError
from ..runner import read_rows, recorded_settings, run_jobs, wilson

__all__ = ["sweep", "summarise", "read_csv", "failure_message", "columns", "COLUMNS", "SUMMARY_COLUMNS",
           "TRAJECTORIES"]

COLUMNS = ["delta", "seed", "status", "success", "escape_time", "final_overlap", "max_overlap", "final_train_loss",
           "final_test_loss", "steps_run", "seconds", "error"]
#: float columns (NaN where a run left them empty: no escape, or a failed run)
_FLOATS = ["escape_time", "final_overlap", "max_overlap", "final_train_loss", "final_test_loss"]
SUMMARY_COLUMNS = ["delta", "runs", "ok", "diverged", "failed", "successes", "success_probability", "stderr", "low",
                   "high", "median_escape_time"]
SUCCESS = "hard overlap > 0.5 at some recorded step (escape_time not None)"
#: what ``keep`` may ask for, and the trajectory columns (JSON arrays, one entry per recorded step) each adds
TRAJECTORIES = {"overlap": ["overlap_t", "success_t"],
                "full": ["M_t", "gram_t", "train_loss_t", "test_loss_t", "test_kind"]}
TEST_KIND = "population test loss (exact expectation over a fresh sample given M_t, gram_t)"


def check_keep(keep) -> tuple:
    """``keep`` as a sorted tuple of TRAJECTORIES' keys (one-line error otherwise)."""
    keep = (keep,) if isinstance(keep, str) else tuple(keep or ())
    bad = [k for k in keep if k not in TRAJECTORIES]
    if bad:
        raise TheorykitError(f"keep: unknown trajectory {bad[0]!r}; choose from {', '.join(TRAJECTORIES)}")
    return tuple(sorted(set(keep)))


def columns(keep=()) -> list:
    """The sweep's columns: :data:`COLUMNS` and the trajectory columns of ``keep``."""
    return COLUMNS + [c for k in check_keep(keep) for c in TRAJECTORIES[k]]


def _trajectories(res, keep) -> dict:
    out: dict[str, Any] = {}
    if "overlap" in keep:
        out.update(overlap_t=np.asarray(res.overlap, dtype=float), success_t=np.asarray(res.success, dtype=bool))
    if "full" in keep:
        out.update(M_t=np.asarray(res.M), gram_t=np.asarray(res.gram), train_loss_t=np.asarray(res.train_loss),
                   test_loss_t=np.asarray(res.population_test_loss), test_kind=TEST_KIND)
    return out


def _run_one(delta: float, seed: int, kwargs: dict, keep: tuple = ()) -> dict:
    """One run (the runner's worker): the row of simulate(delta, seed, **kwargs) (with the trajectories of
    ``keep``), or a failed row with its error."""
    from .gd import simulate

    t0 = time.time()
    row: dict[str, Any] = {"delta": float(delta), "seed": int(seed)}
    try:
        if kwargs.get("problem") is not None:  # sweep(problem=...): the Problem at this delta
            rest = {k: v for k, v in kwargs.items() if k != "problem"}
            res = simulate(kwargs["problem"].replace(delta=float(delta)), seed=int(seed), **rest)
        else:
            res = simulate(delta=float(delta), seed=int(seed), **kwargs)
        row.update(status=res.status, success=bool(res.escape_time is not None),
                   escape_time=res.escape_time, final_overlap=float(res.overlap[-1]),
                   max_overlap=float(np.max(res.overlap)), final_train_loss=float(res.train_loss[-1]),
                   final_test_loss=float(res.test_loss[-1]), steps_run=int(len(res.t) - 1), error="",
                   **_trajectories(res, keep))
    except Exception as e:  # recorded, never swallowed: the row says failed and why
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        row.update(status="failed", success=None, escape_time=None, final_overlap=None, max_overlap=None,
                   final_train_loss=None, final_test_loss=None, steps_run=None,
                   error=f"{type(e).__name__}: {msg}" if msg else type(e).__name__)
    row["seconds"] = round(time.time() - t0, 3)
    return row


def _refuse_duplicates(name: str, values: list) -> None:
    dup = sorted(v for v, c in Counter(values).items() if c > 1)
    if dup:
        raise TheorykitError(f"{name} repeat {dup[:5]}: a repeated {name[:-1]} would count its runs twice; "
                             f"give each once")


def _settings(simulate_kwargs: dict, keep: tuple = ()) -> dict:
    """What determines each (delta, seed) row (recorded in the CSV header; resuming with other settings is
    refused; other deltas and seeds only add rows)."""
    from ..problem import Problem

    def text(v):
        if isinstance(v, Problem):  # the Problem's canonical form (its delta is replaced per row)
            return v.as_dict()
        return v if isinstance(v, (int, float, str, bool, type(None))) else str(v)

    out = {"simulate": {k: text(v) for k, v in simulate_kwargs.items()}, "success": SUCCESS}
    if keep:
        out["keep"] = list(keep)
    return out


def _table(df: pd.DataFrame, keep: tuple = ()) -> pd.DataFrame:
    """The runner's frame as the sweep's: :func:`columns` in (delta, seed) order, floats as floats (NaN when
    empty)."""
    df = df.reindex(columns=columns(keep)).copy()
    for c in _FLOATS:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    df["delta"] = df["delta"].astype(float)
    df["error"] = df["error"].fillna("").astype(str)
    return df.sort_values(["delta", "seed"]).reset_index(drop=True)


def failure_message(df: pd.DataFrame) -> Optional[str]:
    """One line naming how many runs of a sweep failed and the first error; None when none failed."""
    bad = df[df.status == "failed"]
    if not len(bad):
        return None
    first = bad.iloc[0]
    return (f"theorykit sweep: {len(bad)} of {len(df)} runs failed (recorded as failed); first: "
            f"delta={first.delta}, seed={first.seed}: {first.error}")


def sweep(deltas: Sequence[float], seeds: Iterable[int], *, processes: Optional[int] = None,
          csv: Optional[str] = None, progress: Optional[bool] = None, quiet: bool = False, scheduler=None,
          keep: Sequence[str] = (), label: str = "sweep", deadline: Optional[float] = None,
          **simulate_kwargs) -> pd.DataFrame:
    """Run :func:`simulate` for every delta in ``deltas`` and seed in ``seeds`` (same seeds at every delta).

    Each row is one finite-d GD run of docs/theory.md §7 ("Scans"); :func:`theorykit.referee.summarise` turns the
    rows into the success fraction per delta, successes / (ok + diverged) runs, with its binomial standard error.

    Parameters
    ----------
    deltas : sequence of float
        Positive sample ratios.  Deltas and seeds must each be given once (a repeat would count its runs twice).
    seeds : iterable of int
        The seeds, the same at every delta.
    processes : int, optional
        Worker processes (default: the number of CPUs, at most the number of runs; 1 runs in-process).
    csv : str, optional
        A file the rows are appended to as runs finish (checked writable first; settings in its ``#`` header).  If
        it already holds rows with these settings (any deltas and seeds), only the missing runs (and the failed
        ones) are computed; a file written with other settings (simulate's arguments, keep) is refused.  Without
        it the runs go to a temporary file, removed afterwards.
    progress : bool, optional
        One progress bar on stderr (default: when stderr is a terminal).
    quiet : bool
        No line on stderr about failed runs (the caller reports them, e.g. the CLI).
    scheduler : str or distributed.Client, optional
        A Dask scheduler address ("tcp://host:8786") or a ``distributed.Client``: the runs go to that cluster's
        workers as tasks, one per run, single-threaded (``processes`` is ignored); rows, resuming and the CSV are as
        with local processes (the scheduler is not part of the settings, so a sweep started locally resumes on a
        cluster and back).
    keep : sequence of str
        Trajectories each row also holds (JSON arrays over the recorded steps, :data:`TRAJECTORIES`): "overlap"
        (overlap_t, success_t), "full" (M_t, gram_t, train_loss_t, test_loss_t = the population test loss).
    label : str
        The progress bar's label.
    deadline : float, optional
        A ``time.time()`` value after which no run is started (those runs have no row; a rerun does them).
    **simulate_kwargs
        Every other argument of simulate (activation, link, loss, width, d, steps, eta, ...), or ``problem=`` a
        :class:`theorykit.Problem` (its delta is replaced by each of ``deltas``) with simulate's numeric settings
        (d, init, ...).

    Returns
    -------
    pandas.DataFrame
        One row per (delta, seed), with columns :data:`COLUMNS` (delta, seed, status, success, escape_time,
        final_overlap, max_overlap, final_train_loss, final_test_loss, steps_run, seconds, error) sorted by
        (delta, seed), then the trajectory columns of ``keep``; ``df.attrs["settings"]`` holds the settings written
        to the CSV header (plus ``processes``), ``df.attrs["summary"]`` the runner's account (rows reused, run,
        failed, not started).
        A sweep in which every run failed is returned like any other (every row says why); the ``theorykit sweep``
        command exits with status 2 on it.

    Raises
    ------
    TheorykitError
        Deltas that are not positive numbers, seeds that are not integers, an empty grid, a repeated delta or seed,
        an unknown ``keep``, a csv written with other settings.
    KeyboardInterrupt
        Ctrl-C stops the workers at once and re-raises KeyboardInterrupt; the rows written to ``csv`` stay.

    Examples
    --------
    >>> import theorykit as tk
    >>> p = tk.Problem("gelu", "phase-retrieval", delta=2, eta=0.5, steps=5)
    >>> df = tk.sweep([2.0, 4.0], [0, 1], problem=p, d=50, processes=1, quiet=True)
    >>> len(df), df["delta"].tolist()
    (4, [2.0, 2.0, 4.0, 4.0])
    """
    try:
        deltas = [float(x) for x in deltas]
        seeds = [s for s in seeds]
        if any(isinstance(s, bool) or not float(s).is_integer() for s in seeds):
            raise ValueError
        seeds = [int(s) for s in seeds]
    except (TypeError, ValueError):
        raise TheorykitError("deltas must be numbers and seeds integers") from None
    if not deltas or not seeds:
        raise TheorykitError("a sweep needs at least one delta and one seed")
    if any(not math.isfinite(x) or x <= 0 for x in deltas):
        raise TheorykitError(f"every delta must be a positive number, got {deltas}")
    _refuse_duplicates("deltas", deltas)
    _refuse_duplicates("seeds", seeds)
    keep = check_keep(keep)
    for key in ("delta", "seed", "progress"):
        if key in simulate_kwargs:
            raise TheorykitError(f"'{key}' is set by the sweep itself")
    # choices that every run would refuse alike are refused once, before any run starts
    from .gd import check_kernel, check_storage, check_test_set

    if "storage" in simulate_kwargs:
        check_storage(simulate_kwargs["storage"])
    if "test_set" in simulate_kwargs:
        check_test_set(simulate_kwargs["test_set"])
    if "kernel" in simulate_kwargs:
        check_kernel(simulate_kwargs["kernel"])
    if simulate_kwargs.get("problem") is not None:
        from ..problem import Problem

        if not isinstance(simulate_kwargs["problem"], Problem):
            raise TheorykitError(f"problem must be a theorykit.Problem, "
                                 f"got {type(simulate_kwargs['problem']).__name__}")
    n_jobs = len(deltas) * len(seeds)
    processes = min(processes or os.cpu_count() or 1, n_jobs)
    if processes < 1:
        raise TheorykitError("processes must be >= 1")
    # the fused GD kernel's threads: the CPUs shared among the workers (the numbers do not depend on it)
    # (on a Dask cluster every worker thread runs one task: one thread each)
    run_kwargs = {"threads": 1 if scheduler is not None else max(1, (os.cpu_count() or 1) // processes),
                  **simulate_kwargs}
    jobs = [{"key": f"delta={dl!r},seed={s}", "delta": dl, "seed": s, "kwargs": run_kwargs, "keep": keep}
            for dl in deltas for s in seeds]
    settings = _settings(simulate_kwargs, keep)
    if csv:
        old = recorded_settings(os.fspath(csv))
        if isinstance(old, dict) and "deltas" in old and "seeds" in old:
            # a file of the earlier format records its deltas and seeds: it resumes with exactly those, as before
            settings = {**settings, "deltas": deltas, "seeds": seeds}
    tmp = None
    if csv:
        out = os.fspath(csv)
    else:
        tmp = tempfile.mkdtemp(prefix="theorykit_sweep_")
        out = os.path.join(tmp, "sweep.csv")
    try:
        df = run_jobs(jobs, _run_one, out, columns(keep), settings=settings, processes=processes,
                      json_columns=[c for k in keep for c in TRAJECTORIES[k] if c != "test_kind"],
                      progress=progress, label=label, unit="runs", quiet=True, temporary=tmp is not None,
                      scheduler=scheduler, deadline=deadline)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = df.attrs["summary"]
    df = _table(df, keep)
    df.attrs["settings"] = {**settings, "deltas": deltas, "seeds": seeds, "processes": processes}
    df.attrs["summary"] = summary
    msg = failure_message(df)
    if msg and not quiet:
        sys.stderr.write(msg + "\n")
    return df


def read_csv(path: str) -> pd.DataFrame:
    """Read a sweep CSV (written by :func:`sweep`, or by its earlier one-shot writer); the columns :data:`COLUMNS`
    sorted by (delta, seed), the settings in ``df.attrs['settings']``."""
    import json

    with open(path) as fh:
        first = fh.readline()
    if first.startswith("# theorykit sweep"):  # the earlier format: written once at the end of a sweep
        settings = {}
        with open(path) as fh:
            for line in fh:
                if not line.startswith("#"):
                    break
                if line.startswith("# settings: "):
                    settings = json.loads(line[len("# settings: "):])
        df = pd.read_csv(path, comment="#", converters={"error": str, "status": str})
    else:
        df = read_rows(path)
        settings = df.attrs.get("settings") or {}
    df = _table(df, tuple(settings.get("keep", ())))
    df.attrs["settings"] = settings
    return df


def summarise(df: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per delta: runs, ok, diverged, failed, successes, success_probability, stderr, low, high, median_escape_time.

    success_probability = successes / (ok + diverged): a diverged run counts as a run that did not succeed; failed runs
    (errors: no result) are excluded from it and counted in ``failed``.  stderr = sqrt(p(1-p)/n) (binomial, n = ok +
    diverged); [low, high] = the Wilson score interval at ``level`` (:func:`theorykit.runner.wilson`: not empty at p =
    0 or 1); median_escape_time over the ok runs that escaped.  All NaN for a delta whose every run failed.
    """
    out = []
    for dl, g in df.groupby("delta"):
        ok = g[g.status == "ok"]
        n_div = int((g.status == "diverged").sum())
        n = len(ok) + n_div
        k = int(ok.success.astype(bool).sum()) if len(ok) else 0
        p = k / n if n else float("nan")
        se = math.sqrt(p * (1 - p) / n) if n else float("nan")
        low, high = wilson(k, n, level)
        esc = pd.to_numeric(ok.escape_time, errors="coerce").dropna()
        out.append({"delta": dl, "runs": len(g), "ok": len(ok), "diverged": n_div,
                    "failed": int((g.status == "failed").sum()), "successes": k, "success_probability": p,
                    "stderr": se, "low": low, "high": high,
                    "median_escape_time": float(esc.median()) if len(esc) else float("nan")})
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)
