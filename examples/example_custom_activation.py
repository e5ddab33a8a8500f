"""The threshold of your own activation (runs as a test): sigma(x) = x tanh(x), which has a non-zero second Hermite
coefficient, on phase retrieval with the square loss.

    python examples/example_custom_activation.py

1. its Hermite coefficients (quadrature tier: no closed form), mu_2 != 0, so its first GD step already sees z^2;
2. delta_alg = 1/2 of the link (exact) and the spectral threshold delta*(t) at t = 10, with the law of D truncated at
   n = delta d for d = 500 (D is unbounded below for this activation);
3. the simulator at d = 120 on either side of it.
"""
import theorykit as tk

ACT, ETA = "x*tanh(x)", 0.5


def main(verbose=True):
    h = tk.hermite_coefficients(ACT, degree=2)
    assert h[2].tier == "quadrature" and abs(h[2].value) > 0.5 and h[2].error < 1e-10  # mu_2 = 0.848 (measured)
    p = tk.Problem(ACT, "phase-retrieval", "square", 1, eta=ETA, delta=1.0, steps=10)
    assert p.analysis.delta_alg.value == 0.5
    q = tk.delta_star(p, [10], delta_range=(1.0, 40.0), d=500, paths=4096, replicas=2)[0]
    assert q.bracket[0] <= q.value <= q.bracket[1] and 0.5 < q.value < 40 and q.stderr < 0.25 * q.value
    low, high = q.value / 4, 2.5 * q.value
    df = tk.sweep([low, high], range(6), problem=p.replace(steps=300), d=120, processes=2)
    s = tk.referee.summarise(df)
    assert s["success_probability"].iloc[1] >= s["success_probability"].iloc[0]
    if verbose:
        print(f"mu_2 = {h[2].value:.4f} ({h[2].tier}); delta_alg = 0.5; delta*(10) at d = 500: {q.value:.3g} +- "
              f"{q.stderr:.2g}")
        print(s[["delta", "runs", "successes", "success_probability"]].to_string(index=False))


def test_custom_activation():
    main(verbose=False)


if __name__ == "__main__":
    main()
