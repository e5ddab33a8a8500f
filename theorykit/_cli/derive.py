"""theorykit derive --activation A --loss L --width M [--a 1,-1] [--b 0,0] [--json]"""
import sympy as sp

from .. import defaults
from ..errors import TheorykitError
from ..symbolic.network import Network
from ._args import add_network_arguments

#: widest network whose symbolic F (m entries) and D (m x m) `derive` builds and prints: measured on one CPU core,
#: width 16 takes about 3 s (square loss) to 8 s (logistic), width 24 about 5 s to 23 s and width 40 minutes
DERIVE_MAX_WIDTH = 16


def add_parser(sub):
    p = sub.add_parser("derive", help="per-sample gradient F(r, y) and Hessian D(r, y) of the loss in r")
    add_network_arguments(p)
    return p


def run(args) -> dict:
    if isinstance(args.width, int) and args.width > DERIVE_MAX_WIDTH:
        raise TheorykitError(f"derive prints the symbolic F and D entry by entry, so it takes --width <= "
                             f"{DERIVE_MAX_WIDTH} (got {args.width}); simulate and dmft accept widths up to "
                             f"{defaults.MAX_WIDTH}")
    net = Network(args.activation, args.loss, args.width, a=args.a, b=args.b)
    F, D = net.F_expr, net.D_expr
    return {"activation": str(net.activation.expr), "loss": str(net.loss.expr), "width": net.m,
            "a": [str(v) for v in net.a_sym], "b": [str(v) for v in net.b_sym],
            "f": str(net.f_expr),
            "F": [str(e) for e in F], "F_latex": [sp.latex(e) for e in F],
            "D": [[str(D[i, j]) for j in range(net.m)] for i in range(net.m)],
            "D_latex": [[sp.latex(D[i, j]) for j in range(net.m)] for i in range(net.m)],
            "notes": [n for n in [net.activation.note] if n]}


def text(r) -> str:
    lines = [f"f(r) = {r['f']}", f"loss = {r['loss']}"]
    for j, e in enumerate(r["F"]):
        lines.append(f"F_{j + 1}(r, y) = {e}")
    for i, row in enumerate(r["D"]):
        for j, e in enumerate(row):
            if j >= i:
                lines.append(f"D_{i + 1}{j + 1}(r, y) = {e}")
    lines += [f"note: {n}" for n in r["notes"]]
    return "\n".join(lines)
