"""The validation table's pass criteria (theorykit.validation.hessian_check), on synthetic seeds."""
import numpy as np

from theorykit.validation.hessian_check import paired_mean_ok


def _seeds(pred, fin, po, fo):
    return [([p], [f], [a], [b]) for p, f, a, b in zip(pred, fin, po, fo)]


def test_paired_mean_passes_zero_mean_fluctuations_beyond_three_percent():
    rng = np.random.default_rng(0)
    fin = -1.3 + 0.05 * rng.standard_normal(8)
    pred = fin * (1 + 0.04 * rng.standard_normal(8))  # 4% per-seed scatter, no bias: most seeds miss 3%
    ov = np.full(8, 0.47)
    assert paired_mean_ok(_seeds(pred, fin, ov, ov + 0.01 * rng.standard_normal(8)), 8)


def test_paired_mean_fails_a_bias():
    rng = np.random.default_rng(1)
    fin = -1.3 + 0.05 * rng.standard_normal(8)
    ov = np.full(8, 0.47)
    biased = fin * (1.06 + 0.005 * rng.standard_normal(8))  # 6% too low, tight
    assert not paired_mean_ok(_seeds(biased, fin, ov, ov), 8)
    assert not paired_mean_ok(_seeds(fin, fin, ov + 0.08, ov), 8)  # overlap^2 off by 0.08
    assert paired_mean_ok(_seeds(fin, fin, ov, ov), 8)


def test_paired_mean_needs_every_seed_matched():
    ov = [0.5, 0.5]
    assert not paired_mean_ok(_seeds([-1.0, -1.0], [-1.0, -1.0], ov, ov), 3)  # a seed without a matched outlier
    assert not paired_mean_ok(_seeds([-1.0], [-1.0], [0.5], [0.5]), 1)  # one seed: no standard error
    assert paired_mean_ok([([], [], [], []), ([], [], [], [])], 2)  # no outlier predicted at any seed


def test_paired_mean_averages_an_outlier_over_the_seeds_that_have_it():
    # a second outlier near its birth: predicted (and matched) on some seeds only
    both = [([-0.05, -0.026], [-0.0502, -0.0255], [0.82, 0.45], [0.82, 0.47]),
            ([-0.048, -0.025], [-0.0478, -0.0249], [0.82, 0.30], [0.82, 0.28])]
    one = [([-0.05], [-0.0503], [0.82], [0.81])]
    assert paired_mean_ok(both + one, 3)
    off = [([-0.05, -0.026], [-0.0502, -0.040], [0.82, 0.45], [0.82, 0.47])]  # its eigenvalue 35% off
    assert not paired_mean_ok(off + one, 2)


def test_the_threshold_part_sums_the_overlap_over_the_hard_directions():
    """Part B with kH hard directions: the finite-d side sums the bottom eigenvectors' hard overlap^2 up to the K-th
    most overlapping one (spikes below included; K the seed's own count of outliers, 1 to kH), the prediction sums
    its outliers'.  Two outliers carrying 0.4 and 0.39, under a spike carrying 0.05: K = 1 reads up to the most
    overlapping one (0.45), K = 2 all three (0.84)."""
    from types import SimpleNamespace

    from theorykit.validation.hessian_check import match_outliers, summed_overlap

    eig, ov = [-1.0, -0.9, -0.85, -0.5, -0.4], [0.05, 0.4, 0.39, 0.01, 0.02]
    assert abs(sum(match_outliers([0.0], eig, ov)[1]) - 0.45) < 1e-12
    assert abs(sum(match_outliers([0.0] * 2, eig, ov)[1]) - 0.84) < 1e-12
    outs = SimpleNamespace(outliers=(SimpleNamespace(overlap2=0.4), SimpleNamespace(overlap2=0.39)))
    assert abs(summed_overlap(outs) - 0.79) < 1e-12 and summed_overlap(SimpleNamespace(outliers=())) == 0.0
