"""Five-minute tour of theorykit's symbolic core (runs as a test: `python -m pytest examples`).

Run it directly with `python examples/example_quickstart.py`.
"""
import numpy as np
import sympy as sp

import theorykit as tk


def main(verbose=True):
    # 1. Hermite coefficients of an activation (probabilists' He_k, mu_k = E[sigma(G) He_k(G)])
    h = tk.hermite_coefficients("gelu", degree=3)
    assert h[1].exact == sp.Rational(1, 2) and h[2].tier == "exact"
    if verbose:
        for c in h.coefficients:
            print(f"mu_{c.k} = {c.exact}  ({c.tier})")

    # 2. A user activation without a closed form falls back to quadrature, with its error
    c = tk.hermite_coefficients("tanh(x) + x/4", degree=1)[1]
    assert c.tier == "quadrature" and c.error < 1e-12

    # 3. Link analysis: phase retrieval is hard (no easy direction) with delta_alg = 1/2 exactly
    a = tk.analyse_link("phase-retrieval")
    assert (a.information_exponent, a.generative_exponent) == (2, 2)
    assert a.delta_alg.exact == sp.Rational(1, 2)
    stair = tk.analyse_link("z1 + z2**2")
    assert (stair.easy_dim, stair.hard_dim) == (1, 1)
    if verbose:
        print("phase retrieval: delta_alg =", a.delta_alg.exact, "| staircase: easy", stair.easy_dim,
              "hard", stair.hard_dim)

    # 4. Per-sample derivatives of the loss in the pre-activations, symbolic and vectorised
    net = tk.symbolic.Network("gelu", "logistic", width=2, a="1,-1")
    r = np.random.default_rng(0).standard_normal((5, 2))
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    d = net.evaluate(r, y)
    assert d.F.shape == (5, 2) and d.D.shape == (5, 2, 2)
    if verbose:
        print("F_1(r, y) =", net.F_expr[0])
    return h, a, d


def test_quickstart():
    main(verbose=False)


if __name__ == "__main__":
    main()
