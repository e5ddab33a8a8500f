"""theorykit optimise --activation "gelu(x) + c*x**2" --param c=-1:1 --link phase-retrieval [--loss square]
[--width 1] [--eta 1] [--eta-rule fixed|matched] [--objective finite_d@d=400:T=150] [--baseline gelu] [--grid 5]
[--refine 2] [--deltas ...] [--delta-range LO HI] [--paths N] [--replicas R] [--cache DIR]
[--processes P | --scheduler ADDRESS] [--out STEM] [--progress] [--json]

Search a family of activations (or losses) with one or two named parameters for the fewest samples per dimension
(theorykit/report/optimise.py, docs/optimise.md): a grid, then quadratic refinement around the best point, every
candidate with the same random numbers; evaluations cached by the candidate's hash (a rerun reads them back, an
interrupted search resumes).  Candidates that cannot be built or evaluated are reported and skipped.  With --out,
writes STEM.csv and STEM.md (every evaluation, the regenerating command) and STEM.png/.pdf (the objective against
the parameter).

JSON keys: best {params, value, stderr, param_stderr, how}, evaluations [{params, value, stderr, low, high, status,
error, stage, seconds}], baseline {activation, value, stderr, low, high, error}, delta_alg, gap_to_delta_alg,
ingredients {winner, baseline: {activation, hermite, D_t0, escape_time}}, settings, method, files, seconds.
"""
import os
import time

from ._args import add_cell_arguments, add_worker_arguments, cell_arguments, check_workers, integer


def add_parser(sub):
    p = sub.add_parser("optimise", help="search an activation (or loss) family for the fewest samples: grid + "
                                        "quadratic refinement, cached, with the baseline beside it",
                       description=__doc__.split("\n\n")[1],
                       epilog='example: theorykit optimise --activation "x*erf(a*x)" --param a=0.2:5 --link '
                              'phase-retrieval --objective delta_star@t=0:d=1000 --out tables/my_search')
    p.add_argument("--activation", required=True, help="expression in x with the parameters' names, or a preset")
    p.add_argument("--param", action="append", required=True, metavar="NAME=LOW:HIGH",
                   help="a parameter and its bounds (once or twice)")
    p.add_argument("--link", required=True, help="preset or expression in z (or z1..zk, eps)")
    p.add_argument("--loss", default="square", help="preset or expression in y, yhat (may carry the parameters)")
    p.add_argument("--width", type=integer(1), default=1, help="number of hidden units m (default 1)")
    p.add_argument("--eta", type=float, default=1.0, help="the step size (default 1; see --eta-rule)")
    p.add_argument("--eta-rule", choices=("fixed", "matched"), default="fixed",
                   help="fixed: every candidate at --eta (default); matched: candidate c at eta E[sigma_base'^2] / "
                        "E[sigma_c'^2], the same linearised step as the baseline's")
    p.add_argument("--objective", default="finite_d@d=400:T=150",
                   help="finite_d@d=D:T=T, delta_star@t=T[:d=D] or delta_nn@T=T (default %(default)s)")
    p.add_argument("--baseline", default="gelu", help="activation compared with the winner ('none' for none)")
    p.add_argument("--grid", type=integer(3), default=5, help="grid points per parameter (default 5)")
    p.add_argument("--refine", type=integer(0), default=2, help="quadratic refinement rounds (default 2)")
    add_cell_arguments(p, "2,30", "finite_d: the ends bracket the midpoint")
    p.add_argument("--cache", default=None, help="folder of finished evaluations (default "
                                                 "~/.cache/theorykit/optimise)")
    add_worker_arguments(p, "candidate", "1, one candidate at a time")
    p.add_argument("--out", default=None, help="stem: writes STEM.csv and STEM.png/.pdf")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr")
    return p


def run(args) -> dict:
    import math

    from ..errors import TheorykitError
    from ..report.optimise import figure, optimise
    from ..report.writer import now

    t0, started = time.perf_counter(), now()
    check_workers(args)
    cells = cell_arguments(args)
    if len(cells["deltas"]) < 2:
        raise TheorykitError(f"--deltas: give the two ends of the finite_d bracket, got {args.deltas!r}")
    cache = args.cache or os.path.join(os.path.expanduser("~"), ".cache", "theorykit", "optimise")
    if args.out:  # before the search: a bad --out fails at once
        from ..report.writer import check_table_writable

        check_table_writable(args.out)
    base = None if str(args.baseline).lower() == "none" else args.baseline
    r = optimise(args.activation, args.link, args.param, args.objective, loss=args.loss, width=args.width,
                 eta=args.eta, eta_rule=args.eta_rule, baseline=base, grid=args.grid, refine=args.refine, cache=cache,
                 processes=args.processes or 1, scheduler=args.scheduler, progress=bool(args.progress), **cells)
    out = r.as_dict()
    alg = r.delta_alg
    out["gap_to_delta_alg"] = (r.best["value"] - alg) if alg is not None and math.isfinite(r.best["value"]) else None
    out["files"] = None
    if args.out:
        from ..report.writer import md_table, write_table

        rows = [{**e["params"], **{k: e.get(k) for k in ("value", "stderr", "low", "high", "status", "stage", "error",
                                                          "seconds")}} for e in r.evaluations]
        cols = [p.name for p in r.params] + ["value", "stderr", "low", "high", "status", "stage", "error", "seconds"]
        par = ", ".join(f"{k} = {v:.4g} ± {r.best['param_stderr'][k]:.2g}" for k, v in r.best["params"].items())
        body = [f"Best: {par}: {r.best['value']:.4g} ± {r.best['stderr']:.2g} ({r.best['how']}).", "",
                md_table(cols, [[row[c] for c in cols] for row in rows]), ""]
        files = write_table(args.out, rows, cols, body, title=f"theorykit optimise: {args.activation}",
                            command=command_line(args), started=started, wall=time.perf_counter() - t0,
                            timing="evaluations read from the cache count their original seconds",
                            header=[f"Objective {r.settings['objective']} on {args.link} ({args.loss}, m = "
                                    f"{args.width}, eta = {args.eta:g}); {r.method}."])
        out["files"] = list(files) + list(figure(r, args.out))
    return out


def command_line(args) -> str:
    """The regenerating command, every option explicit."""
    import shlex

    parts = ["theorykit", "optimise", "--activation", args.activation]
    for p in args.param:
        parts += ["--param", p]
    parts += ["--link", args.link, "--loss", args.loss, "--width", str(args.width), "--eta", f"{args.eta:g}",
              "--objective", args.objective, "--baseline", str(args.baseline), "--grid", str(args.grid), "--refine",
              str(args.refine), "--deltas", args.deltas, "--delta-range", f"{args.delta_range[0]:g}",
              f"{args.delta_range[1]:g}", "--paths", str(args.paths), "--replicas", str(args.replicas), "--out",
              args.out]
    return " ".join(shlex.quote(p) for p in parts)


def text(r) -> str:
    b, s = r["best"], r["settings"]
    par = ", ".join(f"{k} = {v:.4g} ± {r['best']['param_stderr'][k]:.2g}" for k, v in b["params"].items())
    lines = [f"{s['activation']} on {s['link']} ({s['loss']}, m = {s['width']}, eta = {s['eta']:g}), objective "
             f"{s['objective']}: {len(r['evaluations'])} evaluations, {r['seconds']:.1f} s",
             f"  best: {par}: {b['value']:.4g} ± {b['stderr']:.2g}"]
    if r.get("baseline"):
        bl = r["baseline"]
        lines.append(f"  baseline {bl['activation']}: " + (f"{bl['value']:.4g} ± {bl['stderr']:.2g}"
                                                         if bl["value"] == bl["value"] else bl["error"]))
    if r.get("delta_alg") is not None:
        lines.append(f"  delta_alg = {r['delta_alg']:.4g} (gap {r['gap_to_delta_alg']:.3g})"
                     if r.get("gap_to_delta_alg") is not None else f"  delta_alg = {r['delta_alg']:.4g}")
    for who, ing in (r.get("ingredients") or {}).items():
        if not isinstance(ing, dict) or "error" in ing:
            continue
        h = ing.get("hermite")
        D = ing.get("D_t0") or {}
        esc = ing.get("escape_time")
        lines.append(f"  {who}: Hermite mu_0..mu_4 " + ("[" + ", ".join(f"{c:.3g}" for c in h) + "]" if h else "-")
                     + (f"; D at t = 0: mean {D['mean']:.3g}, 1e-3 quantile {D['q1e-3']:.3g}, min {D['min']:.3g}"
                        if "mean" in D else "")
                     + (f"; escape time t_1/2 = {esc['t']} at delta = {esc['delta']:.4g}" if esc else ""))
    for e in r["evaluations"]:
        par = ", ".join(f"{k} = {v:.4g}" for k, v in e["params"].items())
        val = f"{e['value']:.4g} ± {e['stderr']:.2g}" if e["value"] == e["value"] else e["error"]
        lines.append(f"    [{e['stage']}] {par}: {val} ({e['status']})")
    if r.get("files"):
        lines.append("wrote " + ", ".join(r["files"]))
    return "\n".join(lines)
