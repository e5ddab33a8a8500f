"""theorykit threshold --activation A --link L --loss LOSS --width M [--a ...] [--b ...] --eta ETA [--t T [T ...]]
[--n N | --d D [D ...]] [--horizon T [--horizon-deltas D ...]] [--delta-range LO HI] [--points P] [--paths N]
[--replicas R] [--seed S] [--refine K] [--ridge R]
[--nn [T_MAX] [--nn-points K]] [--dyn T1 T2 [--dyn-deltas D ...]] [--progress] [--json]

delta*(t) (docs/theory.md §5): the smallest delta at which the DMFT state at time t has a hard outlier below the
Hessian's bulk, for every t given, from one DMFT scan in delta (theorykit.thresholds.delta_star); with --n or --d the
law at each delta is truncated at its 1/n quantile (n fixed, or n = delta d moving along the scan).

JSON keys: delta_alg (a number, or null when it does not exist: then delta_alg_reason says why), delta_alg_info
{exact, error, method}, delta_alg_hard ({exact, value, error, method} of the hard directions given the easy ones,
or null), comparator {name, value, why} (what delta_NN is compared with: delta_alg_hard when the link has easy
directions), delta_star [{t, d, value, stderr, dof, interpolation_error, interval95, edge, outlier,
overlap2, truncation_n, bracket, unbounded, tried, method, D_low, error}], with --nn also delta_nn {value, stderr,
criterion, converged, evidence {definition, rule, by_t, lower_bound, sequence, increments, settled, unbounded,
truncation, note}} (--nn alone, width <= 2: delta_nn {value, stderr null, error_bound, criterion "stationary",
converged, evidence {definition, rule, bracket, edge, outlier, overlap2, separation, separation_bracket,
truncation_n, tried, states, method, note}}), with --dyn also delta_dyn {value, stderr, criterion, gamma [{delta,
value, stderr, t_range, points}], t_range, definition, reason, method},
with --d D [D ...] --horizon T also finite_d [{d, horizon, midpoint, band, note}] and escape_time [{delta, d, t, band,
note}] (t null: P(capture) < 1/2 up to the horizon) and finite_d_info {deltas, d, horizon, per_delta, method; the
median start also paths, its DMFT paths},
settings, problem, seconds.  Every value that is not finite is null.  A t whose outlier margin does not change sign on
the grid has value null and its error (the margins' trend); when no t has a value the command exits 4 (no answer).
"""
import math
import time

from .. import defaults
from ._args import add_dmft_arguments, add_problem_arguments, check_args, check_hessian_width, fmt, integer, \
    make_problem, positive_float

EXAMPLE = ("example: theorykit threshold --activation gelu --link sign-symmetric --loss logistic --eta 1 "
           "--t 0 25 50 --delta-range 2 12 --points 6")


def _defaults():
    from .. import thresholds as th  # one set of defaults: delta_star's own

    return {"delta_range": th.THRESHOLD_DELTA_RANGE, "points": th.THRESHOLD_POINTS, "paths": th.THRESHOLD_PATHS,
            "replicas": th.THRESHOLD_REPLICAS, "refine": th.THRESHOLD_REFINE, "nn_points": th.NN_POINTS,
            "kinked_replica_paths": defaults.KINKED_REPLICA_PATHS}


def add_parser(sub):
    dv = _defaults()
    lo, hi = dv["delta_range"]
    p = sub.add_parser("threshold", help="delta*(t): the smallest delta with a hard outlier below the Hessian's bulk "
                                         "at GD time t (docs/theory.md §5)",
                       description="delta*(t) (docs/theory.md §5): the smallest sample ratio delta at which the "
                                   "Hessian at GD time t has a hard outlier below its bulk, for a list of t from one "
                                   "DMFT scan in delta (common random numbers) refined by regula falsi, with "
                                   "standard errors from the replicas; and delta_alg of the link.",
                       epilog=EXAMPLE)
    add_problem_arguments(p, delta=False)
    p.add_argument("--t", type=integer(0), nargs="+", default=None, metavar="T",
                   help="GD times t >= 0 of delta*(t) (one scan serves them all: it runs to max t)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--n", type=integer(1), default=None,
                   help="truncate the law at every delta at its 1/n quantile, n >= 1 samples (finite-n law)")
    g.add_argument("--d", type=integer(1), nargs="+", default=None, metavar="D",
                   help="the user's dimension(s) d >= 1: delta*(t) with the law truncated at n = delta d (moving "
                        "along the scan; one scan per d), and with --horizon the finite-d answers at each d")
    p.add_argument("--delta-range", type=positive_float, nargs=2, default=[float(lo), float(hi)],
                   metavar=("LO", "HI"), dest="delta_range",
                   help=f"scan range 0 < LO < HI of delta (log-spaced grid; default {lo:g} {hi:g})")
    p.add_argument("--points", type=integer(2, 1000), default=dv["points"],
                   help=f"DMFT solves on the delta grid, in 2..1000 (default {dv['points']})")
    add_dmft_arguments(p, None, dv["replicas"],
                       paths_default_help=f"{dv['paths']}; the capture runs of the finite-d answer (--d, --horizon) "
                                          f"of a kinked activation or loss: at least {dv['kinked_replica_paths']} "
                                          "per replica")
    p.add_argument("--refine", type=integer(0, 50), default=dv["refine"],
                   help=f"regula-falsi DMFT solves per t after the grid, in 0..50 (default {dv['refine']})")
    p.add_argument("--nn", type=integer(2), nargs="?", const=0, default=None, metavar="T_MAX",
                   help="also delta_NN: alone (width <= 2), delta*(infinity) at the stationary state GD converges to "
                        "(criterion 'stationary', converged by construction); with T_MAX >= 2, lim delta*(t) from "
                        "delta*(t) on a geometric t grid up to T_MAX (the same DMFT scan as --t), with its "
                        "convergence rule and evidence")
    p.add_argument("--nn-points", type=integer(3, 200), default=dv["nn_points"], dest="nn_points", metavar="K",
                   help=f"times on delta_NN's geometric grid, in 3..200 (default {dv['nn_points']})")
    p.add_argument("--dyn", type=integer(0), nargs=2, default=None, metavar=("T1", "T2"),
                   help="also the dynamical criterion: gamma(delta) = -d ln m*/dT fitted on T1 <= t <= T2 (a ladder of "
                        "nonlinear DMFT runs from small hard overlaps, each to T2, per delta; width 1) and delta_dyn, "
                        "where gamma crosses 0")
    p.add_argument("--dyn-deltas", type=positive_float, nargs="+", default=None, dest="dyn_deltas", metavar="D",
                   help="the deltas of gamma(delta) (default: the scan's grid)")
    p.add_argument("--horizon", type=integer(1), default=None, metavar="T",
                   help="with --d: GD at each d by this many steps: the midpoint delta_1/2(d, T) where "
                        "P(capture) = 1/2 and the escape times t_1/2(delta, d) (docs/theory.md §5). Width 1 with a "
                        "link even along its hard direction and no --horizon-deltas: root finding in --delta-range "
                        "on the DMFT run from the median effective initial overlap (two runs per delta); otherwise a "
                        "capture ladder of nonlinear DMFT runs per delta and ray of initial-overlap directions")
    p.add_argument("--rays", type=integer(2, 64), default=None, metavar="K",
                   help="with --horizon and --width >= 2: rays of initial-overlap directions per delta, on the "
                        "fundamental domain of the circle (width 2) or the sphere (width >= 3) under the problem's "
                        "symmetries (default 5)")
    p.add_argument("--horizon-deltas", type=positive_float, nargs="+", default=None, dest="horizon_deltas",
                   metavar="D", help="the deltas of the finite-d answers, from the capture ladder: P(capture) at each "
                   "(default: the midpoint alone by root finding where it applies, else the deltas of the scan's grid "
                   "that a bisection over it needs to bracket the crossing of P and its band's ends)")
    return p


def run(args) -> dict:
    from ..errors import TheorykitError
    from ..errors import NoAnswer
    from ..dynamics.stationary import G_NODES
    from ..thresholds import delta_star, spectral_inapplicable

    t0 = time.perf_counter()
    check_args(args)
    check_hessian_width(args)
    # --paths not given: THRESHOLD_PATHS, except the finite-d answer's own choice (finite_d_paths: more for a kink)
    paths_given = args.paths
    if args.paths is None:
        args.paths = defaults.THRESHOLD_PATHS
    lo, hi = args.delta_range
    if not lo < hi:
        raise TheorykitError(f"argument --delta-range: expected LO < HI, got {lo:g} {hi:g}")
    if args.dyn is not None:
        if args.dyn[0] + 2 > args.dyn[1]:
            raise TheorykitError(f"argument --dyn: expected T1 + 2 <= T2, got {args.dyn[0]} {args.dyn[1]}")
        if args.width != 1:
            raise TheorykitError("argument --dyn: the dynamical criterion is defined for --width 1")
        if args.dyn_deltas is not None and len(set(args.dyn_deltas)) < 2:
            raise TheorykitError(f"argument --dyn-deltas: give >= 2 distinct deltas, got {args.dyn_deltas}")
    elif args.dyn_deltas is not None:
        raise TheorykitError("argument --dyn-deltas: only with --dyn T1 T2")
    if args.horizon is not None:
        if not args.d:
            raise TheorykitError("argument --horizon: give the dimension(s) with --d D [D ...]")
        if args.rays is not None and args.width == 1:
            raise TheorykitError("argument --rays: only with --width >= 2 (width 1 has the two signs)")
    elif args.horizon_deltas is not None or args.rays is not None:
        raise TheorykitError(f"argument {'--horizon-deltas' if args.rays is None else '--rays'}: only with "
                             "--horizon T")
    if not (args.t or args.nn is not None or args.dyn is not None or args.horizon is not None):
        raise TheorykitError("nothing to compute: give --t T [T ...] (delta*(t)), --nn T_MAX, --dyn T1 T2 or --d D "
                             "--horizon T")
    asked = sorted(set(args.t or []))
    nn_times = []
    stationary_nn = args.nn == 0
    if stationary_nn and args.width not in G_NODES:
        raise TheorykitError(f"argument --nn: delta*(infinity) from the stationary state needs --width <= "
                             f"{max(G_NODES)} (got {args.width}); give --nn T_MAX for the long-time DMFT sequence")
    if args.nn is not None and not stationary_nn:
        from ..thresholds import NN_FIRST_T, geometric_times

        nn_times = geometric_times(args.nn, args.nn_points, min(NN_FIRST_T, max(1, args.nn // 4)))
        if len(nn_times) < 3:  # before the scan: delta_NN's rule needs three grid times
            raise TheorykitError(f"argument --nn: T_MAX = {args.nn} gives the t grid {nn_times}; delta_NN needs >= 3 "
                                 "times (raise T_MAX)")
    times = sorted(set(asked) | set(nn_times))  # one scan serves both
    problem = make_problem(args, lo, max(times + [1]))
    da = problem.analysis.delta_alg
    psd = spectral_inapplicable(problem) if times else None
    if psd and args.dyn is None:
        raise TheorykitError(psd + "; add --dyn T1 T2 for the dynamical criterion")
    every, res = [], []
    for d in (args.d or [None]) if times and not psd else []:  # one scan per truncation dimension
        try:
            scan = delta_star(problem, times, delta_range=(lo, hi), points=args.points, d=d, n=args.n,
                              paths=args.paths, replicas=args.replicas, seed=args.seed, refine=args.refine,
                              progress=bool(args.progress))
        except NoAnswer as e:  # no t resolved at this d: every entry says why, the rest of the command goes on
            scan = list(e.partial or [])
        every = every or scan  # delta_NN's sequence: the first d's
        res += [(d, q) for q in scan if q.t in asked]
    info = da.as_dict()
    out = {"delta_alg": da.value}
    if da.value is None:  # +infinity: no spectral weak recovery at any delta
        out["delta_alg_reason"] = f"{info.get('reason') or 'delta_alg is infinite for this link'} [{da.method}]"
    out["delta_alg_info"] = info
    an = problem.analysis
    out["delta_alg_hard"] = an.delta_alg_hard.as_dict() if an.delta_alg_hard is not None else None
    # delta_NN is about the hard directions: once the easy ones are learned, the spectral comparator is the hard
    # subspace's threshold given them; without easy directions it is delta_alg itself
    hard_cmp = an.easy_dim > 0 and an.hard_dim > 0
    out["comparator"] = {"name": "delta_alg_hard" if hard_cmp else "delta_alg",
                         "value": (an.delta_alg_hard.value if an.delta_alg_hard is not None else None) if hard_cmp
                         else da.value,
                         "why": ("the link has easy directions (delta_alg = 0 for them): delta_NN is compared with "
                                 "the hard directions' delta_alg given the easy coordinates"
                                 + ("" if an.delta_alg_hard is not None else f" ({an.hard_reason})"))
                         if hard_cmp else "no easy direction: delta_alg is the hard directions' threshold"}
    out["delta_star"] = [dict(q.as_dict(), d=d) for d, q in res]
    if psd:
        out["delta_star_reason"] = psd
    if args.dyn is not None:
        import numpy as np

        from ..thresholds import delta_dyn

        grid = args.dyn_deltas or list(np.geomspace(lo, hi, args.points))
        dyn = delta_dyn(problem, grid, tuple(args.dyn), paths=args.paths, replicas=args.replicas, seed=args.seed,
                        progress=bool(args.progress))
        out["delta_dyn"] = dyn.as_dict()
    if stationary_nn and psd is None:
        psd = spectral_inapplicable(problem)
    if stationary_nn and psd and args.dyn is None:
        raise TheorykitError(psd + "; add --dyn T1 T2 for the dynamical criterion")
    if stationary_nn and not psd:
        from ..thresholds import delta_star_infinity

        d0 = (args.d or [None])[0]
        si = delta_star_infinity(problem, delta_range=(lo, hi), points=args.points, d=d0, n=args.n,
                                 progress=bool(args.progress))
        out["delta_nn"] = si.as_delta_nn({"d": d0} if d0 else ({"n": args.n} if args.n else None))
    elif args.nn is not None and psd:  # the one criterion that applies: delta_NN is delta_dyn (the API's rule)
        from ..thresholds import DeltaNN

        out["delta_nn"] = DeltaNN.from_dynamical(dyn, psd).as_dict()
    elif args.nn is not None:
        from ..thresholds import delta_nn_from

        try:
            out["delta_nn"] = delta_nn_from([q for q in every if q.t in nn_times], d=(args.d or [None])[0],
                                            n=args.n).as_dict()
        except NoAnswer as e:
            out["delta_nn"] = {"value": None, "stderr": None, "criterion": "spectral", "converged": False,
                               "error": str(e), "evidence": {"sequence": [q.as_dict() for q in every
                                                                          if q.t in nn_times]}}
    if args.horizon is not None:
        import numpy as np

        from ..thresholds import FINITE_D_RAYS, finite_d, finite_d_midpoint, finite_d_paths, median_start_applies

        if args.horizon_deltas is None and median_start_applies(problem) is None:
            # the midpoint alone, by root finding from the median start (two DMFT runs per delta)
            fm = finite_d_midpoint(problem, args.d, args.horizon, delta_range=(lo, hi), paths=paths_given,
                                   replicas=args.replicas, seed=args.seed, progress=bool(args.progress)).as_dict()
            evals = fm.pop("evaluations")
            fd = {"deltas": sorted({e["delta"] for e in evals}), "d": fm["d"], "horizon": fm["horizon"],
                  "per_delta": evals, "method": fm["method"], "finite_d": fm["finite_d"],
                  "escape_time": fm["escape_time"],
                  "paths": finite_d_paths(problem, args.replicas, paths_given)}
        else:
            # the deltas given are each answered; a generated grid is searched by bisection for the crossing
            grid = args.horizon_deltas or list(np.geomspace(lo, hi, args.points))
            fd = finite_d(problem, grid, args.d, args.horizon, paths=paths_given, replicas=args.replicas,
                          seed=args.seed, rays=args.rays or FINITE_D_RAYS,
                          scan="grid" if args.horizon_deltas else "bisect", progress=bool(args.progress)).as_dict()
        out["finite_d"] = fd.pop("finite_d")
        out["escape_time"] = fd.pop("escape_time")
        out["finite_d_info"] = fd
    out["settings"] = {"activation": problem.activation, "link": problem.link, "loss": problem.loss,
                       "width": problem.m, "a": problem.a_vector.tolist(), "b": problem.b_vector.tolist(),
                       "eta": problem.eta, "ridge": problem.ridge, "t": times, "n": args.n, "d": args.d,
                       "delta_range": [lo, hi], "points": args.points, "paths": args.paths,
                       "replicas": args.replicas, "seed": args.seed, "refine": args.refine,
                       "hard_dim": problem.analysis.hard_dim, "nn": args.nn, "nn_times": nn_times,
                       "dyn": args.dyn, "dyn_deltas": args.dyn_deltas, "horizon": args.horizon,
                       "horizon_deltas": args.horizon_deltas}
    out["problem"] = problem.as_dict()  # with settings it reruns the result (the dmft command's convention)
    out["seconds"] = time.perf_counter() - t0
    failed = [q for q in out["delta_star"] if q["error"]] or (out.get("delta_nn") or {}).get("error")
    answered = not failed or (any(q["value"] == q["value"] for q in out["delta_star"]) or psd
                or (out.get("delta_nn") or {}).get("value") is not None or "delta_dyn" in out or "finite_d" in out)
    if not answered:  # every question asked failed numerically: say so (exit 4), with every reason
        raise NoAnswer("; ".join(q["error"] for q in out["delta_star"] if q["error"])
                       or (out.get("delta_nn") or {}).get("error", "no threshold on the grid"))
    return out  # theorykit.cli.to_json writes NaN/inf as null and reports them under "non_finite"


def text(r) -> str:
    s = r["settings"]
    trunc = f", n = {s['n']}" if s["n"] else (f", d = {s['d']} (n = delta d)" if s["d"] else "")
    lines = [f"{s['activation']} / {s['link']} / {s['loss']}, m = {s['width']}, eta = {s['eta']:g}{trunc}; delta in "
             f"[{s['delta_range'][0]:g}, {s['delta_range'][1]:g}] ({s['points']} points + {s['refine']} refinements "
             f"per t), {s['paths']} DMFT paths in {s['replicas']} replicas, {r['seconds']:.1f} s",
             f"  delta_alg = {fmt(r['delta_alg'], '.6g', 'infinite')}"
             + (f" = {r['delta_alg_info']['exact']} (exact)" if (r.get("delta_alg_info") or {}).get("exact") else
                f" ({(r.get('delta_alg_info') or {}).get('method', 'numerical')})")]
    cmp_ = r.get("comparator") or {}
    if cmp_.get("name") == "delta_alg_hard":
        h = r.get("delta_alg_hard") or {}
        lines.append(f"  delta_alg of the hard directions given the easy ones = "
                     f"{fmt(cmp_.get('value'), '.6g', 'not computed')}"
                     + (f" = {h['exact']} (exact)" if h.get("exact") else "")
                     + ": the comparator of delta*(t) and delta_NN (delta_alg = 0 refers to the easy directions)")
    if r["delta_star"]:
        lines.append(f"  {'t':>6} {'delta*':>10} {'stderr':>9} {'95% interval':>19} {'edge':>11} {'outlier':>11} "
                     f"{'overlap^2':>9} {'n':>8} tail")
    for q in r["delta_star"]:
        if q.get("error"):
            lines.append(f"  {q['t']:>6} {'—':>10}  {q['error']}")
            continue
        unb = {True: "unbounded", False: "bounded", None: "undecided"}[q["unbounded"]]
        lo, hi = q.get("interval95") or (None, None)
        ci = f"[{fmt(lo, '.5g')}, {fmt(hi, '.5g')}]" if lo is not None and math.isfinite(lo) else "-"
        lines.append(f"  {q['t']:>6} {fmt(q['value'], '10.5g'):>10} {fmt(q['stderr'], '9.2g'):>9} {ci:>19} "
                     f"{fmt(q['edge'], '11.5g'):>11} {fmt(q['outlier'], '11.5g'):>11} {fmt(q['overlap2'], '9.3g'):>9} "
                     f"{fmt(q['truncation_n'], 'd', '-'):>8} {unb}")
    if any(not q.get("error") for q in r["delta_star"]):
        dofs = sorted({q["dof"] for q in r["delta_star"] if q.get("dof")})
        lines.append("  columns: delta* with its standard error: the spread over the independently drawn DMFT "
                     f"replicas / sqrt(replicas), {'/'.join(map(str, dofs)) or '?'} degrees of freedom; the 95% "
                     "interval is Student's t on it plus the root's interpolation error in the last bracket: it "
                     "covers the paths' sampling error and the delta grid, not the latent rule; edge: the left edge "
                     "of the Hessian's bulk, outlier: its hard outlier eigenvalue and overlap^2: the "
                     "outlier eigenvector's squared overlap with the hard subspace, all at the bracket's upper delta; "
                     "n: the law's truncation n (- none); tail: whether D is unbounded below there")
        lines.append(f"  method: {next(q for q in r['delta_star'] if not q.get('error'))['method']}")
    if r.get("delta_star_reason"):
        lines.append(f"  delta*(t) = infinity: {r['delta_star_reason']}")
    nn = r.get("delta_nn")
    if nn and nn.get("error"):
        lines.append(f"  delta_NN: no value ({nn['error']})")
    elif nn and nn["criterion"] == "stationary":
        ev = nn["evidence"]
        lines.append(f"  delta_NN (stationary) = delta*(infinity) = {fmt(nn['value'], '.5g')} (error bound "
                     f"{fmt(nn['error_bound'], '.2g')}; bracket [{fmt(ev['bracket'][0], '.5g')}, "
                     f"{fmt(ev['bracket'][1], '.5g')}], edge {fmt(ev['edge'], '.4g')}, outlier "
                     f"{fmt(ev['outlier'], '.4g')}, overlap^2 {fmt(ev['overlap2'], '.3g')}), converged by "
                     "construction")
        lines.append(f"  the hard outlier separates from the bulk at delta = {fmt(ev['separation'], '.5g')} (a "
                     "positive eigenvalue: the state is still a minimum) and turns negative at delta*(infinity)")
        if ev["states"]:
            lines.append("  no stationary state at delta = " + ", ".join(f"{k} ({v})" for k, v in ev["states"].items())
                         + ": below the interpolation threshold the limit depends on the initialisation")
        lines.append(f"  definition: {ev['definition']}")
    elif nn and nn["criterion"] == "dynamical":
        lines.append(f"  delta_NN (dynamical) = {fmt(nn['value'], '.5g')} +- {fmt(nn['stderr'], '.2g')}: "
                     f"{nn['evidence']['note']}")
    elif nn:
        ev = nn["evidence"]
        seq = ", ".join(f"{q['t']}: {fmt(q['value'], '.4g')}" for q in ev["sequence"])
        verdict = "converged" if nn["converged"] else f"not converged by t = {ev['by_t']} (a lower bound)"
        lines.append(f"  delta_NN ({nn['criterion']}) = {fmt(nn['value'], '.5g')} +- {fmt(nn['stderr'], '.2g')}, "
                     f"{verdict}; delta*(t) on the grid: {seq}")
        lines.append(f"  rule: {ev['rule']}")
        lines.append(f"  {ev['note']}")
    dy = r.get("delta_dyn")
    if dy:
        gs = ", ".join(f"{g['delta']:.4g}: {fmt(g['value'], '.3g')} +- {fmt(g['stderr'], '.1g')}" for g in dy["gamma"])
        val = (f"{fmt(dy['value'], '.4g')} +- {fmt(dy['stderr'], '.2g')}"
               if dy["value"] is not None and dy["value"] == dy["value"]
               else f"undefined ({dy['reason']})")
        lines.append(f"  delta_dyn ({dy['criterion']}) = {val}; gamma(delta) on t in {dy['t_range']}: {gs}")
    for f in r.get("finite_d", []):
        undefined = f["midpoint"] is None or f["midpoint"] != f["midpoint"]  # None or NaN
        mid = (f"{fmt(f['midpoint'], '.4g')} [{fmt(f['band'][0], '.4g')}, {fmt(f['band'][1], '.4g')}]"
               if not undefined else f"undefined ({f['note'] or 'no root in the range'})")
        esc = ", ".join(f"{e['delta']:.4g}: {e['t'] if e['t'] is not None else '> ' + str(f['horizon'])}"
                        for e in r.get("escape_time", []) if e["d"] == f["d"])
        lines.append(f"  d = {f['d']}, horizon {f['horizon']}: delta_1/2 = {mid}; escape time t_1/2 by delta: {esc}")
        if f.get("note") and not undefined:
            lines.append(f"    note: {f['note']}")
    if r.get("finite_d_info"):
        lines.append(f"  finite d: {r['finite_d_info']['method']}")
    return "\n".join(lines)
