"""The bottom of the Hessian's spectrum: left edge, hard outliers, overlaps and margin (docs/theory.md §4).

Hard outliers: with zeta in R^{kH} the hard latent coordinates,

    Phi(S) = E[(zeta zeta^T) (x) g(D, S)]        (kH m x kH m),

an eigenvalue below the edge with eigenvector correlated with the hard subspace is a root of det(Phi - lambda I) = 0 on
the real curve (:mod:`.curve`); Phi - lambda I decreases along the curve, so each eigenvalue of it crosses zero at most
once and the number of outliers is the number of its negative eigenvalues at the edge.  Overlap^2 of the eigenvector
with the hard subspace: 1/(1 - a^T Phi'(lambda) a), a the unit null vector, Phi' = (dPhi/dtau)/(dlambda/dtau).
margin = minus the smallest eigenvalue of Phi - lambda I at the edge (> 0 iff a hard outlier exists).

m = 1 with one hard direction and min D < 0 goes through the classic spectral core (:func:`theorykit.spectra.classic.
outlier` with Z = -D, V = zeta^2: bottom of H = -top of that law), the same code as the classic spectral methods; the
continuation is the m x m extension and agrees with it for m = 1 (tests/test_hessian_theory.py).  A truncated law's
expected lowest samples are added back as atoms of weight 1/n for the outliers, and predicted as single-sample spikes
(:mod:`.spikes`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
from scipy import optimize

from ...errors import TheorykitError
from .curve import Curve, find_edge
from .law import HessianLaw, check_law, kernel_mass, rank_ratio
from .solver import Core, batched_mm
from .spikes import single_sample_spikes

__all__ = ["HessianPrediction", "Outlier", "hessian_prediction"]


@dataclass(frozen=True)
class Outlier:
    """One hard outlier: eigenvalue lam (ridge included), squared overlap of its eigenvector with the hard subspace,
    negative (lam < 0: negative curvature, GD moves along it), direction a (kH m,) the null vector of Phi - lam I."""

    lam: float
    overlap2: float
    negative: bool
    direction: tuple

    def as_dict(self) -> dict:
        return {"lambda": self.lam, "overlap2": self.overlap2, "negative": self.negative,
                "direction": list(self.direction)}


@dataclass(frozen=True)
class HessianPrediction:
    """The bottom of the Hessian's spectrum predicted from a :class:`HessianLaw`.

    edge: left edge of the bulk (ridge included); edge_case: "fold" (the real solution turns: square-root edge),
    "domain" (the curve ends where I + D S/delta becomes singular: the edge is set by the law's minimum) or "atom"
    (every D >= 0 and H has a kernel: the bottom of the spectrum is the atom at the ridge, of mass atom_mass);
    outliers:
    hard outliers below the edge, lowest first; margin: minus the smallest eigenvalue of Phi(lambda) - lambda I at the
    edge (> 0 iff a hard outlier exists); S_edge (m, m); unbounded: the law's tail verdict (True: no left edge as
    n -> infinity; None: undecided); truncation_n; D_tail: the tail diagnostic; method: which solver (classic scalar
    core or the m x m continuation) and the law's source; evaluations: residual evaluations used."""

    edge: float
    edge_case: str
    outliers: tuple
    margin: float
    S_edge: np.ndarray
    delta: float
    m: int
    kH: int
    unbounded: Optional[bool]
    truncation_n: Optional[int]
    D_tail: Optional[dict]
    method: str
    evaluations: int
    notes: tuple = field(default_factory=tuple)
    spikes: tuple = ()  # predicted single-sample eigenvalues of a truncated law's expected extremes (None: in the bulk)
    outliers_from: str = "law"  # "law", or "with extremes" (the truncated law plus its expected extremes as atoms)
    atom_mass: float = 0.0  # mass of the kernel of H - ridge I (kernel_mass): an atom of the spectrum at the ridge
    margins: tuple = ()  # minus every eigenvalue of Phi - lambda I at the edge, descending (margins[0] = margin; the
    #                      j-th > 0 iff there are at least j + 1 hard outliers); the m x m continuation only

    @property
    def has_outlier(self) -> bool:
        return len(self.outliers) > 0

    def as_dict(self) -> dict:
        return {"edge": self.edge, "edge_case": self.edge_case, "outliers": [o.as_dict() for o in self.outliers],
                "margin": self.margin, "S_edge": np.asarray(self.S_edge).tolist(), "delta": self.delta, "m": self.m,
                "kH": self.kH, "unbounded": self.unbounded, "truncation_n": self.truncation_n,
                "D_tail": self.D_tail, "method": self.method, "evaluations": self.evaluations,
                "notes": list(self.notes), "spikes": list(self.spikes), "outliers_from": self.outliers_from,
                "atom_mass": self.atom_mass, "margins": list(self.margins)}


def top_edge(law: HessianLaw, n: Optional[int] = None) -> float:
    """The right edge lambda_+ of the bulk of H = (1/n) sum_i D_i (x) x_i x_i^T + ridge I (docs/theory.md §4): minus
    the left edge of the law of -D (the same equation F(S) = 0, solved by the m x m continuation), plus the ridge.
    With ``n``, the law of -D is first truncated at its own 1/n quantile (the top tail of D a sample of n points holds
    as single-sample spikes above the bulk, not as bulk).  For D = c constant it is c (1 + delta^{-1/2})^2, the
    Marchenko-Pastur edge.  Against GD's step size: eta lambda_+ > 2 means GD runs beyond its edge of stability (the
    bulk's top directions are unstable under the linearised step)."""
    law = check_law(law)
    neg = replace(law, D=-law.D, ridge=0.0, tail=None, zeta=np.zeros((len(law.weights), 0)), removed=None,
                  extremes=None, truncation_n=None)
    if n is not None:
        neg = replace(neg.truncated(n), extremes=None)
    return -hessian_prediction(neg, solver="continuation").edge + law.ridge


def hessian_prediction(law: HessianLaw, solver: str = "auto") -> HessianPrediction:
    """Left edge, hard outliers (eigenvalue, overlap^2, sign) and margin for a :class:`HessianLaw` (module docstring,
    docs/theory.md §4).  solver: "auto" (the classic scalar core for m = 1, kH = 1, min D < 0; else the m x m
    continuation), "classic" or "continuation"."""
    law = check_law(law)
    if solver not in ("auto", "classic", "continuation"):
        raise TheorykitError(f"solver must be 'auto', 'classic' or 'continuation', got {solver!r}")
    if not np.any(law.D[law.weights > 0]):
        raise TheorykitError("hessian law: D is identically zero, so H = ridge I and every eigenvalue is the ridge (no "
                             "bulk to solve)")
    scalar_ok = law.m == 1 and law.kH == 1 and float(law.D.min()) < 0
    if solver == "classic" and not scalar_ok:
        raise TheorykitError("the classic scalar core needs m = 1, one hard direction and min D < 0")
    unb = None if law.tail is None else law.tail.get("unbounded")
    notes = list(law.notes)
    if unb and law.truncation_n is None:
        notes.append("D is unbounded below: the n -> infinity law has no left edge; this is the edge of the "
                     "discretised law (resolution-dependent) - truncate at the user's n (HessianLaw.truncated)")
    use_scalar = solver == "classic" or (solver == "auto" and scalar_ok)
    bulk = _scalar(law, unb, notes) if use_scalar else _continuation(law, unb, notes)
    ext = law.extremes
    if not ext or len(ext["D"]) == 0:
        return bulk
    # finite n: the expected lowest samples as atoms of weight 1/n; they are single-sample spikes, and they couple to
    # the hard outlier (their zeta is large when D is low through y): the outliers come from the law with them
    K, n = len(ext["D"]), ext["n"]
    spikes = tuple(single_sample_spikes(law, ext["D"]))
    kp = ext["keep"]  # the bulk above the law's K/n quantile: the K atoms stand for the mass below it
    wb = law.weights[kp]
    w = np.concatenate([wb / wb.sum() * (1.0 - K / n), np.full(K, 1.0 / n)])
    full = replace(law, weights=w, D=np.concatenate([law.D[kp], ext["D"]]),
                   zeta=np.concatenate([law.zeta[kp], ext["zeta"]]),
                   radius=np.concatenate([law.radius[kp], np.full(K, np.nan)]), extremes=None)
    fp = _scalar(full, unb, []) if (use_scalar and float(full.D.min()) < 0) else _continuation(full, unb, [])
    if fp.outliers:
        return replace(bulk, outliers=fp.outliers, spikes=spikes, outliers_from="with extremes",
                       notes=bulk.notes + (f"outliers from the truncated law plus its {K} expected lowest samples "
                                           f"as atoms of weight 1/n (n = {n})",))
    return replace(bulk, spikes=spikes)


def _scalar(law: HessianLaw, unb, notes) -> HessianPrediction:
    from ..classic import hessian_law, outlier

    D = law.D[:, 0, 0]
    sl = hessian_law(law.weights, D, law.zeta[:, 0] ** 2, method=law.source)
    p = outlier(sl, law.delta)
    edge = -p.bulk_edge + law.ridge
    S_e = law.delta / p.lam_bar
    outs = ()
    if p.has_outlier:
        lam = -p.top_eigenvalue + law.ridge
        outs = (Outlier(float(lam), float(p.overlap2), bool(lam < 0), (1.0,)),)
    # margin on the same scale as the continuation's: lambda_edge - Phi(lambda_edge) = -(psi - phi) at lam_bar
    margin = (sl.phi(p.lam_bar) - sl.psi(p.lam_bar, law.delta))
    method = (f"classic scalar spectral core (theorykit.spectra.classic.outlier, Z = -D, V = zeta^2; edge "
              f"{p.edge_case}) on {law.source}")
    return HessianPrediction(float(edge), "fold" if p.edge_case == "interior" else "domain", outs, float(margin),
                             np.array([[S_e]]), law.delta, 1, 1, unb, law.truncation_n, law.tail, method, 0,
                             tuple(notes + list(p.notes)))


def _continuation(law: HessianLaw, unb, notes) -> HessianPrediction:
    core = Core(law)
    curve = Curve(core)
    tau_e, case, taus = find_edge(curve, law)
    s_e, lam_e, ds_e, dl_e, S_e, g_e = curve.at(tau_e)
    kH, m = law.kH, law.m
    outs = []
    margin = -math.inf
    margins: tuple = ()
    if kH:
        def mu(t):
            s, lam, _, _, _, g = curve.at(t)
            return np.linalg.eigvalsh(core.Phi(g)[0] - lam * np.eye(kH * m))

        mu_e = mu(tau_e)
        margin = float(-mu_e[0])
        count = int((mu_e < 0).sum())
        margins = tuple(float(-v) for v in mu_e)
        if case == "atom":  # H >= 0 with a kernel: nothing lies below the atom at 0
            margin, count = min(margin, 0.0), 0
            margins = tuple(min(v, 0.0) for v in margins)
        for j in range(count):
            lo = None
            for t in taus:
                if t < tau_e and mu(t)[j] > 0:
                    lo = t
            if lo is None:
                notes.append(f"outlier {j + 1}: no bracket on the marched curve")
                continue
            tj = optimize.brentq(lambda t: mu(t)[j], lo, tau_e, xtol=1e-14 * tau_e, rtol=1e-13, maxiter=200)
            s, lam, ds, dlam, S, g = curve.at(tj)
            P = core.Phi(g)[0] - lam * np.eye(kH * m)
            ev, U = np.linalg.eigh(P)
            a = U[:, j]
            dS = core.mat(ds)[None]
            gb = core.blocks(g, m)
            dgb = -batched_mm(batched_mm(gb, dS[:, None]), gb) / law.delta
            dg = np.ascontiguousarray(np.moveaxis(dgb, 1, 3)).reshape(1, m * m, -1)
            dPhi = core.Phi(dg)[0] / dlam
            ov = 1.0 / (1.0 - float(a @ dPhi @ a))
            lam_r = lam + law.ridge
            a = a * (1.0 if a[np.argmax(np.abs(a))] > 0 else -1.0)
            outs.append(Outlier(float(lam_r), float(ov), bool(lam_r < 0), tuple(float(v) for v in a)))
    outs.sort(key=lambda o: o.lam)
    if case == "domain":
        notes.append("the real curve ends where I + D S/delta becomes singular before it turns: the edge is set "
                     "by the law's lowest D")
    atom = kernel_mass(law)
    if case == "atom":
        lam_e = 0.0  # the limit of lambda(tau) as tau -> infinity (docs/theory.md §4)
        notes.append(f"every D_i >= 0 and delta E[rank D]/m = {rank_ratio(law):.6g} <= 1: H has a kernel of "
                     f"mass {atom:.6g} (an atom at lambda = ridge), which is the bottom of the spectrum; no "
                     "eigenvalue lies below it")
    method = (f"m x m continuation of the real S below the bulk (tau = tr S, bordered Newton; edge: {case}) on "
              f"{law.source}")
    return HessianPrediction(float(lam_e + law.ridge), case, tuple(outs), margin, core.mat(s_e), law.delta, m, kH,
                             unb, law.truncation_n, law.tail, method, curve.evals, tuple(notes), atom_mass=atom,
                             margins=margins)
