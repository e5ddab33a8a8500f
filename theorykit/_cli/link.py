"""theorykit link LINK [--json]"""
from ..symbolic import gaussian
from ..symbolic.links import analyse_link


def add_parser(sub):
    p = sub.add_parser("link", help="exponents, easy/hard subspaces and delta_alg of a link")
    p.add_argument("link", help="preset (phase-retrieval, noisy-phase-retrieval[:s=..], relu, abs, sign-symmetric, "
                                "linear, easy-quadratic, product, staircase) or expression in z / z1..zk and eps")
    p.add_argument("--wall-limit", type=float, default=None,
                   help="wall-clock seconds per Gaussian expectation (default 30, or $THEORYKIT_WALL_LIMIT)")
    p.add_argument("--max-degree", type=int, default=4, help="degree of the polynomial test functions (default 4)")
    return p


def run(args) -> dict:
    old, gaussian.OVERRIDE = gaussian.OVERRIDE, args.wall_limit
    try:
        return analyse_link(args.link, max_degree=args.max_degree).as_dict()
    finally:
        gaussian.OVERRIDE = old


def text(r) -> str:
    da = r["delta_alg"]
    val = "infinite" if da["value"] is None else f"{da['value']:.10g}"
    ex = f" = {da['exact']}" if da["exact"] is not None else (f" +/- {da['error']:.1e}" if da["value"] else "")
    lines = [f"link: y = {r['link']}   (k = {r['k']})",
             f"  information exponent: {r['information_exponent']}",
             f"  generative exponent:  {r['generative_exponent']}",
             f"  easy subspace dim {r['easy_dim']}, hard subspace dim {r['hard_dim']}   [{r['method']}]",
             f"  delta_alg = {val}{ex}   [{da['method']}]"]
    lines += [f"  note: {n}" for n in r["notes"]]
    return "\n".join(lines)
