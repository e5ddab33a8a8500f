"""Every command-line argument builder, parser/validator and formatter that more than one command uses, in one place:
each command module under theorykit/_cli imports them from here and never from another command.

* the argparse ``type=`` checks of every numeric option (:func:`positive_float`, :func:`nonnegative_float`,
  :func:`integer`, :func:`seconds`, :data:`seed_type`): a value out of range (NaN, inf, negative, zero where invalid,
  a non-integer where an integer is needed) is recorded and raised by :func:`check_args` as a one-line error, exit
  status 2;
* the option groups: the network (:func:`add_network_arguments`, with :func:`check_width`), the Problem of the
  theory commands (:func:`add_problem_arguments`, :func:`make_problem`, :func:`check_hessian_width`), the DMFT's
  numerics (:func:`add_dmft_arguments`), the finite-d simulation of `simulate` and `sweep`
  (:func:`add_simulation_arguments`, :func:`simulation_kwargs`) and the initial law (:func:`add_initial_law_arguments`,
  :func:`initial_law`);
* comma-separated lists (:func:`split_top`, :func:`parse_numbers`) and a number or "n/a" (:func:`fmt`)."""
import argparse
import math

from .. import defaults


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


def add_network_arguments(p, loss_required=True):
    """--activation --loss --width --a --b: the network (theorykit.Network)."""
    p.add_argument("--activation", required=True, help="preset or expression in x")
    p.add_argument("--loss", required=loss_required, default=defaults.LOSS,
                   help="preset (square, logistic, huber) or expression in y, yhat")
    p.add_argument("--width", type=int, default=defaults.WIDTH, help="number of hidden units m")
    p.add_argument("--a", default=None, help="second-layer weights, comma-separated (default all 1)")
    p.add_argument("--b", default=None, help="biases, comma-separated (default all 0)")


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
    p.add_argument("--test-set", choices=["overlaps", "fresh"], default=defaults.SIM_TEST_SET, dest="test_set",
                   help="test loss from the overlaps (default: the test set's coordinates in the span of Theta* and "
                        "Theta_t, exact in law, O(n_test (k+m) m) per step) or from a fresh n_test x d test set")
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
                   help="initial overlap M_0 = Theta*^T Theta(0): k x m numbers, row-major, comma-separated "
                        "(default 0)")
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
                **({"storage": args.storage} if args.storage != "float64" else {}),
                **({"test_set": args.test_set} if args.test_set != defaults.SIM_TEST_SET else {}))


# ------------------------------------------------------------------ the Problem and the DMFT of the theory commands
#: widths the m x m Hessian solver takes (theorykit.spectra.hessian.HessianLaw refuses m > 8)
HESSIAN_MAX_WIDTH = 8


def add_worker_arguments(p, task: str = "run", default: str = "all CPUs"):
    """--processes or --scheduler: where the tasks go (local processes, or a Dask cluster's workers); ``task`` names
    one task (a simulator run, a candidate), ``default`` says what --processes defaults to (None is passed on)."""
    p.add_argument("--processes", type=integer(1), default=None,
                   help=f"worker processes >= 1 (default: {default})")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help=f"run on a Dask cluster: its scheduler's address, e.g. tcp://10.0.0.5:8786 (one task per "
                        f"{task}; needs dask[distributed] here and theorykit on the workers)")


def check_workers(args):
    """One line when both --processes and --scheduler are given."""
    from ..errors import TheorykitError

    if args.scheduler is not None and args.processes is not None:
        raise TheorykitError("give --processes or --scheduler, not both (a Dask cluster has its own workers)")


def add_problem_arguments(p, *, delta: bool = True):
    """--activation --loss --width --a --b --link [--delta] --eta --ridge (the Problem), with their range checks."""
    add_network_arguments(p, loss_required=False)
    check_width(p)
    p.add_argument("--link", required=True, help="preset or expression in z (or z1..zk, eps)")
    if delta:
        p.add_argument("--delta", type=positive_float, required=True, help="samples per dimension n/d (> 0)")
    p.add_argument("--eta", type=positive_float, required=True, help="constant learning rate > 0")
    p.add_argument("--ridge", type=nonnegative_float, default=defaults.RIDGE, help="ridge lambda >= 0 (default 0)")


def add_dmft_arguments(p, paths, replicas: int, paths_default_help: str = ""):
    p.add_argument("--paths", type=integer(2), default=paths,
                   help=f"DMFT sample paths in total over all replicas, >= 2 (default {paths_default_help or paths})")
    p.add_argument("--replicas", type=integer(2), default=replicas,
                   help=f"independent DMFT solves giving the standard errors, >= 2 (default {replicas})")
    p.add_argument("--seed", type=seed_type, default=defaults.DMFT_SEED,
                   help=f"seed of the DMFT's replicas (and of the finite-d referee), an integer >= 0 (default "
                        f"{defaults.DMFT_SEED})")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr")


def check_hessian_width(args):
    from ..errors import TheorykitError

    if args.width > HESSIAN_MAX_WIDTH:
        raise TheorykitError(f"argument --width: the Hessian theory's m x m solver takes widths up to "
                             f"{HESSIAN_MAX_WIDTH}, got {args.width}")


def make_problem(args, delta: float, steps: int):
    from ..problem import Problem

    return Problem(args.activation, args.link, args.loss, args.width, a=args.a, b=args.b, delta=delta,
                   ridge=args.ridge, eta=args.eta, steps=steps)


# ------------------------------------------------------------------ lists and numbers
def split_top(text: str) -> list:
    """Comma-separated items, splitting only outside brackets (an expression such as Max(0, x) stays whole)."""
    out, depth, cur = [], 0, ""
    for ch in str(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [o for o in out if o]


def parse_numbers(text, what, kind=float):
    from ..errors import TheorykitError

    try:
        vals = [kind(v) for v in split_top(text)]
    except ValueError:
        raise TheorykitError(f"--{what} must be comma-separated numbers, got {text!r}") from None
    if not vals or any(not v > 0 for v in vals):
        raise TheorykitError(f"--{what} must be numbers > 0, got {text!r}")
    if len(set(vals)) != len(vals):
        raise TheorykitError(f"--{what} repeats a value: {text!r}")
    return vals


def fmt(v, spec=".6g", none="n/a") -> str:
    """v formatted, or ``none`` for a missing or non-finite value."""
    return none if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def add_cell_arguments(p, deltas_default: str, deltas_help: str):
    """--deltas, --paths, --replicas, --delta-range: the numeric options of a table cell
    (:class:`theorykit.report.table.TableOptions`), shared by ``table`` and ``optimise``."""
    from ..report.table import TableOptions

    dv = TableOptions()
    p.add_argument("--deltas", default=deltas_default, help=f"{deltas_help} (default %(default)s)")
    p.add_argument("--paths", type=integer(2), default=dv.paths, help="DMFT paths (default %(default)s)")
    p.add_argument("--replicas", type=integer(2), default=dv.replicas, help="DMFT replicas (default %(default)s)")
    p.add_argument("--delta-range", nargs=2, type=float, default=list(dv.delta_range), metavar=("LO", "HI"),
                   help="scan range of delta_star and delta_nn (default %(default)s)")


def cell_arguments(args) -> dict:
    """{deltas (sorted tuple), delta_range, paths, replicas} from :func:`add_cell_arguments`' options; one-line errors
    for a bad range or grid."""
    from ..errors import TheorykitError

    lo, hi = args.delta_range
    if not 0 < lo < hi:
        raise TheorykitError(f"--delta-range: expected 0 < LO < HI, got {lo:g} {hi:g}")
    deltas = tuple(sorted(parse_numbers(args.deltas, "deltas")))
    if not deltas or deltas[0] <= 0:
        raise TheorykitError(f"--deltas: give deltas > 0, got {args.deltas!r}")
    return {"deltas": deltas, "delta_range": (lo, hi), "paths": args.paths, "replicas": args.replicas}
