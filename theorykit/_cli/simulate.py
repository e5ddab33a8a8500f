"""theorykit simulate --activation A --link L --loss LOSS --width M [--a ...] [--b ...] --delta D --d DIM --steps T
--eta ETA [--init random|spectral] [--spectral-T EXPR] [--constrained] [--seed S] [--hessian-every K] [--ridge R]
[--hessian-method auto|lanczos|dense] [--n-test N] [--M0 LIST] [--Sigma0 LIST] [--progress] [--json]

JSON keys: status, t, M, gram, train_loss, test_loss, population_test_loss, population_test_loss_error, success,
escape_time, hessian, settings (numbers and choices), method (conventions and the population loss' method, in
words), problem (theorykit.Problem.as_dict(): with settings it re-runs the result) (+ diverged_at).
population_test_loss[_error] are null when k + noisy + m > 4 (method.population_test_loss says why).
"""
import sys

from ._args import check_args, add_simulation_arguments, simulation_kwargs


def add_parser(sub):
    p = sub.add_parser("simulate", help="finite-d full-batch gradient descent (the referee for the theory)",
                       description="Finite-d full-batch gradient descent (the referee for the theory).",
                       epilog="example: theorykit simulate --activation relu --link phase-retrieval --delta 2 --d 200 "
                              "--steps 100 --eta 0.5 --seed 1")
    add_simulation_arguments(p)
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when it is not a terminal")
    return p


def run(args) -> dict:
    from ..referee import simulate

    check_args(args)
    progress = bool(getattr(args, "progress", False)) or sys.stderr.isatty()
    res = simulate(delta=args.delta, seed=args.seed, progress=progress, **simulation_kwargs(args))
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
    pop = r.get("population_test_loss")
    lines.append(f"{'t':>6} {'train':>12} {'test':>12}" + (f" {'population':>12}" if pop else "")
                 + f" {'|M|_F':>9} {'tr gram/m':>9} success")
    for i in rows:
        gram = r["gram"][i]
        trg = sum(gram[j][j] for j in range(len(gram))) / max(len(gram), 1)
        lines.append(f"{r['t'][i]:>6} {r['train_loss'][i]:>12.6g} {r['test_loss'][i]:>12.6g}"
                     + (f" {pop[i]:>12.6g}" if pop else "")
                     + f" {_fro(r['M'][i]):>9.4g} {trg:>9.4g} {'yes' if r['success'][i] else 'no'}")
    lines.append(f"status: {r['status']}; escape time ({s['success_target']} overlap > {s['success_threshold']}): "
                 f"{r['escape_time'] if r['escape_time'] is not None else 'never'}")
    for h in r["hessian"]:
        ev = ", ".join(f"{v:.4g}" for v in h["eigenvalues"][:3])
        hw = f"; hard weight {h['hard_weight']:.3f}" if s["hard_dim"] else ""
        lines.append(f"Hessian t = {h['t']}: bottom eigenvalues {ev}, ...{hw}")
    if r.get("diverged_at"):
        da = r["diverged_at"]
        loss = f"loss {da['loss']:g}" if da.get("loss") is not None else da.get("loss_note", "loss not finite")
        lines.append(f"diverged: {da['hint']} ({loss})")
    return "\n".join(lines)
