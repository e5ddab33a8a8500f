"""theorykit plot KIND ... --out STEM: a figure as STEM.png and STEM.pdf (theorykit/report/figures.py).

Kinds:

* success: P(success) of finite-d GD against delta for one or more activations (sweeps, resumable with --csv-dir),
  with delta_alg and any --mark LABEL:NAME=DELTA (e.g. gelu:delta_dyn=5.18; LABEL:NAME>=DELTA for a lower bound)
  drawn as vertical lines.  --predict adds, for each curve of width m = 1 or 2, the DMFT's finite-d prediction
  P(success at this d by the horizon) with its band (theorykit.finite_d, the function behind `theorykit table`'s
  finite_d column and `theorykit threshold --horizon`; at --predict-deltas, default --deltas, with --paths and
  --replicas; per delta one DMFT and a ladder of DMFT runs per ray, so slow at long horizons); where there is none
  the caption, the figure and the JSON give the reason.  --delta-nn-table tables/delta_nn.csv marks delta_NN (part
  nn) for each curve whose (activation, link, loss, m, eta) is a setting of theorykit.cases.CASES (pr-gelu,
  pr-x2, bounded, ...), labelled "delta_NN >= X (not converged by t = T)" when it is a lower bound; a curve without
  a setting is named in the caption.  A mark outside the plotted delta range is a labelled arrow at its edge and is
  listed in the caption;
* hessian: the finite-d Hessian's full spectrum (dense) over the predicted bulk density, edge and hard outliers
  (the arguments of `theorykit hessian`; --d required);
* delta-star: delta*(t) against t from a table (default tables/delta_nn.csv, part nn);
* escape: escape time against delta for several d from a table (default tables/delta_nn.csv, part escape);
* escape-d: escape time against d, GD's medians against the DMFT's t_1/2 (default tables/thresholds_vs_sim.csv);
* dmft-vs-sim: DMFT against GD for M_t, Theta^T Theta and the losses, with 2-se bands;
* grokking: train and test loss of GD near the threshold over a long horizon, with the hard overlap below.

JSON keys: kind, files [png, pdf], caption (what the figure shows), data (the numbers drawn, per kind), seconds.
For success, data has curves (per activation), marks (per curve label: a number, or {delta, text} for a bound),
prediction (with --predict, per activation: {points [{delta, probability, low, high, noise_limited, error}], how,
reason}) and delta_nn (with --delta-nn-table, per activation: {delta, converged, T, setting, text} or {reason}).
"""
import csv
import math
import os
import time

from ._args import add_problem_arguments, check_args, integer, make_problem, parse_numbers, split_top

KINDS = ("success", "hessian", "delta-star", "escape", "escape-d", "dmft-vs-sim", "grokking")


def _hessian_command():
    """The `theorykit hessian` command (plot hessian is it, drawn): taken from the registry theorykit.cli.COMMANDS
    rather than imported from its module, since no command module imports another."""
    from ..cli import COMMANDS

    return COMMANDS["hessian"]


def add_parser(sub):
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
                   help="a vertical line for curve LABEL, e.g. gelu:delta_NN=8, or gelu:delta_NN>=24 for a lower "
                        "bound (repeatable)")
    s.add_argument("--predict", action="store_true",
                   help="also the DMFT's finite-d prediction P(success at this d by the horizon), any width "
                        "(theorykit.finite_d: a ladder of DMFT runs per delta; slow)")
    s.add_argument("--predict-deltas", default=None, help="comma-separated deltas of the prediction (default: "
                                                          "--deltas)")
    s.add_argument("--paths", type=integer(2), default=None, help="DMFT paths of the prediction (default 16384)")
    s.add_argument("--replicas", type=integer(2), default=None, help="DMFT replicas of the prediction (default 4)")
    s.add_argument("--delta-nn-table", default=None, metavar="CSV",
                   help="mark delta_NN from this table (tables/delta_nn.csv, part nn) for every curve that matches "
                        "one of its settings (hessian_check.SETTINGS); a lower bound when not converged")
    s.add_argument("--csv-dir", default=None, help="folder of the sweeps' CSVs (resumable)")
    s.add_argument("--processes", type=integer(1), default=None)

    h = _hessian_command().add_parser(kinds)  # every argument of `theorykit hessian`

    for name in ("delta-star", "escape", "escape-d"):
        k = kinds.add_parser(name, help=f"{name} from a table")
        table = "thresholds_vs_sim.csv" if name == "escape-d" else "delta_nn.csv"
        k.add_argument("--table", default=os.path.join("tables", table), help="CSV (default %(default)s)")
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
            k.add_argument("--dmft-steps", type=integer(0), default=0,
                           help="also the DMFT's losses to this t (0: none)")
    import argparse

    for k in list(kinds.choices.values()):
        k.add_argument("--out", required=True, help="figure stem: writes STEM.png and STEM.pdf")
        # (after KIND, like every other option; SUPPRESS keeps the command's own default when absent)
        k.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
        if k is not h:
            k.add_argument("--progress", action="store_true", help="progress bar on stderr")
    return p


def _read_rows(path, part, option="--table"):
    from ..errors import TheorykitError

    if not os.path.exists(path):
        raise TheorykitError(f"{option} {path} does not exist (generate it with python scripts/delta_nn_table.py)")

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return v if v != "" else None

    with open(path, newline="") as fh:
        rows = [{k: num(v) for k, v in r.items()}
                for r in csv.DictReader(line for line in fh if not line.startswith("#"))]
    rows = [r for r in rows if r.get("part") == part]
    if not rows:
        raise TheorykitError(f"{option} {path} has no rows of part {part!r}")
    return rows


def _marks(texts, labels):
    """--mark LABEL:NAME=DELTA -> {label: {name: delta}}; NAME ending in > or < (LABEL:NAME>=DELTA) marks a bound:
    {"delta": delta, "text": "NAME (LABEL) >= DELTA (a lower bound)"}."""
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
        name = name.strip()
        rel = name[-1] if name.endswith((">", "<")) else ""
        name = name.rstrip("<>").strip() or "mark"
        out[lab][name] = v if not rel else {"delta": v, "text": f"{name} ({lab}) {rel}= {v:.4g} (a "
                                                                f"{'lower' if rel == '>' else 'upper'} bound)"}
    return out


def _delta_nn_marks(path, problems) -> dict:
    """delta_NN per curve from a delta_nn table (part nn): the setting of theorykit.cases.CASES
    whose Problem (activation, link, loss, m, eta) is the curve's.  {curve: {"delta", "text", "converged", "T",
    "setting"}, or {"reason"} when no setting matches or the table has no delta_NN for it}."""
    from ..cases import CASES as SETTINGS, problem as problem_of
    from ..errors import TheorykitError

    rows = _read_rows(path, "nn", "--delta-nn-table")
    if "delta_nn" not in rows[0] or "setting" not in rows[0]:
        raise TheorykitError(f"--delta-nn-table {path} has no columns setting and delta_nn (a tables/delta_nn.csv?)")

    def key(pr):
        return {k: v for k, v in pr.as_dict().items() if k not in ("delta", "steps")}

    out = {}
    for a, pr in problems.items():
        names = [n for n in SETTINGS if key(problem_of(n, pr.delta, pr.steps)) == key(pr)]
        got = [r for r in rows if r.get("setting") in names]
        if not got:
            what = f"{a} / {pr.link} / {pr.loss} / m = {pr.m} / eta = {pr.eta:g}"
            out[a] = {"reason": f"{path} has no rows of setting {names[0]} ({what})" if names else
                                f"no setting of theorykit.cases.CASES is {what} (mark it with "
                                f"--mark {a}:delta_NN=DELTA)"}
            continue
        r = got[-1]
        v, T = r.get("delta_nn"), r.get("T")
        if not isinstance(v, float) or not math.isfinite(v):
            out[a] = {"reason": f"{path}, setting {r['setting']}: no delta_NN ({r.get('error') or 'empty'})"}
            continue
        conv = str(r.get("converged")).strip().lower() in ("true", "1", "1.0")
        by = f"by t = {T:g}" if isinstance(T, float) else "on the table's t grid"
        out[a] = {"delta": v, "converged": conv, "T": T, "setting": r["setting"],
                  "text": (f"delta_NN ({a}) = {v:.4g} (converged {by})" if conv else
                           f"delta_NN ({a}) >= {v:.4g} (not converged {by})")}
    return out


def _prediction_key(args, pr) -> str:
    """The cache key of one curve's finite-d prediction points in --csv-dir: the Problem (but its delta), d, paths
    and replicas (one record, one entry per delta)."""
    from ..cache import content_key

    return "predict_" + content_key({**pr.as_dict(), "delta": None, "d": args.d, "paths": args.paths,
                                     "replicas": args.replicas}, 16)


def _prediction(args, pr, deltas) -> dict:
    """The finite-d prediction of one curve (theorykit.finite_d at --d by the horizon --steps), or the reason there is
    none: {points, how, reason, cached}.  With --csv-dir the points that did not fail are stored and read back
    (cached: how many were)."""
    from ..cache import JsonCache
    from ..errors import TheorykitError
    from ..thresholds import finite_d

    store = JsonCache(args.csv_dir) if args.csv_dir else None
    key = _prediction_key(args, pr)
    done = (store.get(key) if store else None) or {}
    todo = [dl for dl in deltas if f"{dl:g}" not in done]
    new, how = [], done.get("how", "")
    try:
        if todo:
            fd = finite_d(pr, todo, [args.d], pr.steps, paths=args.paths, replicas=args.replicas, refine=0,
                          progress=bool(args.progress))  # the curve on the plotted grid, cached per delta
            how = fd.method
            for i, q in enumerate(fd.per_delta):
                new.append({"delta": q["delta"], "probability": float(fd.probability[i, 0, -1]),
                            "low": float(fd.low[i, 0, -1]), "high": float(fd.high[i, 0, -1]),
                            "noise_limited": q["noise_limited"], "error": q["error"]})
    except TheorykitError as e:
        return {"points": [], "how": "", "reason": f"no finite-d prediction: {e}", "cached": 0}
    fresh = {f"{p['delta']:g}": p for p in new}
    if store and new:
        store.put(key, {**done, **{k: p for k, p in fresh.items() if not p["error"]}, "how": how})
    pts = [{**done, **fresh}[f"{dl:g}"] for dl in deltas]
    return {"points": pts, "how": how, "reason": None, "cached": len(deltas) - len(todo)}


def _prediction_caption(preds) -> str:
    parts = []
    for a, p in preds.items():
        if p["reason"]:
            parts.append(f"{a}: {p['reason']}")
            continue
        bad = [f"{q['delta']:g} ({q['error']})" for q in p["points"] if q["error"]]
        noisy = [f"{q['delta']:g}" for q in p["points"] if q["noise_limited"]]
        at = ", ".join(f"{q['delta']:g}" for q in p["points"])
        parts.append(f"{a}: {p['how']}, at delta = {at}" + (f"; failed at delta = {'; '.join(bad)}" if bad else "")
                     + (f"; {p['cached']} of {len(p['points'])} points read back from --csv-dir" if p["cached"] else "")
                     + (f"; m_star noise-limited (unreliable) at delta = {', '.join(noisy)}" if noisy else ""))
    drawn = any(not p["reason"] for p in preds.values())
    return (("Dashed with hatched bands: the finite-d prediction theorykit.finite_d (open squares: m_star "
             "noise-limited), band = the replicas' m* and V_eff +- 2 se (a band of the inputs, not a confidence "
             "interval). " if drawn else "") + ". ".join(parts))


def _success(args):
    from ..report import figures
    from ..report.table import parse_eta
    from ..errors import TheorykitError
    from ..problem import Problem
    from ..referee.sweeps import summarise, sweep

    acts = split_top(args.activations)
    eta = parse_eta(args.eta, acts)
    deltas = sorted(parse_numbers(args.deltas, "deltas"))
    given = [o for o, v in (("--predict-deltas", args.predict_deltas), ("--paths", args.paths),
                            ("--replicas", args.replicas)) if v is not None]
    if given and not args.predict:
        raise TheorykitError(f"{', '.join(given)} set the finite-d prediction: add --predict")
    pdeltas = sorted(parse_numbers(args.predict_deltas, "predict-deltas")) if args.predict_deltas else deltas
    args.paths, args.replicas = args.paths or 16384, args.replicas or 4
    marks = _marks(args.mark, acts)
    problems = {a: Problem(a, args.link, args.loss, args.width, eta=eta[a], delta=deltas[0], steps=args.steps)
                for a in acts}
    nn = _delta_nn_marks(args.delta_nn_table, problems) if args.delta_nn_table else {}
    for a, v in nn.items():
        if "delta" in v:
            if "delta_NN" in marks[a]:
                raise TheorykitError(f"delta_NN of {a} is given twice: by --mark and by --delta-nn-table")
            marks[a]["delta_NN"] = {"delta": v["delta"], "text": v["text"]}
    labels = {a: f"{a} (eta {eta[a]:g})" for a in acts}
    curves, data, preds = {}, {}, {}
    for a in acts:
        pr, label = problems[a], labels[a]
        marks[label] = {"delta_alg": pr.analysis.delta_alg.value, **marks.pop(a)}
        csv_path = None if not args.csv_dir else os.path.join(args.csv_dir,
                                                              f"success_{len(curves)}_{a}.csv".replace("/", "_"))
        if csv_path:
            os.makedirs(args.csv_dir, exist_ok=True)
        df = sweep(deltas, range(args.seeds), problem=pr, d=args.d, stop_after_escape=0, csv=csv_path,
                   processes=args.processes, progress=bool(args.progress) or None, quiet=True)
        s = summarise(df)
        curves[label] = s
        data[a] = s[["delta", "runs", "successes", "success_probability", "low", "high"]].to_dict("records")
        if args.predict:
            preds[a] = _prediction(args, pr, pdeltas)
    xlim = figures.delta_range(deltas + (pdeltas if args.predict else []))
    off = [text for lab, ms in marks.items() for name, m in ms.items() for x, text in [figures.mark(name, lab, m)]
           if x is not None and not math.isnan(x) and not xlim[0] <= x <= xlim[1]]
    notes = [f"{a}: {p['reason']}" for a, p in preds.items() if p["reason"]]
    notes += [f"{a}: no delta_NN mark: {v['reason']}" for a, v in nn.items() if "reason" in v]
    title = (f"{args.link}, {args.loss} loss, m = {args.width}, d = {args.d}, horizon {args.steps}, {args.seeds} seeds "
             f"per delta (Wilson 95% bands)")
    fig = figures.success(curves, marks, title, xlim=xlim, notes=notes,
                          predictions={labels[a]: p["points"] for a, p in preds.items()})
    caption = ("Success probability of finite-d GD (hard overlap > 1/2 by the horizon) against delta, with delta_alg "
               "and the given marks as vertical lines")
    if args.predict:
        caption += ". " + _prediction_caption(preds)
    if nn:
        caption += ". delta_NN from " + args.delta_nn_table + " (part nn, spectral criterion; a lower bound when not "
        caption += "converged): " + "; ".join(f"{a}" + (f" (setting {v['setting']})" if "setting" in v else "")
                                              + f": {v.get('text') or v['reason']}" for a, v in nn.items())
    if off:
        caption += (f". Off the plotted range [{xlim[0]:.3g}, {xlim[1]:.3g}] (labelled arrows at its edge "
                    f"pointing out of it, 'off scale' in the legend): " + "; ".join(off))
    out = {"curves": data, "marks": marks}
    if args.predict:
        out["prediction"] = preds
    if nn:
        out["delta_nn"] = nn
    return fig, caption, out


def _hessian(args):
    from ..errors import TheorykitError

    if args.d is None:
        raise TheorykitError("plot hessian needs --d (the finite-d Hessian drawn over the theory)")
    if args.d * args.width > 1000:
        raise TheorykitError(f"plot hessian draws the full spectrum (dense): d * m <= 1000, got {args.d * args.width}")
    args.hessian_k, args.hessian_method = args.d * args.width, "dense"
    r = _hessian_command().run(args)
    from ..report import figures

    sim = r["simulated"] or {}
    title = (f"{args.activation} / {args.link} / {args.loss}, m = {args.width}, delta = {args.delta:g}, eta = "
             f"{args.eta:g}, t = {args.t}, d = {args.d} (constrained GD)")
    fig = figures.hessian(r["density"], sim.get("eigenvalues", []), r["outliers"], r["edge"], title,
                          spikes=r.get("spikes") or [])
    caption = ("Finite-d Hessian eigenvalues (dense, every one) against the predicted bulk density of the law of "
               "(D, zeta) at time t truncated at n = delta d; predicted edge dotted, hard outliers solid, "
               "single-sample spikes dashed")
    return fig, caption, {"edge": r["edge"], "outliers": r["outliers"],
                          "eigenvalues_min": min(sim.get("eigenvalues") or [math.nan])}


def _from_table(args, part):
    from ..report import figures

    rows = _read_rows(args.table, part)
    if args.settings:
        keep = set(args.settings.split(","))
        rows = [r for r in rows if r.get("setting") in keep]
    if part == "nn":
        rows = [r for r in rows if r.get("t") is not None]
        fig = figures.delta_star(rows, f"delta*(t) from {args.table} (2-se bars)")
        cap = "delta*(t) against GD time t, one line per setting (spectral criterion), 2-se error bars"
        data = [{k: r.get(k) for k in ("setting", "t", "delta_star", "delta_star_se")} for r in rows]
    elif part == "finite_d":
        fig = figures.escape_vs_d(rows, f"escape time against d from {args.table}")
        cap = ("Escape time against d (log scale), one panel per setting: GD's median over all runs (quartile bars) "
               "and the DMFT's predicted t_1/2 (dashed, band shaded); growth like ln d is a straight line")
        data = [{k: r.get(k) for k in ("setting", "delta", "d", "t_pred", "t_sim_median")} for r in rows]
    else:
        fig = figures.escape(rows, f"escape time against delta from {args.table}")
        cap = "Escape time (median, quartile bars; escaped/runs annotated) against delta, one line per d"
        data = [{k: r.get(k) for k in ("setting", "delta", "d", "escape_median", "escaped", "runs")} for r in rows]
    return fig, cap, {"rows": data}


def _runs(args):
    from ..referee.gd import simulate

    pr = make_problem(args, args.delta, args.steps)
    sims = []
    for seed in range(args.seeds):
        r = simulate(pr, d=args.d, seed=seed)
        sims.append({**r.as_dict(), "overlap": r.overlap.tolist()})
    return pr, sims


def _dmft_vs_sim(args):
    from ..report import figures
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
    from ..report import figures
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
    from ..report import figures

    check_args(args)
    t0 = time.perf_counter()
    make = {"success": _success, "hessian": _hessian, "delta-star": lambda a: _from_table(a, "nn"),
            "escape": lambda a: _from_table(a, "escape"), "escape-d": lambda a: _from_table(a, "finite_d"),
            "dmft-vs-sim": _dmft_vs_sim, "grokking": _grokking}
    fig, caption, data = make[args.kind](args)
    files = figures.save(fig, args.out)
    return {"kind": args.kind, "files": files, "caption": caption, "data": data,
            "seconds": time.perf_counter() - t0}


def text(r) -> str:
    return f"{r['kind']}: wrote {', '.join(r['files'])} ({r['seconds']:.1f} s)\n  {r['caption']}"
