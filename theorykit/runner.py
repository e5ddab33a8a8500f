"""One resumable runner for every batch of independent jobs (simulator seeds, sweeps, comparison tables), and the
Wilson interval of the success fractions they measure.  Shared layer: it imports only theorykit.errors,
theorykit._checks and third-party packages, so both the referee (sweeps) and report/ and validation/ (tables) build
on it.

:func:`run_jobs` runs ``worker(**kwargs)`` for each job and appends one CSV row per job as it finishes, so an
interrupted run keeps what it did and the same call resumes it:

* the output is checked writable before anything is computed;
* the file starts with ``#`` lines recording the settings (JSON); resuming into a file written with other settings
  (or other columns) is refused;
* jobs whose key already has a row are skipped (a failed row is retried unless ``retry_failed=False``);
* the rest run in a process pool ('fork', one BLAS thread per process via threadpoolctl; ``processes=1`` runs them
  in this process), or as tasks on a Dask cluster (``scheduler=ADDRESS``: the distributed engine for sweeps beyond
  one machine), each row flushed here as it arrives;
* Ctrl-C terminates the pool at once (the rows written stay) and re-raises KeyboardInterrupt;
* a job that raises is recorded with ``status = "failed"`` and its one-line error, never dropped; the summary
  (``df.attrs["summary"]``) lists the failures;
* one progress bar on stderr (:class:`theorykit._checks.Progress`; default: when stderr is a terminal);
* the result is a pandas DataFrame, one row per job in job order.

File layout::

    # theorykit.validation.run_jobs: one row per job, appended as jobs finish; rerun the same call to resume
    # settings: {"columns": [...], "json_columns": [...], "settings": {...}}
    job,<columns...>,status,error,seconds
    ...

(The first line keeps the runner's former module path, ``theorykit.compare``, so files written before the move are
still resumed.)  Floats are written with ``repr`` (exact round trip); lists and arrays as JSON (decoded again for
``json_columns``).

:func:`wilson` is the Wilson score interval of k successes in n (used by ``theorykit.validation.stats.binomial`` and
``theorykit.referee.sweeps.summarise``).
"""
from __future__ import annotations

import csv
import io
from collections import Counter
import json
import math
import multiprocessing as mp
import os
import signal
import sys
import time
import contextlib
import uuid
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from ._checks import Progress
from .errors import TheorykitError

__all__ = ["run_jobs", "read_rows", "check_writable", "normalise", "wilson", "RUNNER_COLUMNS"]

#: first line of every runner file (the runner's former path: files written before it moved stay resumable)
MAGIC = "# theorykit.validation.run_jobs"
SETTINGS_PREFIX = "# settings: "
#: columns the runner adds after the caller's (unless the caller's list has them)
RUNNER_COLUMNS = ("status", "error", "seconds")
_INTERRUPTED = "__theorykit_interrupted__"
_SKIPPED = "__theorykit_deadline__"


# ------------------------------------------------------------------------------------------------ files
def check_writable(path: str) -> None:
    """Create the parent folder if needed and open ``path`` for appending (creating nothing else); a one-line
    TheorykitError if that fails.  A file this creates empty is removed again."""
    path = os.fspath(path)
    existed = os.path.exists(path)
    try:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        with open(path, "a"):
            pass
    except (FileExistsError, NotADirectoryError):
        blocker = os.path.dirname(os.path.abspath(path))
        while blocker and not os.path.exists(blocker) and blocker != os.path.dirname(blocker):
            blocker = os.path.dirname(blocker)
        raise TheorykitError(f"cannot write {path}: {blocker} is a file, not a folder") from None
    except OSError as exc:
        raise TheorykitError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not existed:
        os.remove(path)


def normalise(obj):
    """JSON round trip (tuples -> lists, numpy scalars -> numbers, anything else -> str) for comparing settings."""
    return json.loads(json.dumps(obj, sort_keys=True, default=_json_default))


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


def _header(columns, json_columns, settings) -> dict:
    return normalise({"columns": list(columns), "json_columns": list(json_columns), "settings": settings})


def recorded_settings(path: str) -> Optional[dict]:
    """The settings recorded in the header of a run_jobs file, or None (no such file, or no header)."""
    try:
        with open(path) as fh:
            for _, line in zip(range(4), fh):
                if line.startswith(SETTINGS_PREFIX):
                    return json.loads(line[len(SETTINGS_PREFIX):]).get("settings")
    except (OSError, ValueError):
        return None
    return None


def _read_file(path: str):
    """(recorded header dict or None, list of row dicts as strings, byte offset of the end of the last full line)."""
    with open(path, newline="") as fh:
        text = fh.read()
    if not text:
        return None, [], 0
    lines = text.split("\n")
    if not lines[0].startswith(MAGIC):
        raise TheorykitError(f"{path} exists and was not written by theorykit's resumable runner (run_jobs); "
                             f"refusing to append to it (choose another output path)")
    header, i = None, 0
    while i < len(lines) and lines[i].startswith("#"):
        if lines[i].startswith(SETTINGS_PREFIX):
            header = json.loads(lines[i][len(SETTINGS_PREFIX):])
        i += 1
    complete = text if text.endswith("\n") else text[:text.rfind("\n") + 1]  # a row cut by a kill is dropped
    body = "\n".join(complete.split("\n")[i:])
    rows = list(csv.DictReader(io.StringIO(body))) if body.strip() else []
    return header, rows, len(complete.encode())


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (np.integer, int)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, np.ndarray, dict)):
        return json.dumps(value.tolist() if isinstance(value, np.ndarray) else value, default=_json_default)
    return str(value)


def _parse(value: str):
    if value == "":
        return None
    if value in ("True", "False"):
        return value == "True"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _frame(rows: Sequence[dict], columns: Sequence[str], json_columns: Sequence[str], key_column: str,
           text_columns: Sequence[str]) -> pd.DataFrame:
    recs = []
    for r in rows:
        rec = {}
        for c in columns:
            v = r.get(c, "")
            v = "" if v is None else v
            if c in json_columns:
                rec[c] = json.loads(v) if v != "" else None
            elif c in text_columns:
                rec[c] = v
            else:
                rec[c] = _parse(v)
        recs.append(rec)
    return pd.DataFrame.from_records(recs, columns=list(columns))


def read_rows(path: str, json_columns: Sequence[str] = ()) -> pd.DataFrame:
    """All rows of a run_jobs file (the last row of each key), values parsed back; the recorded settings in
    ``df.attrs['settings']``."""
    header, rows, _ = _read_file(path)
    if header is None:
        raise TheorykitError(f"{path} has no recorded settings")
    key_column = header.get("key_column", "job")
    cols = [key_column] + _all_columns(header["columns"])
    last = {}
    for r in rows:
        last[r[key_column]] = r
    json_columns = list(json_columns) or header.get("json_columns", [])
    df = _frame(list(last.values()), cols, json_columns, key_column, [key_column, "status", "error"])
    df.attrs["settings"] = header.get("settings")
    return df


def _all_columns(columns: Sequence[str]) -> list:
    return list(columns) + [c for c in RUNNER_COLUMNS if c not in columns]


# ------------------------------------------------------------------------------------------------ workers
def _init_worker(blas_threads: Optional[int]):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business: it terminates the pool
    if blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=blas_threads, user_api="blas")


def _call(task):
    """Run one job; never raises (the error goes into the row)."""
    worker, key, kwargs, deadline = task
    if deadline is not None and time.time() > deadline:
        return key, _SKIPPED
    t0 = time.perf_counter()
    try:
        row = worker(**kwargs)
        if row is None:
            row = {}
        elif not isinstance(row, dict):
            raise TypeError(f"the worker returned {type(row).__name__}, not a dict of columns")
        row = dict(row)
        row.setdefault("status", "ok")
        row.setdefault("error", "")
    except KeyboardInterrupt:
        return key, _INTERRUPTED
    except Exception as exc:  # recorded, never swallowed
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        row = {"status": "failed", "error": f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__}
    row["seconds"] = round(time.perf_counter() - t0, 3)
    return key, row


def _call_limited(task, blas_threads):
    if blas_threads is None:
        return _call(task)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=blas_threads, user_api="blas"):
        return _call(task)


def _dask_client(scheduler):
    """(client, whether we opened it) for a scheduler address or a distributed.Client; one-line errors."""
    try:
        import distributed
    except ImportError:
        raise TheorykitError("running on a Dask scheduler needs dask[distributed]: pip install 'theorykit[dask]'") \
            from None
    if isinstance(scheduler, distributed.Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise TheorykitError(f"scheduler must be an address such as tcp://127.0.0.1:8786 or a distributed.Client, "
                             f"got {scheduler!r}")
    try:
        return distributed.Client(scheduler.strip(), timeout=DASK_CONNECT_TIMEOUT), True
    except (OSError, TimeoutError, ValueError) as e:
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise TheorykitError(f"cannot reach the Dask scheduler at {scheduler!r} within {DASK_CONNECT_TIMEOUT:g} s "
                             f"({msg[:160]})") from None


@contextlib.contextmanager
def _on_dask(scheduler):
    """(client, submit) for the block: ``submit(fn, *args)`` sends one task to the cluster and returns its future.
    When the block raises (Ctrl-C included) the unfinished futures are cancelled; a client opened here is closed."""
    client, opened = _dask_client(scheduler)
    futures: list = []

    def submit(fn, *args):
        futures.append(client.submit(fn, *args, pure=False, key=f"theorykit-{uuid.uuid4().hex}"))
        return futures[-1]
    try:
        yield client, submit
    except BaseException:
        client.cancel([f for f in futures if not f.done()])
        raise
    finally:
        if opened:
            client.close()


def _run_on_dask(scheduler, tasks, blas_threads, record):
    """Submit every task to the cluster and record each row as its task finishes (any order)."""
    import distributed

    with _on_dask(scheduler) as (_, submit):
        for fut in distributed.as_completed([submit(_call_limited, task, blas_threads) for task in tasks]):
            record(*fut.result())


#: seconds to wait for a Dask scheduler to answer
DASK_CONNECT_TIMEOUT = 20.0


def map_tasks(fn: Callable, items: Sequence, *, processes: int = 1, scheduler=None) -> list:
    """[fn(item) for item in items], in order: here (processes = 1), in local processes, or as tasks on a Dask
    cluster (``scheduler``: an address or a ``distributed.Client``; unfinished tasks are cancelled when one raises
    or on Ctrl-C).  For a few long, independent evaluations whose results the caller records itself (the optimiser's
    candidates); a sweep of many runs goes through :func:`run_jobs`, which also resumes from its file."""
    items = list(items)
    if scheduler is not None and items:
        with _on_dask(scheduler) as (_, submit):
            return [f.result() for f in [submit(fn, it) for it in items]]
    if processes > 1 and len(items) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(processes, len(items))) as ex:
            return list(ex.map(fn, items))
    return [fn(it) for it in items]


# ------------------------------------------------------------------------------------------------ the runner
def run_jobs(jobs: Iterable[dict], worker: Callable[..., dict], out: str, columns: Sequence[str], *,
             settings: Optional[dict] = None, processes: int = 2, json_columns: Sequence[str] = (),
             key_column: str = "job", retry_failed: bool = True, blas_threads: Optional[int] = 1,
             progress: Optional[bool] = None, label: str = "jobs", unit: str = "jobs",
             deadline: Optional[float] = None, quiet: bool = False, temporary: bool = False,
             scheduler=None) -> pd.DataFrame:
    """Run ``worker(**kwargs)`` for every job, appending one row per job to the CSV ``out``; resumable.

    jobs: dicts, each with a ``"key"`` entry (unique; written as text in column ``key_column``) and the worker's
        keyword arguments.
    worker: a top-level (picklable) function returning a dict of some of ``columns`` (missing ones are left empty;
        a ``status`` it returns is kept, e.g. "diverged"; default "ok").
    columns: the table's fixed columns (the runner adds ``key_column`` first and status, error, seconds last unless
        present).  ``json_columns``: columns holding lists/arrays, written as JSON and decoded when read back.
    settings: JSON-able record of everything that determines the rows; written in the file's header, and a file
        written with other settings or columns is refused (choose another path or delete it).
    processes: worker processes ('fork'; 1 = in this process).  blas_threads: BLAS threads per job (threadpoolctl;
        None leaves them alone).  deadline: a ``time.time()`` value after which no job is started (the ones not
        started are listed in the summary and run on resume).
    progress: the progress bar (:class:`theorykit._checks.Progress`, ``LABEL [###  ] i/n UNIT, k failed``) on
        stderr; None: when stderr is a terminal.  quiet: no line on stderr about failed jobs (the caller reports them).
        temporary: ``out`` is a scratch file the caller removes, so the Ctrl-C message does not offer to resume it.
    scheduler: a Dask scheduler's address ("tcp://host:8786") or a ``distributed.Client``: the jobs run as Dask tasks
        on that cluster's workers instead of local processes (``processes`` is then ignored); rows are written here as
        the tasks finish, so resuming, failures and Ctrl-C (which cancels the tasks not yet finished) work as locally.
        The workers need theorykit installed.  Needs ``dask[distributed]`` (``pip install theorykit[dask]``).
    Returns a DataFrame with one row per job in job order (values parsed back from the file) and
    ``df.attrs["summary"]`` = {"out", "jobs", "skipped", "ran", "failed": [{"key", "error"}], "not_started", "seconds"}.
    KeyboardInterrupt (Ctrl-C, or raised by a job) terminates the pool, keeps the rows written and is re-raised.
    """
    out = os.fspath(out)
    jobs = [dict(j) for j in jobs]
    keys = []
    for j in jobs:
        if "key" not in j:
            raise TheorykitError("every job needs a 'key' entry")
        keys.append(str(j.pop("key")))
    if len(set(keys)) != len(keys):
        dup = sorted(k for k, c in Counter(keys).items() if c > 1)
        raise TheorykitError(f"job keys must be unique; repeated: {dup[:5]}")
    columns = [c for c in columns if c != key_column]
    bad = [c for c in json_columns if c not in columns]
    if bad:
        raise TheorykitError(f"json_columns {bad} are not among the columns")
    all_cols = [key_column] + _all_columns(columns)
    text_cols = [key_column, "status", "error"]
    if processes < 1:
        raise TheorykitError(f"processes must be >= 1, got {processes}")
    header = _header(columns, json_columns, settings)
    header["key_column"] = key_column

    # (a) writable before computing; (b) recorded settings; (c) what is done
    check_writable(out)
    done = {}
    if os.path.exists(out) and os.path.getsize(out) > 0:
        recorded, rows, end = _read_file(out)
        if json.dumps(recorded, sort_keys=True) != json.dumps(header, sort_keys=True):  # (NaN-safe)
            diff = sorted(k for k in set(recorded or {}) | set(header)
                          if (recorded or {}).get(k) != header.get(k))
            sdiff = []
            if "settings" in diff and isinstance((recorded or {}).get("settings"), dict) \
                    and isinstance(header["settings"], dict):
                rs, hs = recorded["settings"], header["settings"]
                sdiff = sorted(k for k in set(rs) | set(hs) if rs.get(k) != hs.get(k))
            raise TheorykitError(f"{out} was written with other settings (differ in {', '.join(diff)}"
                                 + (f": {', '.join(sdiff[:8])}" if sdiff else "")
                                 + "); refusing to resume into it (use another output path, or delete it to start "
                                   "afresh)")
        if end != os.path.getsize(out):
            with open(out, "r+b") as fh:  # drop a row cut short by a kill
                fh.truncate(end)
        for r in rows:
            done[r[key_column]] = r
    else:
        with open(out, "w", newline="") as fh:
            fh.write(MAGIC + ": one row per job, appended as jobs finish; rerun the same call to resume\n")
            fh.write(SETTINGS_PREFIX + json.dumps(header, sort_keys=True) + "\n")
            csv.writer(fh, lineterminator="\n").writerow(all_cols)

    todo = [(k, j) for k, j in zip(keys, jobs)
            if k not in done or (retry_failed and done[k].get("status") == "failed")]
    skipped = len(jobs) - len(todo)
    t0 = time.perf_counter()
    failed, not_started, ran = [], [], 0
    show = (sys.stderr.isatty() if progress is None else bool(progress)) and len(todo) > 0
    bar = Progress(len(todo), label=label, unit=unit) if show else None

    def tick(final: bool = False):
        if bar is not None:
            bar.unit = unit + (f", {len(failed)} failed" if failed else "")
            if final:
                bar.close(ran)
            else:
                bar.update(ran)

    with open(out, "a", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")

        def record(key, row):
            nonlocal ran
            if row == _SKIPPED:
                not_started.append(key)
                return
            if row == _INTERRUPTED:
                raise KeyboardInterrupt
            extra = sorted(set(row) - set(all_cols))
            if extra:
                row = {"status": "failed", "seconds": row.get("seconds"),
                       "error": f"TheorykitError: the worker returned columns not in the table: {extra}"}
            cells = {c: _cell(row.get(c)) for c in all_cols}
            cells[key_column] = key
            cells["error"] = cells["error"].replace("\n", " ")
            writer.writerow([cells[c] for c in all_cols])
            fh.flush()
            done[key] = cells
            ran += 1
            if cells["status"] == "failed":
                failed.append({"key": key, "error": cells["error"]})
            tick()

        tasks = [(worker, k, j, deadline) for k, j in todo]
        nproc = min(processes, len(tasks))
        try:
            if scheduler is not None and tasks:
                _run_on_dask(scheduler, tasks, blas_threads, record)
            elif nproc <= 1:
                for task in tasks:
                    record(*_call_limited(task, blas_threads))
            else:
                ctx = mp.get_context("fork")
                pool = ctx.Pool(nproc, initializer=_init_worker, initargs=(blas_threads,))
                try:
                    for key, row in pool.imap_unordered(_call, tasks, chunksize=1):
                        record(key, row)
                    pool.close()
                except BaseException:
                    pool.terminate()
                    raise
                finally:
                    pool.join()
        except KeyboardInterrupt:
            tick(final=True)
            if temporary:
                sys.stderr.write(f"interrupted: {len(done)} of {len(jobs)} jobs done\n")
            else:
                sys.stderr.write(f"interrupted: {ran} new rows kept in {out} ({len(done)} of {len(jobs)} jobs done); "
                                 f"rerun the same command to resume\n")
            raise
        tick(final=True)

    failed = [{"key": k, "error": done[k].get("error", "")} for k in keys
              if k in done and done[k].get("status") == "failed"]
    summary = {"out": out, "jobs": len(jobs), "skipped": skipped, "ran": ran, "failed": failed,
               "not_started": not_started, "seconds": round(time.perf_counter() - t0, 3)}
    if failed and not quiet:
        where = "" if temporary else f" (recorded in {out})"
        sys.stderr.write(f"{label}: {len(failed)} of {len(jobs)} jobs failed{where}; first: "
                         f"{failed[0]['key']}: {failed[0]['error']}\n")
    df = _frame([done[k] for k in keys if k in done], all_cols, json_columns, key_column, text_cols)
    df.attrs["summary"] = summary
    df.attrs["settings"] = settings
    return df


# ------------------------------------------------------------------------------------------------ proportions
def wilson(k: int, n: int, level: float = 0.95) -> tuple:
    """Wilson score interval (low, high) of k successes in n trials at ``level`` ((nan, nan) when n = 0).

    With z the two-sided normal quantile of ``level`` (1.959964 at 0.95) and p = k/n: centre (p + z^2/(2n)) / (1 +
    z^2/n), half-width z sqrt(p(1-p)/n + z^2/(4n^2)) / (1 + z^2/n).  Unlike p +- z se it stays inside [0, 1] and is not
    empty at p = 0 or 1: for k = 0 it is exactly [0, z^2/(n + z^2)], for k = n exactly [n/(n + z^2), 1].
    """
    from scipy.stats import norm

    k, n = int(k), int(n)
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k = {k}, n = {n}")
    if n == 0:
        return float("nan"), float("nan")
    if not 0 < level < 1:
        raise ValueError(f"wilson: level must be in (0, 1), got {level}")
    p = k / n
    z = float(norm.ppf(0.5 + level / 2))
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    low = 0.0 if k == 0 else max(centre - half, 0.0)
    high = 1.0 if k == n else min(centre + half, 1.0)
    return low, high
