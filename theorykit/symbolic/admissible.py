"""Admissibility of a spectral preprocessing T(y, delta) on a link: the one check shared by the spectral theory
(:func:`theorykit.spectra.spectral_law`, ``theorykit spectral``) and the finite-d spectral initialisations
(``simulate``/``sweep``/``dmft --init spectral``), so that one T is accepted or refused alike by all of them
(docs/theory.md §6).

Refused, with a one-line :class:`~theorykit.errors.TheorykitError`: T not real and finite on the support of y; T with a
pole inside the support of y; T unbounded above on it (the top eigenvalue then diverges with n); sup T <= 0 on it
(M_n is negative semi-definite: no outlier).  The support of y is one deterministic set for every caller: a seeded
sample of (z, eps), a grid of |z| <= 10 along the axes and 16 seeded directions, and rays out to |z| = 1e6.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from .. import conventions as cv
from .._checks import check_number
from ..errors import TheorykitError
from .lambdify import lambdify_safe
from .ingredients import DELTA, Link, Preprocessing, link as make_link, \
    preprocessing as make_preprocessing

__all__ = ["check_preprocessing", "check_poles", "support"]


@lru_cache(maxsize=32)
def _denominator(T: Preprocessing):
    """(poly coefficient functions of delta, or None; numpy denominator (y, delta)) of T's denominator in y."""
    try:
        den = sp.denom(sp.together(T.expr))
    except Exception:  # SymPy cannot split it: no pole check beyond finiteness
        return None, None
    if not den.has(cv.Y):
        return None, None
    try:
        P = sp.Poly(den, cv.Y)
        coeffs = [sp.lambdify([DELTA], c, "numpy") for c in P.all_coeffs()]
    except Exception:  # not a polynomial in y: sign changes of the denominator only
        coeffs = None
    return coeffs, lambdify_safe([cv.Y, DELTA], den, "T_denominator")


def check_poles(T: Preprocessing, delta: float, ysorted: np.ndarray) -> None:
    """Refuse T with a pole inside the support of y (``ysorted``: sorted support points): a real root of T's
    denominator with support points within 1e-3 (1 + |root|) of it, or a sign change of the denominator between two
    support points that close (a gap of a discrete y is no support)."""
    coeffs, den = _denominator(T)
    if den is None:
        return
    ylo, yhi = ysorted[0], ysorted[-1]
    roots = []
    if coeffs is not None:
        c = np.array([float(f(delta)) for f in coeffs])
        if len(c) > 1 and np.any(c != 0):
            c = np.trim_zeros(c, "f")
            roots = [r.real for r in np.roots(c) if abs(r.imag) <= 1e-12 * (1 + abs(r))]
    for r in roots:
        if ylo < r < yhi:
            i = np.searchsorted(ysorted, r)
            near = min(abs(ysorted[max(i - 1, 0)] - r), abs(ysorted[min(i, len(ysorted) - 1)] - r))
            if near <= 1e-3 * (1 + abs(r)):  # y has mass around the root (not a gap of a discrete y)
                raise TheorykitError(f"preprocessing T(y) = {T.expr} has a pole at y = {r:.6g} inside the support "
                                     f"of y (delta = {delta:g}): T is unbounded there, the spectral theory needs a "
                                     "bounded T")
    with np.errstate(all="ignore"):
        dv = den(ysorted, delta)
    s = np.sign(dv)
    for i in np.nonzero(s[:-1] * s[1:] < 0)[0]:
        a, b = ysorted[i], ysorted[i + 1]
        if b - a <= 1e-3 * (1 + abs(a)):
            raise TheorykitError(f"preprocessing T(y) = {T.expr} has a pole between y = {a:.6g} and {b:.6g} inside "
                                 f"the support of y (delta = {delta:g}): the spectral theory needs a bounded T")


@lru_cache(maxsize=16)
def support(L: Link):
    """(y on the inner support set, sorted; y on rays out to radius 1e6; their radii) -- the module docstring's set."""
    rng = np.random.default_rng(0)
    k, noisy = L.k, L.noisy
    dims = k + (1 if noisy else 0)
    pts = rng.standard_normal((20000, dims))
    dirs = np.concatenate([np.eye(dims), -np.eye(dims), rng.standard_normal((16, dims))])
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    inner = np.concatenate([pts, (np.linspace(-10, 10, 2001)[:, None, None] * dirs[None]).reshape(-1, dims)])
    g = np.geomspace(1e-8, 1e6, 301)
    outer = (g[:, None, None] * dirs[None]).reshape(-1, dims)

    def resp(P):
        with np.errstate(all="ignore"):
            return np.asarray(L.numpy(*[P[:, i] for i in range(k)], P[:, k] if noisy else np.zeros(len(P))),
                              dtype=float)

    y = resp(inner)
    y = np.sort(y[np.isfinite(y)])
    y_ext = resp(outer)
    ok = np.isfinite(y_ext)
    return y, y_ext[ok], np.linalg.norm(outer, axis=1)[ok]


def sup_on_rays(Tp: Preprocessing, delta: float, y_ext, r_ext, radii) -> list:
    """sup of T(y, delta) over the ray points of radius <= R, for each R in radii (-inf where none is finite)."""
    with np.errstate(all="ignore"):
        Z_ext = Tp.numpy(y_ext, delta)
    ok = np.isfinite(Z_ext)
    Z_ext, r_ok = Z_ext[ok], np.asarray(r_ext)[ok]
    return [float(Z_ext[r_ok <= R].max()) if np.any(r_ok <= R) else -np.inf for R in radii]


def check_preprocessing(link, T, delta) -> float:
    """Refuse an inadmissible T (module docstring) with one line; return sup T over the support set (> 0)."""
    L = make_link(link)
    Tp = make_preprocessing(T)
    delta = check_number("delta", delta, lambda v: v > 0, "a positive finite number")
    y, y_ext, r_ext = support(L)
    check_poles(Tp, delta, np.unique(np.concatenate([y, y_ext])))
    Z = Tp(y, delta)  # finite on the support, else Preprocessing's own one-line error
    s4, s6 = sup_on_rays(Tp, delta, y_ext, r_ext, (1e4, 1e6))
    if s6 - s4 > 1e-3 * max(1.0, abs(s6)):
        raise TheorykitError(f"preprocessing T(y) = {Tp.expr} appears unbounded above on the support of y (sup over "
                             f"|z| <= 1e4: {s4:.6g}, <= 1e6: {s6:.6g}); the top eigenvalue then diverges with n: use a "
                             "bounded T")
    tau = max(float(np.max(Z)), s6)
    if tau <= 0:
        raise TheorykitError(f"spectral law: sup Z = {tau:.6g} <= 0, so no positive outlier can exist (M_n is negative "
                             "semi-definite up to O(1/sqrt(n))); use a T that takes positive values")
    return tau
