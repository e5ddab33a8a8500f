"""How many samples at *your* d?  The finite-d prediction for phase retrieval, checked against GD (runs as a test).

    python examples/example_capture.py

The d -> infinity DMFT says when GD learns the hard direction of y = z^2 only in the limit; at finite d the initial
overlap (~ 1/sqrt(d)) and the noise of n = delta d samples decide.  ``theorykit.finite_d`` matches the linear hard
process (the effective initial-overlap variance v_eff) to the smallest initial overlap m* from which the nonlinear
DMFT captures the direction by the horizon (one ladder of DMFT runs): P = P(chi2_1 > d m*^2 / v_eff).
"""
import numpy as np

import theorykit as tk

NET = dict(activation="gelu", link="phase-retrieval", loss="square", width=1)
DELTA, ETA, HORIZON, D, SEEDS = 13.0, 1.0, 60, 200, 96


def main():
    pr = tk.Problem(**NET, delta=DELTA, eta=ETA, steps=HORIZON)
    fd = tk.finite_d(pr, [DELTA], [D], HORIZON, paths=16384, replicas=4, seed=0)
    P, low, high = (float(a[0, 0, HORIZON]) for a in (fd.probability, fd.low, fd.high))
    info = fd.per_delta[0]
    print(f"m* = {info['m_star']:.3f}, v_eff = {info['v']:.2f} at t = {info['t_match']}: P(capture by t = "
          f"{HORIZON}) at d = {D}: {P:.2f} [{low:.2f}, {high:.2f}]")

    # the referee: GD at d = 200 from independent seeds
    wins = [tk.simulate(**NET, delta=DELTA, d=D, steps=HORIZON, eta=ETA, seed=s, n_test=1).escape_time is not None
            for s in range(SEEDS)]
    p = np.mean(wins)
    print(f"GD, d = {D}, {SEEDS} seeds: captured by t = {HORIZON} in {p:.2f} +- {np.sqrt(p * (1 - p) / SEEDS):.2f}")
    # binomial standard error of a fraction of SEEDS runs if the prediction is right (taken at the prediction, not at
    # the observed p, so it is never 0).  GD must fall within 3 of them of the prediction's band [low, high]; the
    # numbers measured when written are in the commit that wrote this example.
    se = np.sqrt(P * (1 - P) / SEEDS)
    assert low <= P <= high and high - low < 0.15, (low, P, high)
    assert low - 3 * se <= p <= high + 3 * se, (p, low, P, high)


def test_example_capture():
    main()


if __name__ == "__main__":
    main()
