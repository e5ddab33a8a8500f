"""DMFT of gradient descent in five lines, checked against the finite-d simulator (runs as a test).

    python examples/example_dmft.py
"""
import numpy as np

import theorykit as tk


def main():
    # d -> infinity prediction: tanh network, m = 2, a = (1, -1), easy link y = z + z^2/2, delta = 2, eta = 1
    net = dict(activation="tanh", link="z+z**2/2", loss="square", width=2, a="1,-1")
    th = tk.dmft(**net, delta=2.0, eta=1.0, steps=10, paths=16384, replicas=4, seed=0)
    print(f"DMFT ({th.seconds:.1f} s): gram(10) = {th.gram[10].ravel().round(3)} +- "
          f"{th.stderr['gram'][10].ravel().round(3)}, train {th.train_loss[10]:.4f}, test {th.test_loss[10]:.4f}")

    # the referee: finite-d GD at d = 1000, 4 seeds; agreement within 4 standard errors (seeds and DMFT replicas)
    # plus 1% for finite d (losses too, but their finite-n noise is skewed by y's tails: see tables/dmft_vs_sim.md)
    sims = [tk.simulate(**net, delta=2.0, d=1000, steps=10, eta=1.0, seed=s) for s in range(4)]
    for name, sim_values, value, se in [
            ("gram", [s.gram[10] for s in sims], th.gram[10], th.stderr["gram"][10]),
            ("M", [s.M[10] for s in sims], th.M[10], th.stderr["M"][10])]:
        mean = np.mean(sim_values, axis=0)
        sim_se = np.std(sim_values, axis=0, ddof=1) / np.sqrt(len(sims))
        print(f"simulator, d = 1000: {name}(10) = {np.round(mean, 4).ravel()} +- {np.round(sim_se, 4).ravel()}")
        assert np.all(np.abs(value - mean) <= 4 * np.hypot(sim_se, se) + 0.01 * np.abs(mean)), name

    # hard direction (phase retrieval): C_mu = d E[(theta^T e)^2] grows from Sigma_0 = 1 (exact at t = 0: Theta0 ~
    # N(0, I/d)); what it means for GD at a finite d is theorykit.finite_d (examples/example_capture.py)
    pr = tk.dmft("gelu", "phase-retrieval", "square", 1, delta=4.0, eta=1.0, steps=20, paths=8192, replicas=4)
    print(f"phase retrieval: C_mu(20) = {pr.C_mu[20, 0, 0, 0]:.1f} +- {pr.stderr['C_mu'][20, 0, 0, 0]:.1f}")
    assert pr.C_mu[0, 0, 0, 0] == 1.0 and pr.C_theta_tt[0, 0, 0] == 1.0
    # the hard overlap variance grows from 1 while the replicas agree (measured: reliable up to t = 5, C_mu(5) = 27.5
    # +- 1.0, later 27.2 +- 1.1), and is still above 1 at t = 20 (where its replicas no longer agree)
    assert pr.hard_reliable_until >= 5 and pr.C_mu[5, 0, 0, 0] - 3 * pr.stderr["C_mu"][5, 0, 0, 0] > 20
    assert pr.C_mu[20, 0, 0, 0] > pr.C_mu[0, 0, 0, 0]


def test_example_dmft():
    main()


if __name__ == "__main__":
    main()
