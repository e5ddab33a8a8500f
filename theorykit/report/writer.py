"""Generated tables: a CSV and a Markdown file whose header states the exact command that regenerates them.

Hand-written notes on a table live beside it in ``<stem>_notes.md``; :func:`write_table` never opens that file (it
only links to it when it exists), so regenerating a table never deletes a note.  Both outputs are written to a
temporary file and renamed, so an interrupted write leaves the previous table intact.
"""
from __future__ import annotations

import csv
import datetime
import math
import os
import platform
import shlex
import sys
from typing import Optional, Sequence

import numpy as np

from ..errors import TheorykitError
from ..runner import check_writable

__all__ = ["write_table", "write_study", "write_csv", "check_table_writable", "notes_path", "regenerate_command",
           "machine", "md_table", "fmt", "pct", "pm", "table_stem"]


# ------------------------------------------------------------------------------------------------ formatting
def fmt(v, p=4):
    """A number for a table cell: 4 significant digits, scientific outside [1e-3, 1e5); '—' for None/NaN;
    Python ints (and bools: 'True'/'False', as the published tables have them) as str; NumPy bools as 'yes'/'NO'."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "NO"
    a = abs(v)
    if a != 0 and (a < 1e-3 or a >= 1e5):
        return f"{v:.{p - 1}e}"
    return f"{v:.{p}g}"


def pct(v):
    """0.0123 -> '1.23%'; '—' for None/NaN."""
    return "—" if v is None or not math.isfinite(v) else f"{100 * v:.2f}%"


def pm(v, e, scale=100.0, p=2):
    """'+1.23 ± 0.45' (v and e times ``scale``); '—' when either is missing."""
    if v is None or e is None or not math.isfinite(v):
        return "—"
    return f"{scale * v:+.{p}f} ± {scale * e:.{p}f}"


def md_table(header, rows):
    """A Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ provenance
def regenerate_command(prog: str, argv: Sequence[str], redact: Sequence[str] = ()) -> str:
    """The command line that regenerates a table: ``prog`` (e.g. 'python scripts/dmft_vs_sim.py') followed by the
    shell-quoted arguments; the value after an option in ``redact`` is shown as '<see Note>'."""
    av = list(argv)
    av = ["'<see Note>'" if i > 0 and av[i - 1] in redact else shlex.quote(a) for i, a in enumerate(av)]
    return " ".join([prog] + av)


def script_prog(script: str, root: str) -> str:
    """'python <script relative to root>'."""
    return "python " + os.path.relpath(os.path.abspath(script), root)


def write_study(stem: str, script: str, argv: Sequence[str], rows: Sequence[dict], body: Sequence[str], *,
                title: str, header: Sequence[str], started, t0: float, root: str,
                columns: Optional[Sequence[str]] = None) -> tuple:
    """:func:`write_table` for a study script: tables/<stem>.{csv,md} under ``root`` with ``columns`` (default: those
    of the first row), the command 'python <script> <argv>' and the wall time since ``t0`` (time.perf_counter())."""
    import time

    cols = list(rows[0]) if columns is None else list(columns)
    return write_table(os.path.join(root, "tables", stem), rows, cols, body, title=title,
                       command=regenerate_command(script_prog(script, root), list(argv)), started=started,
                       wall=time.perf_counter() - t0, header=header, root=root)


def machine(cpus_note: str = "shared") -> str:
    """'host, processor, N CPUs (shared), Python x.y.z, numpy a.b.c'."""
    return (f"{platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs ({cpus_note}), "
            f"Python {platform.python_version()}, numpy {np.__version__}")


def table_stem(out: str) -> str:
    """The stem of a table named by its Markdown or CSV file or by its stem: 'tables/x.md' -> 'tables/x'."""
    out = os.fspath(out)
    for ext in (".md", ".csv"):
        if out.endswith(ext):
            return out[: -len(ext)]
    return out


def notes_path(stem: str) -> str:
    """Where the hand-written notes on the table ``stem`` live: ``<stem>_notes.md``."""
    return os.fspath(stem) + "_notes.md"


def check_table_writable(stem: str) -> None:
    """Refuse (TheorykitError) before any computation if ``<stem>.csv`` or ``<stem>.md`` cannot be written."""
    for ext in (".csv", ".md"):
        check_writable(os.fspath(stem) + ext)


# ------------------------------------------------------------------------------------------------ writing
def _atomic_write(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise TheorykitError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_csv(path, rows, columns):
    """rows (dicts) -> CSV with the given columns; floats to 6 significant digits, None as empty."""
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns)
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else (f"{r[k]:.6g}" if isinstance(r.get(k), float) else r[k]))
                    for k in columns})
    _atomic_write(os.fspath(path), buf.getvalue())


def write_table(stem: str, rows: Sequence[dict], columns: Sequence[str], body: Sequence[str], *, title: str,
                command: str, started: datetime.datetime, wall: float, timing: str = "",
                cpus_note: str = "shared", header: Sequence[str] = (), root: Optional[str] = None) -> tuple:
    """Write ``<stem>.csv`` (``rows`` in ``columns``) and ``<stem>.md``: the title, the regenerating command, the date,
    wall time (``timing``: details in brackets) and machine, then the ``header`` paragraphs (definitions, the CSV
    columns), a pointer to ``<stem>_notes.md`` when it exists, and ``body`` (Markdown lines).

    The notes file is never opened for writing.  Returns (csv path, md path)."""
    stem = os.fspath(stem)
    csv_path, md_path = stem + ".csv", stem + ".md"
    if os.path.abspath(md_path) == os.path.abspath(notes_path(stem)):  # pragma: no cover - cannot happen
        raise TheorykitError("the table and its notes must be different files")
    write_csv(csv_path, rows, columns)
    rel = (lambda p: os.path.relpath(os.path.abspath(p), root)) if root else (lambda p: p)
    head = [f"# {title}\n",
            f"Command (from the repository root): `{command}`\n",
            f"Date: {started.strftime('%Y-%m-%d %H:%M %Z')}. Wall time: {wall / 60:.1f} min"
            + (f" ({timing})" if timing else "") + f". Machine: {machine(cpus_note)}.\n"]
    head += list(header)
    notes = notes_path(stem)
    if os.path.exists(notes):
        head.append(f"Hand-written notes on this table: `{rel(notes)}` (kept when the table is regenerated).\n")
    else:
        head.append(f"Generated file: regenerating it overwrites it; hand-written notes belong in `{rel(notes)}`.\n")
    _atomic_write(md_path, "\n".join(head + list(body)) + "\n")
    return csv_path, md_path


def typed(v: str):
    """A CSV cell back to a Python value: '' -> None, True/False, int, float, else the text."""
    if v == "":
        return None
    if v in ("True", "False"):
        return v == "True"
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def previous_rows(stem: str) -> dict:
    """The rows of the table already written at ``stem``.csv, grouped by their case key (rows without one are
    ignored): the committed table is the table's memory, so a clean checkout regenerates it without recomputing the
    cases it already holds."""
    import csv

    out: dict = {}
    if not os.path.exists(stem + ".csv"):
        return out
    with open(stem + ".csv", newline="") as f:
        for row in csv.DictReader(f):
            r = {k: typed(v) for k, v in row.items()}
            if r.get("case_key"):
                out.setdefault(r["case_key"], []).append(r)
    return out


def key_of(*parts) -> str:
    """A case key: the parts joined by '_' (tuples as their repr, without spaces)."""
    return "_".join(str(v) for v in parts).replace(" ", "")


def cached_case(args, part: str, case: tuple, compute, *, key: str, folder: str) -> dict:
    """compute(args, case) -> {"rows": [...]} once per ``key``: read back from the JSON cache in ``folder`` (an
    interrupted run resumes there), else from the rows of the table being regenerated (``args.previous``, from
    :func:`previous_rows`; empty with --recompute), else computed and cached.  Every row carries the key as
    ``case_key``, so the committed table remembers which case made it."""
    from ..cache import JsonCache

    store = JsonCache(folder)
    rec = store.get(key)
    if rec is not None:
        log(f"{part} {case[0]}: cached")
    elif key in (getattr(args, "previous", None) or {}):
        log(f"{part} {case[0]}: read back from the table")
        return {"rows": args.previous[key]}
    else:
        rec = compute(args, case)
        store.put(key, rec)
    return {"rows": [dict(r, case_key=key) for r in rec["rows"]]}


def add_case_table_arguments(ap, name: str) -> None:
    """The options every cached-case table script shares: --quick --processes --out --cache --cases --recompute."""
    ap.add_argument("--quick", action="store_true", help="one tiny case per part (a few minutes)")
    ap.add_argument("--processes", type=int, default=None, help="simulator processes (default: CPUs)")
    ap.add_argument("--out", default=None, help=f"table stem (default tables/{name})")
    ap.add_argument("--cache", default=None, help="folder of finished cases (default tables/.cache): an "
                    "interrupted run resumes there")
    ap.add_argument("--cases", default=None, help="comma-separated settings to run (default: all)")
    ap.add_argument("--recompute", action="store_true", help="recompute every case (default: a case whose rows the "
                    "table being regenerated already holds, under the same case key, is read back from it)")


def open_case_table(args, root: Optional[str], name: str) -> str:
    """The table's stem (``args.out`` or tables/NAME[_quick]); sets ``args.cache`` and ``args.previous`` (the
    table's own rows by case key, unless --recompute)."""
    root = root or os.getcwd()
    stem = args.out or os.path.join(root, "tables", name + ("_quick" if args.quick else ""))
    args.cache = args.cache or os.path.join(root, "tables", ".cache")
    args.previous = {} if args.recompute else previous_rows(stem)
    return stem


def parse_case_table(ap, argv, root: Optional[str], name: str, cases: list = (), quick: list = ()) -> tuple:
    """Parse a cached-case table script's arguments (``ap`` holds its own; the shared ones are added here) and open
    its table: (args, stem, root, the cases to run -- ``quick`` with --quick, else ``cases``, filtered by --cases on
    their first entry)."""
    add_case_table_arguments(ap, name)
    args = ap.parse_args(argv)
    stem = open_case_table(args, root, name)
    chosen = list(quick if args.quick else cases)
    if args.cases:
        chosen = [c for c in chosen if c[0] in args.cases.split(",")]
    return args, stem, root or os.getcwd(), chosen


def now() -> datetime.datetime:
    """The local time with its zone (for ``started``)."""
    return datetime.datetime.now().astimezone()


def log(msg: str) -> None:
    """'[HH:MM:SS] msg' on stdout, flushed."""
    import time

    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)
    sys.stdout.flush()
