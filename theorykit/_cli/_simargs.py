"""Command-line arguments shared by `simulate` and `sweep` (one definition for both), and the argparse ``type=``
checks of every numeric option: a value out of range (NaN, inf, negative, zero where invalid, a non-integer where
an integer is needed) is a parser error, printed on one line with exit status 2."""
import argparse
import math

from .. import defaults
from .derive import add_network_arguments


class Invalid:
    """What a ``type=`` check returns for a value out of range: :func:`check_args` (first thing in each command's
    run) turns it into a one-line TheorykitError, so that ``main()`` returns 2 rather than exiting from the parser."""

    def __init__(self, message):
        self.message = message


def _typed(fn):
    def parse(text):
        try:
            return fn(text)
        except argparse.ArgumentTypeError as e:
            return Invalid(str(e))

    parse.__name__ = getattr(fn, "__name__", "value")
    return parse


def check_args(args):
    """Raise the first range error recorded by the ``type=`` checks (an :class:`Invalid` value), naming its option."""
    from ..errors import TheorykitError

    for dest, value in vars(args).items():
        for v in (value if isinstance(value, list) else [value]):
            if isinstance(v, Invalid):
                raise TheorykitError(f"argument --{dest.replace('_', '-')}: {v.message}")
    return args


def _parse_float(text) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


@_typed
def positive_float(text) -> float:
    """A finite number > 0."""
    v = _parse_float(text)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return v


@_typed
def nonnegative_float(text) -> float:
    """A finite number >= 0."""
    v = _parse_float(text)
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return v + 0.0  # -0.0 -> 0.0


def seconds(allow_zero: bool = False):
    """The argparse type of a time limit: a finite number of seconds > 0 (>= 0 with allow_zero), at most
    theorykit.symbolic.gaussian.MAX_SECONDS."""
    from ..symbolic.gaussian import MAX_SECONDS

    def parse(text) -> float:
        v = _parse_float(text)
        if not ((v >= 0 if allow_zero else v > 0) and v <= MAX_SECONDS):
            raise argparse.ArgumentTypeError(f"expected a number of seconds {'>= 0' if allow_zero else '> 0'} and "
                                             f"<= {MAX_SECONDS:g}, got {text!r}")
        return v + 0.0

    parse.__name__ = "seconds"
    return _typed(parse)


def integer(lo: int, hi=None, label=None):
    """The argparse type of an integer in lo..hi (hi None: no upper bound); '1.5', '1e3', 'nan' are refused."""
    def parse(text) -> int:
        bound = label or (f">= {lo}" if hi is None else f"in {lo}..{hi}")
        try:
            v = int(str(text).strip())
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected an integer {bound}, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected an integer {bound}, got {text!r}")
        return v

    parse.__name__ = f"integer {lo}.." + ("" if hi is None else str(hi))
    return _typed(parse)


#: the largest seed numpy.random.default_rng takes from the command line (any non-negative int works; 2^63 - 1 keeps
#: the value a 64-bit integer in the CSV and JSON outputs)
SEED_MAX = 2 ** 63 - 1
seed_type = integer(0, SEED_MAX, label=">= 0 (below 2^63)")


def check_width(p):
    """Give the --width option added by add_network_arguments its range check (an integer in 1..4096)."""
    for action in p._actions:
        if action.dest == "width":
            action.type = integer(1, 4096)
            action.help = "number of hidden units m, in 1..4096 (default 1)"
    return p


def add_simulation_arguments(p, with_delta: bool = True):
    add_network_arguments(p, loss_required=False)  # default: square loss
    check_width(p)
    p.add_argument("--link", required=True, help="preset or expression in z (or z1..zk) and eps")
    if with_delta:
        p.add_argument("--delta", type=positive_float, required=True, help="sample ratio n/d")
        p.add_argument("--seed", type=seed_type, default=defaults.SIM_SEED,
                       help=f"seed of numpy.random.default_rng (default {defaults.SIM_SEED})")
    p.add_argument("--d", type=integer(1), required=True, help="input dimension d >= 1")
    p.add_argument("--steps", type=integer(0), required=True, help="number of GD steps T >= 0 (records t = 0..T)")
    p.add_argument("--eta", type=positive_float, required=True, help="learning rate eta > 0")
    p.add_argument("--init", choices=["random", "spectral"], default=defaults.SIM_INIT,
                   help="random theta_j ~ N(0, I/d) (default) or spectral (top eigenvectors of (1/n) sum T(y) x x^T)")
    p.add_argument("--spectral-T", default=None, dest="spectral_T",
                   help="preprocessing T(y, delta) for --init spectral (default (y-1)/(y+sqrt(2*delta)-1))")
    p.add_argument("--constrained", action="store_true", help="project Theta off the hard subspace every step")
    p.add_argument("--hessian-every", type=integer(0), default=defaults.SIM_HESSIAN_EVERY, dest="hessian_every",
                   help="bottom-10 Hessian eigenpairs every K steps (0: never)")
    p.add_argument("--hessian-method", choices=["auto", "lanczos", "dense"], default=defaults.SIM_HESSIAN_METHOD,
                   dest="hessian_method",
                   help="Hessian eigensolver (auto: dense for m*d <= 400, else Lanczos)")
    p.add_argument("--ridge", type=nonnegative_float, default=defaults.RIDGE,
                   help="ridge lambda >= 0: adds (lambda/2)||Theta||_F^2 (default 0)")
    p.add_argument("--n-test", type=integer(1), default=None, dest="n_test",
                   help="test-set size >= 1 (default max(2000, n))")
    p.add_argument("--stop-after-escape", type=integer(0), default=None, dest="stop_after_escape", metavar="K",
                   help="end a run K >= 0 steps after its escape (hard overlap > 0.5); default: run every step")
    p.add_argument("--kernel", choices=["auto", "fused", "numpy"], default="auto",
                   help="GD step: fused (one pass over X per step, numba), numpy (two matmuls), or auto (fused for "
                        "runs estimated >= 5 s when the activation and loss compile); the numbers agree to rounding")
    p.add_argument("--storage", choices=["float64", "float32"], default="float64",
                   help="storage of X: float64 (default) or float32 (rounded as drawn, float64 arithmetic; half the "
                        "bytes per pass of the memory-bound GD step)")
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
                hessian_method=args.hessian_method, n_test=args.n_test, stop_after_escape=args.stop_after_escape,
                kernel=args.kernel, **initial_law(args),
                # only when not the default, so that a sweep CSV written before this option resumes
                **({"storage": args.storage} if args.storage != "float64" else {}))
