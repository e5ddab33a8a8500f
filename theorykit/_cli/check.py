"""theorykit check KIND CLAIM [options] [--json]: check a hand calculation against theorykit.

KIND is one of
* hermite      CLAIM --activation A --k K               mu_k = E[sigma(G) He_k(G)]
* expectation  CLAIM --activation A --of EXPR [--variance V|q]   E[g(U)], U ~ N(0, V); g in x, sigma, sigma1, sigma2,
                                                        sigma3 (sigma and its derivatives at x)
* delta-alg    CLAIM --link L                           the weak-recovery threshold (CLAIM inf: infinite)
* exponent     CLAIM --link L --which information|generative
* dmft         CLAIM --quantity NAME[i,j] --activation A --link L [--loss --width --a --b --delta --eta --ridge]
                                                        a t = 0 or 1 quantity of the exact DMFT (delta, eta unset:
                                                        symbols the claim may use)

The answer is "equal (exactly)", "equal to N digits" or "differs by ...", with how it was decided (the Python API is
theorykit.check; the rules are in theorykit/claims.py).  JSON keys: kind, quantity, claim, verdict
("equal" | "agrees" | "differs" | "undecided"), message, digits, computed {exact, value, error, tier, method},
difference {exact, value}, how, seconds.  Exit status: 0 equal or agrees, 3 differs, 4 undecided, 2 bad input.
"""
import argparse

from ._args import add_network_arguments, check_args, integer, seconds

#: exit status of a claim that differs from the computed value (0: equal; 2 is a bad input, 1 an internal error)
DIFFERS = 3
UNDECIDED = 4


def add_parser(sub):
    p = sub.add_parser("check", help="check a hand calculation: a claimed closed form against theorykit",
                       description=__doc__.split("\n\n")[0])
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True, parser_class=type(p))

    def kind(name, help_):
        k = kinds.add_parser(name, help=help_)
        k.add_argument("claim", help="the claimed closed form (an expression: numbers, pi, E, sqrt, erf, asin, ...; "
                                     "'inf' for infinity)")
        return k

    h = kind("hermite", "a Hermite coefficient mu_k = E[sigma(G) He_k(G)]")
    h.add_argument("--activation", required=True, help="preset or expression in x")
    h.add_argument("--k", type=integer(0, 40), required=True, help="the degree k, in 0..40")
    e = kind("expectation", "a Gaussian expectation of an expression in x, sigma and its derivatives")
    e.add_argument("--activation", required=True, help="preset or expression in x")
    e.add_argument("--of", required=True, help="g, an expression in x, sigma, sigma1, sigma2, sigma3")
    e.add_argument("--variance", default="1", help="the variance of x: a number > 0, or q (symbolic: the claim may "
                                                   "use q); default 1")
    for name in ("hermite", "expectation"):
        k = kinds.choices[name]
        k.add_argument("--time-limit", type=seconds(allow_zero=True), default=3.0,
                       help="seconds >= 0 for sympy.integrate (0: skip it; default 3)")
        k.add_argument("--wall-limit", type=seconds(), default=None,
                       help="wall-clock seconds > 0, all methods together (default 30, or $THEORYKIT_WALL_LIMIT)")
    a = kind("delta-alg", "delta_alg of a link")
    a.add_argument("--link", required=True, help="preset or expression in z (or z1..zk, eps)")
    x = kind("exponent", "the information or generative exponent of a single-index link")
    x.add_argument("--link", required=True, help="preset or expression in z")
    x.add_argument("--which", required=True, choices=("information", "generative"))
    d = kind("dmft", "a t = 0 or t = 1 quantity of the exact DMFT (polynomial sigma, loss and link)")
    d.add_argument("--quantity", required=True, help="gram1, train_loss1, test_loss1, C_theta11[0,0], M1[0,0], "
                                                     "R_u10[0,0], ... (theorykit.dmft_closed_form's fields)")
    add_network_arguments(d, loss_required=False)
    d.add_argument("--link", required=True, help="preset or expression in z (or z1..zk, eps)")
    for name in ("delta", "eta"):
        d.add_argument(f"--{name}", default=None, help=f"an exact number (1/20, 0.05); unset: the symbol {name}")
    d.add_argument("--ridge", default="0", help="an exact number >= 0 (default 0)")
    for k in kinds.choices.values():  # after KIND, like every other option (SUPPRESS keeps the command's default)
        k.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
        k.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an internal error (a bug)")
    return p


def run(args) -> dict:
    from ..claims import check

    check_args(args)
    kind = args.kind.replace("-", "_")
    kw = {}
    if kind in ("hermite", "expectation"):
        kw.update(activation=args.activation, time_limit=args.time_limit, wall_limit=args.wall_limit)
        if kind == "hermite":
            kw["k"] = args.k
        else:
            kw.update(of=args.of, variance=args.variance)
    elif kind in ("delta_alg", "exponent"):
        kw["link"] = args.link
        if kind == "exponent":
            kw["which"] = args.which
    else:
        kw.update(quantity=args.quantity, activation=args.activation, link=args.link, loss=args.loss,
                  width=args.width, a=args.a, b=args.b, delta=args.delta, eta=args.eta, ridge=args.ridge)
    return check(kind, args.claim, **kw).as_dict()


def exit_status(r) -> int:
    return {"differs": DIFFERS, "undecided": UNDECIDED}.get(r["verdict"], 0)


def text(r) -> str:
    c = r["computed"]
    got = c["exact"] if c["exact"] is not None else f"{c['value']!r} ± {c['error']:.1e}"
    return "\n".join([f"{r['quantity']}",
                      f"  claim:    {r['claim']}",
                      f"  computed: {got}   [{c['tier']}: {c['method']}]",
                      f"  verdict:  {r['message']}",
                      f"  how:      {r['how']}"])
