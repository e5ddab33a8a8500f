"""One set of defaults, used by the Python API and the command line alike.

A function's keyword default and the matching CLI option's default both name the constant here, so the two cannot
drift apart.  Only constants live here (no imports from the package), so every module may import it.

Groups:

* problem (:class:`theorykit.Problem`): the loss, width, second-layer weights a, biases b, ridge, initial law;
* simulate (:func:`theorykit.simulate`, the finite-d referee, and the ``simulate`` / ``sweep`` commands);
* dmft (:func:`theorykit.dmft` and the ``dmft`` command), the gradient-flow grid (:func:`theorykit.flow_schedule`)
  and the capture bisection (:func:`theorykit.capture_threshold`);
* link analysis, Hermite coefficients and spectral thresholds.
"""

# ------------------------------------------------------------------------------------------------ problem
#: loss preset of a Problem (and of every solver's keyword form)
LOSS = "square"
#: number of hidden units m
WIDTH = 1
#: second-layer weights a_j (all equal to this) and biases b_j
A = 1
B = 0
#: ridge lambda (adds (lambda/2) ||Theta||_F^2)
RIDGE = 0.0
#: largest width accepted
MAX_WIDTH = 4096
# the initial law: Sigma0 = I (m x m) and M0 = 0 (k x m)

# ------------------------------------------------------------------------------------------------ simulate
SIM_INIT = "random"
SIM_SEED = 0
SIM_CONSTRAINED = False
SIM_HESSIAN_EVERY = 0
SIM_HESSIAN_K = 10
SIM_HESSIAN_METHOD = "auto"
#: the test set has max(SIM_N_TEST_MIN, n) samples unless n_test is given
SIM_N_TEST_MIN = 2000
#: the test loss from the overlaps (a Gaussian test set in the (k + m)-dim span of Theta* and Theta_t), or "fresh"
SIM_TEST_SET = "overlaps"
#: default spectral preprocessing T(y, delta) of init="spectral" (theorykit.referee.gd.DEFAULT_SPECTRAL_T)
SIM_SPECTRAL_T = "(y-1)/(y+sqrt(2*delta)-1)"

# ------------------------------------------------------------------------------------------------ dmft
DMFT_PATHS = 65536
DMFT_REPLICAS = 8
DMFT_LATENT = "auto"
DMFT_SAMPLER = "sobol"
DMFT_RESPONSE = "auto"
DMFT_SEED = 0
DMFT_JITTER = 1e-10
DMFT_WINDOW = 0
#: samples n of the finite sample whose latent tail beyond the 1/n quantile the d -> infinity DMFT's check of a
#: divergence truncates (dmft without d: a divergence that the truncated solve passes is "unreliable", not GD's);
#: 1 / EXCLUDED_LIMIT of theorykit.dynamics.sample_side, the excluded weight above which a solve counts as diverged
DMFT_REACH = 10_000

#: gradient-flow grid (flow_schedule and the dmft command's --eta0, --eta-max, --doubling-every)
FLOW_ETA0 = 0.05
FLOW_ETA_MAX = 1.0
FLOW_DOUBLING_EVERY = 40

#: DMFT paths (total over replicas) and replicas of a threshold scan and of the finite-d answer (delta_star,
#: delta_nn, delta_dyn, finite_d and the threshold command): the validation tables' accuracy
THRESHOLD_PATHS = 16384
THRESHOLD_REPLICAS = 4
#: paths per replica, at least, of the finite-d answer's capture runs when the activation or the loss is kinked: their
#: Stein responses carry noise that biases C_theta upwards (docs/theory.md §3.1, §5 "the median start"), and that bias
#: decides whether the hard direction is captured (tables/finite_d_midpoint_vs_gd.md, pr-relu)
KINKED_REPLICA_PATHS = 16384

#: capture_threshold's bisection on the initial hard overlap m0 in [lo, hi]
CAPTURE_LO = 0.0
CAPTURE_HI = 1.0
CAPTURE_TOL = 1e-3
CAPTURE_RTOL = 0.1

# ------------------------------------------------------------------------------------------------ analysis
#: degree of the polynomial test functions of analyse_link (and `theorykit link --max-degree`)
LINK_MAX_DEGREE = 4
#: largest Hermite index and sympy.integrate time limit of hermite_coefficients (and `theorykit hermite`)
HERMITE_DEGREE = 4
HERMITE_TIME_LIMIT = 3.0
#: delta range scanned by spectral_threshold (and `theorykit spectral --delta-range`)
SPECTRAL_DELTA_RANGE = (1e-3, 1e3)
