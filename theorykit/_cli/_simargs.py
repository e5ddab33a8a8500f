"""Command-line arguments shared by `simulate` and `sweep` (one definition for both)."""
from .. import defaults
from .derive import add_network_arguments


def add_simulation_arguments(p, with_delta: bool = True):
    add_network_arguments(p, loss_required=False)  # default: square loss
    p.add_argument("--link", required=True, help="preset or expression in z (or z1..zk) and eps")
    if with_delta:
        p.add_argument("--delta", type=float, required=True, help="sample ratio n/d")
        p.add_argument("--seed", type=int, default=defaults.SIM_SEED,
                       help=f"seed of numpy.random.default_rng (default {defaults.SIM_SEED})")
    p.add_argument("--d", type=int, required=True, help="input dimension")
    p.add_argument("--steps", type=int, required=True, help="number of GD steps T (records t = 0..T)")
    p.add_argument("--eta", type=float, required=True, help="learning rate")
    p.add_argument("--init", choices=["random", "spectral"], default=defaults.SIM_INIT,
                   help="random theta_j ~ N(0, I/d) (default) or spectral (top eigenvectors of (1/n) sum T(y) x x^T)")
    p.add_argument("--spectral-T", default=None, dest="spectral_T",
                   help="preprocessing T(y, delta) for --init spectral (default (y-1)/(y+sqrt(2*delta)-1))")
    p.add_argument("--constrained", action="store_true", help="project Theta off the hard subspace every step")
    p.add_argument("--hessian-every", type=int, default=defaults.SIM_HESSIAN_EVERY, dest="hessian_every",
                   help="bottom-10 Hessian eigenpairs every K steps (0: never)")
    p.add_argument("--hessian-method", choices=["auto", "lanczos", "dense"], default=defaults.SIM_HESSIAN_METHOD,
                   dest="hessian_method",
                   help="Hessian eigensolver (auto: dense for m*d <= 400, else Lanczos)")
    p.add_argument("--ridge", type=float, default=defaults.RIDGE, help="ridge lambda: adds (lambda/2)||Theta||_F^2")
    p.add_argument("--n-test", type=int, default=None, dest="n_test", help="test-set size (default max(2000, n))")
    add_initial_law_arguments(p)
    return p


def add_initial_law_arguments(p):
    """--M0 and --Sigma0: the initial law Theta(0) = Theta* M0 + (complement with covariance Sigma0), for simulate,
    sweep and dmft alike, so that theory and referee can start from the same point."""
    p.add_argument("--M0", default=None, metavar="LIST",
                   help="initial overlap M_0 = Theta*^T Theta(0): k x m numbers, row-major, comma-separated (default 0)")
    p.add_argument("--Sigma0", default=None, metavar="LIST",
                   help="initial covariance of the complement: m x m numbers row-major, or one number s for s I "
                        "(default I)")


def initial_law(args) -> dict:
    """{"M0": ..., "Sigma0": ...} parsed from --M0 / --Sigma0 (None when not given); shapes are checked by the API."""
    from ..errors import TheorykitError

    out = {}
    for name in ("M0", "Sigma0"):
        text = getattr(args, name)
        if text is None:
            out[name] = None
            continue
        try:
            vals = [float(v) for v in str(text).split(",") if v.strip()]
        except ValueError:
            raise TheorykitError(f"--{name} must be comma-separated numbers, got {text!r}") from None
        if not vals:
            raise TheorykitError(f"--{name} is empty")
        out[name] = vals[0] if len(vals) == 1 and name == "Sigma0" else vals
    return out


def simulation_kwargs(args) -> dict:
    """The keyword arguments of theorykit.simulate named on the command line (without delta/seed)."""
    return dict(activation=args.activation, link=args.link, loss=args.loss, width=args.width, a=args.a, b=args.b,
                d=args.d, steps=args.steps, eta=args.eta, ridge=args.ridge, init=args.init,
                spectral_T=args.spectral_T, constrained=args.constrained, hessian_every=args.hessian_every,
                hessian_method=args.hessian_method, n_test=args.n_test, **initial_law(args))
