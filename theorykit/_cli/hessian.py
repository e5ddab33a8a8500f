"""theorykit hessian --activation A --link L --loss LOSS --width M [--a ...] [--b ...] --delta D --eta ETA --t T
[--d DIM] [--ridge R] [--paths N] [--replicas R] [--seed S] [--points P] [--hessian-k K]
[--hessian-method auto|lanczos|dense] [--progress] [--json]

The Hessian at time t of gradient descent (docs/theory.md §4): one DMFT solve to t keeps the law of (D, zeta) at t
(theorykit.thresholds.law_at), whose bulk density, left edge and hard outliers come from
theorykit.spectra.hessian.  With --d the law is truncated at n = delta d (its 1/n quantile: the finite-n law, needed
where D is unbounded below), the predicted single-sample spikes come with it, and the finite-d referee (constrained
GD at the same t, bottom Hessian eigenpairs) is run beside it.

JSON keys: t, edge, top_edge (the bulk's right edge lambda_+, its top tail truncated at n with --d), eta_top_edge
(eta lambda_+: above 2, GD runs beyond its edge of stability, and a note says so), density {lambda, rho}, outliers
[{lambda, overlap2, negative, direction}], unbounded,
truncation_n, D_tail, simulated (null without --d; else {t, eigenvalues, overlap2, hard_weight, d, n, constrained,
seed, method, status}), settings, seconds; also spikes (with --d: [{lambda_min_D, lambda}], lowest D first, lambda
null when the spike falls inside the bulk) and spikes_from (which samples), outliers_from, overlap2_below_edge (the
hard overlap^2 below the bulk in all, outliers and spikes together), margin (null when the
link has no hard direction), edge_case ("fold", "domain" or "atom"), atom_mass (the kernel of H: an atom at lambda =
ridge), method, notes, law {source, paths}, problem.  Every value that is not finite
is null (theorykit.cli.to_json, which lists them under "non_finite").
"""
import math
import time

import numpy as np

from .. import defaults
from ._args import add_dmft_arguments, add_problem_arguments, check_args, check_hessian_width, fmt, integer, \
    make_problem

EXAMPLE = ("example: theorykit hessian --activation gelu --link phase-retrieval --loss square --delta 10 --eta 1 "
           "--t 20 --d 500 --paths 8192 --replicas 4")
#: default density points, finite-d eigenpairs and predicted spikes
POINTS = 100
HESSIAN_K = 10
SPIKES = 5


# ------------------------------------------------------------------------------------------------ the command
def add_parser(sub):
    p = sub.add_parser("hessian", help="Hessian at time t: bulk density, left edge, hard outliers "
                                       "(docs/theory.md §4), with --d beside the finite-d Hessian",
                       description="The Hessian of the empirical risk at GD time t, from the DMFT's law of (D, zeta) "
                                   "at t (docs/theory.md §4): bulk density, left edge and hard outliers with their "
                                   "overlap^2; with --d the finite-n law (truncated at n = delta d), the predicted "
                                   "single-sample spikes and the finite-d referee's bottom eigenpairs at the same t.",
                       epilog=EXAMPLE)
    add_problem_arguments(p)
    p.add_argument("--t", type=integer(0), required=True, help="GD time (step) t >= 0 at which the Hessian is taken")
    p.add_argument("--d", type=integer(1), default=None,
                   help="the user's dimension d >= 1: truncates the law at n = delta d and runs the finite-d referee "
                        "(constrained GD, bottom Hessian eigenpairs) at the same t")
    from ..thresholds import THRESHOLD_PATHS, THRESHOLD_REPLICAS

    add_dmft_arguments(p, THRESHOLD_PATHS, THRESHOLD_REPLICAS)
    p.add_argument("--points", type=integer(2, 10000), default=POINTS,
                   help=f"points of the bulk density between its edges, in 2..10000 (default {POINTS})")
    p.add_argument("--hessian-k", type=integer(1, 1000), default=HESSIAN_K, dest="hessian_k",
                   help=f"with --d: bottom eigenpairs of the finite-d Hessian, in 1..1000 (default {HESSIAN_K})")
    p.add_argument("--hessian-method", choices=["auto", "lanczos", "dense"], default=defaults.SIM_HESSIAN_METHOD,
                   dest="hessian_method", help="with --d: finite-d eigensolver (auto: dense for m*d <= 400, else "
                                               "Lanczos)")
    return p


def _check_simulation(problem, d: int):
    """Refuse a finite-d referee run that is too large before the DMFT runs (the referee's own up-front checks)."""
    from ..referee.gd import check_request

    return check_request(problem, d)[0]


def run(args) -> dict:
    from ..errors import TheorykitError
    from ..spectra.hessian import hessian_density, single_sample_spikes
    from ..thresholds import hessian

    t0 = time.perf_counter()
    check_args(args)
    check_hessian_width(args)
    t, d = args.t, args.d
    problem = make_problem(args, args.delta, t)
    if d is not None:
        _check_simulation(problem, d)
    progress = bool(args.progress)
    h = hessian(problem, t, d=d, paths=args.paths, replicas=args.replicas, seed=args.seed, progress=progress)
    law, pred, res = h.law, h.prediction, h.dmft
    notes = list(pred.notes)
    try:
        lam, rho = hessian_density(law, points=args.points)
        density = {"lambda": lam.tolist(), "rho": rho.tolist()}
    except TheorykitError as e:  # a numerical failure of the density, not a bad input: report it, keep the rest
        density = {"lambda": [], "rho": [], "error": str(e)}
        notes.append(f"density not computed: {e}")

    spikes = None
    simulated = None
    spikes_from = None
    if d is not None:
        spikes, spikes_from = _spikes(law, pred, single_sample_spikes)
        simulated = _simulated(problem, args, d, t, progress)

    outliers = [{"lambda": o.lam, "overlap2": o.overlap2, "negative": o.negative, "direction": list(o.direction)}
                for o in pred.outliers]
    settings = {"activation": problem.activation, "link": problem.link, "loss": problem.loss, "width": problem.m,
                "a": problem.a_vector.tolist(), "b": problem.b_vector.tolist(), "delta": problem.delta,
                "eta": problem.eta, "t": t, "ridge": problem.ridge, "d": d, "paths": args.paths,
                "replicas": args.replicas, "seed": args.seed, "points": args.points,
                "hessian_k": args.hessian_k if d is not None else None,
                "hessian_method": args.hessian_method if d is not None else None,
                "hard_dim": law.kH, "dmft_status": res.status, "latent": res.settings.get("latent"),
                "dmft_seconds": res.seconds}
    eta_top = float(problem.eta) * h.top_edge
    if not math.isfinite(eta_top):
        notes.append("the bulk's right edge was not computed (its continuation failed on this law)")
    elif eta_top > 2:
        notes.append(f"eta lambda_+ = {eta_top:.3g} > 2: GD runs beyond its edge of stability at t = {t} (the bulk's "
                     "top directions are unstable under the linearised step; GD oscillates there and is held by the "
                     "nonlinearity)")
    out = {"t": t, "edge": pred.edge, "top_edge": h.top_edge, "eta_top_edge": eta_top, "density": density,
           "outliers": outliers, "unbounded": pred.unbounded,
           "truncation_n": law.truncation_n, "D_tail": pred.D_tail, "simulated": simulated, "settings": settings}
    if spikes is not None:
        out["spikes"] = spikes
        out["spikes_from"] = spikes_from
    out["outliers_from"] = getattr(pred, "outliers_from", "law")
    out.update({"margin": pred.margin, "edge_case": pred.edge_case, "atom_mass": pred.atom_mass,
                "overlap2_below_edge": pred.overlap2_below_edge, "method": pred.method, "notes": notes,
                "law": {"source": law.source, "paths": int(len(law.weights))}, "problem": problem.as_dict()})
    out["seconds"] = time.perf_counter() - t0
    return out  # theorykit.cli.to_json writes NaN/inf as null and reports them under "non_finite"


def _spikes(law, pred, single_sample_spikes):
    """The predicted lowest single-sample eigenvalues of the finite-n law, lowest D first (at most SPIKES): the
    prediction's own (``pred.spikes``, of the truncated law's expected lowest samples ``law.extremes``) when it has
    them, else those of the paths the truncation removed (``law.removed``).  Returns (list, how)."""
    ext = getattr(law, "extremes", None)
    own = tuple(getattr(pred, "spikes", ()) or ())
    if own and isinstance(ext, dict) and len(ext.get("D", ())) == len(own):
        D, lams = np.asarray(ext["D"], dtype=float), list(own)
        how = (f"the {len(own)} expected lowest samples of n = {law.truncation_n} (the law's paths at the quantiles "
               "(j - 1/2)/n of lambda_min(D)), each as a single sample on the truncated law")
    else:
        D = np.asarray((law.removed or {}).get("D", np.zeros((0, law.m, law.m))), dtype=float)
        lams = None
        how = "the paths the 1/n truncation removed, lowest lambda_min(D) first, each as a single sample"
    if not len(D):
        return [], how
    lmin = np.linalg.eigvalsh(D)[:, 0]
    order = np.argsort(lmin, kind="stable")[:SPIKES]
    if lams is None:
        lams = single_sample_spikes(law, D[order])
    else:
        lams = [lams[i] for i in order]
    return [{"lambda_min_D": float(lmin[i]), "lambda": lv} for i, lv in zip(order, lams)], how


def _simulated(problem, args, d: int, t: int, progress: bool) -> dict:
    from ..referee import simulate

    sim = simulate(problem, d=d, seed=args.seed, constrained=True, hessian_every=max(t, 1),
                   hessian_k=args.hessian_k, hessian_method=args.hessian_method, progress=progress)
    rec = next((h for h in sim.hessian if h["t"] == t), None)
    out = {"t": t, "eigenvalues": None, "overlap2": None, "hard_weight": None, "d": d, "n": sim.settings["n"],
           "constrained": True, "seed": args.seed, "method": None, "status": sim.status}
    if rec is not None:
        out.update(eigenvalues=np.asarray(rec["eigenvalues"]).tolist(),
                   overlap2=np.asarray(rec["hard_overlap2"]).tolist(), hard_weight=rec["hard_weight"],
                   method=rec["method"])
    else:
        out["note"] = (f"the finite-d run did not reach t = {t}: "
                       + (sim.diverged_at or {}).get("hint", f"status {sim.status}"))
    return out


def text(r) -> str:
    s = r["settings"]
    lines = [f"{s['activation']} / {s['link']} / {s['loss']}, m = {s['width']}, delta = {s['delta']:g}, "
             f"eta = {s['eta']:g}, t = {r['t']}" + (f", d = {s['d']} (n = {r['truncation_n']})" if s["d"] else "")
             + f"; {s['paths']} DMFT paths in {s['replicas']} replicas, {r['seconds']:.1f} s",
             f"  left edge of the bulk: {fmt(r['edge'], '.8g')}   ({r['edge_case']})"
             + (f"   margin {fmt(r['margin'], '.4g')}" if r["margin"] is not None else ""),
             f"  right edge of the bulk: {fmt(r['top_edge'], '.8g')}   (eta lambda_+ = {fmt(r['eta_top_edge'], '.4g')}"
             + ("; beyond GD's edge of stability, 2)" if (r["eta_top_edge"] or 0) > 2 else ")")]
    if r.get("atom_mass"):
        lines.append(f"  kernel: an atom of mass {fmt(r['atom_mass'], '.4g')} at lambda = ridge (H is singular)")
    if r["outliers"]:
        for j, o in enumerate(r["outliers"]):
            lines.append(f"  hard outlier {j + 1}: lambda = {fmt(o['lambda'], '.8g')}, overlap^2 = "
                         f"{fmt(o['overlap2'], '.4g')}" + ("  (negative curvature)" if o["negative"] else ""))
    else:
        lines.append("  no hard outlier below the edge")
    unb = {True: "unbounded below (no n -> infinity edge)", False: "bounded below", None: "undecided"}[r["unbounded"]]
    lines.append(f"  law of D: {unb}; min lambda_min(D) = {fmt(r['D_tail']['min_D'], '.4g')}")
    if r.get("spikes"):
        sp_ = ", ".join(fmt(q["lambda"], ".5g", "in bulk") for q in r["spikes"])
        lines.append(f"  predicted single-sample spikes (lowest D_i first): {sp_}")
    sim = r["simulated"]
    if sim is not None:
        if sim["eigenvalues"] is not None:
            ev = ", ".join(f"{v:.5g}" for v in sim["eigenvalues"][:5])
            ov = ", ".join(f"{v:.3g}" for v in sim["overlap2"][:5])
            lines.append(f"  finite-d Hessian (d = {sim['d']}, n = {sim['n']}, constrained GD): bottom {ev}, ...; "
                         f"hard overlap^2 {ov}, ...")
        else:
            lines.append(f"  finite-d Hessian: {sim.get('note', 'not available')}")
    rho = r["density"]["rho"]
    if rho:
        lam = r["density"]["lambda"]
        i = int(np.argmax(rho))
        lines.append(f"  bulk density on [{lam[0]:.5g}, {lam[-1]:.5g}] ({len(lam)} points), peak {rho[i]:.4g} at "
                     f"{lam[i]:.5g}")
    lines.append(f"  method: {r['method']}")
    lines += [f"  note: {n}" for n in r["notes"]]
    return "\n".join(lines)
