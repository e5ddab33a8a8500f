"""GD that trains the second layer too (the paper's conventions, tables/paper_comparison.md): a referee beside
:func:`theorykit.simulate`, which trains Theta only.  Plain NumPy (no fused kernel); same data and initial draws as
the simulator (:func:`theorykit.referee.gd.draw_instance`), same success statistic
(:func:`theorykit.referee.gd.subspace_overlap`)."""
from __future__ import annotations

import math

import numpy as np

from .gd import draw_instance, subspace_overlap

#: the columns of a trained-second-layer run (those of theorykit.sweep that the table reads, plus the final a)
TRAINED_COLUMNS = ["delta", "seed", "success", "escape_time", "max_overlap", "final_overlap", "steps_run",
                   "final_train_loss", "a_final"]


def trained_a_run(delta: float, seed: int, kwargs: dict) -> dict:
    """One GD run that trains the second layer too (not in theorykit's simulator, which trains Theta only).

    Same model, data and initialisation as ``simulate(problem.replace(delta=delta), d=d, seed=seed)`` (the same
    RNG draws, via :func:`theorykit.referee.gd.draw_instance`): full-batch GD on
    L(Theta, a) = (1/n) sum_i l(y_i, f(x_i)),
    f = (1/m) sum_j a_j sigma(theta_j^T x + b_j), with Theta <- Theta - eta grad_Theta L and a <- a - eta_a grad_a L
    at every step (simultaneous updates).  Success as the simulator's: cos^2 > 1/2 between the hard direction and the
    top left singular vector of Theta; the run stops at its escape.  With eta_a = 0 it is the simulator's numpy path
    (tests/test_paper_comparison.py checks the escape times agree).  A non-finite loss ends the run ("diverged")."""
    problem, d, eta_a = kwargs["problem"].replace(delta=float(delta)), int(kwargs["d"]), float(kwargs["eta_a"])
    net, lk = problem.network, problem.link_obj
    m, k, n = net.m, lk.k, int(round(problem.delta * d))
    target = np.array(problem.analysis.hard_basis, dtype=float).reshape(k, -1)
    theta, X, y, _, _ = draw_instance(problem, d, n, 1, int(seed))
    a, b = net.a.copy(), net.b
    escape, best, ov, status, tr = None, 0.0, 0.0, "ok", math.nan
    t = 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for t in range(problem.n_steps + 1):
            s0, s1, _ = net.activation.numpy(X @ theta + b)
            l0, l1, _ = net.loss.numpy(y, s0 @ a / m)
            tr = float(np.mean(l0))
            if not (math.isfinite(tr) and np.all(np.isfinite(theta)) and np.all(np.isfinite(a))):
                status = "diverged"
                break
            ov = subspace_overlap(theta[:k], theta.T @ theta, target)
            best = max(best, ov)
            if ov > 0.5:
                escape = t
                break
            if t == problem.n_steps:
                break
            g_theta = X.T @ (l1[:, None] * s1 * (a / m)) / n
            g_a = s0.T @ l1 / (n * m)
            eta_t = problem.etas[t]
            theta -= eta_t * g_theta
            a -= eta_a * g_a
    return {"delta": float(delta), "seed": int(seed), "status": status, "success": escape is not None,
            "escape_time": escape, "max_overlap": best, "final_overlap": ov, "steps_run": t, "final_train_loss": tr,
            "a_final": ",".join(f"{v:.4g}" for v in a)}
