"""The finite-d simulator (docs/theory.md §1 and §7): full-batch gradient descent on a two-layer network.

Model (float64 throughout)::

    x_i ~ N(0, I_d), i = 1..n, n = round(delta * d);   z_i = Theta*^T x_i;   y_i = h(z_i, eps_i)
    f(r) = (1/m) sum_j a_j sigma(r_j + b_j),  r = Theta^T x
    L(Theta) = (1/n) sum_i l(y_i, f(Theta^T x_i)) + (ridge/2) ||Theta||_F^2
    grad L  = (1/n) X^T F(X Theta, y) + ridge * Theta,   Theta <- Theta - eta * grad L

Conventions (all recorded in ``result.settings``):

* **Theta\\***: the first k coordinate axes, Theta* = I_d[:, :k], so z = x[:, :k] and M_t = Theta*^T Theta = Theta[:k].
  Data and random initialisation are isotropic, so this is equal in distribution to a random orthonormal frame.
* **Hard subspace**: ``analyse_link(link).hard_basis`` (k x kH, latent coordinates); in R^d it is
  hard_dirs = Theta* @ hard_basis.  Links with no hard direction (kH = 0) measure success against the whole latent
  subspace Theta* instead (``settings["success_target"] == "latent"``).
* **Success** at step t: overlap_t > 0.5 with overlap_t = ||P_target U_top||_F^2 / q, U_top the top-q left singular
  vectors of Theta_t, q = dim(target) (for q = 1: cos^2 between the hard direction and the top left singular vector).
  If m < q only m singular vectors exist and overlap_t <= m / q.  escape_time = first t with success (None if never).
* **train_loss** is the empirical risk (1/n) sum_i l(y_i, f(r_i)) *without* the ridge term; the ridge term at step t
  is (ridge/2) trace(gram_t).  **test_loss** is the same average over a test set of n_test samples (default
  n_test = max(2000, n)), drawn once (``settings["test_set"]`` and ``method["test_loss"]`` say which kind):

  - ``test_set="overlaps"`` (default): the test set's coordinates in the span of Theta* and Theta_t.  For x ~ N(0,
    I_d) independent of Theta_t, r = Theta_t^T x = M_t^T z + Theta_t[k:]^T x[k:] with z = x[:k] ~ N(0, I_k) and
    Theta_t[k:]^T x[k:] ~ N(0, C_t), C_t = Theta_t[k:]^T Theta_t[k:], independent of z; so with (z_i, g_i) ~ N(0,
    I_(k+p)) drawn once (p = min(m, d - k)) and R_t (p, m) with R_t^T R_t = C_t (the Cholesky factor, continuous in
    t), r_i = M_t^T z_i + R_t^T g_i has at every step exactly the law of a fresh test sample's pre-activations, and
    y_i = h(z_i, eps_i) its response.  A step then costs O(n_test (k + m) m) for the test loss instead of a pass
    over an (n_test, d) matrix.  (Across steps the g_i are tied to R_t rather than to fixed x_i; each step's law is
    the same.)
  - ``test_set="fresh"``: a fresh (n_test, d) test set X_test, read at every step.
  **population_test_loss** is its expectation over a fresh sample,
  E[l(y, f(M_t^T z + g))] with g ~ N(0, C_t), C_t = gram_t - M_t^T M_t (exact at every d because Theta* is the first
  k axes: r = Theta^T x = M_t^T z + Theta_t[k:]^T x[k:]), by theorykit.population with Gauss-Hermite quadrature
  (orders POPULATION_ORDER, or exact for polynomial sigma, l, h), computed from M and gram on first access (after the
  run, so it costs nothing in the GD loop) when k + noisy + m <= 4 (else None; ``method["population_test_loss"]``
  says which).
* **Random init**: theta_j(0) ~ N(0, I_d/d).  A Problem with a non-default initial law (Sigma0, M0) starts from
  Theta(0) = Theta* M0 + G Sigma0^(1/2) / sqrt(d), G the same (d, m) standard normal draw: the rows of the
  complement are N(0, Sigma0 / d) and M_0 = M0 + O(d^-1/2) (the DMFT's theta^0 ~ N(0, Sigma0), M_0 = M0 as d -> oo).
* **Step sizes**: eta at every step, or the Problem's schedule eta_0..eta_{T-1} (step t uses eta_t).
* **Spectral init**: the top-m eigenvectors (unit norm, largest-|entry|
  positive) of (1/n) sum_i T(y_i) x_i x_i^T, default T(y, delta) = (y - 1)/(y + sqrt(2 delta) - 1)
  (:data:`DEFAULT_SPECTRAL_T`).
* **Constrained GD**: Theta <- (I - P_hard) Theta at initialisation and after every step.
* **Randomness**: one ``numpy.random.default_rng(seed)``, drawn in this order: (1) Theta(0) draw, shape (d, m), always
  made (also for the spectral init, so that both inits see the same data for a seed); (2) X train, (n, d);
  (3) eps train, (n,), only for noisy links; (4) the test set: X test (n_test, d) for test_set "fresh", or its
  coordinates (z, g) (n_test, k + min(m, d - k)) for "overlaps"; (5) eps test, (n_test,), only for noisy links.
* **Divergence**: the run stops at the first step t whose train or test loss is not finite, whose train loss exceeds
  1e12 * max(1, train loss at t = 0), or whose ||Theta||_F^2 exceeds 1e100; all arrays stop at step t - 1 (no NaN
  anywhere) and ``diverged_at`` gives the step,
  the loss there (inf when not finite) and a hint on eta.
* **Per step cost**: one matmul X @ Theta, one X^T @ F, plus the test loss: O(n_test (k + m) m) from the overlaps
  (default), or one X_test @ Theta (test_set "fresh"); plus O((n + n_test) m + d m^2).
* **Kernel** (``kernel``): "numpy" makes those products with NumPy (two passes over X per step); "fused" makes the
  step in one pass over X (:mod:`theorykit.referee._fused`: numba, tiles of rows kept in cache, float64; agrees with
  NumPy to rounding, reproducible bitwise whatever the thread count); "auto" (default) takes "fused" when numba
  compiles the activation and loss and the run is estimated at >= FUSED_AUTO_SECONDS with NumPy (it compiles in a
  few seconds, once per machine: the compiled code is cached on disk), else "numpy".  ``settings["kernel"]`` says
  which ran, ``method["kernel"]`` why.
* **Storage of X** (``storage``): "float64" (default), or "float32": X and X_test (test_set "fresh"; the (n_test,
  k + p) coordinates of "overlaps" stay float64) are drawn in float64 as above, rounded to float32 and kept so (half
  the memory and half the bytes per pass over X, which is what bounds the step where its arithmetic is cheaper than
  the read: tables/gd_step_bench.md), and y is the link's response to the rounded x; every product and sum is
  float64.  One step's gradient agrees with the float64 storage's to ~1e-7 relative (the rounding of X);
  benchmarks/bench_gd_step.py measures the speed and runs
  both storages over the same seeds.  ``settings["float"]`` says which.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, cast

import numpy as np

from .. import defaults
from .._checks import MEMORY_FRACTION, Progress, check_int, check_number, fmt_bytes, loss_undefined_at_start, \
    physical_memory
from ..errors import TheorykitError
from ..problem import Problem, problem_or_keywords

# the old private names, for code that still imports them from here; new code imports theorykit._checks
_Progress, _check_int, _check_number, _fmt_bytes = Progress, check_int, check_number, fmt_bytes

#: default spectral preprocessing (bounded for y >= 0 and every delta; optimal for phase retrieval, docs/theory.md §6)
DEFAULT_SPECTRAL_T = defaults.SIM_SPECTRAL_T
#: success threshold on the overlap
SUCCESS_THRESHOLD = 0.5
#: ||Theta||_F^2 above this counts as divergence (overflow would follow)
THETA_NORM2_LIMIT = 1e100
#: hessian_method "auto" uses the dense eigensolver up to this md, Lanczos above
HESSIAN_DENSE_MAX = 400
#: Gauss-Hermite nodes per axis of the per-step population test loss, by the number of Gaussian variables
#: k + noisy + rank(C_t) (modest: it runs at every step; the error estimate says how good it is)
POPULATION_ORDER = {1: 100, 2: 64, 3: 24, 4: 12}
#: kernel "auto" takes the fused kernel for runs estimated (by _check_cost, the NumPy path) at least this long (s)
FUSED_AUTO_SECONDS = 5.0
KERNELS = ("auto", "fused", "numpy")
#: storage of X (and X_test): float64, or float32 with float64 arithmetic (module docstring)
STORAGES = ("float64", "float32")
#: a train loss above this factor times max(1, train loss at t = 0) counts as divergence
LOSS_GROWTH_LIMIT = 1e12
THETA_STAR_CONVENTION = "first k coordinate axes: Theta* = I_d[:, :k], z = x[:, :k], M_t = Theta_t[:k, :]"
RNG_ORDER = ("Theta0 (d, m) [always drawn]", "X train (n, d)", "eps train (n,) [noisy links]",
             "test set: X test (n_test, d) [test_set 'fresh'] or its coordinates (z, g) (n_test, k + min(m, d - k)) "
             "[test_set 'overlaps']", "eps test (n_test,) [noisy links]")
#: simulate's ``test_set``: the test loss from the overlaps (default) or from a fresh (n_test, d) test set
TEST_SETS = ("overlaps", "fresh")


@dataclass(frozen=True)
class SimulationResult:
    """Output of :func:`simulate`.  T = number of recorded steps (steps + 1, fewer on divergence); t = 0..T-1.

    status        "ok" | "diverged"
    t             (T,) int, the steps 0..T-1
    M             (T, k, m) overlaps Theta*^T Theta_t
    gram          (T, m, m) Theta_t^T Theta_t
    train_loss    (T,) empirical risk without the ridge term (add (ridge/2) trace(gram_t) for the penalised risk)
    test_loss     (T,) average loss on the test set (settings["test_set"]: "overlaps" or "fresh", module docstring)
    overlap       (T,) the success statistic (cos^2 or subspace overlap, see module doc)
    success       (T,) bool, overlap > 0.5
    escape_time   first t with success, or None
    hessian       list of dicts {t, eigenvalues (k_eig,), hard_overlap2 (k_eig,), hard_weight, method}
    settings      every input and convention (JSON-safe)
    diverged_at   None, or {"step", "loss", "hint"} when status == "diverged" (JSON: a loss that is not finite is
                  null, with "loss_note" saying it was inf or NaN)
    theta         (d, m) the final weights (None when diverged; not part of the JSON output)
    problem       the :class:`theorykit.Problem` that was run (JSON: its as_dict(); ``simulate(Problem.from_dict(
                  out["problem"]), d=..., seed=..., ...)`` with the numeric settings re-runs it)
    population_test_loss        (T,) the population (fresh-sample) test loss E[l(y, f(M_t^T z + g))], g ~ N(0, C_t),
                                C_t = gram_t - M_t^T M_t (theorykit.population), or None when k + noisy + m > 4
                                (method["population_test_loss"] says which)
    population_test_loss_error  (T,) its quadrature error estimate (0 for the exact polynomial tier), or None
    method        how it was computed, in words (conventions, the population loss' method); settings hold numbers
                  and choices only
    Both are computed on first access (or by as_dict) from M and gram, so runs that never read them (sweeps) pay
    nothing; reading never changes settings or method (the values live in a private cache).
    """

    status: str
    t: np.ndarray
    M: np.ndarray
    gram: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    overlap: np.ndarray
    success: np.ndarray
    escape_time: Optional[int]
    hessian: list
    settings: dict
    diverged_at: Optional[dict] = None
    theta: Optional[np.ndarray] = field(default=None, repr=False)
    problem: Optional[Problem] = None
    method_text: dict = field(default_factory=dict, repr=False)
    _population_inputs: Optional[tuple] = field(default=None, repr=False, compare=False)  # (net, link)
    _population_cache: Optional[tuple] = field(default=None, repr=False, compare=False)

    @property
    def population_test_loss(self) -> Optional[np.ndarray]:
        """(T,) population test loss (class docstring), computed from M and gram on first access."""
        return self._population()[0]

    @property
    def population_test_loss_error(self) -> Optional[np.ndarray]:
        return self._population()[1]

    @property
    def method(self) -> dict:
        """How the run was computed, in words: the conventions, and the population test loss' method."""
        return {**self.method_text, "population_test_loss": self._population()[2]}

    def _population(self) -> tuple:
        if self._population_cache is None:  # computed once, on first use (a frozen result's cache)
            if self._population_inputs is None:
                value = (None, None, "not available")
            else:
                net, lk = self._population_inputs
                value = _population_test_loss(net, lk, self.M, self.gram)
            object.__setattr__(self, "_population_cache", value)
        return cast(tuple, self._population_cache)  # set just above

    def as_dict(self) -> dict:
        """The JSON contract: keys status, t, M, gram, train_loss, test_loss, population_test_loss (list or null),
        population_test_loss_error (list or null), success, escape_time, hessian, settings, method, problem (plus
        diverged_at when diverged)."""
        def opt(a):
            return None if a is None else np.asarray(a).tolist()

        out = {"status": self.status, "t": self.t.tolist(), "M": self.M.tolist(), "gram": self.gram.tolist(),
               "train_loss": self.train_loss.tolist(), "test_loss": self.test_loss.tolist(),
               "population_test_loss": opt(self.population_test_loss),
               "population_test_loss_error": opt(self.population_test_loss_error),
               "success": [bool(s) for s in self.success], "escape_time": self.escape_time,
               "hessian": [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in h.items()}
                           for h in self.hessian],
               "settings": self.settings, "method": self.method,
               "problem": None if self.problem is None else self.problem.as_dict()}
        if self.diverged_at is not None:
            out["diverged_at"] = dict(self.diverged_at)
            loss = out["diverged_at"].get("loss")
            if loss is not None and not math.isfinite(loss):
                # JSON has no inf/NaN: the loss is null and loss_note says what it was
                out["diverged_at"]["loss"] = None
                out["diverged_at"]["loss_note"] = (f"the training loss was {'NaN' if math.isnan(loss) else loss} at "
                                                   "this step (not a finite number, written null)")
        return out


# ------------------------------------------------------------------------------------------------ gradient
def empirical_risk(net, X: np.ndarray, y: np.ndarray, theta: np.ndarray, ridge: float = 0.0) -> float:
    """L(Theta) = (1/n) sum_i l(y_i, f(Theta^T x_i)) + (ridge/2) ||Theta||_F^2."""
    X = np.asarray(X, dtype=float)
    theta = np.asarray(theta, dtype=float)
    return float(np.mean(net.loss_values(X @ theta, y)) + 0.5 * ridge * np.sum(theta * theta))


def risk_gradient(net, X: np.ndarray, y: np.ndarray, theta: np.ndarray, ridge: float = 0.0) -> np.ndarray:
    """grad L(Theta) = (1/n) X^T F(X Theta, y) + ridge * Theta, shape (d, m).  Same code path as the simulator."""
    X = np.asarray(X, dtype=float)
    theta = np.asarray(theta, dtype=float)
    derivs = net.evaluate(X @ theta, np.asarray(y, dtype=float))
    return _gradient(X, derivs, theta, ridge)


def gd_update(X: np.ndarray, derivs, theta: np.ndarray, eta: float, ridge: float = 0.0) -> np.ndarray:
    """One GD update in place: Theta <- (1 - eta ridge) Theta - (eta/n) X^T F, F = derivs.F at r = X Theta.

    Together with ``net.evaluate(X @ theta, y)`` this is one step of the simulator (two matmuls, no (n, d)
    temporary).  Returns theta.
    """
    return _apply_update(theta, X.T @ derivs.F, eta / X.shape[0], eta, ridge)  # second matmul


def _apply_update(theta, g_sum, scale, eta, ridge):
    """Theta <- (1 - eta ridge) Theta - scale * g_sum (g_sum = X^T F, scale = eta / n), in place; returns theta."""
    g_sum *= scale
    if ridge:
        theta *= 1.0 - eta * ridge
    theta -= g_sum
    return theta


def _gradient(X, derivs, theta, ridge):
    g = X.T @ derivs.F  # (d, m): the second matmul
    g *= 1.0 / X.shape[0]
    if ridge:
        g += ridge * theta
    return g


# ------------------------------------------------------------------------------------------------ helpers
def memory_estimate(n: int, d: int, m: int, k: int, steps: int, n_test: int, spectral: bool,
                    test_set: str = "fresh") -> dict:
    """Bytes the simulation allocates (float64): data, test set ((n_test, d), or (n_test, k + min(m, d - k)) for
    test_set "overlaps"), per-step work arrays, history, spectral matrix."""
    f8 = 8
    est = {"X": n * d * f8, "X_test": n_test * n_test_columns(test_set, d, m, k) * f8,
           # r, F, grad_f, curv, activation values/derivatives, loss arrays: ~16 (N, m)-sized arrays; Theta + grad
           "work": 16 * (n + n_test) * max(m, 1) * f8 + 4 * d * m * f8,
           "history": (steps + 1) * (k * m + m * m + 4) * f8,
           "spectral": (d * d + 1024 * d) * f8 if spectral else 0}
    est["total"] = sum(est.values())
    return est


#: a run estimated to take longer than this (seconds, see :func:`_check_cost`) is refused up front
MAX_SECONDS = 86400.0


def n_test_columns(test_set: str, d: int, m: int, k: int) -> int:
    """Columns of the test set: d for test_set "fresh", k + min(m, d - k) for "overlaps" (module docstring)."""
    return d if test_set == "fresh" else k + min(m, d - k)


def _check_cost(n, d, m, steps, n_test, test_cols=None):
    """Refuse a run whose estimated time exceeds :data:`MAX_SECONDS`: per step ~2e-4 s of fixed overhead plus ~2 ns
    per multiply-add of the forward/backward passes on the train and test sets ((n d + n_test test_cols) m; test_cols
    = d by default)."""
    per_step = 2e-4 + 2e-9 * (n * d + n_test * (d if test_cols is None else test_cols)) * max(m, 1)
    est = (steps + 1) * per_step
    if est > MAX_SECONDS:
        raise TheorykitError(f"simulation of {steps} steps at n = {n}, d = {d}, m = {m} would take about "
                             f"{est / 3600:.3g} h (estimate; limit {MAX_SECONDS / 3600:g} h): lower steps, d or delta")
    return est


def _check_memory(n, d, m, k, steps, n_test, spectral, test_set="fresh"):
    est = memory_estimate(n, d, m, k, steps, n_test, spectral, test_set)
    phys = physical_memory()
    if phys is not None and est["total"] > MEMORY_FRACTION * phys:
        raise TheorykitError(
            f"simulation needs about {fmt_bytes(est['total'])} (X: n x d = {n} x {d} = {fmt_bytes(est['X'])}, "
            f"test set {fmt_bytes(est['X_test'])}) but only {fmt_bytes(MEMORY_FRACTION * phys)} "
            f"(60% of {fmt_bytes(phys)} physical memory) is allowed: lower d, delta or n_test")
    return est


def check_request(problem: Problem, d: int, steps: Optional[int] = None, n_test: Optional[int] = None,
                  spectral: bool = False, test_set: str = defaults.SIM_TEST_SET) -> tuple:
    """The simulator's up-front refusals for ``problem`` at dimension d (one-line errors, before any work): n = round(
    delta d) samples in 1..1e15, k <= d latent directions, memory within 60% of physical memory and estimated time
    within MAX_SECONDS.  steps defaults to the problem's; n_test to max(SIM_N_TEST_MIN, n); test_set is simulate's.
    Returns (n, n_test).
    simulate() calls it; so does any caller that wants the refusal before its own work (e.g. the hessian command,
    before its DMFT solve)."""
    delta = cast(float, problem.delta)  # a simulated Problem has its delta (None would raise TypeError below)
    if not delta * d < 1e15:  # n = round(delta d) samples: inf (1e308 * d) or beyond any memory
        raise TheorykitError(f"n = delta * d = {delta} * {d} samples is too many: lower delta or d")
    n = int(round(delta * d))
    if n < 1:
        raise TheorykitError(f"n = round(delta * d) = round({delta} * {d}) = 0 samples: raise delta or d")
    n_test = max(defaults.SIM_N_TEST_MIN, n) if n_test is None else check_int("n_test", n_test, 1)
    k, m = problem.link_obj.k, problem.network.m
    if k > d:
        raise TheorykitError(f"the link has k = {k} latent directions but d = {d} < k")
    steps = problem.n_steps if steps is None else steps
    check_test_set(test_set)
    _check_memory(n, d, m, k, steps, n_test, spectral, test_set)
    _check_cost(n, d, m, steps, n_test, n_test_columns(test_set, d, m, k))
    return n, n_test


def draw_instance(problem: Problem, d: int, n: int, n_test: int, seed: int, storage: str = "float64",
                  test_set: str = "fresh"):
    """(Theta(0), X, y, X_test, y_test) from one default_rng(seed), in the documented order (RNG_ORDER).  storage
    "float32": X and X_test rounded to float32 as drawn (the same draws), y the response to the rounded x.
    test_set "overlaps": X_test is the test set's coordinates (z, g), (n_test, k + min(m, d - k)) float64, and
    y_test the response to z (module docstring)."""
    check_storage(storage)
    check_test_set(test_set)
    lk, m = problem.link_obj, problem.m
    k = lk.k
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((d, m)) / math.sqrt(d)
    if problem.Sigma0 is not None:  # rows ~ N(0, Sigma0 / d)
        w, U = np.linalg.eigh(problem.Sigma0_matrix)
        theta = theta @ ((U * np.sqrt(np.clip(w, 0.0, None))) @ U.T)
    if problem.M0 is not None:
        theta[:k] += problem.M0_matrix
    dtype = np.dtype(storage)
    X = rng.standard_normal((n, d)).astype(dtype, copy=False)
    eps = rng.standard_normal(n) if lk.noisy else None
    y = np.asarray(lk.response(X[:, :k].astype(float), eps), dtype=float)
    if test_set == "fresh":
        X_test = rng.standard_normal((n_test, d)).astype(dtype, copy=False)
    else:
        X_test = rng.standard_normal((n_test, n_test_columns(test_set, d, m, k)))
    eps_test = rng.standard_normal(n_test) if lk.noisy else None
    y_test = np.asarray(lk.response(X_test[:, :k].astype(float), eps_test), dtype=float)
    return theta, X, y, X_test, y_test


def check_kernel(kernel) -> str:
    """kernel must be one of KERNELS (one-line error otherwise)."""
    if kernel not in KERNELS:
        raise TheorykitError(f"kernel must be one of {', '.join(repr(k) for k in KERNELS)}, got {kernel!r}")
    return kernel


def check_test_set(test_set) -> str:
    """test_set must be one of TEST_SETS (one-line error otherwise)."""
    if test_set not in TEST_SETS:
        raise TheorykitError(f"test_set must be one of {', '.join(repr(s) for s in TEST_SETS)}, got {test_set!r}")
    return test_set


def overlap_weights(theta: np.ndarray, k: int, p: int) -> np.ndarray:
    """(k + p, m) weights W_t = [M_t; R_t] of test_set "overlaps": the test pre-activations are (z, g) @ W_t, with
    M_t = Theta_t[:k] and R_t (p, m), R_t^T R_t = C_t = Theta_t[k:]^T Theta_t[k:] (the upper Cholesky factor, or
    from the eigendecomposition where C_t is singular; NaN where Theta_t is not finite)."""
    m = theta.shape[1]
    W = np.empty((k + p, m))
    W[:k] = theta[:k]
    Tc = theta[k:]
    C = Tc.T @ Tc
    if not np.all(np.isfinite(C)):
        W[k:] = np.nan
        return W
    try:
        if p < m:
            raise np.linalg.LinAlgError("rank p < m")
        W[k:] = np.linalg.cholesky(C).T
    except np.linalg.LinAlgError:  # singular C_t (rank <= p): R_t from its top p eigenpairs
        w, U = np.linalg.eigh((C + C.T) / 2)
        W[k:] = (np.sqrt(np.clip(w[m - p:], 0.0, None))[:, None] * U[:, m - p:].T)
    return W


def check_storage(storage) -> str:
    """storage must be one of STORAGES (one-line error otherwise)."""
    if storage not in STORAGES:
        raise TheorykitError(f"storage must be one of {', '.join(repr(s) for s in STORAGES)}, got {storage!r}")
    return storage


def training_data(problem: Problem, d: int, seed: int = defaults.SIM_SEED, storage: str = "float64"):
    """(X (n, d), y (n,)): the training set that ``simulate(problem, d=d, seed=seed)`` draws (same RNG order; the
    latent directions are the first k axes, so z = X[:, :k]).  With a run's final ``theta`` this gives the finite-d
    Hessian at that step: ``problem.network.evaluate(X @ theta, y)`` holds its per-sample D_i."""
    d = check_int("d", d, 1)
    seed = check_int("seed", seed, 0)
    n = int(round(cast(float, problem.delta) * d))  # a simulated Problem has its delta
    if n < 1:
        raise TheorykitError("n = round(delta * d) = 0 samples: raise delta or d")
    _, X, y, _, _ = draw_instance(problem, d, n, 1, seed, storage)
    return X, y


def subspace_overlap(Mt: np.ndarray, gram: np.ndarray, target: np.ndarray) -> float:
    """||P_target U_top||_F^2 / q from M_t = Theta*^T Theta (k, m) and gram (m, m); target (k, q) orthonormal."""
    q = target.shape[1]
    if q == 0:
        return 0.0
    w, V = np.linalg.eigh(gram)  # ascending; singular values s = sqrt(w)
    order = np.argsort(w)[::-1][:q]
    w, V = w[order], V[:, order]
    scale = w.max() if w.size else 0.0
    keep = w > max(scale, 1e-300) * 1e-24
    if not np.any(keep):
        return 0.0
    # target^T U_top = target^T Theta*^T Theta V / s
    B = (target.T @ Mt @ V[:, keep]) / np.sqrt(w[keep])
    return float(np.sum(B * B) / q)


def _spectral_init(X, Ty, m):
    """Top-m eigenvectors of the data matrix (1/n) X^T diag(T) X (:func:`spectral_methods.data_matrix`, built in row
    blocks), signed so that each one's largest entry is positive."""
    from scipy.linalg import eigh

    from .spectral_methods import data_matrix

    n, d = X.shape
    if m > d:
        raise TheorykitError(f"spectral initialisation needs width m <= d (got m = {m}, d = {d})")
    A = data_matrix(X, None, lambda _: Ty)
    w, V = eigh(A, subset_by_index=[d - m, d - 1])
    V = V[:, ::-1].copy()  # descending eigenvalue order
    idx = np.argmax(np.abs(V), axis=0)
    V *= np.sign(V[idx, np.arange(m)])
    V /= np.linalg.norm(V, axis=0)
    return V, w[::-1].copy()


def _hessian_function():
    from .hessian import hessian_bottom

    return hessian_bottom


#: hessian_method "auto" falls back to the dense eigensolver up to this md when Lanczos does not converge
HESSIAN_DENSE_FALLBACK_MAX = 6000


def _hessian(hessian_bottom, X, derivs, ridge, hard_dirs, k_eig, method):
    """The bottom eigenpairs at one step.  "auto": dense for md <= HESSIAN_DENSE_MAX, else Lanczos; and dense again
    when Lanczos does not converge and md <= HESSIAN_DENSE_FALLBACK_MAX (a bottom cluster far closer than ||H||, as at
    the hard edge of a nearly singular Hessian: ReLU's D is 0 on half the samples), recorded in the method."""
    from .hessian import LanczosNotConverged

    md = X.shape[1] * derivs.F.shape[1]
    auto = method == "auto"
    if auto:
        method = "dense" if md <= HESSIAN_DENSE_MAX else "lanczos"
    note = ""
    try:
        hs = hessian_bottom(X, derivs, k=k_eig, ridge=ridge, hard_dirs=hard_dirs, method=method)
    except LanczosNotConverged:
        if not (auto and method == "lanczos" and md <= HESSIAN_DENSE_FALLBACK_MAX):
            raise
        hs = hessian_bottom(X, derivs, k=k_eig, ridge=ridge, hard_dirs=hard_dirs, method="dense")
        note = " (auto: Lanczos did not converge, dense instead)"
    ev = np.asarray(hs.eigenvalues, dtype=float)
    ov = np.zeros_like(ev) if hs.hard_overlap2 is None else np.asarray(hs.hard_overlap2, dtype=float)
    hw = float(np.sum(ov)) if hs.hard_weight is None else float(hs.hard_weight)
    return {"eigenvalues": ev, "hard_overlap2": ov, "hard_weight": hw, "method": str(hs.method) + note}


def _population_test_loss(net, lk, M_hist, gram_hist):
    """(population test loss, its error, how it was computed) at every recorded step (module docstring), or
    (None, None, the reason)."""
    from ..population import PopulationLoss, QUADRATURE_MAX_DIM

    k, m, noisy = lk.k, net.m, int(lk.noisy)
    if k + noisy + m > QUADRATURE_MAX_DIM:
        return None, None, (f"not computed: k + noisy + m = {k} + {noisy} + {m} > {QUADRATURE_MAX_DIM} Gaussian "
                            "variables (use theorykit.population_loss with Monte Carlo on M and gram)")
    T = len(M_hist)
    vals, errs, methods = np.empty(T), np.empty(T), {}
    pl = PopulationLoss(net, lk, order=POPULATION_ORDER)  # rules and y on the nodes are built once
    for t in range(T):
        M = M_hist[t]
        C = gram_hist[t] - M.T @ M
        s, U = np.linalg.eigh((C + C.T) / 2)
        C = (U * np.clip(s, 0.0, None)) @ U.T  # clamp rounding-level negative eigenvalues of gram - M^T M
        try:
            e = pl(M, C)
            vals[t], errs[t], meth = e.value, e.error, e.method
        except TheorykitError as exc:  # e.g. the loss overflows on the nodes just before a divergence
            vals[t], errs[t], meth = np.inf, np.inf, f"not finite: {exc}"
        methods[meth] = methods.get(meth, 0) + 1
    info = {"definition": "E[l(y, f(M_t^T z + g))], z ~ N(0, I_k), g ~ N(0, C_t), C_t = gram_t - M_t^T M_t",
            "methods": {meth: f"{c} step{'s' if c != 1 else ''}" for meth, c in methods.items()},
            "max_error": float(errs.max(initial=0.0))}
    return vals, errs, info


# ------------------------------------------------------------------------------------------------ simulate
def simulate(activation=None, link=None, loss=None, width=None, *, problem: Optional[Problem] = None, a=None,
             b=None, delta=None, d: int, steps=None, eta=None, schedule=None, ridge=None, Sigma0=None, M0=None,
             init: str = defaults.SIM_INIT,
             spectral_T=None, constrained: bool = defaults.SIM_CONSTRAINED, seed: int = defaults.SIM_SEED,
             hessian_every: int = defaults.SIM_HESSIAN_EVERY, hessian_k: int = defaults.SIM_HESSIAN_K,
             hessian_method: str = defaults.SIM_HESSIAN_METHOD, n_test: Optional[int] = None,
             progress: bool = False, stop_after_escape: Optional[int] = None, kernel: str = "auto",
             threads: Optional[int] = None, storage: str = "float64",
             test_set: str = defaults.SIM_TEST_SET) -> SimulationResult:
    """Full-batch GD of docs/theory.md §1 at finite d; see the module docstring for every convention.

    Theta^{t+1} = (1 - eta_t ridge) Theta^t - (eta_t/n) sum_i x_i F(r_i^t, y_i)^T on n = round(delta d) samples
    x_i ~ N(0, I_d), in float64, with Theta* the first k axes: the finite-d referee of docs/theory.md §7.

    Two forms with the same numbers:

    * ``simulate(problem, *, d, ...)`` (or ``simulate(problem=problem, d=d, ...)``) with a :class:`theorykit.Problem`
      (model, delta, ridge, step sizes, initial law);
    * the keyword form ``simulate(activation, link, loss="square", width=1, *, a, b, delta, steps, eta, ridge=0,
      d, ...)`` (or ``schedule=`` instead of eta and steps; ``Sigma0``, ``M0``), a thin wrapper that builds
      ``Problem(activation, link, loss, width, a=a, ..., M0=M0)`` and runs the first form (None: the default of
      :mod:`theorykit.defaults`).

    Parameters
    ----------
    problem : Problem
        Problem: delta > 0 (n = round(delta d) >= 1), steps >= 0 and eta > 0 (or a schedule of step sizes: step t
        uses eta_t), ridge >= 0; Sigma0, M0: Theta(0) = Theta* M0 + G Sigma0^(1/2) / sqrt(d) (module docstring; the
        default I, 0 is the plain random init).  In the keyword form its fields are given one by one.
    d : int
        d >= 1.
    init : str
        "random" (theta_j ~ N(0, I_d/d)) or "spectral" (spectral_T: expression in y, delta, or a Preprocessing;
        default :data:`DEFAULT_SPECTRAL_T`).
    constrained : bool
        Project out the hard subspace at init and after every step.
    seed : int
        One seeded generator draws everything in a documented order: same seed, same numbers.
    hessian_every, hessian_k, hessian_method
        hessian_every: K > 0 records the bottom ``hessian_k`` Hessian eigenpairs at t = 0, K, 2K, ... (0: never),
        with ``theorykit.referee.hessian.hessian_bottom`` (hessian_method "lanczos", "dense", or "auto": dense for
        md <= 400).
    n_test : int, optional
        Test-set size (default max(2000, n)).
    test_set : str
        "overlaps" (default): the test loss from the test set's coordinates in the span of Theta* and Theta_t, exact
        in law at every step and O(n_test (k + m) m) per step; "fresh": a fresh (n_test, d) test set read at every
        step (module docstring).  ``settings["test_set"]`` and ``method["test_loss"]`` say which.
    progress : bool
        Draw a progress bar on stderr.
    stop_after_escape : int, optional
        K >= 0 ends the run K steps after the escape (the first success; the arrays then stop there and
        ``settings["stopped_at"]`` says where), None runs every step (an escape-time study needs only the escape).
    kernel : str
        "auto", "fused" or "numpy" (module docstring).
    threads : int, optional
        The fused kernel's threads (default: the CPUs available; no effect on the numbers).
    storage : str
        "float64" (default) or "float32" (X kept in float32, float64 arithmetic; module docstring).

    Returns
    -------
    SimulationResult
        (its ``problem`` is the Problem it ran), with T recorded steps: ``status`` ("ok" or "diverged", with
        ``diverged_at``), ``t`` (T,), ``M`` (T, k, m), ``gram`` (T, m, m), ``train_loss`` and ``test_loss`` (T,),
        ``overlap`` (T,) (the success statistic), ``success`` (T,) bool, ``escape_time`` (first t with success, or
        None), ``hessian``, ``settings``, ``theta`` (d, m).

    Raises
    ------
    TheorykitError
        Bad inputs raise :class:`TheorykitError` before anything is allocated (a size that does not fit in memory
        too).

    Examples
    --------
    >>> import theorykit as tk
    >>> p = tk.Problem("gelu", "phase-retrieval", delta=2, eta=0.5, steps=5)
    >>> s = tk.simulate(p, d=100, seed=0)
    >>> s.status, s.M.shape, s.overlap.shape, s.theta.shape
    ('ok', (6, 1, 1), (6,), (100, 1))
    """
    # simulate(problem, ...), simulate(problem=problem, ...) or the keyword form (a Problem built from it)
    problem = problem_or_keywords("simulate", activation, problem=problem, build=True, link=link, loss=loss,
                                  width=width, a=a, b=b, delta=delta, ridge=ridge, eta=eta, steps=steps,
                                  schedule=schedule, Sigma0=Sigma0, M0=M0)[0]
    # build=True: a Problem, never None
    return _simulate(problem, d=d, init=init, spectral_T=spectral_T,  # type: ignore[arg-type]
                     constrained=constrained, seed=seed, hessian_every=hessian_every, hessian_k=hessian_k,
                     hessian_method=hessian_method, n_test=n_test,
                     progress=progress, stop_after_escape=stop_after_escape, kernel=kernel, threads=threads,
                     storage=storage, test_set=test_set)


def _choose_kernel(kernel, threads, net, n, n_test, d, m, steps, test_cols=None):
    """(FusedStep or None, settings["kernel"], method["kernel"]) for simulate's ``kernel`` argument."""
    from ._fused import FusedStep, fused_kernel

    check_kernel(kernel)
    if threads is not None:
        threads = check_int("threads", threads, 1)
    numpy_text = "numpy: X @ Theta and X^T F as two matmuls per step (two passes over X)"
    if kernel == "numpy":
        return None, "numpy", numpy_text + " (asked for)"
    est = _check_cost(n, d, m, steps, n_test, test_cols)
    if kernel == "auto" and est < FUSED_AUTO_SECONDS:
        return None, "numpy", numpy_text + (f" (auto: estimated {est:.2g} s < {FUSED_AUTO_SECONDS:g} s, "
                                            "not worth compiling)")
    fused, why = fused_kernel(net, threads)
    if fused is None:
        if kernel == "fused":
            raise TheorykitError(f"kernel 'fused' is not available for this network: {why}")
        return None, "numpy", numpy_text + f" (auto: the fused kernel is not available: {why})"
    return fused, "fused", FusedStep.description + f", {fused.threads} thread{'s' if fused.threads > 1 else ''}"


def _simulate(problem: Problem, *, d, init, spectral_T, constrained, seed, hessian_every, hessian_k,
              hessian_method, n_test, progress, stop_after_escape=None, kernel="auto", threads=None,
              storage="float64", test_set=defaults.SIM_TEST_SET) -> SimulationResult:
    from ..symbolic.ingredients import preprocessing

    delta, ridge, steps, eta = problem.delta, problem.ridge, problem.n_steps, problem.eta
    schedule = problem.schedule  # None for constant-step GD
    d = check_int("d", d, 1)
    seed = check_int("seed", seed, 0)
    hessian_every = check_int("hessian_every", hessian_every, 0)
    hessian_k = check_int("hessian_k", hessian_k, 1)
    check_storage(storage)
    if hessian_method not in ("auto", "lanczos", "dense"):
        raise TheorykitError(f"hessian_method must be 'auto', 'lanczos' or 'dense', got {hessian_method!r}")
    if init not in ("random", "spectral"):
        raise TheorykitError(f"init must be 'random' or 'spectral', got {init!r}")
    if spectral_T is not None and init != "spectral":
        raise TheorykitError("a spectral preprocessing T was given but init is not 'spectral'")
    if init == "spectral" and (problem.Sigma0 is not None or problem.M0 is not None):
        raise TheorykitError("init 'spectral' sets Theta(0) itself: it takes the default Sigma0 = I and M0 = 0")
    net = problem.network
    lk = problem.link_obj
    m, k = net.m, lk.k
    n, n_test = check_request(problem, d, steps=steps, n_test=n_test, spectral=init == "spectral", test_set=test_set)
    p_test = n_test_columns(test_set, d, m, k) - k  # "overlaps": test coordinates along Theta_t's complement
    if stop_after_escape is not None:
        stop_after_escape = check_int("stop_after_escape", stop_after_escape, 0)
    hessian_fn = _hessian_function() if hessian_every else None
    fused, kernel_name, kernel_text = _choose_kernel(kernel, threads, net, n, n_test, d, m, steps,
                                                     n_test_columns(test_set, d, m, k))
    T_fn = None
    if init == "spectral":
        T_fn = preprocessing(DEFAULT_SPECTRAL_T if spectral_T is None else spectral_T)
        if m > d:
            raise TheorykitError(f"spectral initialisation needs width m <= d (got m = {m}, d = {d})")
        from ..symbolic.admissible import check_preprocessing

        check_preprocessing(lk, T_fn, delta)  # the same verdict on T as `theorykit spectral`

    hard_basis = np.array(problem.analysis.hard_basis, dtype=float).reshape(k, -1)
    kH = hard_basis.shape[1]
    target, target_name = (hard_basis, "hard") if kH > 0 else (np.eye(k), "latent")
    hard_dirs = np.zeros((d, kH))
    hard_dirs[:k] = hard_basis  # Theta* @ hard_basis with Theta* = first k axes

    theta, X, y, X_test, y_test = draw_instance(problem, d, n, n_test, seed, storage, test_set)
    X64 = None

    spectral_eigenvalues = None
    if init == "spectral":
        theta, spectral_eigenvalues = _spectral_init(X, T_fn(y, delta), m)  # type: ignore[misc]  # set for "spectral"

    def project(th):
        if constrained and kH:
            th -= hard_dirs @ (hard_dirs.T @ th)
        return th

    theta = project(theta)

    problem_dict = problem.as_dict()
    settings = {
        "activation": net.activation.name, "link": lk.name, "loss": net.loss.name, "width": m,
        "a": net.a.tolist(), "b": net.b.tolist(), "delta": delta, "d": d, "n": n, "n_test": n_test,
        "steps": steps, "eta": eta, "schedule": (list(schedule) if schedule is not None else None),
        "ridge": ridge, "Sigma0": problem_dict["Sigma0"], "M0": problem_dict["M0"], "init": init,
        "spectral_T": (str(T_fn.expr) if T_fn is not None else None),
        "spectral_eigenvalues": (spectral_eigenvalues.tolist() if spectral_eigenvalues is not None else None),
        "constrained": bool(constrained), "seed": seed, "hessian_every": hessian_every, "hessian_k": hessian_k,
        "hessian_method": hessian_method,
        "k": k, "hard_dim": kH, "hard_basis": hard_basis.tolist(), "success_target": target_name,
        "success_threshold": SUCCESS_THRESHOLD, "float": storage, "stop_after_escape": stop_after_escape,
        "stopped_at": None, "kernel": kernel_name, "test_set": test_set,
    }
    method_text = {"theta_star": THETA_STAR_CONVENTION, "rng_order": list(RNG_ORDER),
                   "train_loss": "empirical risk without the ridge term; ridge term = (ridge/2) trace(gram)",
                   "kernel": kernel_text,
                   "test_loss": (f"average over a fresh test set of n_test = {n_test} samples (X_test, n_test x d), "
                                 "read at every step" if test_set == "fresh" else
                                 f"average over n_test = {n_test} test samples from the overlaps: pre-activations "
                                 "M_t^T z + R_t^T g, (z, g) ~ N(0, I) drawn once, R_t^T R_t = Theta_t[k:]^T "
                                 "Theta_t[k:]; the law of a fresh test set's average at every step"),
                   "storage": ("X and X_test in float64" if storage == "float64" else
                               "X and X_test rounded to float32 as drawn (y from the rounded x); float64 arithmetic"
                               + ("" if test_set == "fresh" else " (the test set's coordinates stay float64)"))}

    M_hist = np.empty((steps + 1, k, m))
    gram_hist = np.empty((steps + 1, m, m))
    train = np.empty(steps + 1)
    test = np.empty(steps + 1)
    overlap = np.empty(steps + 1)
    hessian = []
    diverged_at = None
    last = -1
    k_eig = min(hessian_k, d * m)
    bar = Progress(steps, label="simulate", unit="steps") if progress else None  # update(t): t steps done
    inv_n = 1.0 / n
    escaped_at = None

    def test_inputs(th):  # (test matrix, weights): the test pre-activations are their product
        return (X_test, th) if test_set == "fresh" else (X_test, overlap_weights(th, k, p_test))

    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            for t in range(steps + 1):
                if fused is None:
                    derivs = net.evaluate(X @ theta, y)  # first matmul
                    tr = float(np.sum(derivs.loss)) * inv_n
                    Xt, Wt = test_inputs(theta)
                    te = float(np.mean(net.loss_values(Xt @ Wt, y_test)))
                else:  # one pass over X for the loss and X^T F, one over the test set for the test loss (one dispatch)
                    Xt, Wt = test_inputs(theta)
                    loss_sum, g_sum, test_sum = fused.step(X, y, theta, test=(Xt, y_test, Wt))
                    tr, te = loss_sum * inv_n, test_sum / n_test
                    derivs = None
                    if (t == 0 and not math.isfinite(tr)) or (hessian_every and t % hessian_every == 0):
                        derivs = net.evaluate(X @ theta, y)  # the per-sample quantities, for the error or Hessian
                gram = theta.T @ theta
                norm2 = float(np.trace(gram))
                if t == 0:
                    # a loss that is NaN (or infinite) before any step is undefined there, not a divergence
                    err = (None if math.isfinite(tr) else
                           loss_undefined_at_start(net.loss, derivs.loss, y, derivs.f, "training sample"))
                    if err is None and not math.isfinite(te):
                        Xt, Wt = test_inputs(theta)
                        f_test = net.output(Xt @ Wt)
                        err = loss_undefined_at_start(net.loss, net.loss.numpy(y_test, f_test)[0], y_test, f_test,
                                                      "test sample")
                    if err is not None:
                        raise err
                    loss_scale = max(1.0, abs(tr))
                if not (math.isfinite(tr) and math.isfinite(te) and math.isfinite(norm2)
                        and norm2 <= THETA_NORM2_LIMIT and tr <= LOSS_GROWTH_LIMIT * loss_scale):
                    bad = tr if math.isfinite(tr) else float("inf")
                    e = cast(float, eta if schedule is None else max(schedule[:max(t, 1)]))  # the largest step taken
                    diverged_at = {"step": t, "loss": bad,
                                   "hint": f"gradient descent diverged at step {t} with eta = {e:g}: "
                                           f"try a smaller eta (e.g. {e / 4:g}); stability needs "
                                           f"eta * (per-sample curvature) / delta <~ 1"}
                    break
                M_hist[t] = theta[:k]
                gram_hist[t] = gram
                train[t], test[t] = tr, te
                overlap[t] = subspace_overlap(theta[:k], gram, target)
                if hessian_every and t % hessian_every == 0:
                    if X64 is None:  # the Hessian's float64 products need X in float64 (storage "float32": a copy)
                        X64 = X if X.dtype == np.float64 else X.astype(np.float64)
                    h = _hessian(hessian_fn, X64, derivs, ridge, hard_dirs if kH else None, k_eig,
                                 hessian_method)
                    hessian.append({"t": t, **h})
                last = t
                if bar is not None:
                    bar.update(t)
                if escaped_at is None and overlap[t] > SUCCESS_THRESHOLD:
                    escaped_at = t
                if t == steps:
                    break
                if stop_after_escape is not None and escaped_at is not None and t >= escaped_at + stop_after_escape:
                    settings["stopped_at"] = t
                    break
                eta_t = cast(float, eta if schedule is None else schedule[t])  # eta is set without a schedule
                if fused is None:
                    gd_update(X, derivs, theta, eta_t, ridge)
                else:
                    _apply_update(theta, g_sum, eta_t / n, eta_t, ridge)
                project(theta)
    finally:
        if bar is not None:
            bar.close(max(last, 0))

    T = last + 1
    success = overlap[:T] > SUCCESS_THRESHOLD
    hits = np.flatnonzero(success)
    return SimulationResult(
        status="ok" if diverged_at is None else "diverged", t=np.arange(T), M=M_hist[:T].copy(),
        gram=gram_hist[:T].copy(), train_loss=train[:T].copy(), test_loss=test[:T].copy(),
        overlap=overlap[:T].copy(), success=success, escape_time=int(hits[0]) if hits.size else None,
        hessian=hessian, settings=settings, diverged_at=diverged_at,
        theta=theta.copy() if diverged_at is None else None, problem=problem, method_text=method_text,
        _population_inputs=(net, lk))
