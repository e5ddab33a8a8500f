"""theorykit table --activations gelu,quad,relu --losses square --widths 1,2 --link phase-retrieval
[--columns delta_alg,delta_star@t=50,delta_nn@T=200,finite_d@d=400:T=150,sim@d=400:T=150] [--eta 1 | --eta
gelu=1,quad=0.05] [--deltas 4,6,8,10] [--seeds 16] [--paths N] [--replicas R] [--out tables/NAME] [--cache DIR]
[--processes P | --scheduler ADDRESS] [--progress] [--json]

One row per setting (activation x loss x width x link), one value per column with its error and how it was
obtained (theorykit/report/table.py).  Cells are cached as they finish (keyed by the Problem's hash, the
column and the numeric options): rerunning the same command reads them back, so an interrupted table resumes, and a
cell that fails records its one-line error while the others go on.  With --out, writes NAME.csv and NAME.md (the
regenerating command in the header).

JSON keys: rows [{activation, loss, width, link, eta, <column>, <column>_stderr, <column>_low, <column>_high,
<column>_how, <column>_seconds, <column>_error, <column>_status, seconds, wall_seconds}], columns, settings, files,
cache, seconds.
"""
import os
import time

from ._args import (add_cell_arguments, add_worker_arguments, cell_arguments, check_args, check_workers, integer,
                    parse_numbers, split_top)


def add_parser(sub):
    from ..report.table import DEFAULT_COLUMNS, TableOptions

    dv = TableOptions()
    p = sub.add_parser("table", help="a comparison table: one row per setting, thresholds and simulations as "
                                     "columns, each with its error and method (cached, resumable)",
                       description=__doc__.split("\n\n")[1],
                       epilog="example: theorykit table --activations gelu,quad --widths 1 --link phase-retrieval "
                              "--eta gelu=1,quad=0.05 --columns delta_alg,sim@d=200:T=200 --deltas 3,5,7,9,12 "
                              "--seeds 8 --out tables/my_table")
    p.add_argument("--activations", required=True, help="comma-separated presets or expressions in x")
    p.add_argument("--losses", default="square", help="comma-separated losses (default square)")
    p.add_argument("--widths", default="1", help="comma-separated widths m (default 1)")
    p.add_argument("--link", required=True, help="a link, or several comma-separated")
    p.add_argument("--columns", default=DEFAULT_COLUMNS,
                   help="comma-separated: delta_alg, delta_star@t=T, delta_nn@T=T, finite_d@d=D:T=T, sim@d=D:T=T "
                        f"(default {DEFAULT_COLUMNS})")
    p.add_argument("--eta", default="1", help="step size: one number, or NAME=ETA pairs per activation (others 1)")
    add_cell_arguments(p, ",".join(f"{v:g}" for v in dv.deltas), "delta grid of the finite_d and sim columns")
    p.add_argument("--seeds", type=integer(1), default=dv.seeds, help="simulator seeds per delta (default %(default)s)")
    add_worker_arguments(p)  # the sim columns' runs: local processes or a Dask cluster
    p.add_argument("--out", default=None, help="table stem: writes STEM.csv and STEM.md")
    p.add_argument("--cache", default=None, help="folder of finished cells (default: STEM's folder/.cache/table, or "
                                                 "~/.cache/theorykit/table without --out)")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr")
    return p


def command_line(args) -> str:
    """The regenerating command, every option explicit."""
    import shlex

    parts = ["theorykit", "table", "--activations", args.activations, "--losses", args.losses, "--widths",
             args.widths, "--link", args.link, "--columns", args.columns, "--eta", args.eta, "--deltas", args.deltas,
             "--seeds", str(args.seeds), "--paths", str(args.paths), "--replicas", str(args.replicas),
             "--delta-range", f"{args.delta_range[0]:g}", f"{args.delta_range[1]:g}"]
    if args.out:
        parts += ["--out", args.out]
    return " ".join(shlex.quote(p) for p in parts)


def run(args) -> dict:
    from ..report import table as st
    from ..report.writer import now, write_table
    from ..errors import TheorykitError

    check_args(args)
    check_workers(args)
    t0, started = time.perf_counter(), now()
    acts, losses, links = split_top(args.activations), split_top(args.losses), split_top(args.link)
    widths = parse_numbers(args.widths, "widths", int)
    for name, vals in (("activations", acts), ("losses", losses), ("link", links)):
        if not vals:
            raise TheorykitError(f"--{name} is empty")
        if len(set(vals)) != len(vals):
            raise TheorykitError(f"--{name} repeats an entry: {vals}")
    columns = st.parse_columns(args.columns)
    eta = st.parse_eta(args.eta, acts)
    cells = cell_arguments(args)
    lo, hi = cells["delta_range"]
    options = st.TableOptions(**cells, seeds=args.seeds, processes=args.processes, scheduler=args.scheduler)
    cache = args.cache or (os.path.join(os.path.dirname(os.path.abspath(args.out)), ".cache", "table") if args.out
                           else os.path.join(os.path.expanduser("~"), ".cache", "theorykit", "table"))
    if args.out:
        from ..report.writer import check_table_writable

        check_table_writable(args.out)
    df = st.build(acts, losses, widths, links, columns, eta, options, cache, progress=bool(args.progress))
    files = None
    wall = time.perf_counter() - t0
    if args.out:
        cols = list(df.columns)
        body = [f"## {', '.join(c.name for c in columns)}", ""] + st.markdown(df, columns)
        header = [f"Columns {st.__doc__.split('Columns')[1].split('Every cell')[0].strip()}\n",
                  f"Options: {options.paths} DMFT paths in {options.replicas} replicas; "
                  f"simulator {options.seeds} seeds "
                  f"per delta on the grid {list(options.deltas)}; delta_star/delta_nn scan range {[lo, hi]}. "
                  f"Cached cells: {cache}.\n"]
        files = list(write_table(args.out, df.to_dict("records"), cols, body, title="theorykit table",
                                 command=command_line(args), started=started, wall=wall,
                                 timing="cells read from the cache count their original seconds in each row",
                                 header=header))
    return {"rows": df.to_dict("records"), "columns": [c.name for c in columns],
            "settings": {"activations": acts, "losses": losses, "widths": widths, "links": links,
                         "eta": eta, **options.key()},
            "files": files, "cache": cache, "seconds": wall}


def text(r) -> str:
    import pandas as pd

    from ..report.table import cell_text

    df = pd.DataFrame(r["rows"])
    lines = []
    for row in df.to_dict("records"):
        cells = "; ".join(f"{c} = {cell_text(row, c)} ({row[f'{c}_status']})" for c in r["columns"])
        lines.append(f"{row['activation']} / {row['loss']} / m = {row['width']} / {row['link']} (eta = "
                     f"{row['eta']:g}): {cells}; {row['wall_seconds']:.1f} s")
    if r["files"]:
        lines.append("wrote " + ", ".join(r["files"]))
    return "\n".join(lines)
