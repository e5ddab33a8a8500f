"""Benchmark: one GD step of the simulator vs. the machine's own matmul rate for the same shapes.

    python benchmarks/bench_gd_step.py [--d 1000] [--n 6000] [--m 4] [--repeats 15]

Setting: gelu, phase retrieval, square loss.  "matmuls" = X @ Theta plus X.T @ F timed alone with NumPy (best of
--repeats); "GD step" = the simulator's step, ``net.evaluate(X @ theta, y)`` + ``gd_update`` (best of --repeats);
ratio = matmuls / step (goal >= 0.70: the step is dominated by its two matmuls).  For information it also times a
whole recorded iteration of :func:`theorykit.simulate` (test loss on n_test = n fresh samples, i.e. a third
matmul, plus M_t, gram, overlap), against three matmuls.
"""
import argparse
import time

import numpy as np


def best(fn, repeats):
    out = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--n", type=int, default=6000)
    p.add_argument("--m", type=int, default=4)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--no-full", action="store_true", help="skip the whole-iteration timing")
    args = p.parse_args(argv)

    import theorykit as tk
    from theorykit.referee.gd import gd_update, simulate

    d, n, m, R = args.d, args.n, args.m, args.repeats
    net = tk.Network("gelu", "square", m)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = X[:, 0] ** 2
    theta0 = rng.standard_normal((d, m)) / np.sqrt(d)
    F = rng.standard_normal((n, m))

    # the machine's matmul rate for the same shapes
    t_fwd = best(lambda: X @ theta0, R)
    t_bwd = best(lambda: X.T @ F, R)
    t_mm = t_fwd + t_bwd

    # one simulator step (tiny eta so theta stays in the same regime over repeats)
    theta = theta0.copy()

    def step():
        derivs = net.evaluate(X @ theta, y)
        gd_update(X, derivs, theta, 1e-6, 0.0)

    step()  # warm up (lambdify caches)
    t_step = best(step, R)
    print(f"shapes: X ({n}, {d}), Theta ({d}, {m}); gelu / phase retrieval / square loss; best of {R}")
    print(f"matmuls alone: X@Theta {t_fwd * 1e3:.2f} ms + X.T@F {t_bwd * 1e3:.2f} ms = {t_mm * 1e3:.2f} ms")
    print(f"GD step      : {t_step * 1e3:.2f} ms")
    print(f"ratio matmuls / step = {t_mm / t_step:.1%} (goal >= 70%)")

    if not args.no_full:
        steps = 20
        kw = dict(delta=n / d, d=d, steps=steps, eta=1.0, n_test=n, seed=0)
        t0 = time.perf_counter()
        simulate("gelu", "phase-retrieval", "square", m, steps=0, **{k: v for k, v in kw.items() if k != "steps"})
        t_setup = time.perf_counter() - t0
        t0 = time.perf_counter()
        simulate("gelu", "phase-retrieval", "square", m, **kw)
        t_full = (time.perf_counter() - t0 - t_setup) / steps
        print(f"whole recorded iteration of simulate() (incl. test loss, n_test = n): {t_full * 1e3:.2f} ms "
              f"vs 3 matmuls {(t_mm + t_fwd) * 1e3:.2f} ms: ratio {(t_mm + t_fwd) / t_full:.1%}")


if __name__ == "__main__":
    main()
