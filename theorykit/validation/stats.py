"""Statistics of the DMFT-versus-GD comparisons (formerly inside scripts/dmft_vs_sim.py and scripts/dmft_dscan.py).

Everything here is a pure function of arrays (NumPy, SciPy): no theorykit solver is called, so each one is tested
against a value computed by hand (tests/test_compare.py).

* :func:`binomial` -- a success fraction with its binomial standard error and Wilson interval;
* :func:`crossing` -- the delta at which a success curve crosses 1/2 (linear interpolation; theorykit.rules);
* :func:`logistic_midpoint` -- the same midpoint from per-run outcomes by a logistic maximum-likelihood fit;
* :func:`compare` -- the relative error of a DMFT value against a seed mean, and the size expected from noise;
* :func:`signed`, :func:`per_seed_rms` -- the signed scalar and the per-seed rms deviation of dmft_dscan;
* :func:`cv_mean` -- the control-variate estimator of a seed mean;
* :func:`gls`, :func:`power_fit`, :func:`fit_over_d`, :func:`extrapolate_inverse`, :func:`loglog_slope` -- fits of a
  gap against d (c/d, b + c/d, A (d/1000)^p, the verdict) and of a value against 1/paths;
* :func:`within`, :func:`within_se`, :func:`within_factor`, :func:`in_band` -- the pass criteria.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..rules import crossing  # the one crossing finder, shared with the theory's thresholds
from ..runner import wilson

__all__ = ["Proportion", "binomial", "crossing", "logistic_midpoint", "compare",
           "signed", "per_seed_rms", "cv_mean", "gls", "power_fit",
           "fit_over_d", "extrapolate_inverse", "loglog_slope", "within", "within_se", "within_factor", "in_band"]


# ------------------------------------------------------------------------------------------------ proportions
@dataclass(frozen=True)
class Proportion:
    """k successes out of n: p = k/n, the binomial standard error se = sqrt(p(1-p)/n) (what the pass criteria use)
    and the Wilson score interval [low, high] at ``level``."""
    k: int
    n: int
    p: float
    se: float
    low: float
    high: float
    level: float


def binomial(k: int, n: int, level: float = 0.95) -> Proportion:
    """Success fraction k/n with its binomial s.e. and Wilson score interval (NaN everywhere when n = 0).

    Wilson (:func:`theorykit.runner.wilson`, the one copy, also behind ``theorykit.summarise``): with z the two-sided
    normal quantile of ``level``, centre (p + z^2/(2n)) / (1 + z^2/n) and half-width z sqrt(p(1-p)/n + z^2/(4n^2)) /
    (1 + z^2/n); unlike p +- z se it stays inside [0, 1] and is not empty at p = 0, 1.
    """
    k, n = int(k), int(n)
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"binomial: need 0 <= k <= n, got k = {k}, n = {n}")
    if n == 0:
        nan = float("nan")
        return Proportion(k, n, nan, nan, nan, nan, float(level))
    p = k / n
    se = math.sqrt(max(p * (1 - p), 0.0) / n)
    low, high = wilson(k, n, level)
    return Proportion(k, n, p, se, low, high, float(level))


# ------------------------------------------------------------------------------------------------ DMFT vs seed mean
def logistic_midpoint(x, y, resamples: int = 400, seed: int = 0) -> tuple:
    """(midpoint, bootstrap standard error) of P(success | delta) = 1 / (1 + exp(-(delta - mu) / s)) fitted by maximum
    likelihood to per-run outcomes y (0/1) at deltas x; the error from ``resamples`` bootstrap redraws of the runs."""
    from scipy.optimize import minimize
    from scipy.special import expit

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)

    def nll(p, x, y):
        q = np.clip(expit((x - p[0]) / math.exp(min(p[1], 50.0))), 1e-12, 1 - 1e-12)
        return -float((y * np.log(q) + (1 - y) * np.log(1 - q)).sum())

    fit = minimize(nll, [float(np.mean(x)), 0.0], args=(x, y), method="Nelder-Mead").x
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(resamples):
        i = rng.integers(0, len(x), len(x))
        boot.append(minimize(nll, fit, args=(x[i], y[i]), method="Nelder-Mead").x[0])
    return float(fit[0]), float(np.std(boot, ddof=1))


def compare(dm, dm_se, sim_arr) -> dict:
    """DMFT value ``dm`` (scalar or matrix) with its standard error ``dm_se`` against per-seed values ``sim_arr``
    (shape (S, ...)).  Returns the table columns dmft, dmft_se, sim_mean, sim_se (Frobenius norms for matrices),

    rel_err = ||dm - mean_seeds||_F / ||mean_seeds||_F and rel_se = sqrt(sum dm_se^2 + sum se_seed_mean^2) /
    ||mean_seeds||_F, the size of the gap expected from noise alone (se of the seed mean: ddof = 1; 0 for one seed).
    """
    sim_arr = np.asarray(sim_arr, float)
    S = sim_arr.shape[0]
    mean = sim_arr.mean(axis=0)
    se = sim_arr.std(axis=0, ddof=1) / math.sqrt(S) if S > 1 else np.zeros_like(mean)
    dm, dm_se = np.asarray(dm, float), np.asarray(dm_se, float)
    nm = float(np.linalg.norm(np.ravel(mean)))
    gap = float(np.linalg.norm(np.ravel(dm - mean)))
    noise = float(np.sqrt(np.sum(dm_se ** 2) + np.sum(se ** 2)))
    scalar = dm.ndim == 0
    return {"dmft": float(dm) if scalar else float(np.linalg.norm(np.ravel(dm))),
            "dmft_se": float(dm_se) if scalar else float(np.linalg.norm(np.ravel(dm_se))),
            "sim_mean": float(mean) if scalar else nm,
            "sim_se": float(se) if scalar else float(np.linalg.norm(np.ravel(se))),
            "rel_err": gap / max(nm, 1e-300), "rel_se": noise / max(nm, 1e-300)}


def per_seed_rms(dm, arr) -> float:
    """sqrt(mean_seeds ||X_seed - X_dm||_F^2) / ||X_dm||_F: the finite-d fluctuation (expected ~ d^-1/2)."""
    dv = np.asarray(dm, float)
    arr = np.asarray(arr, float)
    dev = (arr - dv[None]).reshape(arr.shape[0], -1)
    return float(np.sqrt(np.mean(np.sum(dev ** 2, axis=1)))) / max(float(np.linalg.norm(np.ravel(dv))), 1e-300)


def signed(dm, dm_se, arr):
    """The signed scalar of dmft_dscan: the value itself for a scalar; for a matrix X the component along the DMFT
    matrix, s = <X, X_dm>/||X_dm||_F (linear in X, so its seed s.e. is exact).

    Returns (s_dm, s_dm_se, s per seed (S,), frob_diff = ||mean X||_F - ||X_dm||_F, rel_err_full =
    ||mean X - X_dm||_F / ||X_dm||_F, rms_rel = per-seed rms / ||X_dm||_F).
    """
    dm, dm_se = np.asarray(dm, float), np.asarray(dm_se, float)
    arr = np.asarray(arr, float)
    S = arr.shape[0]
    flat = arr.reshape(S, -1)
    dmf, sef = dm.ravel(), dm_se.ravel()
    nrm = float(np.linalg.norm(dmf))
    if dm.ndim == 0:
        s_dm, s_se, s = float(dm), float(dm_se), flat[:, 0]
    else:
        u = dmf / nrm
        s_dm, s_se, s = nrm, float(np.sqrt(np.sum((u * sef) ** 2))), flat @ u
    mean = flat.mean(axis=0)
    frob = float(np.linalg.norm(mean) - nrm)
    full = float(np.linalg.norm(mean - dmf)) / nrm
    rms = float(np.sqrt(np.mean(np.sum((flat - dmf[None]) ** 2, axis=1)))) / nrm
    return s_dm, s_se, s, frob, full, rms


def cv_mean(x, C):
    """Control-variate mean of ``x`` (S,) given covariates ``C`` (S, k) whose expectation is exactly 0: the intercept
    of the OLS regression of x on [1, C] and its OLS standard error.  Same expectation as the plain mean (up to
    O(1/S)), smaller variance where x correlates with C.  With S <= k + 3 seeds: the plain mean and its s.e."""
    x = np.asarray(x, float)
    C = np.asarray(C, float).reshape(len(x), -1)
    S = len(x)
    A = np.column_stack([np.ones(S), C])
    if S <= A.shape[1] + 2:
        return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(S))
    beta, *_ = np.linalg.lstsq(A, x, rcond=None)
    r = x - A @ beta
    cov = (r @ r / (S - A.shape[1])) * np.linalg.inv(A.T @ A)
    return float(beta[0]), float(math.sqrt(cov[0, 0]))


# ------------------------------------------------------------------------------------------------ fits
def gls(A, g, cov):
    """Generalised least squares g ~ A beta with covariance ``cov``: (beta, cov(beta), chi^2)."""
    A, g = np.asarray(A, float), np.asarray(g, float)
    W = np.linalg.inv(cov)
    F = A.T @ W @ A
    Cb = np.linalg.inv(F)
    beta = Cb @ (A.T @ W @ g)
    r = g - A @ beta
    return beta, Cb, float(r @ W @ r)


def power_fit(d, g, cov, A0):
    """g = A (d/1000)^p with the full covariance (start A0, p = -1); (A, A_se, p, p_se), or None if it fails."""
    from scipy.optimize import least_squares

    g = np.asarray(g, float)
    L = np.linalg.cholesky(cov)
    x = np.asarray(d, float) / 1000.0

    def res(th):
        return np.linalg.solve(L, g - th[0] * x ** th[1])

    try:
        sol = least_squares(res, x0=[A0, -1.0])
        J = sol.jac
        C = np.linalg.inv(J.T @ J)
        if not sol.success or not np.all(np.isfinite(C)):
            return None
        return float(sol.x[0]), float(math.sqrt(C[0, 0])), float(sol.x[1]), float(math.sqrt(C[1, 1]))
    except (np.linalg.LinAlgError, ValueError):
        return None


def fit_over_d(ds, gaps, sim_ses, dm_se) -> dict:
    """Fits of a gap (GD - DMFT) against d, by GLS with the full covariance: the seed noise ``sim_ses`` independent
    across d, the DMFT error ``dm_se`` common to every d.

    Keys: chi2_0, p_0 (the zero-gap model); fit_c, fit_c_se, chi2_c, dof_c, p_c (gap = c/d); fit_b, fit_b_se, fit_c2,
    fit_c2_se, chi2_bc (gap = b + c/d, 3 or more d; else None); pow_A, pow_A_se, pow_p, pow_p_se (gap = A (d/1000)^p,
    only when |c| > 3 se_c and 3 or more d; else None); bound_1000 = |gap| + 2 se at the d nearest 1000, bound_1000_fit
    = (|c| + 2 se_c)/1000, bound_d (that d); z (gap/se per d); verdict:

    * 'no measurable gap' -- the zero model is acceptable: p_0 >= 0.01 and every |z| < 3;
    * 'gap shrinks' -- c/d acceptable (p_c >= 0.01) and b within 2.5 se of 0 (or not fitted);
    * 'offset persists' -- c/d rejected (p_c < 0.01) and b more than 3 se from 0;
    * 'ambiguous' -- otherwise.
    """
    from scipy.stats import chi2 as chi2d

    ds = np.asarray(ds, float)
    g = np.asarray(gaps, float)
    cov = np.diag(np.asarray(sim_ses, float) ** 2) + float(dm_se) ** 2  # DMFT error: common to every d
    n = len(ds)
    out = {}
    W = np.linalg.inv(cov)
    out["chi2_0"] = float(g @ W @ g)
    out["p_0"] = float(chi2d.sf(out["chi2_0"], n))
    beta, Cb, c2 = gls((1.0 / ds)[:, None], g, cov)
    out.update(fit_c=float(beta[0]), fit_c_se=float(math.sqrt(Cb[0, 0])), chi2_c=c2, dof_c=n - 1,
               p_c=float(chi2d.sf(c2, n - 1)) if n > 1 else float("nan"))
    if n >= 3:
        beta2, Cb2, c22 = gls(np.vstack([np.ones(n), 1.0 / ds]).T, g, cov)
        out.update(fit_b=float(beta2[0]), fit_b_se=float(math.sqrt(Cb2[0, 0])), fit_c2=float(beta2[1]),
                   fit_c2_se=float(math.sqrt(Cb2[1, 1])), chi2_bc=c22)
    else:
        out.update(fit_b=None, fit_b_se=None, fit_c2=None, fit_c2_se=None, chi2_bc=None)
    out.update(pow_A=None, pow_A_se=None, pow_p=None, pow_p_se=None)
    if n >= 3 and abs(out["fit_c"]) > 3 * out["fit_c_se"]:
        pf = power_fit(ds, g, cov, out["fit_c"] / 1000.0)
        if pf is not None:
            out.update(pow_A=pf[0], pow_A_se=pf[1], pow_p=pf[2], pow_p_se=pf[3])
    z = g / np.sqrt(np.diag(cov))
    measurable = out["p_0"] < 0.01 or bool(np.any(np.abs(z) >= 3))
    i1000 = int(np.argmin(np.abs(ds - 1000)))
    # 95% bounds on |gap| at d = 1000: measured there, and from the c/d fit
    out["bound_1000"] = float(abs(g[i1000]) + 2 * math.sqrt(cov[i1000, i1000]))
    out["bound_1000_fit"] = float((abs(out["fit_c"]) + 2 * out["fit_c_se"]) / 1000.0)
    out["bound_d"] = float(ds[i1000])
    if not measurable:
        out["verdict"] = "no measurable gap"
    else:
        b_ok = out["fit_b"] is None or abs(out["fit_b"]) <= 2.5 * out["fit_b_se"]
        b_bad = out["fit_b"] is not None and abs(out["fit_b"]) > 3 * out["fit_b_se"]
        if out["p_c"] >= 0.01 and b_ok:
            out["verdict"] = "gap shrinks"
        elif b_bad and out["p_c"] < 0.01:
            out["verdict"] = "offset persists"
        else:
            out["verdict"] = "ambiguous"
    out["z"] = z.tolist()
    return out


def extrapolate_inverse(x, values, ses):
    """Weighted fit value = X_inf + B x (x = 1/paths per replica, say): (X_inf, its s.e., chi^2, dof)."""
    x, y = np.asarray(x, float), np.asarray(values, float)
    cov = np.diag(np.asarray(ses, float) ** 2)
    beta, Cb, c2 = gls(np.vstack([np.ones_like(x), x]).T, y, cov)
    return float(beta[0]), float(math.sqrt(Cb[0, 0])), c2, len(x) - 2


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x."""
    x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    A = np.vstack([x, np.ones_like(x)]).T
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return float(coef[0])


# ------------------------------------------------------------------------------------------------ pass criteria
def within(value, goal: float) -> bool:
    """value <= goal (a relative error against its goal; False for NaN)."""
    return bool(value <= goal)


def within_se(a, b, se, k: float = 2.0, floor: float = 0.1, slack: float = 0.0) -> bool:
    """|a - b| <= max(k se, floor) + slack: a prediction a against a measured b with standard error se (part 3 of
    dmft_vs_sim: k = 2, floor = 0.1, slack = half the width of the prediction's band)."""
    return bool(abs(a - b) <= max(k * se, floor) + slack)


def within_factor(ratio, factor: float = 1.5) -> bool:
    """1/factor <= ratio <= factor."""
    return bool(1 / factor <= ratio <= factor)


def in_band(x, low, high, se, k: float = 2.0) -> bool:
    """low - k se <= x <= high + k se: a measured x (s.e. se) inside a predicted band."""
    return bool(low - k * se <= x <= high + k * se)
