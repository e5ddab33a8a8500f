"""What a DMFT solve returns: :class:`DMFTResult` (documented shapes, standard errors, settings, the Problem) and the
matched finite-d prediction :class:`CapturePrediction` (docs/theory.md §3, §3.2)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import TheorykitError
from .sample_side import TAIL_LEVELS


@dataclass(frozen=True, eq=False)
class PathLaw:
    """The DMFT's law of one sample at time t, as a weighted sample of paths (docs/theory.md §4 integrates against it).

    N paths over all replicas (replica r's paths in ``replica == r``).  weights (N,): probability weights, summing to 1
    over the paths not excluded (each replica's weights / replicas); raw_weights (N,): the same before exclusion;
    r (N, m): pre-activations r^t; y (N,); z (N, k): latent coordinates; zeta (N, kH): the hard ones (z @ hard_basis);
    D (N, m, m): the per-sample curvature as the finite-n Hessian sees it (no Dirac terms from kinks); excluded (N,)
    bool: paths excluded as single-path instabilities by time t (kept here, marked; their weight is 0 in ``weights``);
    latent: how the latent was integrated (Gauss-Hermite nodes x sampled w paths, or Monte-Carlo latents).
    The Hessian theory reads this object and nothing else from the solver."""

    t: int
    weights: np.ndarray
    raw_weights: np.ndarray
    r: np.ndarray
    y: np.ndarray
    z: np.ndarray
    zeta: np.ndarray
    D: np.ndarray
    excluded: np.ndarray
    replica: np.ndarray
    latent: str

    @staticmethod
    def combine(t: int, parts: list, hard_basis: np.ndarray, latent: str) -> "PathLaw":
        """One law from the replicas' kept samples (dicts with r, D, weight, z, y, excluded)."""
        R = len(parts)
        raw = np.concatenate([p["weight"] for p in parts]) / R
        excl = np.concatenate([p["excluded"] for p in parts])
        w = np.where(excl, 0.0, raw)
        total = w.sum()
        z = np.concatenate([p["z"] for p in parts])
        return PathLaw(t=int(t), weights=w / total if total > 0 else w, raw_weights=raw,
                       r=np.concatenate([p["r"] for p in parts]), y=np.concatenate([p["y"] for p in parts]), z=z,
                       zeta=z @ hard_basis, D=np.concatenate([p["D"] for p in parts]), excluded=excl,
                       replica=np.concatenate([np.full(len(p["y"]), i) for i, p in enumerate(parts)]),
                       latent=latent)

    def expectation(self, values) -> float:
        """sum_n weights_n values_n over the kept paths (values (N,))."""
        return float(self.weights @ np.asarray(values, dtype=float))


@dataclass
class CapturePrediction:
    """Matched finite-d prediction of :meth:`DMFTResult.capture_prediction` (m = 1, first hard direction).

    probability = P(chi2_1 > d m_star^2 / v) with v = v_eff(t_match); [low, high] is its sensitivity band: the ends of
    the m_star bracket, v_eff +- 2 standard errors (jackknife over replicas), and t_match anywhere in
    [ceil(t_match / 2), t_match].  It is a band of the inputs, not a confidence interval of the heuristic itself.
    noise_limited: capture_threshold's flag (None when m_star was given as a number); True means m_star is unreliable.
    """

    d: int
    probability: float
    low: float
    high: float
    m_star: float
    bracket: tuple
    t_match: int
    v: float
    v_stderr: float
    noise_limited: Optional[bool] = None
    how: str = ("matched: linear hard process (DMFT tangents) up to t_match, then the nonlinear DMFT's capture "
                "threshold m_star (capture_threshold); P = P(chi2_1 > d m_star^2 / v_eff(t_match))")

    def as_dict(self) -> dict:
        return {"d": self.d, "probability": self.probability, "low": self.low, "high": self.high,
                "m_star": self.m_star, "bracket": list(self.bracket), "t_match": self.t_match, "v": self.v,
                "v_stderr": self.v_stderr, "noise_limited": self.noise_limited, "how": self.how}


@dataclass
class DMFTResult:
    """DMFT prediction; T+1 = number of time points reached, k latent dim, m width, kH hard directions.

    t (T+1,), time (T+1,) flow time sum_{s<t} eta_s; M (T+1, k, m); gram (T+1, m, m) = M^T M + C_theta(t, t);
    train_loss, test_loss (T+1,); C_theta_tt (T+1, m, m); C_mu (T+1, kH, m, m) = d E[Theta^T e e^T Theta] per hard
    direction e (docs/theory.md §3.2); D_tail (T+1, 4): min and the 1e-5, 1e-4, 1e-3 quantiles of the smallest eigenvalue of
    D^t; stderr: the same keys -> standard errors over replicas; kernels (if requested): C_theta, R_theta, C_u, R_u
    as (T+1, T+1, m, m) arrays (replica means) with "<name>_stderr"; status "ok" | "diverged"; diverged_at;
    hard_reliable_until: last t before the replicas of tr C_mu disagree by > 5%; hard_ess (T+1,): smallest over
    replicas of the effective fraction of paths carrying the hard drift (see :func:`hard_tangents`); C_mu_init
    (T+1, kH, m, m): the part of C_mu grown from the initial overlap alone, P_t Sigma_0 P_t^T; v_eff (T+1,), m = 1
    only: C_mu Sigma_0 / C_mu_init on the first hard direction, the variance d Var(mu^t / P_t) of the effective
    initial overlap (ratio of replica means; stderr["v_eff"] by jackknife over replicas); V_eff (T+1, m, m), any m:
    d Cov(P_t^-1 mu^t), the covariance of the effective initial overlap vector on the first hard direction
    (:func:`theorykit.dynamics.hard_process.effective_overlap_covariance`; V_eff[:, 0, 0] = v_eff for m = 1;
    stderr["V_eff"] by jackknife); bias (with
    ``bias_check``): {key: estimated finite-path bias of that output, "stderr": {key: its standard error}} for M,
    gram, train_loss, test_loss, C_theta_tt, C_mu.
    """

    status: str
    t: np.ndarray
    time: np.ndarray
    M: np.ndarray
    gram: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    C_theta_tt: np.ndarray
    C_mu: np.ndarray
    D_tail: np.ndarray
    stderr: dict
    kernels: Optional[dict]
    settings: dict
    seconds: float
    diverged_at: Optional[dict] = None
    Ezu: Optional[np.ndarray] = None
    hard_reliable_until: Optional[int] = None
    hard_ess: Optional[np.ndarray] = None
    bias: Optional[dict] = None
    C_mu_init: Optional[np.ndarray] = None
    v_eff: Optional[np.ndarray] = None
    V_eff: Optional[np.ndarray] = None
    problem: Optional[object] = None  # the theorykit.Problem solved (None if the ingredients have no spec string)
    laws: Optional[dict] = None  # t -> PathLaw at the times requested with keep_law_at
    excluded_masks: Optional[list] = None  # per replica: the paths excluded by the end (the scan mode unites them)
    method: Optional[dict] = None  # how it was solved, in words (latent rule, estimators, errors, kinks)
    per_replica: Optional[dict] = None  # {"M": (R, T+1, k, m), "C_theta_tt": (R, T+1, m, m)}: each replica's own

    def _need_hard_process(self):
        if (self.settings or {}).get("hard_process_solved") is False and self.C_mu.shape[1] == 0 and \
                (self.method or {}).get("hard_process") is not None:
            raise TheorykitError("this DMFT was solved with hard_process=False: no hard process, no finite-d "
                                 "hard-overlap prediction (solve again without it)")

    def success_probability(self, d: int, t=None, samples: int = 20000, seed: int = 0):
        """Predicted probability that GD at dimension d has hard overlap > 1/2 at time t (docs/theory.md §3.2).

        To linear order Theta^T e = mu / sqrt(d) with mu ~ N(0, C_mu(t)) and the complement's Gram C_theta(t, t);
        for m = 1 this is P(chi2_1 > d C_theta(t, t) / C_mu(t)) (exact); for m > 1 the cos^2 between e and the top
        left singular vector of Theta is Monte-Carlo'd over mu (``samples`` draws).  Uses the first hard direction.
        Returns an array over t (all time points if t is None).  Times after ``hard_reliable_until`` rest on a
        C_mu whose replicas disagree by more than 5%: treat them as unreliable (C_mu is then carried by rare paths,
        see ``hard_ess``; more paths push that time later only slowly).  Measured: right in mean and law where it is
        reliable, but GD escapes later; :meth:`capture_probability` is the matched prediction that tracks GD."""
        from scipy.stats import chi2

        self._need_hard_process()
        if self.C_mu.shape[1] == 0:
            raise TheorykitError("this link has no hard direction: no finite-d hard-overlap prediction")
        d = int(d)
        ts = self.t if t is None else np.atleast_1d(np.asarray(t, dtype=int))
        m = self.gram.shape[1]
        out = []
        rng = np.random.default_rng(seed)
        for s in ts:
            Cm = self.C_mu[s, 0]
            Ct = self.C_theta_tt[s]
            if m == 1:
                ratio = d * Ct[0, 0] / max(Cm[0, 0], 1e-300)
                out.append(float(chi2.sf(ratio, 1)))
                continue
            lam, V = np.linalg.eigh(Cm)
            mu = rng.standard_normal((samples, m)) * np.sqrt(np.maximum(lam, 0)) @ V.T / math.sqrt(d)
            lt, Vt = np.linalg.eigh(Ct)
            half = (Vt * np.sqrt(np.maximum(lt, 0))).T  # rows: complement coordinates, half^T half = C_theta
            Mk = self.M[s]
            ok = 0
            for i in range(samples):
                Th = np.vstack([mu[i][None, :], Mk, half])
                u, _, _ = np.linalg.svd(Th, full_matrices=False)
                ok += u[0, 0] ** 2 > 0.5
            out.append(ok / samples)
        return np.array(out)

    def capture_prediction(self, d: int, capture, t_match: Optional[int] = None) -> CapturePrediction:
        """Matched finite-d prediction (m = 1): P(GD at dimension d captures the hard direction by the horizon).

        The linear process (docs/theory.md §3.2) is trusted up to ``t_match`` (default: ``hard_reliable_until``);
        there mu^t = P_t mu_eff with an effective initial overlap mu_eff ~ N(0, v/d), v = v_eff(t) = d Var(mu^t)/P_t^2
        = C_mu(t) Sigma_0 / C_mu_init(t) (noise-driven growth counted in units of initial overlap).  The nonlinear
        DMFT started from an initial hard overlap m0 grows like P_t m0 in the same linear regime and reaches
        cos^2 > 1/2 by the horizon iff m0 > m_star (:func:`capture_threshold`).  So P = P(chi2_1 > d m_star^2 / v).

        ``capture`` is m_star, or the dict returned by :func:`capture_threshold` (its bracket then enters the band).
        v_eff(t) levels off as the growing mode takes over, so the matching time matters little; the band reports how
        little.  Not reliable when ``capture["noise_limited"]`` (the replicas' M_T along e too noisy to place m*).
        Measured against GD: tables/dmft_vs_sim_part3.md (phase retrieval, GeLU and x^2) and
        tables/dmft_vs_sim_part3_sign.md (y = sign(|z| - median), logistic loss)."""
        from scipy.stats import chi2

        from .._checks import check_int as _check_int

        self._need_hard_process()
        if self.C_mu.shape[1] == 0 or self.gram.shape[1] != 1 or self.v_eff is None:
            raise TheorykitError("capture_prediction needs a hard direction and width m = 1")
        def number(v):
            return isinstance(v, (int, float, np.floating)) and not isinstance(v, bool) and math.isfinite(v)

        noise = capture.get("noise_limited") if isinstance(capture, dict) else None
        m_star = capture.get("m_star") if isinstance(capture, dict) else capture
        if not (number(m_star) and m_star > 0):
            raise TheorykitError(f"m_star must be a positive number, got {m_star!r}")
        m_star = float(m_star)
        bracket = capture.get("bracket", (m_star, m_star)) if isinstance(capture, dict) else (m_star, m_star)
        if not (isinstance(bracket, (list, tuple)) and len(bracket) == 2 and all(number(b) for b in bracket)
                and 0 <= bracket[0] <= m_star <= bracket[1]):
            raise TheorykitError(f"the bracket must be [lo, hi] with 0 <= lo <= m_star <= hi, got {bracket!r}")
        bracket = (float(bracket[0]), float(bracket[1]))
        d = _check_int("d", d, 1)
        tm = self.hard_reliable_until if t_match is None else t_match
        if isinstance(tm, bool) or not isinstance(tm, (int, np.integer)) or not 0 <= tm < len(self.t):
            raise TheorykitError(f"t_match must be a time index in [0, {len(self.t) - 1}], got {t_match!r}")
        tm = int(tm)
        v = np.asarray(self.v_eff, dtype=float)
        se = np.asarray(self.stderr.get("v_eff", np.zeros_like(v)), dtype=float)
        win = slice((tm + 1) // 2, tm + 1)
        v_lo = float(np.min(v[win] - 2 * se[win]))
        v_hi = float(np.max(v[win] + 2 * se[win]))

        def p(m, vv):
            return float(chi2.sf(d * m ** 2 / vv, 1)) if vv > 0 else 0.0

        return CapturePrediction(d=d, probability=p(m_star, float(v[tm])), low=p(bracket[1], v_lo),
                                 high=p(bracket[0], v_hi) if bracket[0] > 0 else 1.0, m_star=m_star,
                                 bracket=bracket, t_match=tm, v=float(v[tm]), v_stderr=float(se[tm]),
                                 noise_limited=noise)

    def capture_probability(self, d: int, m_star, t_match: Optional[int] = None) -> float:
        """The probability of :meth:`capture_prediction` (``m_star`` a number or capture_threshold's dict)."""
        return self.capture_prediction(d, m_star, t_match).probability

    def as_dict(self) -> dict:
        tail = [{"t": int(t), "min": float(r[0]), **{f"q{q:.0e}".replace("e-0", "e-"): float(v)
                                                       for q, v in zip(TAIL_LEVELS, r[1:])}}
                for t, r in zip(self.t, self.D_tail)]
        out = {
            "status": self.status, "t": self.t.tolist(), "time": self.time.tolist(), "M": self.M.tolist(),
            "gram": self.gram.tolist(), "train_loss": self.train_loss.tolist(), "test_loss": self.test_loss.tolist(),
            "stderr": {k: np.asarray(v).tolist() for k, v in self.stderr.items()},
            "hard": {"C_mu": self.C_mu.tolist(), "C_mu_stderr": np.asarray(self.stderr.get("C_mu")).tolist(),
                     "reliable_until": self.hard_reliable_until,
                     "ess": (None if self.hard_ess is None else np.asarray(self.hard_ess).tolist()),
                     "v_eff": (None if self.v_eff is None else np.asarray(self.v_eff).tolist()),
                     "v_eff_stderr": (None if self.v_eff is None else np.asarray(self.stderr["v_eff"]).tolist())},
            "D_tail": tail, "settings": self.settings, "seconds": self.seconds,
            "diverged_at": self.diverged_at,
            "problem": (None if self.problem is None else self.problem.to_dict()),
            "method": self.method,
        }
        if self.kernels is not None:
            out["kernels"] = {k: np.asarray(v).tolist() for k, v in self.kernels.items()}
        if self.bias is not None:
            out["bias"] = {k: ({kk: np.asarray(vv).tolist() for kk, vv in v.items()} if k == "stderr"
                               else np.asarray(v).tolist()) for k, v in self.bias.items()}
        return out
