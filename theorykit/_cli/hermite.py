"""theorykit hermite ACT [--degree K] [--json]"""
from ..symbolic.hermite import hermite_coefficients
from ._args import check_args, integer, seconds


def add_parser(sub):
    p = sub.add_parser("hermite", help="Hermite coefficients mu_k = E[sigma(G) He_k(G)] of an activation")
    p.add_argument("activation", help="preset (quad, gelu, relu, tanh, erf, linear, he2, he3) or expression in x")
    p.add_argument("--degree", type=integer(0, 40), default=4, help="largest k, in 0..40 (default 4)")
    p.add_argument("--time-limit", type=seconds(allow_zero=True), default=3.0,
                   help="seconds >= 0 for sympy.integrate per coefficient (0: skip it; default 3)")
    p.add_argument("--wall-limit", type=seconds(), default=None,
                   help="wall-clock seconds > 0 per coefficient, all methods together (default 30, or "
                        "$THEORYKIT_WALL_LIMIT)")
    return p


def run(args) -> dict:
    check_args(args)
    h = hermite_coefficients(args.activation, args.degree, time_limit=args.time_limit,
                             wall_limit=args.wall_limit)
    return {"activation": str(h.activation.expr), "name": h.activation.name,
            "convention": "probabilists' He_k; mu_k = E[sigma(G) He_k(G)]; sigma = sum_k mu_k He_k / k!",
            "coefficients": [c.as_dict() for c in h.coefficients]}


def text(r) -> str:
    lines = [f"sigma(x) = {r['activation']}   ({r['convention']})"]
    for c in r["coefficients"]:
        ex = c["exact"] if c["exact"] is not None else "-"
        err = "" if c["tier"] == "exact" else f"  (+/- {c['error']:.1e})"
        lines.append(f"  mu_{c['k']:<2d} = {c['value']: .15g}   exact: {ex}   [{c['tier']}]{err}")
    return "\n".join(lines)
