"""What a DMFT solve returns: :class:`DMFTResult` (documented shapes, standard errors, settings, the Problem;
docs/theory.md §3, §3.2).  The finite-d prediction built on it lives in :mod:`theorykit.thresholds.capture`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

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


@dataclass(frozen=True)
class DMFTResult:
    """DMFT prediction; T+1 = number of time points reached, k latent dim, m width, kH hard directions.

    t (T+1,), time (T+1,) flow time sum_{s<t} eta_s; M (T+1, k, m); gram (T+1, m, m) = M^T M + C_theta(t, t);
    train_loss, test_loss (T+1,); C_theta_tt (T+1, m, m); C_mu (T+1, kH, m, m) = d E[Theta^T e e^T Theta] per hard
    direction e (docs/theory.md §3.2); D_tail (T+1, 4): min and the 1e-5, 1e-4, 1e-3 quantiles of the smallest
    eigenvalue of D^t; stderr: the same keys -> standard errors over replicas; kernels (if requested): C_theta, R_theta,
    C_u, R_u as (T+1, T+1, m, m) arrays (replica means) with "<name>_stderr"; status "ok" | "diverged"; diverged_at;
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
            "problem": (None if self.problem is None else self.problem.as_dict()),
            "method": self.method,
        }
        if self.kernels is not None:
            out["kernels"] = {k: np.asarray(v).tolist() for k, v in self.kernels.items()}
        if self.bias is not None:
            out["bias"] = {k: ({kk: np.asarray(vv).tolist() for kk, vv in v.items()} if k == "stderr"
                               else np.asarray(v).tolist()) for k, v in self.bias.items()}
        return out
