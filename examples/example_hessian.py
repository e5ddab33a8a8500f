"""The Hessian at time t from the DMFT's law, next to the finite-d Hessian (runs as a test:
`python -m pytest examples`).

Run it directly with `python examples/example_hessian.py`.  GeLU phase retrieval, square loss, m = 1, delta = 10 at
random initialisation: the DMFT's law of (D, zeta) at t = 0, truncated at n = delta d for d = 400, predicts a hard
outlier with negative curvature below the bulk; the finite-d Hessian (Lanczos, constrained init) has it.
"""
import numpy as np

import theorykit as tk
from theorykit.referee.gd import training_data
from theorykit.thresholds import law_at


def main(verbose=True):
    d = 400
    p = tk.Problem("gelu", "phase-retrieval", "square", 1, delta=10.0, eta=1.0, steps=0)
    r = tk.dmft(p, keep_law_at=[0], paths=16384, replicas=2, bias_check=False)
    law = law_at(r, 0, d=d)
    h = tk.spectra.hessian_prediction(law)
    assert h.unbounded  # square loss with y = z^2: D is unbounded below, so the finite-n law is the one to use
    # the hard outlier carries most of the overlap^2 below the edge; a root in the gap between the predicted
    # single-sample spike and the bulk may come with it, carrying a few thousandths (the spike's own eigenvector)
    o = max(h.outliers, key=lambda v: v.overlap2)
    assert o.negative and o.lam < h.edge and o.overlap2 > 0.5 * h.overlap2_below_edge
    # the finite-d referee at the same t: bottom eigenpairs and their overlap^2 with the hard direction e_1
    X, y = training_data(p, d, seed=0)
    sim = tk.simulate(p, d=d, seed=0, n_test=1)
    hb = tk.referee.hessian_bottom(X, p.network.evaluate(X @ sim.theta, y), k=6, hard_dirs=np.eye(d)[:, :1])
    j = int(np.argmax(hb.hard_overlap2))
    assert abs(hb.eigenvalues[j] - o.lam) < 0.15 * abs(o.lam)  # d = 400: O(d^-1/2) spread
    if verbose:
        print(f"edge {h.edge:.4f}; outlier {o.lam:.4f} (overlap^2 {o.overlap2:.3f}); "
              f"finite d = {d}: {hb.eigenvalues[j]:.4f} (overlap^2 {hb.hard_overlap2[j]:.3f}); spikes "
              f"{[round(s, 4) for s in h.spikes if s is not None][:3]}")
    return h, hb


def test_hessian_example():
    main(verbose=False)


if __name__ == "__main__":
    main()
