"""Classic spectral methods (docs/theory.md §6; Mondelli-Montanari 2017, Lu-Li 2017).

M_n = (1/n) sum_i T(y_i) x_i x_i^T,  x_i ~ N(0, I_d),  n = delta d.  With Z = T(Y), G the latent coordinate and
tau = ess sup Z, on lam > tau:

    psi_delta(lam) = lam (1/delta + E[Z/(lam - Z)]),        psi'(lam) = 1/delta - E[Z^2/(lam - Z)^2],
    phi(lam)       = lam E[Z V/(lam - Z)],   V = G^2,         phi'(lam) = -E[Z^2 V/(lam - Z)^2],

psi is convex, lam_bar = argmin psi on [tau, inf): either the root of psi' (the *interior* case) or tau itself when
psi'(tau+) >= 0 (the *boundary* case; there E[Z/(tau - Z)] is finite).  The bulk edge is psi(lam_bar).  An outlier
exists iff psi(lam_bar) < phi(lam_bar), i.e. iff  m = delta E[Z (V - 1)/(lam_bar - Z)] - 1 > 0; then lam* > lam_bar
is the unique root of psi = phi (psi - phi increases there), the top eigenvalue tends to psi(lam*) and the squared
overlap of the top eigenvector with the latent direction to psi'(lam*)/(psi'(lam*) - phi'(lam*)).

Design: the core works on a weighted discrete law (:class:`SpectralLaw`: weights w, values Z, spike weights V, and
tau, which may exceed max Z when the sup is only approached in a limit).  :func:`spectral_law` builds it from a link
and a preprocessing by the deterministic quadrature of :func:`theorykit.symbolic.links.quadrature_nodes`;
:func:`outlier` and :func:`bulk_edge` never look at where the law came from.

Reuse for the Hessian outlier (section 4, scalar case m = 1): H = (1/n) sum_i D_i x_i x_i^T has the spectrum of
-M_n with Z = -D, so pass ``SpectralLaw.from_arrays(w, -D, zeta**2)`` (or :func:`hessian_law`) and negate the
eigenvalue: the bottom Hessian outlier is -outlier(...).top_eigenvalue, the overlap is unchanged, and the
section-4 parameter is S = delta/lam (lambda_H(S) = -psi(delta/S), Phi(S) = -phi(delta/S); the left edge
lambda'(S) = 0 is psi'(lam) = 0).  The law of D must be bounded below (tau = -min D finite): truncate it first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

import numpy as np
from scipy import optimize

from .._checks import check_number
from ..errors import TheorykitError
from ..symbolic.admissible import check_preprocessing, sup_on_rays
from ..symbolic.ingredients import Link, link as make_link, preprocessing as make_preprocessing

__all__ = ["SpectralLaw", "SpectralPrediction", "Threshold", "spectral_law", "hessian_law", "bulk_edge", "outlier",
           "spectral_prediction", "spectral_threshold"]

_BOUNDARY_TOL = 1e-10  # psi'(tau+) >= -tol/delta counts as the boundary case (the switch itself is measure zero)


# ---------------------------------------------------------------------------------------------------- the law
@dataclass(frozen=True, eq=False)
class SpectralLaw:
    """A weighted discrete law of (Z, V): weights (N,) summing to 1, Z (N,), V (N,) >= 0 (the spike weight, G^2),
    and tau >= max Z, the essential sup of Z in the law this one discretises.  ``method`` says how it was built."""

    weights: np.ndarray
    Z: np.ndarray
    V: np.ndarray
    tau: float
    method: str
    notes: tuple = field(default_factory=tuple)

    @classmethod
    def from_arrays(cls, weights, Z, V, tau: Optional[float] = None, method: str = "discrete law (user arrays)",
                    notes=()) -> "SpectralLaw":
        """Validate and build a law; tau defaults to max Z (an empirical law)."""
        w, Z, V = (np.asarray(a, dtype=float).ravel() for a in (weights, Z, V))
        if not (len(w) == len(Z) == len(V)) or len(w) == 0:
            raise TheorykitError("spectral law: weights, Z and V must be non-empty arrays of the same length")
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(Z)) and np.all(np.isfinite(V))):
            raise TheorykitError("spectral law: weights, Z and V must be finite")
        if np.any(w < 0) or abs(w.sum() - 1) > 1e-8:
            raise TheorykitError(f"spectral law: weights must be >= 0 and sum to 1 (sum = {w.sum():.6g})")
        if np.any(V < 0):
            raise TheorykitError("spectral law: the spike weights V (= G^2) must be >= 0")
        keep = w > 0
        w, Z, V = w[keep], Z[keep], V[keep]
        tau = float(Z.max()) if tau is None else float(tau)
        if not math.isfinite(tau) or tau < Z.max():
            raise TheorykitError(f"spectral law: tau = {tau} must be finite and >= max Z = {Z.max():.6g}")
        if tau <= 0:
            raise TheorykitError(f"spectral law: sup Z = {tau:.6g} <= 0, so no positive outlier can exist "
                                 "(M_n is negative semi-definite up to O(1/sqrt(n))); use a T that takes positive "
                                 "values")
        return cls(w, Z, V, tau, method, tuple(notes))

    def __post_init__(self):
        w, Z, V = self.weights, self.Z, self.V
        cache = {"zmax": float(Z.max()), "Z": w * Z, "Z2": w * Z * Z, "ZV": w * Z * V, "Z2V": w * Z * Z * V,
                 "ZV1": w * Z * (V - 1.0)}
        object.__setattr__(self, "_c", cache)

    # moments E[f(Z, V)/(lam - Z)^p] = sum_i (w_i f_i) r_i^p, r = 1/(lam - Z); at lam = tau a weight sitting at
    # Z = tau makes them infinite (sign of the numerator), which callers read as "psi' = -inf" etc.
    def _E(self, key: str, lam: float, p: int) -> float:
        wnum = self._c[key]
        if lam > self._c["zmax"]:
            r = 1.0 / (lam - self.Z)
            return float((wnum * (r * r if p == 2 else r)).sum())
        gap = lam - self.Z
        at_pole = gap <= 0
        live = at_pole & (wnum != 0)
        if np.any(live):
            s = np.sign(wnum[live])
            return math.inf if np.all(s > 0) else (-math.inf if np.all(s < 0) else math.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(at_pole, 0.0, 1.0 / np.where(at_pole, 1.0, gap))
        return float((wnum * (r * r if p == 2 else r)).sum())

    def psi(self, lam: float, delta: float) -> float:
        return lam * (1.0 / delta + self._E("Z", lam, 1))

    def dpsi(self, lam: float, delta: float) -> float:
        return 1.0 / delta - self._E("Z2", lam, 2)

    def phi(self, lam: float) -> float:
        return lam * self._E("ZV", lam, 1)

    def dphi(self, lam: float) -> float:
        return -self._E("Z2V", lam, 2)

    def margin(self, lam: float, delta: float) -> float:
        """delta (phi - psi)/lam = delta E[Z (V - 1)/(lam - Z)] - 1: positive iff phi > psi at lam."""
        return delta * self._E("ZV1", lam, 1) - 1.0


def hessian_law(weights, D, zeta2, method: str = "discrete law of (D, zeta^2)", notes=()) -> SpectralLaw:
    """The law for the scalar Hessian outlier of section 4: Z = -D, V = zeta^2 (bottom of H = -top of this law)."""
    D = np.asarray(D, dtype=float)
    return SpectralLaw.from_arrays(weights, -D, zeta2, None, method + " (Z = -D: Hessian bottom = -top)", notes)


# ------------------------------------------------------------------------------------------------- the core
def bulk_edge(law: SpectralLaw, delta: float):
    """(lam_bar, edge_case): the argmin of psi_delta on [tau, inf) and "interior" or "boundary".  The bulk edge
    eigenvalue itself is ``law.psi(lam_bar, delta)`` (reported as ``outlier(law, delta).bulk_edge``)."""
    delta = check_delta(delta)
    tau = law.tau
    d_tau = law.dpsi(tau, delta)
    if not math.isnan(d_tau) and d_tau >= -_BOUNDARY_TOL / delta:
        return tau, "boundary"
    scale = max(abs(tau), float(np.sqrt(np.dot(law.weights, law.Z ** 2))), 1e-300)
    step = scale
    for _ in range(200):  # psi' -> 1/delta > 0 as lam -> inf
        if law.dpsi(tau + step, delta) > 0:
            break
        step *= 2
    else:
        raise TheorykitError("spectral: psi_delta' stays negative up to lam = 1e60 * scale (law too heavy-tailed)")
    hi = tau + step
    if math.isfinite(d_tau):
        lo = tau
    else:  # weight at Z = tau (an atom, or a node of the discretisation): psi' -> -inf at tau+; walk down to it
        lo = tau + step
        while law.dpsi(lo, delta) > 0:
            lo = tau + (lo - tau) / 16
            if lo - tau < 1e-15 * scale:
                raise TheorykitError("spectral: could not bracket the minimum of psi_delta near tau")
    lam = optimize.brentq(law.dpsi, lo, hi, args=(delta,), xtol=1e-15 * scale, rtol=4 * np.finfo(float).eps,
                          maxiter=500)
    return float(lam), "interior"


@dataclass(frozen=True)
class SpectralPrediction:
    """Asymptotic top of the spectrum of M_n = (1/n) sum T(y_i) x_i x_i^T (or of any :class:`SpectralLaw`).

    top_eigenvalue = psi(max(lam_star, lam_bar)); overlap2 = squared overlap of the top eigenvector with the latent
    direction (0 without an outlier); bulk_edge = psi(lam_bar); case = "interior" / "boundary" (which kind of
    minimum lam_bar is, when an outlier exists) or "no outlier"; edge_case is the kind of lam_bar in every case;
    margin = delta E[Z (V - 1)/(lam_bar - Z)] - 1 (> 0 iff an outlier exists)."""

    top_eigenvalue: float
    overlap2: float
    bulk_edge: float
    lam_bar: float
    lam_star: Optional[float]
    case: str
    edge_case: str
    tau: float
    delta: float
    margin: float
    method: str
    notes: tuple = field(default_factory=tuple)

    @property
    def has_outlier(self) -> bool:
        return self.lam_star is not None

    def as_dict(self) -> dict:
        return {"top_eigenvalue": self.top_eigenvalue, "overlap2": self.overlap2, "bulk_edge": self.bulk_edge,
                "lam_bar": self.lam_bar, "lam_star": self.lam_star, "case": self.case, "edge_case": self.edge_case,
                "tau": self.tau, "delta": self.delta, "margin": self.margin, "method": self.method,
                "notes": list(self.notes)}


def outlier(law: SpectralLaw, delta: float) -> SpectralPrediction:
    """The generic core: bulk edge, outlier and overlap for a :class:`SpectralLaw` at sample ratio delta."""
    delta = check_delta(delta)
    lam_bar, edge_case = bulk_edge(law, delta)
    edge = law.psi(lam_bar, delta)
    m = law.margin(lam_bar, delta)
    if math.isnan(m) or math.isnan(edge):
        raise TheorykitError("spectral: psi or phi is undefined at the bulk edge (law with weight at Z = tau "
                             "of both signs in Z (V - 1))")
    notes = list(law.notes)
    if not math.isfinite(edge):
        raise TheorykitError("spectral: psi_delta is infinite at its minimum (law degenerate at tau)")
    if m <= 0:
        return SpectralPrediction(edge, 0.0, edge, lam_bar, None, "no outlier", edge_case, law.tau, delta, m,
                                  law.method, tuple(notes))
    # outlier: root of the margin (same root as psi - phi, which increases on (lam_bar, inf)); margin(inf) = -1
    scale = max(lam_bar, abs(law.tau), 1e-300)
    step = negative_step(lambda lam: law.margin(lam, delta), lam_bar, scale,
                         "spectral: could not bracket the outlier (phi > psi up to lam = 1e60 * scale)")
    lo = lam_bar
    if not math.isfinite(m):  # phi infinite at the edge: step in from the pole until the margin is finite
        lo = lam_bar + step
        while law.margin(lo, delta) < 0:
            lo = lam_bar + (lo - lam_bar) / 16
            if lo - lam_bar < 1e-15 * scale:
                raise TheorykitError("spectral: could not bracket the outlier near the edge")
    lam_star = float(optimize.brentq(law.margin, lo, lam_bar + step, args=(delta,), xtol=1e-15 * scale,
                                     rtol=4 * np.finfo(float).eps, maxiter=500))
    dps, dph = law.dpsi(lam_star, delta), law.dphi(lam_star)
    ov = dps / (dps - dph)
    top = law.psi(lam_star, delta)
    if not (math.isfinite(top) and math.isfinite(ov)):
        raise TheorykitError("spectral: the outlier computation left the finite numbers")
    if lam_star - lam_bar < 1e-9 * scale:
        notes.append("outlier within 1e-9 of the bulk edge (at the threshold)")
    return SpectralPrediction(top, float(ov), edge, lam_bar, lam_star, edge_case, edge_case, law.tau, delta, m,
                              law.method, tuple(notes))


def negative_step(margin, lam_bar: float, scale: float, failure: str) -> float:
    """The first step = scale * 2^j (j = 0 .. 199) with margin(lam_bar + step) < 0: the right end of the bracket
    (lam_bar, lam_bar + step] of an outlier, whose margin decreases to -1 at infinity.  TheorykitError(failure)
    when there is none."""
    step = scale
    for _ in range(200):
        if margin(lam_bar + step) < 0:
            return step
        step *= 2
    raise TheorykitError(failure)


# --------------------------------------------------------------------------------- laws from (link, T, delta)
def check_delta(delta) -> float:
    """delta as a positive finite float, or a one-line TheorykitError."""
    return check_number("delta", delta, lambda v: v > 0, "a positive finite number")


def _single_index(spec) -> Link:
    L = make_link(spec)
    if L.k != 1:
        raise TheorykitError(f"spectral: link {L.name!r} has k = {L.k}; the spectral theory here is single-index "
                             "(k = 1) only")
    return L


@lru_cache(maxsize=8)
def _link_grid(L: Link, level: int):
    """(weights, y, z) at the quadrature nodes, and (y_ext, r_ext) on an extended grid (|z|, |eps| up to 1e6)."""
    from ..symbolic.links import quadrature_nodes

    pts, w, desc = quadrature_nodes(L, level)
    z = pts[:, 0]
    eps = pts[:, 1] if L.noisy else None
    y = L.response(z, eps)
    g = np.geomspace(1e-8, 1e6, 301 if not L.noisy else 141)
    axis = np.concatenate([-g[::-1], [0.0], g, np.linspace(-10, 10, 2001 if not L.noisy else 201)])
    if L.noisy:
        ze, ee = (a.ravel() for a in np.meshgrid(axis, axis, indexing="ij"))
        r_ext = np.maximum(np.abs(ze), np.abs(ee))
    else:
        ze, ee = axis, np.zeros_like(axis)
        r_ext = np.abs(ze)
    y_ext = L.numpy(ze, ee)
    ok = np.isfinite(y_ext)
    return w, y, z, desc, y_ext[ok], r_ext[ok]


def spectral_law(link, T, delta, level: int = 0) -> SpectralLaw:
    """The law of (Z, G^2) = (T(Y, delta), z^2) for a single-index link, by deterministic quadrature.

    tau = sup T over the support of y: max over the quadrature nodes (|z| <= 10) and an extended grid out to
    |z|, |eps| = 1e6 (so a sup approached only as y -> inf is caught to the rate at which T approaches it), refined
    by a local maximisation around the best point (single-index noiseless links).  Errors (one line): T with a pole
    inside the support of y, T unbounded above (still rising at |z| = 1e6), sup T <= 0, T not finite."""
    L = _single_index(link)
    Tp = make_preprocessing(T)
    delta = check_delta(delta)
    w, y, z, desc, y_ext, r_ext = _link_grid(L, level)
    # admissibility (pole in the support, unbounded above, sup T <= 0): the one check the finite-d spectral
    # initialisations make too, so that they accept or refuse the same T
    check_preprocessing(L, Tp, delta)
    Z = Tp(y, delta)
    wl, Zl, Vl = w, Z, z ** 2
    if not L.noisy and len(z) % 2 == 0 and np.array_equal(z, -z[::-1]) and np.array_equal(y, y[::-1]):
        h = len(z) // 2  # even link on mirror-symmetric nodes: fold z -> |z| (halves the cost, exact)
        wl, Zl, Vl = 2 * w[h:], Z[h:], z[h:] ** 2
    s6, = sup_on_rays(Tp, delta, y_ext, r_ext, (1e6,))
    tau = max(float(Z.max()), s6)
    notes = []
    if not L.noisy:  # refine a sup attained at a finite point
        def f(t):
            return -float(Tp.numpy(L.numpy(np.array([t]), np.zeros(1)), delta)[0])

        i = int(np.argmax(Z))
        if Z[i] >= s6 - 1e-12 * max(1.0, abs(s6)):
            h = 2 * max(abs(z[min(i + 1, len(z) - 1)] - z[i]), abs(z[i] - z[max(i - 1, 0)]), 1e-12)
            try:
                res = optimize.minimize_scalar(f, bounds=(z[i] - h, z[i] + h), method="bounded",
                                               options={"xatol": 1e-14})
                if math.isfinite(res.fun) and -res.fun > tau:
                    tau = -res.fun
            except Exception:  # keep the grid value
                pass
    method = (f"quadrature of (z{', eps' if L.noisy else ''}): {desc}; tau = sup T over the nodes and an extended "
              f"grid to |z| = 1e6")
    return SpectralLaw.from_arrays(wl, Zl, Vl, tau, method, notes)


def spectral_prediction(link, T, delta, level: int = 0) -> SpectralPrediction:
    """Top eigenvalue, overlap^2, bulk edge and case for M_n with preprocessing T(y, delta), n/d -> delta."""
    return outlier(spectral_law(link, T, delta, level), delta)


# -------------------------------------------------------------------------------------------------- threshold
@dataclass(frozen=True)
class Threshold:
    """delta_u(T): the smallest delta at which an outlier exists.

    bracket: the final (a, b) with margin(a) <= 0 < margin(b) (or a inadmissible when case_detail says the
    threshold is the edge of T's admissible range); error: root tolerance plus the change of the root when the
    quadrature is halved; case: "interior"/"boundary" kind of lam_bar at delta_u."""

    delta_u: float
    bracket: tuple
    margins: tuple
    case: str
    domain_edge: bool
    error: float
    xtol: float
    method: str
    notes: tuple = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return {"delta_u": self.delta_u, "bracket": list(self.bracket), "margins": list(self.margins),
                "case": self.case, "domain_edge": self.domain_edge, "error": self.error, "xtol": self.xtol,
                "method": self.method, "notes": list(self.notes)}


def _margin_at(L, T, delta, level):
    """(margin, edge_case) or None when T is not admissible at this delta."""
    try:
        law = spectral_law(L, T, delta, level)
        lam_bar, edge_case = bulk_edge(law, delta)
        m = law.margin(lam_bar, delta)
    except TheorykitError:
        return None
    if math.isnan(m):
        return None
    return float(np.clip(m, -1e300, 1e300)), edge_case


def spectral_threshold(link, T, delta_range=(1e-3, 1e3), points: int = 31, xtol: float = 1e-10,
                       level: int = 0, scan_level: int = 2) -> Threshold:
    """delta_u(T) by a log-spaced scan of delta_range (quadrature ``scan_level``) for the first delta with an
    outlier, then scipy.optimize.brentq on a sign change of the margin verified at quadrature ``level``.  If T is
    inadmissible (pole, unbounded) just below, the edge of its admissible range is found by bisection and is
    delta_u when the margin there is already >= 0 (e.g. the optimal T for phase retrieval, with a pole for
    delta < 1/2)."""
    L = _single_index(link)
    Tp = make_preprocessing(T)
    lo, hi = (float(v) for v in delta_range)
    if not (0 < lo < hi and math.isfinite(hi)):
        raise TheorykitError(f"delta_range must satisfy 0 < lo < hi (got {delta_range})")
    if L.noisy:  # quadrature_nodes in 2-D breaks at level >= 2 (1200/4 nodes is not a multiple of the GL order 8)
        scan_level = min(scan_level, 1)
        level = min(level, 0)
    grid = np.geomspace(lo, hi, max(int(points), 3))
    scan = [_margin_at(L, Tp, d, scan_level) for d in grid]
    first = next((i for i, s in enumerate(scan) if s is not None and s[0] > 0), None)
    if first is None:
        raise TheorykitError(f"spectral threshold: no outlier for delta in [{lo:g}, {hi:g}] (preprocessing {Tp.expr})")
    if first == 0:
        raise TheorykitError(f"spectral threshold: an outlier already exists at delta = {lo:g}: delta_u < {lo:g} "
                             "(lower the range)")
    # verify at the fine level, moving right if the coarse scan was misleading
    def f(d):
        return _margin_at(L, Tp, d, level)

    a, b = grid[first - 1], grid[first]
    fb = f(b)
    j = first
    while fb is None or fb[0] <= 0:
        j += 1
        if j >= len(grid):
            raise TheorykitError("spectral threshold: the coarse scan's outlier was not confirmed by the fine "
                                 "quadrature")
        a, b = b, grid[j]
        fb = f(b)
    fa = f(a)
    notes = []
    domain_edge = False
    if fa is not None and fa[0] > 0:  # fine quadrature already has an outlier at a: step left
        k = j - 1
        while k > 0 and fa is not None and fa[0] > 0:
            k -= 1
            a, b, fb = grid[k], a, fa
            fa = f(a)
        if fa is not None and fa[0] > 0:
            raise TheorykitError(f"spectral threshold: an outlier already exists at delta = {lo:g}")
    if fa is None:  # inadmissible at a: bisect for the edge of the admissible range
        bad, good, fg = a, b, fb
        for _ in range(200):
            if good - bad <= xtol * max(1.0, good):
                break
            mid = 0.5 * (bad + good)
            fm = f(mid)
            if fm is None:
                bad = mid
            else:
                good, fg = mid, fm
                if fm[0] <= 0:
                    break
        if fg[0] > 0:
            domain_edge = True
            notes.append(f"T is not admissible (pole / unbounded) just below delta = {good:.12g} and has an outlier "
                         f"just above: the threshold is the edge of T's admissible range (margin there "
                         f"{fg[0]:.3g})")
            case = fg[1]
            delta_u, a_fin, b_fin, ma, mb = good, bad, good, math.nan, fg[0]
        else:
            a, fa = good, fg
    if not domain_edge:
        a_fin, b_fin, ma, mb = a, b, fa[0], fb[0]
        if not (ma <= 0 < mb):
            raise TheorykitError("spectral threshold: no verified sign change of the margin")
        if ma == 0:
            delta_u = a
        else:
            delta_u = optimize.brentq(lambda d: f(d)[0] if f(d) is not None else math.nan, a, b, xtol=xtol,
                                      rtol=4 * np.finfo(float).eps, maxiter=200)
        case = f(delta_u)[1] if f(delta_u) is not None else "unknown"
    # error: xtol + shift of the root when the quadrature is halved (margin at level+1 / slope at level)
    err = xtol
    if not domain_edge:
        h = max(1e-6 * delta_u, 10 * xtol)
        fp, fm_ = f(delta_u + h), f(delta_u - h)
        c = _margin_at(L, Tp, delta_u, level + 1)
        if fp is not None and fm_ is not None and c is not None:
            slope = (fp[0] - fm_[0]) / (2 * h)
            if slope > 0:
                err += abs(c[0]) / slope
    else:
        c = _margin_at(L, Tp, delta_u, level + 1)
        if c is None or c[0] <= 0:
            notes.append("the halved quadrature disagrees on the outlier at the domain edge")
            err = math.inf
    method = (f"log scan of delta in [{lo:g}, {hi:g}] ({len(grid)} points, quadrature level {scan_level}), "
              + ("bisection on admissibility" if domain_edge else "scipy.optimize.brentq on the margin "
                 "delta E[Z (G^2 - 1)/(lam_bar - Z)] - 1")
              + f" (xtol {xtol:g}) with quadrature level {level}; error = xtol + root shift at level {level + 1}")
    return Threshold(float(delta_u), (float(a_fin), float(b_fin)), (float(ma), float(mb)), case, domain_edge,
                     float(err), xtol, method, tuple(notes))


# ---------------------------------------------------------------------------------------- finite-d helpers


# -------------------------------------------------------------------------------------------------- spectral start
#: default preprocessing of a spectral start: bounded for y >= 0 at every delta, optimal for phase retrieval (§6)
DEFAULT_START_T = "(y-1)/(y+sqrt(2*delta)-1)"


def spectral_start(problem, T: str = DEFAULT_START_T, level: int = 0):
    """The Problem started from the classic spectral method instead of a random init (docs/theory.md §6, §3).

    The top eigenvector of M_n = (1/n) sum T(y_i) x_i x_i^T has squared overlap rho^2 = ``spectral_prediction(link, T,
    delta).overlap2`` with the latent direction (0 below delta_u).  As an initial law for the DMFT: neuron 1 starts at
    M_0 = rho e (e the latent direction; k = 1) with the remainder of its unit norm, 1 - rho^2, as an independent
    Gaussian part; the other neurons (top eigenvectors 2..m, no outlier) start as at random, Sigma_0 = diag(1 - rho^2,
    1, ..., 1).  The remainder is in fact correlated with the data (the eigenvector is built from X), and this
    approximation is NOT accurate beyond t = 0: tables/spectral_start.md (``python scripts/spectral_start_check.py``)
    measures it against the simulator's spectral init.  The exact treatment is ``dmft(problem, init="spectral")``,
    which runs the power iteration that builds the eigenvector inside the DMFT (docs/theory.md §3.3).  Returns
    (problem with M0 and Sigma0 set, the SpectralPrediction used)."""
    from ..problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"spectral_start takes a theorykit.Problem, got {type(problem).__name__}")
    L = _single_index(problem.link_obj)
    pred = spectral_prediction(L, T, problem.delta, level)
    rho2 = float(pred.overlap2)
    m = problem.m
    M0 = np.zeros((1, m))
    M0[0, 0] = math.sqrt(max(rho2, 0.0))
    Sigma0 = np.eye(m)
    Sigma0[0, 0] = 1.0 - rho2
    return problem.replace(M0=M0, Sigma0=Sigma0), pred
