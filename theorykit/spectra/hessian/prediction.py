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
(:mod:`.spikes`); for m = 1 the outliers are then found in every gap between the spikes (:mod:`.gaps`; the
continuation stops at the fold below the deepest one), and likewise for a sample's own law (``sample=True``).
``overlap2_below_edge`` is the hard overlap^2 below the edge in all: the outliers' of the law without its spikes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
from scipy import optimize

from ...errors import TheorykitError
from .curve import Curve, find_edge
from .gaps import gap_outliers
from .law import HessianLaw, check_law, kernel_mass, rank_ratio
from .solver import Core, batched_mm
from .spikes import single_sample_spikes, split_spikes

__all__ = ["HessianPrediction", "Outlier", "hessian_prediction"]

#: a note when the outliers found beside single-sample spikes carry this much less overlap^2 than the law without them
SHORT_OVERLAP = 0.1


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
    core or the m x m continuation) and the law's source; evaluations: residual evaluations used;
    overlap2_below_edge: the hard overlap^2 that the eigenvectors below the bulk carry in all, outliers and
    single-sample spikes together: the outliers' overlap^2 of the law with its spikes split off (a spike near an
    outlier shares it out, the sum stays), or of the law itself when it has none."""

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
    outliers_from: str = "law"  # "law", "with extremes" (the truncated law plus its expected extremes as atoms) or
    #                             "sample" (hessian_prediction(..., sample=True): a sample law with its spikes)
    atom_mass: float = 0.0  # mass of the kernel of H - ridge I (kernel_mass): an atom of the spectrum at the ridge
    margins: tuple = ()  # minus every eigenvalue of Phi - lambda I at the edge, descending (margins[0] = margin; the
    #                      j-th > 0 iff there are at least j + 1 hard outliers); the m x m continuation only
    overlap2_below_edge: Optional[float] = None  # the hard overlap^2 below the bulk, outliers and spikes together

    @property
    def has_outlier(self) -> bool:
        return len(self.outliers) > 0

    def as_dict(self) -> dict:
        return {"edge": self.edge, "edge_case": self.edge_case, "outliers": [o.as_dict() for o in self.outliers],
                "margin": self.margin, "S_edge": np.asarray(self.S_edge).tolist(), "delta": self.delta, "m": self.m,
                "kH": self.kH, "unbounded": self.unbounded, "truncation_n": self.truncation_n,
                "D_tail": self.D_tail, "method": self.method, "evaluations": self.evaluations,
                "notes": list(self.notes), "spikes": list(self.spikes), "outliers_from": self.outliers_from,
                "atom_mass": self.atom_mass, "margins": list(self.margins),
                "overlap2_below_edge": self.overlap2_below_edge}


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


def hessian_prediction(law: HessianLaw, solver: str = "auto", sample: bool = False) -> HessianPrediction:
    """Left edge, hard outliers (eigenvalue, overlap^2, sign) and margin for a :class:`HessianLaw` (module docstring,
    docs/theory.md §4).  solver: "auto" (the classic scalar core for m = 1, kH = 1, min D < 0; else the m x m
    continuation), "classic" or "continuation".  sample=True: the law is a sample of n = N points (a simulation's own
    D_i, equal weights); its single-sample spikes are split off (:func:`split_spikes`) and the edge is that of the
    rest; for m = 1 the outliers are then found in every gap between the spikes and the bulk (:mod:`.gaps`); for
    m >= 2 they are the m x m continuation's on the whole sample (below the deepest spike's fold); overlap2_below_edge
    is the outliers' total of the law without its spikes.  A truncated law's expected lowest samples
    (``law.extremes``) are handled the same way."""
    law = check_law(law)
    if solver not in ("auto", "classic", "continuation"):
        raise TheorykitError(f"solver must be 'auto', 'classic' or 'continuation', got {solver!r}")
    if sample:
        return _sample(law, solver)
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
    crossed = np.array([sp is not None for sp in spikes])
    if law.m == 1 and crossed.any():  # every gap between the spikes and the bulk (.gaps)
        Da = ext["D"][:, 0, 0]
        outs, how = _gaps(full, Da[crossed], np.concatenate([law.D[kp, 0, 0], Da[~crossed]]))
    else:
        fp = _scalar(full, unb, []) if (use_scalar and float(full.D.min()) < 0) else _continuation(full, unb, [])
        outs, how = fp.outliers, "below the deepest spike's fold (the continuation)"
    if any(o.lam < bulk.edge for o in outs):
        return _with_spikes(replace(bulk, spikes=spikes), outs, "with extremes",
                            f"outliers from the truncated law plus its {K} expected lowest samples as atoms of weight "
                            f"1/n (n = {n}), {how}")
    return replace(bulk, spikes=spikes)


def _with_spikes(bulk: HessianPrediction, outs: tuple, source: str, how: str) -> HessianPrediction:
    """The prediction of the law without its spikes (``bulk``), with the outliers found beside its spikes (``outs``;
    those at or above its edge dropped: the law with the atoms folds a little higher, and a root there is no outlier
    of this bulk), and a note when the outliers carry clearly less than the law without the spikes puts below the
    edge (an outlier that falls within a spike's stretch of the curve is not a root on it)."""
    above = [o for o in outs if o.lam >= bulk.edge]
    outs = tuple(o for o in outs if o.lam < bulk.edge)
    notes = bulk.notes + (how,) + ((f"{len(above)} root(s) of the law with the spikes at or above the bulk's edge "
                                    f"{bulk.edge:.6g} dropped ({', '.join(f'{o.lam:.6g}' for o in above)})",)
                                   if above else ())
    total, found = bulk.overlap2_below_edge or 0.0, sum(o.overlap2 for o in outs)
    if found < total - SHORT_OVERLAP:
        notes += (f"the outliers found carry overlap^2 {found:.3g} of the {total:.3g} below the edge: the rest sits "
                  "with the spikes or with an outlier within a spike's stretch of the curve (overlap2_below_edge "
                  "is the total)",)
    return replace(bulk, outliers=outs, outliers_from=source, notes=notes)


def _gaps(law: HessianLaw, spike_D: np.ndarray, rest_D: np.ndarray):
    """m = 1: outliers in every gap of ``law`` below its bulk, crossing the poles of the samples ``spike_D`` (each a
    single-sample spike), the domain ending at the pole of min ``rest_D`` (.gaps); with the method in words."""
    low = float(rest_D.min())
    end = -law.delta / low if low < 0 else math.inf
    poles = -law.delta / spike_D[spike_D < 0]
    found, _ = gap_outliers(law, poles[poles < end], end)
    outs = tuple(Outlier(lam + law.ridge, ov, bool(lam + law.ridge < 0), a) for lam, ov, a in found)
    return outs, f"in every gap below the bulk, between the {len(spike_D)} spikes (m = 1, explicit curve)"


def _sample(law: HessianLaw, solver: str) -> HessianPrediction:
    """hessian_prediction(law, sample=True): see its docstring."""
    bulk, spike_D, spike_lams = split_spikes(law)
    pred = replace(hessian_prediction(bulk, solver), spikes=tuple(float(v) for v in spike_lams))
    if not len(spike_lams):
        return pred
    if law.m == 1:
        outs, how = _gaps(law, spike_D[:, 0, 0], bulk.D[:, 0, 0])
    else:
        outs, how = hessian_prediction(law, solver).outliers, "below the deepest spike's fold (the m x m continuation)"
    if not any(o.lam < pred.edge for o in outs):
        return pred
    return _with_spikes(pred, outs, "sample", f"outliers of the whole sample, {how}; the edge is the bulk's, "
                                              f"{len(spike_lams)} single-sample spikes split off")


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
                             tuple(notes + list(p.notes)), overlap2_below_edge=float(sum(o.overlap2 for o in outs)))


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
                             margins=margins,
                             overlap2_below_edge=float(sum(o.overlap2 for o in outs)))
