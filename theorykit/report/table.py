"""``theorykit table``: one row per setting (activation x loss x width x link), one value per requested column, each
with its error and how it was obtained, cached cell by cell so that an interrupted table resumes where it stopped.

Columns (``--columns``, comma-separated; parameters after ``@``, separated by ``:``):

* ``delta_alg``: the link's weak-recovery threshold (docs/theory.md §2), exact where SymPy finds it;
* ``delta_star@t=T`` (or ``delta_star@t=T:d=D``, the law of D truncated at n = delta D, needed where D is unbounded
  below): the spectral threshold at GD time T (docs/theory.md §5, :func:`theorykit.delta_star`), with its replica
  standard error; infinite (with the reason) where the Hessian is PSD almost surely;
* ``delta_nn@T=T`` (or ``delta_nn@T=T:d=D``): lim delta*(t) on a geometric grid up to T (:func:`theorykit.delta_nn`), \
with its convergence
  verdict (a lower bound when not converged);
* ``finite_d@d=D:T=T``: the midpoint delta_1/2(D, T) where P(GD at dimension D captures the hard direction by T) is
  1/2 (docs/theory.md §5), as ``theorykit threshold --d D --horizon T`` finds it: by root finding from the median
  start (:func:`theorykit.thresholds.finite_d_midpoint`, m = 1 and a link even along its hard direction) in the
  bracket of the ``--deltas`` grid's ends, with its standard error and band; otherwise (m = 2) where
  :func:`theorykit.finite_d`'s P crosses 1/2 over the ``--deltas`` grid, band where its low and high ends cross 1/2;
* ``sim@d=D:T=T``: the simulated midpoint: finite-d GD (``theorykit.sweep``) at dimension D for T steps over the
  ``--deltas`` grid with ``--seeds`` seeds each; success = hard overlap > 1/2 by T; midpoint = the success
  fraction's crossing of 1/2 (linear interpolation), band = the crossings of its Wilson 95% bounds.

Every cell is a dict {value, stderr, low, high, how, seconds, error}; a cell that raises records its one-line error
(and is computed again next time) while the other cells go on.  Finished cells are stored in the cache folder as
JSON, keyed by a hash of the Problem (its as_dict), the column and the numeric options, so rerunning the same command
reads them back (``status`` in the output says computed or cached).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional

import pandas as pd

from .. import defaults
from ..cache import JsonCache, content_key
from ..errors import TheorykitError
from ..problem import Problem

KINDS = ("delta_alg", "delta_star", "delta_nn", "finite_d", "sim")
#: the parameters each column kind takes (all integers), and which it requires
PARAMS = {"delta_alg": (), "delta_star": ("t",), "delta_nn": ("T",), "finite_d": ("d", "T"), "sim": ("d", "T")}
#: optional parameters: d = the truncation of the law of D at n = delta d (needed where D is unbounded below)
OPTIONAL = {"delta_star": ("d",), "delta_nn": ("d",)}
CACHE_VERSION = 1
DEFAULT_COLUMNS = "delta_alg,delta_star@t=50"


@dataclass(frozen=True)
class Column:
    """One requested column: its kind and integer parameters (``delta_star@t=50`` -> kind delta_star, t = 50)."""

    kind: str
    params: tuple = field(default=())  # ((name, value), ...) in PARAMS order

    @property
    def name(self) -> str:
        return self.kind + ("@" + ":".join(f"{k}={v}" for k, v in self.params) if self.params else "")

    def get(self, key: str, default=None):
        return dict(self.params).get(key, default)


def parse_columns(text: str) -> list:
    """'delta_alg,delta_star@t=50,sim@d=400:T=150' -> [Column, ...]; one-line errors for unknown kinds, missing or
    extra parameters, non-integers."""
    cols = []
    for item in [c.strip() for c in str(text).split(",") if c.strip()]:
        kind, _, rest = item.partition("@")
        kind = kind.strip()
        if kind not in KINDS:
            raise TheorykitError(f"unknown column {kind!r} (columns: {', '.join(KINDS)})")
        given = {}
        for part in [p for p in rest.split(":") if p.strip()] if rest else []:
            k, eq, v = part.partition("=")
            k = k.strip()
            allowed = PARAMS[kind] + OPTIONAL.get(kind, ())
            if not eq or k not in allowed:
                raise TheorykitError(f"column {item!r}: {kind} takes "
                                     f"{', '.join(p + '=N' for p in allowed) or 'no parameters'}")
            try:
                n = int(v)
            except ValueError:
                raise TheorykitError(f"column {item!r}: {k} must be an integer, got {v!r}") from None
            low = 0 if k == "t" else 1  # delta*(t) is defined from t = 0 (the initial Hessian)
            if n < low:
                raise TheorykitError(f"column {item!r}: {k} must be >= {low}, got {n}")
            given[k] = n
        missing = [p for p in PARAMS[kind] if p not in given]
        if missing:
            raise TheorykitError(f"column {item!r} needs {', '.join(p + '=N' for p in missing)} (e.g. "
                                 f"{kind}@{':'.join(p + '=' + ('400' if p == 'd' else '100') for p in PARAMS[kind])})")
        col = Column(kind, tuple((p, given[p]) for p in PARAMS[kind] + OPTIONAL.get(kind, ()) if p in given))
        if col in cols:
            raise TheorykitError(f"column {col.name} is given twice")
        cols.append(col)
    if not cols:
        raise TheorykitError("no columns given")
    return cols


def parse_eta(text, activations) -> dict:
    """'0.5' (every activation) or 'gelu=1,quad=0.05' (per activation, the others 1.0) -> {activation: eta}."""
    text = str(text).strip()
    out = {a: 1.0 for a in activations}
    pairs = [("", text)] if "=" not in text else [p.partition("=")[::2] for p in text.split(",") if p.strip()]
    for a, v in pairs:
        a = a.strip()
        if a and a not in out:
            raise TheorykitError(f"--eta names {a!r}, which is not among --activations")
        try:
            val = float(v)
        except ValueError:
            raise TheorykitError(f"--eta must be a number or NAME=NUMBER pairs, got {text!r}") from None
        out.update({a: val} if a else {k: val for k in out})
    bad = {a: v for a, v in out.items() if not (math.isfinite(v) and v > 0)}
    if bad:
        raise TheorykitError(f"--eta must be > 0, got {bad}")
    return out


@dataclass(frozen=True)
class TableOptions:
    """Numeric options shared by the cells (part of every cell's cache key)."""

    paths: int = defaults.THRESHOLD_PATHS
    replicas: int = defaults.THRESHOLD_REPLICAS
    seeds: int = 16
    deltas: tuple = (4.0, 6.0, 8.0, 10.0, 12.0, 16.0)
    delta_range: tuple = (1.0, 40.0)
    processes: Optional[int] = None  # simulator processes (not part of the key: no effect on the numbers)
    scheduler: Optional[str] = None  # or a Dask scheduler's address for the simulator runs (not part of the key)

    def key(self) -> dict:
        return {"paths": self.paths, "replicas": self.replicas, "seeds": self.seeds, "deltas": list(self.deltas),
                "delta_range": list(self.delta_range)}


def cell_key(problem: Problem, column: Column, options: TableOptions) -> str:
    """Hash of what determines the cell: the Problem, the column and the numeric options."""
    return content_key({"problem": problem.as_dict(), "column": column.name, "options": options.key(),
                        "version": CACHE_VERSION})


# ------------------------------------------------------------------------------------------------ the cells
def _cell(value=math.nan, stderr=math.nan, low=math.nan, high=math.nan, how=""):
    return {"value": float(value), "stderr": float(stderr), "low": float(low), "high": float(high), "how": how}


def _delta_alg(problem, col, opt):
    da = problem.analysis.delta_alg
    if da.value is None:
        return _cell(math.inf, 0.0, how=f"infinite: {da.as_dict().get('reason') or 'no spectral weak recovery'} "
                                        f"[{da.method}]")
    return _cell(da.value, da.error or 0.0, how=da.method)


def _delta_star(problem, col, opt):
    from ..thresholds import delta_star, spectral_inapplicable

    t = col.get("t")
    why = spectral_inapplicable(problem)
    if why:
        return _cell(math.inf, how=why)
    q = delta_star(problem.replace(steps=t), [t], delta_range=opt.delta_range, paths=opt.paths,
                   replicas=opt.replicas, d=col.get("d"))[0]
    # the regula-falsi bracket is where the margin changes sign, not a confidence interval: it goes to the method
    return _cell(q.value, q.stderr, how=f"{q.method}; the margin changes sign in [{q.bracket[0]:.4g}, "
                                         f"{q.bracket[1]:.4g}] (the search bracket, not an error bar)")


def _delta_nn(problem, col, opt):
    from ..thresholds import delta_nn, spectral_inapplicable

    T = col.get("T")
    why = spectral_inapplicable(problem)
    if why:
        return _cell(math.inf, how=why + " (the dynamical criterion applies: theorykit threshold --dyn)")
    r = delta_nn(problem.replace(steps=T), T, delta_range=opt.delta_range, paths=opt.paths, replicas=opt.replicas,
                 d=col.get("d"))
    seq = ", ".join(f"{q.t}: {q.value:.4g}" for q in r.sequence)
    verdict = "converged" if r.converged else f"not converged by t = {T}: a lower bound"
    return _cell(r.value, r.stderr, how=f"{r.criterion} criterion, {verdict}; delta*(t) = {seq}")


def _crossings(deltas, p, lo, hi):
    from ..rules import crossing

    mid = crossing(deltas, p)
    a, b = crossing(deltas, hi), crossing(deltas, lo)
    return (math.nan if mid is None else mid), (math.nan if a is None else a), (math.nan if b is None else b)


def _sim(problem, col, opt):
    from ..referee.sweeps import summarise, sweep

    d, T = col.get("d"), col.get("T")
    deltas = list(opt.deltas)
    df = sweep(deltas, range(opt.seeds), problem=problem.replace(steps=T, delta=deltas[0]), d=d, stop_after_escape=0,
               processes=opt.processes, scheduler=opt.scheduler, quiet=True)
    failed = df[df.status == "failed"]
    if len(failed) == len(df):
        raise TheorykitError(f"every simulator run failed; first: {failed.iloc[0].error}")
    s = summarise(df)
    p, lo, hi = (s[c].to_numpy(dtype=float) for c in ("success_probability", "low", "high"))
    mid, a, b = _crossings(deltas, p, lo, hi)
    frac = ", ".join(f"{dl:g}: {int(k)}/{int(n)}" for dl, k, n in zip(s.delta, s.successes, s.ok + s.diverged))
    note = "" if math.isfinite(mid) else " (the success fraction does not cross 1/2 on the grid: widen --deltas)"
    return _cell(mid, math.nan, a, b, how=f"simulated GD at d = {d}, horizon T = {T}, {opt.seeds} seeds per delta; "
                                          f"successes {frac}; midpoint = crossing of 1/2 (linear interpolation), "
                                          f"band = crossings of the Wilson 95% bounds{note}")


def _finite_d(problem, col, opt):
    from ..thresholds import finite_d, finite_d_midpoint, median_start_applies

    d, T = col.get("d"), col.get("T")
    if median_start_applies(problem) is None:
        # the command line's rule (theorykit threshold --d --horizon): the midpoint by root finding from the median
        # start, bracketed by the --deltas grid's ends
        fm = finite_d_midpoint(problem, [d], T, delta_range=(min(opt.deltas), max(opt.deltas)), paths=opt.paths,
                               replicas=opt.replicas)
        m = fm.midpoints[0]
        # the escape time t_1/2 (first t with cos^2 >= 1/2 from the median start) at the evaluated delta nearest the
        # midpoint from above: how long GD takes at d where it starts to succeed
        above = sorted((e for e in fm.escape_time if e["t"] is not None and e["delta"] >= (m["midpoint"] or 0)
                        and math.isfinite(m["midpoint"] or math.nan)), key=lambda e: e["delta"])
        esc = ({"delta": above[0]["delta"], "t": above[0]["t"], "band": list(above[0]["band"])} if above else None)
        # no crossing in the bracket is an answer (value NaN, where it lies in the note), not a failure
        return {**_cell(m["midpoint"], m["stderr"], *m["band"],
                        how=f"theorykit.thresholds.finite_d_midpoint ({fm.method})" + (f"; {m['note']}" if m["note"]
                                                                                       else "")),
                "note": m["note"] or "", "escape_time": esc}
    fd = finite_d(problem, list(opt.deltas), [d], T, paths=opt.paths, replicas=opt.replicas, scan="bisect")
    failed = [q for q in fd.per_delta if q["error"]]
    if len(failed) == len(fd.per_delta):
        raise TheorykitError(f"delta = {failed[0]['delta']:g}: {failed[0]['error']}")
    m = fd.midpoints[0]
    parts = ", ".join(f"{dl:g}: {p:.2f}" for dl, p in zip(fd.deltas, fd.probability[:, 0, T]))
    return _cell(m["midpoint"], math.nan, *m["band"],
                 how=f"theorykit.finite_d ({fd.method}); P(capture by T) {parts}"
                     + (f"; {m['note']}" if m["note"] else ""))


def evaluate_cell(problem: Problem, column: Column, options: TableOptions, store: Optional[JsonCache]) -> tuple:
    """(cell, status) of one column for one Problem: read back from ``store`` under :func:`cell_key` ("cached"), else
    computed and stored ("computed"), or its one-line error ("failed": not stored, so it is tried again next time).
    The cell is {value, stderr, low, high, how, seconds, error} (plus what its kind adds, e.g. finite_d's note)."""
    t0 = time.perf_counter()
    key = cell_key(problem, column, options) if store is not None else None
    kept = store.get(key) if store is not None and key else None
    if kept is not None:
        kept.setdefault("seconds", 0.0)
        return kept, "cached"
    try:
        cell = {**COMPUTE[column.kind](problem, column, options), "error": ""}
    except TheorykitError as e:
        return {**_cell(), "error": str(e).splitlines()[0] if str(e) else "error",
                "seconds": round(time.perf_counter() - t0, 2)}, "failed"
    cell["seconds"] = round(time.perf_counter() - t0, 2)
    if store is not None and key:
        store.put(key, cell)
    return cell, "computed"


COMPUTE = {"delta_alg": _delta_alg, "delta_star": _delta_star, "delta_nn": _delta_nn, "finite_d": _finite_d,
           "sim": _sim}


# ------------------------------------------------------------------------------------------------ the table
def settings_grid(activations, losses, widths, links) -> list:
    return [(a, lo, w, lk) for lk in links for a in activations for lo in losses for w in widths]


def table(activations, links, columns=DEFAULT_COLUMNS, *, losses=("square",), widths=(1,), eta=1.0,
          cache: Optional[str] = None, progress: bool = False, **options) -> pd.DataFrame:
    """One row per setting (activation x loss x width x link), one group of entries per column.

    What ``theorykit table`` prints, as a DataFrame (see :func:`build` for the entries): delta_alg
    (docs/theory.md §2), delta*(t) and delta_NN (docs/theory.md §5), the finite-d midpoint (docs/theory.md §5,
    "At your d and horizon") and the simulated success (docs/theory.md §7) of each setting.

    Parameters
    ----------
    activations, links : lists of presets or expressions (a single string is one setting).
    columns : "delta_alg,delta_star@t=50,finite_d@d=400:T=100,sim@d=400:T=100,delta_nn@T=400" or a list of names
        (module docstring: what each kind computes).
    losses, widths : the other axes of the grid.
    eta : a step size for every activation, or {activation: eta}.
    cache : a folder where finished cells are kept and read back (keyed by the Problem, the column and the options).
    progress : draw a progress bar on stderr.
    options : :class:`TableOptions` fields (paths, replicas, seeds, deltas, delta_range, processes).

    Returns
    -------
    pandas.DataFrame
        One row per setting, with columns activation, loss, width, link, eta, then per column NAME its group
        (NAME, NAME_stderr, NAME_low, NAME_high, NAME_how, NAME_seconds, NAME_error, NAME_status), then seconds and
        wall_seconds.

    Raises
    ------
    TheorykitError
        An ``eta`` dict naming an activation not in the grid, or an unknown option.

    Examples
    --------
    >>> from theorykit import table
    >>> df = table("gelu", "phase-retrieval", "delta_alg")
    >>> float(df["delta_alg"][0])
    0.5
    """
    acts = [activations] if isinstance(activations, str) else list(activations)
    lks = [links] if isinstance(links, str) else list(links)
    cols = parse_columns(columns if isinstance(columns, str) else ",".join(columns))
    steps = eta if isinstance(eta, dict) else {a: float(eta) for a in acts}
    unknown = set(steps) - set(acts)
    if unknown:
        raise TheorykitError(f"eta names {sorted(unknown)}, which are not among the activations")
    try:
        opt = TableOptions(**options)
    except TypeError as e:
        raise TheorykitError(f"table: unknown option ({e}); options are "
                             f"{', '.join(TableOptions.__dataclass_fields__)}") from None
    return build(acts, list(losses), [int(w) for w in widths], lks, cols, {a: steps.get(a, 1.0) for a in acts}, opt,
                 cache, progress=progress)


def build(activations, losses, widths, links, columns, eta, options: TableOptions, cache: Optional[str],
          progress: bool = False, log=None) -> pd.DataFrame:
    """The table: one row per setting, for every column ``c`` the entries c, c_stderr, c_low, c_high, c_how,
    c_seconds, c_error, c_status ("computed" | "cached" | "failed"), then the row's total seconds."""
    from .._checks import Progress

    grid = settings_grid(activations, losses, widths, links)
    rows = []
    bar = Progress(len(grid) * len(columns), label="table", unit="cells") if progress else None
    done = 0
    store = JsonCache(cache) if cache else None
    for act, loss, width, link in grid:
        row = {"activation": act, "loss": loss, "width": width, "link": link, "eta": eta[act]}
        t_row = time.perf_counter()
        try:
            # delta and steps are placeholders: every column sets its own (a scan, a grid, or its T)
            problem = Problem(act, link, loss, width, eta=eta[act], delta=1.0, steps=1)
        except TheorykitError as e:
            problem, bad = None, str(e)
        for col in columns:
            c = col.name
            if problem is None:
                cell, status = {**_cell(), "error": bad, "seconds": 0.0}, "failed"
            else:
                cell, status = evaluate_cell(problem, col, options, store)
            for k in ("value", "stderr", "low", "high", "how", "seconds", "error"):
                row[c if k == "value" else f"{c}_{k}"] = cell.get(k)
            row[f"{c}_status"] = status
            done += 1
            if bar:
                bar.update(done)
            if log:
                log(f"{act} / {loss} / m = {width} / {link}: {c} {status}"
                    + (f" ({cell['error']})" if cell.get("error") else ""))
        row["seconds"] = round(sum(float(row.get(f"{col.name}_seconds") or 0.0) for col in columns), 2)
        row["wall_seconds"] = round(time.perf_counter() - t_row, 2)
        rows.append(row)
    if bar:
        bar.close(done)
    return pd.DataFrame(rows)


def cell_text(row, name: str) -> str:
    """'value ± stderr' or 'value (band low-high)', '∞', or 'failed: ...' for a Markdown cell (a band: the low and
    high ends of a midpoint, from the prediction's or the simulation's own band)."""
    from .writer import fmt

    if row.get(f"{name}_error"):
        return f"failed: {row[f'{name}_error']}"
    v, se, lo, hi = (row.get(name), row.get(f"{name}_stderr"), row.get(f"{name}_low"), row.get(f"{name}_high"))
    if v is not None and isinstance(v, float) and math.isinf(v):
        return "∞"
    s = fmt(v)
    if se is not None and isinstance(se, float) and math.isfinite(se) and se > 0:
        s += f" ± {fmt(se, 2)}"
    if lo is not None and hi is not None and all(isinstance(x, float) and math.isfinite(x) for x in (lo, hi)):
        s += f" (band {fmt(lo, 3)}–{fmt(hi, 3)})"
    return s


def markdown(df: pd.DataFrame, columns) -> list:
    from .writer import md_table

    hdr = ["activation", "loss", "m", "link", "eta"] + [c.name for c in columns] + ["seconds"]
    body = [[r["activation"], r["loss"], str(r["width"]), r["link"], f"{r['eta']:g}"]
            + [cell_text(r, c.name) for c in columns] + [f"{r['wall_seconds']:.0f}"] for r in df.to_dict("records")]
    lines = [md_table(hdr, body), "", "How each value was obtained:", ""]
    for r in df.to_dict("records"):
        for c in columns:
            how = r.get(f"{c.name}_how")
            if how and not r.get(f"{c.name}_error"):
                lines.append(f"* {r['activation']} / {r['loss']} / m = {r['width']} / {r['link']}, {c.name} "
                             f"({r[f'{c.name}_status']}, {r[f'{c.name}_seconds']} s): {how}")
    return lines
