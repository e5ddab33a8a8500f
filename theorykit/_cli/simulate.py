"""theorykit simulate --activation A --link L --loss LOSS --width M [--a ...] [--b ...] --delta D --d DIM --steps T
--eta ETA [--init random|spectral] [--spectral-T EXPR] [--constrained] [--seed S] [--hessian-every K] [--ridge R]
[--n-test N] [--progress] [--json]

JSON keys: status, t, M, gram, train_loss, test_loss, success, escape_time, hessian, settings (+ diverged_at).
"""
import sys

from .derive import add_network_arguments


def add_parser(sub):
    p = sub.add_parser("simulate", help="finite-d full-batch gradient descent (the referee for the theory)")
    add_network_arguments(p, loss_required=False)  # default: square loss
    p.add_argument("--link", required=True, help="preset or expression in z (or z1..zk) and eps")
    p.add_argument("--delta", type=float, required=True, help="sample ratio n/d")
    p.add_argument("--d", type=int, required=True, help="input dimension")
    p.add_argument("--steps", type=int, required=True, help="number of GD steps T (records t = 0..T)")
    p.add_argument("--eta", type=float, required=True, help="learning rate")
    p.add_argument("--init", choices=["random", "spectral"], default="random",
                   help="random theta_j ~ N(0, I/d) (default) or spectral (top eigenvectors of (1/n) sum T(y) x x^T)")
    p.add_argument("--spectral-T", default=None, dest="spectral_T",
                   help="preprocessing T(y, delta) for --init spectral (default (y-1)/(y+sqrt(2*delta)-1))")
    p.add_argument("--constrained", action="store_true", help="project Theta off the hard subspace every step")
    p.add_argument("--seed", type=int, default=0, help="seed of numpy.random.default_rng (default 0)")
    p.add_argument("--hessian-every", type=int, default=0, dest="hessian_every",
                   help="bottom-10 Hessian eigenpairs every K steps (0: never)")
    p.add_argument("--ridge", type=float, default=0.0, help="ridge lambda: adds (lambda/2)||Theta||_F^2")
    p.add_argument("--n-test", type=int, default=None, dest="n_test", help="test-set size (default max(2000, n))")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when it is not a terminal")
    return p


def run(args) -> dict:
    from ..simulate import simulate

    progress = bool(getattr(args, "progress", False)) or sys.stderr.isatty()
    res = simulate(args.activation, args.link, args.loss, args.width, a=args.a, b=args.b, delta=args.delta,
                   d=args.d, steps=args.steps, eta=args.eta, ridge=args.ridge, init=args.init,
                   spectral_T=args.spectral_T, constrained=args.constrained, seed=args.seed,
                   hessian_every=args.hessian_every, n_test=args.n_test, progress=progress)
    return res.as_dict()


def _fro(mat) -> float:
    return sum(v * v for row in mat for v in row) ** 0.5


def text(r) -> str:
    s = r["settings"]
    lines = [f"{s['activation']} / {s['link']} / {s['loss']}, m = {s['width']}, d = {s['d']}, n = {s['n']} "
             f"(delta = {s['delta']:g}), eta = {s['eta']:g}, init = {s['init']}"
             + (", constrained" if s["constrained"] else "") + f", seed = {s['seed']}"]
    T = len(r["t"])
    rows = sorted(set([0, T - 1] + [round(i * (T - 1) / 10) for i in range(11)])) if T else []
    lines.append(f"{'t':>6} {'train':>12} {'test':>12} {'|M|_F':>9} {'tr gram/m':>9} success")
    for i in rows:
        gram = r["gram"][i]
        trg = sum(gram[j][j] for j in range(len(gram))) / max(len(gram), 1)
        lines.append(f"{r['t'][i]:>6} {r['train_loss'][i]:>12.6g} {r['test_loss'][i]:>12.6g} "
                     f"{_fro(r['M'][i]):>9.4g} {trg:>9.4g} {'yes' if r['success'][i] else 'no'}")
    lines.append(f"status: {r['status']}; escape time ({s['success_target']} overlap > {s['success_threshold']}): "
                 f"{r['escape_time'] if r['escape_time'] is not None else 'never'}")
    for h in r["hessian"]:
        ev = ", ".join(f"{v:.4g}" for v in h["eigenvalues"][:3])
        hw = f"; hard weight {h['hard_weight']:.3f}" if s["hard_dim"] else ""
        lines.append(f"Hessian t = {h['t']}: bottom eigenvalues {ev}, ...{hw}")
    if r.get("diverged_at"):
        lines.append(f"diverged: {r['diverged_at']['hint']} (loss {r['diverged_at']['loss']:g})")
    return "\n".join(lines)
