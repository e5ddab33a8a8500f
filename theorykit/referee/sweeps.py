"""Success probability of finite-d GD versus delta, over seeds, in parallel processes.

Every (delta, seed) pair is one call of :func:`theorykit.simulate` with exactly that seed (no hidden
reseeding: the seed is recorded on its row).  A run that raises is recorded with status "failed" and its one-line
error, never dropped; a diverged run keeps status "diverged".  Results come back as a pandas DataFrame (one row per
run) and, with ``csv=PATH``, are saved as CSV whose ``#`` header lines record every setting as JSON.
Summaries (:func:`summarise`) give the success fraction per delta with its binomial standard error, counting only
runs that completed ("ok").
"""
from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import TheorykitError

COLUMNS = ["delta", "seed", "status", "success", "escape_time", "final_overlap", "max_overlap", "final_train_loss",
           "final_test_loss", "steps_run", "seconds", "error"]


def _run_one(delta: float, seed: int, kwargs: dict) -> dict:
    from .gd import simulate

    t0 = time.time()
    row = {"delta": float(delta), "seed": int(seed)}
    try:
        res = simulate(delta=float(delta), seed=int(seed), **kwargs)
        row.update(status=res.status, success=bool(res.escape_time is not None),
                   escape_time=res.escape_time, final_overlap=float(res.overlap[-1]),
                   max_overlap=float(np.max(res.overlap)), final_train_loss=float(res.train_loss[-1]),
                   final_test_loss=float(res.test_loss[-1]), steps_run=int(len(res.t) - 1), error="")
    except Exception as e:  # recorded, never swallowed: the row says failed and why
        msg = str(e).splitlines()[0] if str(e) else ""
        row.update(status="failed", success=None, escape_time=None, final_overlap=None, max_overlap=None,
                   final_train_loss=None, final_test_loss=None, steps_run=None,
                   error=f"{type(e).__name__}: {msg}")
    row["seconds"] = round(time.time() - t0, 3)
    return row


class _Bar:
    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.t0 = total, enabled, time.time()

    def show(self, done: int, failed: int):
        if not self.enabled:
            return
        frac = done / max(self.total, 1)
        el = time.time() - self.t0
        eta = el / frac - el if frac > 0 else float("nan")
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        sys.stderr.write(f"\rsweep [{bar}] {done}/{self.total} runs, {failed} failed, {el:.0f}s elapsed"
                         + (f", ~{eta:.0f}s left" if done else "") + " ")
        sys.stderr.flush()
        if done == self.total:
            sys.stderr.write("\n")


def sweep(deltas: Sequence[float], seeds: Iterable[int], *, processes: Optional[int] = None,
          csv: Optional[str] = None, progress: Optional[bool] = None, **simulate_kwargs) -> pd.DataFrame:
    """Run :func:`simulate` for every delta in ``deltas`` and seed in ``seeds`` (same seeds at every delta).

    simulate_kwargs: every other argument of simulate (activation, link, loss, width, d, steps, eta, ...).
    processes: worker processes (default: the number of CPUs, at most the number of runs; 1 runs in-process).
    Returns a DataFrame with columns :data:`COLUMNS` sorted by (delta, seed); ``df.attrs["settings"]`` holds the
    settings written to the CSV header.
    """
    deltas = [float(x) for x in deltas]
    seeds = [int(s) for s in seeds]
    if not deltas or not seeds:
        raise TheorykitError("a sweep needs at least one delta and one seed")
    if any(not math.isfinite(x) or x <= 0 for x in deltas):
        raise TheorykitError(f"every delta must be a positive number, got {deltas}")
    for key in ("delta", "seed", "progress"):
        if key in simulate_kwargs:
            raise TheorykitError(f"'{key}' is set by the sweep itself")
    tasks = [(dl, s) for dl in deltas for s in seeds]
    # validate the settings once, in-process, so a typo fails fast with its own message
    from .gd import simulate  # noqa: F401

    processes = min(processes or os.cpu_count() or 1, len(tasks))
    if processes < 1:
        raise TheorykitError("processes must be >= 1")
    bar = _Bar(len(tasks), sys.stderr.isatty() if progress is None else progress)
    rows, failed = [], 0
    if processes == 1:
        for dl, s in tasks:
            rows.append(_run_one(dl, s, simulate_kwargs))
            failed += rows[-1]["status"] == "failed"
            bar.show(len(rows), failed)
    else:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
        with ProcessPoolExecutor(max_workers=processes, mp_context=ctx) as ex:
            futs = [ex.submit(_run_one, dl, s, simulate_kwargs) for dl, s in tasks]
            for f in as_completed(futs):
                rows.append(f.result())
                failed += rows[-1]["status"] == "failed"
                bar.show(len(rows), failed)
    df = pd.DataFrame(rows, columns=COLUMNS).sort_values(["delta", "seed"]).reset_index(drop=True)
    settings = {"simulate": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                             for k, v in simulate_kwargs.items()},
                "deltas": deltas, "seeds": seeds, "processes": processes,
                "success": "hard overlap > 0.5 at some recorded step (escape_time not None)"}
    df.attrs["settings"] = settings
    if failed:
        first = df[df.status == "failed"].iloc[0]
        sys.stderr.write(f"theorykit sweep: {failed} of {len(tasks)} runs failed (recorded as failed); first: "
                         f"delta={first.delta}, seed={first.seed}: {first.error}\n")
    if csv:
        write_csv(df, csv)
    return df


def write_csv(df: pd.DataFrame, path: str) -> None:
    """CSV with '# settings: {json}' header lines, readable back by :func:`read_csv`."""
    with open(path, "w") as fh:
        fh.write("# theorykit sweep\n")
        fh.write("# settings: " + json.dumps(df.attrs.get("settings", {}), sort_keys=True) + "\n")
        df.to_csv(fh, index=False)


def read_csv(path: str) -> pd.DataFrame:
    """Read a sweep CSV written by :func:`write_csv`; the settings come back in ``df.attrs['settings']``."""
    settings = {}
    with open(path) as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            if line.startswith("# settings: "):
                settings = json.loads(line[len("# settings: "):])
    df = pd.read_csv(path, comment="#", converters={"error": str, "status": str})
    df.attrs["settings"] = settings
    return df


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per delta: runs, ok, diverged, failed, success fraction among ok runs and its binomial standard error."""
    out = []
    for dl, g in df.groupby("delta"):
        ok = g[g.status == "ok"]
        p = float(ok.success.astype(bool).mean()) if len(ok) else float("nan")
        se = math.sqrt(p * (1 - p) / len(ok)) if len(ok) else float("nan")
        out.append({"delta": dl, "runs": len(g), "ok": len(ok), "diverged": int((g.status == "diverged").sum()),
                    "failed": int((g.status == "failed").sum()), "success_probability": p, "stderr": se,
                    "median_escape_time": float(ok.escape_time.dropna().median()) if len(ok) else float("nan")})
    return pd.DataFrame(out)
