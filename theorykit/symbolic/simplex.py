"""delta_alg of a link of two Gaussian variables (k = 2 noiseless, or k = 1 with eps) by the exact law of its
piecewise-linear interpolant (docs/theory.md §2, "Links of two variables by triangles").

delta_alg = 1 / rho, rho the largest eigenvalue of M -> E_y[G(y) M G(y)] on symmetric k x k matrices,
G(y) = E[zz^T | y] - I.  With u = F(y) the quantile level, E_y[G (x) G] = int_0^1 G(y(u)) (x) G(y(u)) du: no bins.

* Mesh: the square [-R, R]^2 (the two Gaussian variables, eps second) in N cells per axis, each cell cut into two
  triangles (Kuhn's triangulation); h is interpolated linearly on each triangle (h-hat), the Gaussian density and
  z_i z_j are taken at the triangle's centroid (triangles of mass below 1e-15 are dropped, the rest renormalised).
* The law of h-hat is then known in closed form: a linear function of the uniform law on a triangle with sorted
  vertex values a <= b <= c has the tent density 2 (y - a) / ((b - a)(c - a)) on [a, b] and
  2 (c - y) / ((c - a)(c - b)) on [b, c] (the divided difference 2 [a, b, c] (t - y)_+).  So the CDF F-hat(y), the
  density p-hat(y) and M-hat_ij(y) = E[z_i z_j delta(h-hat - y)] are exact at any y, and G(y) = M-hat / p-hat - I.
* Nodes y_1 < ... < y_L at graded levels u (dense toward 0 and 1), and E_y[G (x) G] by the trapezoidal rule in the
  exact levels F-hat(y_l), the two end pieces by their end values.  A simplex whose vertex values agree to 1e-12
  (relative) is an atom of h-hat (a flat region of h: relu(z1) z2 at 0); atoms are grouped by value, each adds
  P(atom) G(atom) (x) G(atom), and the continuous part is integrated in its own levels.

Computed twice, with N and with N / 2 cells per axis (and half the levels in u); the error reported is twice the
change (the observed convergence lies between first and second order in 1 / N; tests/test_links_simplex.py checks
the coverage on links with exact values).  A link whose values at the mesh's nodes are not finite, or that takes
finitely many values (jumps: the interpolant would smear them), gives None and is left to the caller's other tiers.
Three variables (k = 3, or k = 2 with eps) are done by slices of this construction (:mod:`theorykit.symbolic.slices`):
tetrahedra (a quadratic spline law) would need far more cells for the same accuracy, and a tetrahedron of wide
h-range meets most levels.
"""
from __future__ import annotations

import itertools
import math
from typing import Optional

import numpy as np

from .sphere import MAX_LEVELS  # distinct values of y on a sample up to which y is taken as piecewise constant

#: (cells per axis, levels in u) of the fine rule; the coarse rule halves both
RULE = (1200, 2400)
#: half-width of the mesh's square (the Gaussian mass outside is below 1e-14)
REACH = 8.0
#: a simplex of relative Gaussian mass below this is dropped
MIN_MASS = 1e-15
#: vertex values within this (relative to 1 + their size) are one value (atoms; ties are separated by it)
TIE = 1e-12


def _kuhn(n: int) -> list:
    """The n! simplices of the unit cube by Kuhn's rule: vertex offsets (n + 1, n) for each permutation."""
    out = []
    for perm in itertools.permutations(range(n)):
        v = np.zeros((n + 1, n), dtype=int)
        for i, ax in enumerate(perm):
            v[i + 1] = v[i]
            v[i + 1, ax] = 1
        out.append(v)
    return out


def _simplices(response, n: int, k: int, cells: int, reach: float):
    """(sorted vertex values (S, n + 1), masses (S,), features m z_i z_j (S, k(k+1)/2)) over the mesh, or None when
    h is not finite at a node."""
    g = np.linspace(-reach, reach, cells + 1)
    grids = np.meshgrid(*([g] * n), indexing="ij")
    pts = np.stack([a.ravel() for a in grids], axis=1)
    with np.errstate(all="ignore"):
        H = np.asarray(response(pts), dtype=float).reshape([cells + 1] * n)
    if H.shape != (cells + 1,) * n or not np.all(np.isfinite(H)):
        return None
    h = g[1] - g[0]
    vol = h ** n / math.factorial(n)
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    # the centroid's coordinates and the Gaussian density there factor over the axes
    phi_max = (2 * np.pi) ** (-n / 2)
    Vs: list = []
    M: list = []
    Fs: list = []
    for off in _kuhn(n):
        axes = [g[:cells] + h * off[:, ax].mean() for ax in range(n)]
        dens = np.ones([1] * n)
        for ax, c in enumerate(axes):
            dens = dens * np.exp(-0.5 * c * c).reshape([-1 if a == ax else 1 for a in range(n)])
        m = (vol * phi_max * dens).ravel()
        keep = np.nonzero(m > MIN_MASS * vol * phi_max)[0]
        idx = np.unravel_index(keep, (cells,) * n)
        c = [axes[ax][idx[ax]] for ax in range(n)]
        Vs.append(np.stack([H[tuple(ix + o for ix, o in zip(idx, row))] for row in off], axis=1))
        M.append(m[keep])
        Fs.append(np.stack([c[i] * c[j] for i, j in pairs], axis=1))
    V, m, Fe = np.sort(np.concatenate(Vs), axis=1), np.concatenate(M), np.concatenate(Fs)
    m = m / m.sum()
    return V, m, Fe * m[:, None]


def _tent(V: np.ndarray, y: np.ndarray):
    """(P(h-hat <= y), density of h-hat at y) for the uniform law on each triangle (rows of V: vertex values sorted,
    strictly increasing) at the matching y (same length, a < y < c): the tent law."""
    a, b, c = V.T
    low = y <= b
    num = np.where(low, y - a, c - y)
    t = num / np.where(low, b - a, c - b)
    ca = c - a
    q = num * t / ca
    return np.where(low, q, 1 - q), 2 * t / ca


def _law(V, m, Fe, y, chunk: int = 400_000):
    """At sorted y: (F-hat(y), p-hat(y), E[f delta(h-hat - y)] for each feature column), over the simplices."""
    L, P = len(y), Fe.shape[1]
    order = np.argsort(V[:, -1])
    below = np.concatenate([[0.0], np.cumsum(m[order])])
    cdf = below[np.searchsorted(V[order, -1], y, side="left")]  # simplices wholly below y
    dens = np.zeros(L)
    feat = np.zeros((L, P))
    for s in range(0, len(m), chunk):
        Vs = V[s:s + chunk]
        i0 = np.searchsorted(y, Vs[:, 0], side="right")
        i1 = np.searchsorted(y, Vs[:, -1], side="left")
        cnt = np.maximum(i1 - i0, 0)
        tot = int(cnt.sum())
        if tot == 0:
            continue
        sid = np.repeat(np.arange(len(Vs)), cnt)
        j = np.repeat(i0, cnt) + (np.arange(tot) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        below, dn = _tent(Vs[sid], y[j])
        cdf += np.bincount(j, weights=m[s:s + chunk][sid] * below, minlength=L)
        dens += np.bincount(j, weights=m[s:s + chunk][sid] * dn, minlength=L)
        for q in range(P):
            feat[:, q] += np.bincount(j, weights=Fe[s:s + chunk, q][sid] * dn, minlength=L)
    return cdf, dens, feat


def _levels(L: int) -> np.ndarray:
    """L quantile levels in (0, 1), graded toward both ends (tanh-sinh spacing)."""
    s = np.linspace(-1, 1, L + 2)[1:-1]
    u = 0.5 * (1 + np.tanh(2.5 * np.arctanh(s)))
    return u[(u > 1e-13) & (u < 1 - 1e-13)]


def second_moments_minus_identity(feat: np.ndarray, P: np.ndarray, k: int) -> np.ndarray:
    """G = E[zz^T | .] - I (N, k, k) from the feature sums (upper triangle, row by row) and the masses."""
    G = np.zeros((len(P), k, k))
    col = 0
    for i in range(k):
        for j in range(i, k):
            G[:, i, j] = G[:, j, i] = feat[:, col] / P
            col += 1
    return G - np.eye(k)


def _operator(response, n: int, k: int, cells: int, levels: int, reach: float) -> Optional[tuple]:
    """(E_y[G (x) G] as a k^2 x k^2 array, the mass in atoms) on one mesh, or None (h not finite at a node)."""
    got = _simplices(response, n, k, cells, reach)
    if got is None:
        return None
    V, m, Fe = got
    scale = 1.0 + np.abs(V).max(axis=1)
    flat = (V[:, -1] - V[:, 0]) <= TIE * scale
    op = np.zeros((k * k, k * k))
    atom_mass = float(m[flat].sum())
    if np.any(flat):  # atoms, grouped by value
        key = np.round(V[flat, 0] / (TIE * 1e3 * scale[flat])).astype(np.int64)
        _, inv = np.unique(key, return_inverse=True)
        Pa = np.bincount(inv, weights=m[flat])
        Fa = np.stack([np.bincount(inv, weights=Fe[flat, q]) for q in range(Fe.shape[1])], axis=1)
        Ga = second_moments_minus_identity(Fa, Pa, k)
        op += np.einsum("g,gij,gkl->ikjl", Pa, Ga, Ga).reshape(k * k, k * k)
        V, m, Fe, scale = V[~flat], m[~flat], Fe[~flat], scale[~flat]
    if len(m) == 0:
        return op, atom_mass
    # strictly increasing vertex values (ties separated by TIE: a change of h-hat far below the rule's error)
    V = np.maximum.accumulate(V + TIE * scale[:, None] * np.arange(V.shape[1]), axis=1)
    cont = float(m.sum())
    cen = V.mean(axis=1)
    o = np.argsort(cen)
    q = np.cumsum(m[o]) / cont
    y = np.unique(np.interp(_levels(levels), q, cen[o]))
    cdf, dens, feat = _law(V, m, Fe, y)
    ok = dens > 0
    y, u, dens, feat = y[ok], cdf[ok], dens[ok], feat[ok]
    G = second_moments_minus_identity(feat, dens, k)
    gg = np.einsum("lij,lkm->likjm", G, G).reshape(len(y), k * k, k * k)
    du = np.diff(u)
    op += np.einsum("l,lab->ab", du, (gg[1:] + gg[:-1]) / 2) + u[0] * gg[0] + (cont - u[-1]) * gg[-1]
    return op, atom_mass


def simplex_operator(response, n: int, k: int, rule: Optional[tuple] = None) -> Optional[tuple]:
    """(coarse operator, fine operator, description) of E_y[G (x) G] (k^2 x k^2) for y = response(points), points
    (N, n) with the k latent coordinates first; None when the rule does not apply (n not 2, h not finite at a node,
    or finitely many values of y).  rule: (cells per axis, levels) of the fine rule (default :data:`RULE`)."""
    if n != 2:
        return None
    rng = np.random.default_rng(11)
    with np.errstate(all="ignore"):
        sample = np.asarray(response(rng.standard_normal((4096, n))), dtype=float)
    if not np.all(np.isfinite(sample)) or len(np.unique(np.round(sample, 12))) <= MAX_LEVELS:
        return None
    cells, levels = rule or RULE
    reach = REACH
    fine = _operator(response, n, k, cells, levels, reach)
    coarse = _operator(response, n, k, cells // 2, levels // 2, reach)
    if fine is None or coarse is None:
        return None
    how = (f"deterministic: exact law of the piecewise-linear interpolant of y on {cells} and {cells // 2} cells per "
           f"axis of [-{reach:g}, {reach:g}]^2 (2 triangles per cell), E_y[G (x) G] in the "
           f"quantile level by the trapezoidal rule ({levels} and {levels // 2} levels)"
           + (f"; atoms of y (flat regions) hold {fine[1]:.3g} of the mass" if fine[1] > 0 else "")
           + "; error: twice the change between the two")
    return coarse[0], fine[0], how
