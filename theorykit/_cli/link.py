"""theorykit link LINK [--json]"""
from ..symbolic import gaussian
from ..symbolic.links import analyse_link
from ._args import check_args, integer, seconds


def add_parser(sub):
    p = sub.add_parser("link", help="exponents, easy/hard subspaces and delta_alg of a link")
    p.add_argument("link", help="preset (phase-retrieval, noisy-phase-retrieval[:s=..], relu, abs, sign-symmetric, "
                                "linear, easy-quadratic, product, staircase) or expression in z / z1..zk and eps")
    p.add_argument("--wall-limit", type=seconds(), default=None,
                   help="wall-clock seconds > 0 per Gaussian expectation (default 30, or $THEORYKIT_WALL_LIMIT)")
    p.add_argument("--max-degree", type=integer(1, MAX_DEGREE), default=4,
                   help=f"degree of the polynomial test functions, in 1..{MAX_DEGREE} (default 4)")
    return p


#: largest --max-degree: the test functions y^p z^q of higher degree have Gaussian moments beyond float range for
#: ordinary links (and 0 would test nothing: every direction would look hard)
MAX_DEGREE = 12


def run(args) -> dict:
    check_args(args)
    old, gaussian.OVERRIDE = gaussian.OVERRIDE, args.wall_limit
    try:
        return analyse_link(args.link, max_degree=args.max_degree).as_dict()
    finally:
        gaussian.OVERRIDE = old


def _value(da) -> str:
    val = "infinite" if da["value"] is None else f"{da['value']:.10g}"
    ex = f" = {da['exact']}" if da["exact"] is not None else (f" +/- {da['error']:.1e}" if da["value"] else "")
    return f"{val}{ex}   [{da['method']}]"


def text(r) -> str:
    lines = [f"link: y = {r['link']}   (k = {r['k']})",
             f"  information exponent: {_exponent(r, 'information_exponent')}",
             f"  generative exponent:  {_exponent(r, 'generative_exponent')}",
             f"  easy subspace dim {r['easy_dim']}, hard subspace dim {r['hard_dim']}   [{r['method']}]",
             f"  delta_alg = {_value(r['delta_alg'])}"]
    if r.get("delta_alg_hard") is not None:
        lines.append(f"  delta_alg of the hard directions given the easy ones = {_value(r['delta_alg_hard'])}")
    elif r["easy_dim"] and r["hard_dim"]:
        lines.append(f"  delta_alg of the hard directions given the easy ones: {r.get('delta_alg_hard_reason')}")
    lines += [f"  note: {n}" for n in r["notes"]]
    return "\n".join(lines)


def _exponent(r, key) -> str:
    return str(r[key]) if r[key] is not None else f"none ({r.get(key + '_reason', 'not found')})"
