"""theorykit plot KIND ... --out STEM: a figure as STEM.png and STEM.pdf (theorykit/compare/figures.py).

Kinds:

* success: P(success) of finite-d GD against delta for one or more activations (sweeps, resumable with --csv-dir),
  with delta_alg and any --mark LABEL:NAME=DELTA (e.g. gelu:delta_NN=8) drawn as vertical lines;
* hessian: the finite-d Hessian's full spectrum (dense) over the predicted bulk density, edge and hard outliers
  (the arguments of `theorykit hessian`; --d required);
* delta-star: delta*(t) against t from a table (default tables/delta_nn.csv, part nn);
* escape: escape time against delta for several d from a table (default tables/delta_nn.csv, part escape);
* dmft-vs-sim: DMFT against GD for M_t, Theta^T Theta and the losses, with 2-se bands;
* grokking: train and test loss of GD near the threshold over a long horizon, with the hard overlap below.

JSON keys: kind, files [png, pdf], caption (what the figure shows), data (the numbers drawn, per kind), seconds.
"""
import csv
import math
import os
import time

from ._simargs import check_args, integer, positive_float

KINDS = ("success", "hessian", "delta-star", "escape", "dmft-vs-sim", "grokking")


def add_parser(sub):
    from . import hessian as hessian_cmd
    from .hessian import add_problem_arguments

    p = sub.add_parser("plot", help="figures: success vs delta, Hessian spectrum, delta*(t), escape times, DMFT vs GD, "
                                    "grokking (PNG and PDF)",
                       description=__doc__.split("\n\n")[0])
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True, parser_class=type(p))

    s = kinds.add_parser("success", help="P(success) of finite-d GD against delta, delta_alg and marks")
    s.add_argument("--activations", required=True, help="comma-separated activations (one curve each)")
    s.add_argument("--eta", default="1", help="one number, or NAME=ETA per activation (others 1)")
    s.add_argument("--link", required=True)
    s.add_argument("--loss", default="square")
    s.add_argument("--width", type=integer(1), default=1)
    s.add_argument("--d", type=integer(1), required=True)
    s.add_argument("--steps", type=integer(1), required=True, help="the horizon T")
    s.add_argument("--deltas", required=True, help="comma-separated delta grid")
    s.add_argument("--seeds", type=integer(1), default=16)
    s.add_argument("--mark", action="append", default=[], metavar="LABEL:NAME=DELTA",
                   help="a vertical line for curve LABEL, e.g. gelu:delta_NN=8 (repeatable)")
    s.add_argument("--csv-dir", default=None, help="folder of the sweeps' CSVs (resumable)")
    s.add_argument("--processes", type=integer(1), default=None)

    h = hessian_cmd.add_parser(kinds)  # every argument of `theorykit hessian`

    for name in ("delta-star", "escape"):
        k = kinds.add_parser(name, help=f"{name} from a table")
        k.add_argument("--table", default=os.path.join("tables", "delta_nn.csv"), help="CSV (default %(default)s)")
        k.add_argument("--settings", default=None, help="comma-separated settings to draw (default all)")

    for name in ("dmft-vs-sim", "grokking"):
        k = kinds.add_parser(name, help="DMFT against GD" if name == "dmft-vs-sim" else "train/test loss near the "
                                                                                      "threshold")
        add_problem_arguments(k)
        k.add_argument("--steps", type=integer(1), required=True)
        k.add_argument("--d", type=integer(1), required=True)
        k.add_argument("--seeds", type=integer(1), default=8)
        k.add_argument("--paths", type=integer(2), default=16384)
        k.add_argument("--replicas", type=integer(2), default=4)
        if name == "grokking":
            k.add_argument("--dmft-steps", type=integer(0), default=0, help="also the DMFT's losses to this t (0: none)")
    import argparse

    for k in list(kinds.choices.values()):
        k.add_argument("--out", required=True, help="figure stem: writes STEM.png and STEM.pdf")
        # (after KIND, like every other option; SUPPRESS keeps the command's own default when absent)
        k.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
        if k is not h:
            k.add_argument("--progress", action="store_true", help="progress bar on stderr")
    return p


def _read_rows(path, part):
    from ..errors import TheorykitError

    if not os.path.exists(path):
        raise TheorykitError(f"--table {path} does not exist (generate it with python scripts/delta_nn_table.py)")

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return v if v != "" else None

    with open(path, newline="") as fh:
        rows = [{k: num(v) for k, v in r.items()} for r in csv.DictReader(line for line in fh if not line.startswith("#"))]
    rows = [r for r in rows if r.get("part") == part]
    if not rows:
        raise TheorykitError(f"--table {path} has no rows of part {part!r}")
    return rows


def _marks(texts, labels):
    from ..errors import TheorykitError

    out = {lb: {} for lb in labels}
    for t in texts:
        lab, _, rest = t.partition(":")
        name, _, val = rest.partition("=")
        try:
            v = float(val)
        except ValueError:
            raise TheorykitError(f"--mark expects LABEL:NAME=DELTA, got {t!r}") from None
        if lab not in out:
            raise TheorykitError(f"--mark {t!r}: {lab!r} is not among the curves {labels}")
        out[lab][name.strip() or "mark"] = v
    return out


def _success(args):
    from ..compare.settings_table import parse_eta
    from ..problem import Problem
    from ..referee.sweeps import summarise, sweep
    from .table import parse_numbers, split_top

    acts = split_top(args.activations)
    eta = parse_eta(args.eta, acts)
    deltas = sorted(parse_numbers(args.deltas, "deltas"))
    marks = _marks(args.mark, acts)
    curves, data = {}, {}
    for a in acts:
        pr = Problem(a, args.link, args.loss, args.width, eta=eta[a], delta=deltas[0], steps=args.steps)
        da = pr.analysis.delta_alg.value
        marks[a] = {"delta_alg": da, **marks[a]}
        csv_path = None if not args.csv_dir else os.path.join(args.csv_dir, f"success_{len(curves)}_{a}.csv".replace("/", "_"))
        if csv_path:
            os.makedirs(args.csv_dir, exist_ok=True)
        df = sweep(deltas, range(args.seeds), problem=pr, d=args.d, stop_after_escape=0, csv=csv_path,
                   processes=args.processes, progress=bool(args.progress) or None, quiet=True)
        s = summarise(df)
        curves[f"{a} (eta {eta[a]:g})"] = s
        marks[f"{a} (eta {eta[a]:g})"] = marks.pop(a)
        data[a] = s[["delta", "runs", "successes", "success_probability", "low", "high"]].to_dict("records")
    from ..compare import figures

    title = (f"{args.link}, {args.loss} loss, m = {args.width}, d = {args.d}, horizon {args.steps}, {args.seeds} seeds "
             f"per delta (Wilson 95% bands)")
    fig = figures.success(curves, marks, title)
    caption = ("Success probability of finite-d GD (hard overlap > 1/2 by the horizon) against delta, with delta_alg "
               "and the given marks as vertical lines")
    return fig, caption, {"curves": data, "marks": marks}


def _hessian(args):
    from . import hessian as hessian_cmd
    from ..errors import TheorykitError

    if args.d is None:
        raise TheorykitError("plot hessian needs --d (the finite-d Hessian drawn over the theory)")
    if args.d * args.width > 1000:
        raise TheorykitError(f"plot hessian draws the full spectrum (dense): d * m <= 1000, got {args.d * args.width}")
    args.hessian_k, args.hessian_method = args.d * args.width, "dense"
    r = hessian_cmd.run(args)
    from ..compare import figures

    sim = r["simulated"] or {}
    title = (f"{args.activation} / {args.link} / {args.loss}, m = {args.width}, delta = {args.delta:g}, eta = "
             f"{args.eta:g}, t = {args.t}, d = {args.d} (constrained GD)")
    fig = figures.hessian(r["density"], sim.get("eigenvalues", []), r["outliers"], r["edge"], title,
                          spikes=r.get("spikes") or [])
    caption = ("Finite-d Hessian eigenvalues (dense, every one) against the predicted bulk density of the law of "
               "(D, zeta) at time t truncated at n = delta d; predicted edge dotted, hard outliers solid, single-sample "
               "spikes dashed")
    return fig, caption, {"edge": r["edge"], "outliers": r["outliers"],
                          "eigenvalues_min": min(sim.get("eigenvalues") or [math.nan])}


def _from_table(args, part):
    from ..compare import figures

    rows = _read_rows(args.table, part)
    if args.settings:
        keep = set(args.settings.split(","))
        rows = [r for r in rows if r.get("setting") in keep]
    if part == "nn":
        rows = [r for r in rows if r.get("t") is not None]
        fig = figures.delta_star(rows, f"delta*(t) from {args.table} (2-se bars)")
        cap = "delta*(t) against GD time t, one line per setting (spectral criterion), 2-se error bars"
        data = [{k: r.get(k) for k in ("setting", "t", "delta_star", "delta_star_se")} for r in rows]
    else:
        fig = figures.escape(rows, f"escape time against delta from {args.table}")
        cap = "Escape time (median, quartile bars; escaped/runs annotated) against delta, one line per d"
        data = [{k: r.get(k) for k in ("setting", "delta", "d", "escape_median", "escaped", "runs")} for r in rows]
    return fig, cap, {"rows": data}


def _runs(args):
    from ..referee.gd import simulate
    from .hessian import make_problem

    pr = make_problem(args, args.delta, args.steps)
    sims = []
    for seed in range(args.seeds):
        r = simulate(pr, d=args.d, seed=seed)
        sims.append({**r.as_dict(), "overlap": r.overlap.tolist()})
    return pr, sims


def _dmft_vs_sim(args):
    from ..compare import figures
    from ..dynamics.solver import dmft

    pr, sims = _runs(args)
    r = dmft(pr, paths=args.paths, replicas=args.replicas, progress=bool(args.progress))
    title = (f"{args.activation} / {args.link} / {args.loss}, m = {args.width}, delta = {args.delta:g}, eta = "
             f"{args.eta:g}; DMFT {args.paths} paths, GD d = {args.d}")
    fig = figures.dmft_vs_sim(r.as_dict(), sims, title)
    cap = "DMFT (d -> infinity, 2-se band) against the GD seed mean (2-se band) for M_t, Theta^T Theta and the losses"
    return fig, cap, {"dmft_train_loss": r.train_loss.tolist(),
                      "sim_train_loss_mean": [sum(s["train_loss"][t] for s in sims) / len(sims)
                                              for t in range(len(r.t))]}


def _grokking(args):
    from ..compare import figures
    from ..dynamics.solver import dmft

    pr, sims = _runs(args)
    dm = None
    if args.dmft_steps:
        dm = dmft(pr.replace(steps=args.dmft_steps), paths=args.paths, replicas=args.replicas).as_dict()
    title = (f"{args.activation} / {args.link} / {args.loss}, m = {args.width}, delta = {args.delta:g}, eta = "
             f"{args.eta:g}, d = {args.d}, {args.seeds} seeds")
    fig = figures.grokking(sims, dm, title)
    cap = ("Train and population test loss of finite-d GD near the threshold (seeds thin, median bold) and the hard "
           "overlap below: the train loss falls long before the test loss drops at the escape")
    esc = [s["escape_time"] for s in sims]
    return fig, cap, {"escape_times": esc,
                      "final_train_loss": [s["train_loss"][-1] for s in sims],
                      "final_test_loss": [s["population_test_loss"][-1] if s.get("population_test_loss") else
                                          s["test_loss"][-1] for s in sims]}


def run(args) -> dict:
    from ..compare import figures

    check_args(args)
    t0 = time.perf_counter()
    make = {"success": _success, "hessian": _hessian, "delta-star": lambda a: _from_table(a, "nn"),
            "escape": lambda a: _from_table(a, "escape"), "dmft-vs-sim": _dmft_vs_sim, "grokking": _grokking}
    fig, caption, data = make[args.kind](args)
    files = figures.save(fig, args.out)
    return {"kind": args.kind, "files": files, "caption": caption, "data": data,
            "seconds": time.perf_counter() - t0}


def text(r) -> str:
    return f"{r['kind']}: wrote {', '.join(r['files'])} ({r['seconds']:.1f} s)\n  {r['caption']}"
