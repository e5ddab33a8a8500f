"""theorykit dmft --activation A --link L --loss LOSS --width M [--a ...] [--b ...] --delta D
(--eta ETA --steps T | --flow-time TAU [--eta0 E0] [--eta-max EM] [--doubling-every K]) [--paths N]
[--replicas R] [--ridge R] [--seed S] [--latent auto|gauss-hermite|gauss-legendre|monte-carlo] [--order Q]
[--sampler sobol|random] [--response auto|stein|direct] [--kernels] [--bias-check auto|on|off] [--d DIM]
[--progress] [--json]

Status: ok; diverged (GD's instability, with a hint; exit status 0); unreliable (the d -> infinity DMFT diverged
through paths beyond the latent 1/n quantile of a realistic sample, which no data set of that size holds: not a
statement about GD; exit status 4, as for no answer).  With --d the paths beyond the 1/n quantile of n = delta d
samples are truncated where unstable, as a finite sample would (settings.truncation).

JSON keys: status, t, time, M, gram, train_loss, test_loss, stderr {same keys}, hard {C_mu, C_mu_stderr,
reliable_until, ess}, D_tail [{t, min, q1e-5, q1e-4, q1e-3}], kernels {C_theta, R_theta, C_u, R_u (+ _stderr)} (with
--kernels), bias {M, gram, train_loss, test_loss, C_theta_tt, C_mu, stderr {same keys}} (when the bias check ran:
with Stein's responses, or --bias-check on), settings, method (prose: how it was solved), problem, seconds,
diverged_at.  What GD at a finite d does by a horizon (the capture probability, midpoints, escape times) is
`theorykit threshold --d D --horizon T` (theorykit.finite_d).
"""
import math
import sys

from .. import defaults
from ._args import add_initial_law_arguments, add_network_arguments, check_args, check_width, initial_law, integer, \
    nonnegative_float, positive_float, seed_type

EXAMPLE = ("example: theorykit dmft --activation relu --link phase-retrieval --delta 2 --eta 0.5 --steps 40 "
           "--paths 4096 --replicas 4")


def add_parser(sub):
    p = sub.add_parser("dmft", help="DMFT of gradient descent (docs/theory.md §3 and §3.2), with standard errors",
                       description="DMFT of gradient descent (docs/theory.md §3 and §3.2), with standard errors.",
                       epilog=EXAMPLE)
    add_network_arguments(p, loss_required=False)
    check_width(p)
    p.add_argument("--link", required=True, help="preset or expression in z (or z1..zk, eps)")
    p.add_argument("--delta", type=positive_float, required=True, help="samples per dimension n/d (> 0)")
    p.add_argument("--eta", type=positive_float, default=None, help="constant learning rate > 0 (with --steps)")
    p.add_argument("--steps", type=integer(0), default=None,
                   help="number of GD steps T >= 0 (with --eta); the output has t = 0..T")
    p.add_argument("--flow-time", type=positive_float, default=None,
                   help="gradient-flow mode: total time > 0, sum(eta_t) on a non-uniform grid "
                        "(instead of --eta/--steps)")
    p.add_argument("--eta0", type=positive_float, default=defaults.FLOW_ETA0,
                   help=f"flow mode: first step size (default {defaults.FLOW_ETA0:g})")
    p.add_argument("--eta-max", type=positive_float, default=defaults.FLOW_ETA_MAX,
                   help=f"flow mode: largest step size (default {defaults.FLOW_ETA_MAX:g})")
    p.add_argument("--doubling-every", type=integer(1), default=defaults.FLOW_DOUBLING_EVERY,
                   help=f"flow mode: steps between doublings (default {defaults.FLOW_DOUBLING_EVERY})")
    p.add_argument("--paths", type=integer(2), default=defaults.DMFT_PATHS,
                   help=f"sample paths in total over all replicas, >= 2 (default {defaults.DMFT_PATHS})")
    p.add_argument("--replicas", type=integer(2), default=defaults.DMFT_REPLICAS,
                   help=f"independent solves giving the standard errors, >= 2 (default {defaults.DMFT_REPLICAS})")
    p.add_argument("--ridge", type=nonnegative_float, default=defaults.RIDGE,
                   help="ridge lambda >= 0 (default 0)")
    p.add_argument("--seed", type=seed_type, default=defaults.DMFT_SEED,
                   help=f"seed of the replicas' random streams, an integer >= 0 (default {defaults.DMFT_SEED})")
    p.add_argument("--latent", default=defaults.DMFT_LATENT,
                   choices=["auto", "gauss-hermite", "gauss-legendre", "monte-carlo"],
                   help="how the latent (z, eps) is integrated (auto: Gauss-Hermite when it is accurate, else "
                        "Gauss-Legendre between the link's breakpoints when that is, else Monte Carlo)")
    p.add_argument("--order", type=integer(1, 1000), default=None,
                   help="Gauss-Hermite nodes per latent dimension (Gauss-Legendre: per piece), in 1..1000 "
                        "(default 32 for one latent dimension, else 16)")
    p.add_argument("--sampler", default=defaults.DMFT_SAMPLER, choices=["sobol", "random"],
                   help="paths of the Gaussian field: scrambled Sobol (default) or i.i.d.")
    p.add_argument("--response", default=defaults.DMFT_RESPONSE, choices=["auto", "stein", "direct"],
                   help="response estimator: auto takes direct Jacobians on the whole batch when they fit, else "
                        "Stein's lemma (eta >= 0.25); Stein only with a kinked activation or loss")
    p.add_argument("--kernels", action="store_true", help="include the two-time kernels in the output")
    p.add_argument("--bias-check", default="auto", choices=["auto", "on", "off"],
                   help="also solve as many replicas with half the paths, report the finite-path bias ('bias') and "
                        "include it in the standard errors (auto: on with Stein's responses)")
    p.add_argument("--d", type=integer(1), default=None,
                   help="the dimension d >= 1 of a finite problem: unstable paths beyond the latent 1/n quantile "
                        "(n = delta d) are truncated, as a sample of n points holds none of them (default: the "
                        "d -> infinity DMFT)")
    add_initial_law_arguments(p)
    p.add_argument("--init", choices=["random", "spectral"], default="random",
                   help="random (the initial law --M0/--Sigma0, default 0 and I) or spectral: GD from the top "
                        "eigenvector of (1/n) sum T(y) x x^T, with the power iteration that builds it in the DMFT "
                        "(m = 1, single index; docs/theory.md §3.3)")
    p.add_argument("--spectral-T", default=None, dest="spectral_T",
                   help="preprocessing T(y, delta) for --init spectral (default (y-1)/(y+sqrt(2*delta)-1))")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when it is not a terminal")
    return p


def run(args) -> dict:
    from ..dynamics import dmft, flow_schedule
    from ..errors import TheorykitError

    check_args(args)
    if args.flow_time is not None:
        if args.eta is not None or args.steps is not None:
            raise TheorykitError("give either --eta and --steps, or --flow-time, not both")
        step = dict(schedule=flow_schedule(args.flow_time, args.eta0, args.eta_max, args.doubling_every))
    else:
        if args.eta is None or args.steps is None:
            raise TheorykitError("give --eta and --steps (or --flow-time for the gradient-flow mode)")
        step = dict(eta=args.eta, steps=args.steps)
    progress = bool(args.progress) or sys.stderr.isatty()
    law = initial_law(args)
    if args.init == "spectral" and (law["M0"] is not None or law["Sigma0"] is not None):
        raise TheorykitError("--init spectral sets the initial law itself: drop --M0/--Sigma0")
    if args.spectral_T is not None and args.init != "spectral":
        raise TheorykitError("--spectral-T is the preprocessing of --init spectral: add --init spectral or drop it")
    if args.init == "spectral":
        from ..symbolic.admissible import check_preprocessing

        # the same verdict on T as `theorykit spectral` and `simulate --init spectral` (one check for all)
        check_preprocessing(args.link, args.spectral_T or defaults.SIM_SPECTRAL_T, args.delta)
    res = dmft(args.activation, args.link, args.loss, args.width, a=args.a, b=args.b, delta=args.delta,
               ridge=args.ridge, M0=law["M0"], Sigma0=law["Sigma0"], init=args.init, spectral_T=args.spectral_T,
               paths=args.paths, replicas=args.replicas, latent=args.latent, order=args.order,
               sampler=args.sampler, response=args.response, seed=args.seed, kernels=args.kernels,
               bias_check={"auto": "auto", "on": True, "off": False}[args.bias_check],
               progress=progress, d=args.d, **step)
    out = res.as_dict()
    hard = out.get("hard") or {}
    if hard.get("ess") is not None and not all(math.isfinite(v) for v in hard["ess"]):
        # JSON has no NaN: say what the missing effective sample sizes mean
        hard["ess"] = [v if math.isfinite(v) else None for v in hard["ess"]]
        hard["ess_note"] = ("null: no effective sample size of pathwise tangents here (with a kinked activation or "
                            "loss the hard process runs on Stein kernels instead of tangents)")
    return out


def exit_status(r) -> int:
    """4 (no answer) when the DMFT is unreliable (its divergence is driven by paths no realistic sample holds), else
    0 (a diverged DMFT is an answer: GD is unstable)."""
    return 4 if r["status"] == "unreliable" else 0


def text(r) -> str:
    s = r["settings"]
    step = f"eta = {s['eta']:g}" if s["eta"] is not None else f"flow grid of {s['steps']} steps"
    lines = [f"{s['activation']} / {s['link']} / {s['loss']}, m = {s['width']}, delta = {s['delta']:g}, {step}, "
             f"{s['paths_total']} paths in {s['replicas']} replicas ({s['latent']}, {s['sampler']}, "
             f"response: {s['response']}), {r['seconds']:.1f} s"]
    T = len(r["t"])
    rows = sorted(set([0, T - 1] + [round(i * (T - 1) / 10) for i in range(11)])) if T else []
    lines.append(f"{'t':>6} {'time':>8} {'train':>18} {'test':>18} {'tr gram/m':>18} {'min D':>9}")
    e = r["stderr"]
    for i in rows:
        g, ge = r["gram"][i], e["gram"][i]
        m = len(g)
        trg = sum(g[j][j] for j in range(m)) / m
        trge = (sum(ge[j][j] ** 2 for j in range(m)) ** 0.5) / m
        lines.append(f"{r['t'][i]:>6} {r['time'][i]:>8.3g} {r['train_loss'][i]:>10.5g} ± {e['train_loss'][i]:<6.1g}"
                     f"{r['test_loss'][i]:>10.5g} ± {e['test_loss'][i]:<6.1g}{trg:>10.5g} ± {trge:<6.1g}"
                     f"{r['D_tail'][i]['min']:>9.3g}")
    if s["hard_dim"]:
        cm = r["hard"]["C_mu"][T - 1][0]
        lines.append(f"hard process C_mu(t = {r['t'][-1]}) = {cm} (d E[Theta^T e e^T Theta], docs/theory.md §3.2)")
        ru = r["hard"]["reliable_until"]
        if ru is not None and ru < r["t"][-1]:
            lines.append(f"warning: C_mu is Monte-Carlo-unreliable after t = {ru} (replica spread > 5%): "
                         f"the linear hard process amplifies noise where it does not contract; raise --paths")
    lines.append(f"±: the spread of the {s['replicas']} independent replica solves / sqrt({s['replicas']}) "
                 f"({s['replicas'] - 1} degrees of freedom), the paths' sampling error"
                 + (", with the bias check's estimate of the finite-path bias added in quadrature" if s["bias_check"]
                    else "; not the O(1/paths) bias of each solve (bias check off: --bias-check on adds it)")
                 + "; never the latent rule or the time grid")
    tr = s.get("truncation")
    if tr:
        radius = (f"latent radius >= {tr['latent_radius']:.3g}" if tr["latent_radius"] is not None else
                  "no path of this latent rule")
        lines.append(f"truncated at the 1/n quantile (n = {tr['n']}" + (f" = delta d, d = {tr['d']}" if tr["d"] else "")
                     + f"): unstable paths beyond it ({radius}) excluded, as a sample of n points holds none of "
                       f"them; excluded weight {s['excluded_weight']:.2g}"
                     + (f" from step {s['excluded_first_step']}" if s["excluded_first_step"] is not None else ""))
    lines.append(f"status: {r['status']}")
    if r.get("diverged_at"):
        hint = r["diverged_at"]["hint"]
        lines.append(hint if r["status"] == "unreliable" else f"diverged: {hint}")
    return "\n".join(lines)
