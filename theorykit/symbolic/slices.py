"""delta_alg of a link of three Gaussian variables (k = 3 noiseless, or k = 2 with eps) by slices: Gauss-Legendre
in the first variable, graded toward the slices where y is constant, and in each slice the exact law of y's
piecewise-linear interpolant on a triangulated mesh in the other two (docs/theory.md §2, "Links of three variables by
slices").

delta_alg = 1 / rho, rho the largest eigenvalue of M -> E_y[G(y) M G(y)] on symmetric k x k matrices,
G(y) = E[zz^T | y] - I.

* Bins in y: E_y[G (x) G] is approached by sum_b P_b G_b (x) G_b over B quantile bins of y,
  G_b = E[zz^T | y in b] - I.  Its bias is -sum_b P_b Var(G | b): of order 1/B^2 where G is smooth in the level,
  1/B next to a singularity of G; the rule takes B, B/2 and B/4 bins (nested: every second and fourth edge) and
  extrapolates both orders, (8 op_B - 6 op_B/2 + op_B/4) / 3.  The edges: the weighted quantiles of the triangles'
  centroid values on a mesh with a quarter of the cells.
* The bins' contents P_b and E[z_i z_j 1{y in b}] are differences of the cumulative sums
  F_f(y_e) = E[f(z) 1{h(z) <= y_e}] at the edges -- integrals of indicators, not conditional densities, so they stay
  bounded and continuous in z_1 where a slice's law of y collapses (z1 z2 z3 near z1 = 0).
* In each slice z_1 = a, F_f is the exact CDF of the piecewise-linear interpolant of h(a, ., .) on [-R, R]^2 in N
  cells per axis (two triangles per cell, Kuhn's rule; the tent law of :mod:`theorykit.symbolic.simplex`), the
  Gaussian density and the features at each triangle's centroid: one compiled pass per slice.
* In z_1: Gauss-Legendre panels times the normal density, cut geometrically toward the slices where h is constant
  (:func:`degenerate_slices`), where the slices' CDFs change on the scale of the edges next to the collapse.
* Atoms (values y takes on more than ATOM_FRACTION of a seeded sample; a flat region of h, relu(z1) z2 z3 at 0): the
  flat triangles at such a value are counted apart, each atom adding P(atom) G(atom) (x) G(atom).

The error reported (by :func:`theorykit.symbolic.links.delta_alg_slices`) is twice the sum of the changes in rho with
half the nodes per panel, half the cells and half the bins.  A link whose values are not finite at a node or that
takes finitely many values gives None and is left to the caller's other tiers; links with jumps are declined there.
"""
from __future__ import annotations

import math
from typing import Optional

import numba
import numpy as np

from .simplex import REACH, TIE, second_moments_minus_identity
from .sphere import MAX_LEVELS

#: (Gauss-Legendre nodes per panel in z_1, cells per axis of each slice, bins in y) of the fine rule; the error comes
#: from three rules that each halve one of them
RULE = (6, 160, 1000)
#: z_1's rule: panels of width OUTER_PANEL on [-OUTER_REACH, OUTER_REACH] (the normal mass outside is 1e-17), cut next
#: to a degenerate slice at distances OUTER_TINY * OUTER_GRADING^j
OUTER_REACH, OUTER_PANEL, OUTER_TINY, OUTER_GRADING = 8.5, 0.5, 1e-4, 8.0
#: degenerate slices farther out than this are not graded toward (the normal density there is below 1e-8)
OUTER_GRADED_REACH = 6.0
#: Gauss-Hermite nodes per axis of the slices' spread (:func:`degenerate_slices`), and the relative spread below
#: which a slice is constant
SPREAD_NODES, DEGENERATE_RELATIVE = 20, 1e-9
#: a triangle of relative Gaussian mass below this is dropped
MIN_MASS = 1e-15
#: a value of y taken by more than this fraction of a sample is an atom (a flat region of h, counted apart)
ATOM_FRACTION = 1e-3


def _slice_values(hfun, a: float, cells: int, reach: float) -> Optional[np.ndarray]:
    """h(a, z_2, z_3) on the mesh's nodes (cells + 1, cells + 1), or None when it is not finite at one."""
    g = np.linspace(-reach, reach, cells + 1)
    Z2, Z3 = np.meshgrid(g, g, indexing="ij")
    pts = np.stack([np.full(Z2.size, a), Z2.ravel(), Z3.ravel()], axis=1)
    with np.errstate(all="ignore"):
        H = np.asarray(hfun(pts), dtype=float).reshape(cells + 1, cells + 1)
    return H if np.all(np.isfinite(H)) else None


#: the two triangles of a cell (Kuhn's rule): the middle vertex's offset and the centroid's offset, in cells
_KUHN2 = ((1.0, 0.0, 2 / 3, 1 / 3), (0.0, 1.0, 1 / 3, 2 / 3))


@numba.njit(cache=True)
def _slice_kernel(H, lo, h, a, lat, edges, tie, min_mass, atoms, out, atom_out):  # pragma: no cover - compiled
    """One slice z_1 = a, the mesh's nodes lo + h i: for each triangle (two per cell) with centroid (c_2, c_3),
    mass m = exp(-(c_2^2 + c_3^2) / 2) (above min_mass) and features f = z_i z_j (i <= j < k, z_i the slice
    coordinate lat[i] of (a, c_2, c_3)):
    a flat triangle (vertex values within tie * (1 + |v|)) at a value of ``atoms`` (sorted) adds m [1, f] to that
    atom's row of atom_out; any other adds m [1, f] P(h-hat <= y_e) to out[e] at each sorted edge y_e (the tent law
    of the linear interpolant, vertex values made strictly increasing by tie * (1 + |v|)) and m [1, f] to out[E]
    (the continuous part's totals)."""
    k = lat.shape[0]
    n = H.shape[0] - 1
    E = edges.shape[0]
    Q = out.shape[1]
    below = np.zeros((E + 1, Q))
    z = np.zeros(3)
    w = np.zeros(Q)
    z[0] = a
    for t in range(2):
        o2, o3 = int(_KUHN2[t][0]), int(_KUHN2[t][1])
        p2, p3 = _KUHN2[t][2], _KUHN2[t][3]
        for i in range(n):
            c2 = lo + h * (i + p2)
            for j in range(n):
                c3 = lo + h * (j + p3)
                m = math.exp(-0.5 * (c2 * c2 + c3 * c3))
                if m <= min_mass:
                    continue
                z[1] = c2
                z[2] = c3
                w[0] = m
                q = 1
                for u in range(k):
                    for v in range(u, k):
                        w[q] = m * z[lat[u]] * z[lat[v]]
                        q += 1
                v0, v1, v2 = H[i, j], H[i + o2, j + o3], H[i + 1, j + 1]
                if v0 > v1:
                    v0, v1 = v1, v0
                if v1 > v2:
                    v1, v2 = v2, v1
                if v0 > v1:
                    v0, v1 = v1, v0
                sc = tie * (1.0 + max(abs(v0), abs(v2)))
                if v2 - v0 <= sc and atoms.shape[0] > 0:
                    r = np.searchsorted(atoms, v0)
                    hit = -1
                    for cand in (r - 1, r):
                        if 0 <= cand < atoms.shape[0] and abs(atoms[cand] - v0) <= 1e3 * sc:
                            hit = cand
                    if hit >= 0:
                        for q in range(Q):
                            atom_out[hit, q] += w[q]
                        continue
                b = max(v1, v0 + sc)
                c = max(v2, b + sc)
                i0 = np.searchsorted(edges, v0, side="right")
                i1 = np.searchsorted(edges, c, side="left")
                for q in range(Q):
                    below[i1, q] += w[q]  # wholly below every edge from i1 on
                    out[E, q] += w[q]
                ca = c - v0
                for e in range(i0, i1):  # v0 < y_e < c: the tent law's CDF
                    y = edges[e]
                    if y <= b:
                        p = (y - v0) * (y - v0) / ((b - v0) * ca)
                    else:
                        p = 1.0 - (c - y) * (c - y) / ((c - b) * ca)
                    for q in range(Q):
                        out[e, q] += w[q] * p
    acc = np.zeros(Q)
    for e in range(E):
        for q in range(Q):
            acc[q] += below[e, q]
            out[e, q] += acc[q]


def _slice_spread(hfun, zs: np.ndarray) -> np.ndarray:
    """The standard deviation of h(z_1, z_2, z_3) over (z_2, z_3) ~ N(0, I_2) at each z_1 of ``zs`` (a 20 x 20
    Gauss-Hermite rule), NaN where h is not finite."""
    x, w = np.polynomial.hermite_e.hermegauss(SPREAD_NODES)
    w = w / w.sum()
    X2, X3 = np.meshgrid(x, x, indexing="ij")
    W = (w[:, None] * w[None, :]).ravel()
    q = len(W)
    pts = np.stack([np.repeat(zs, q), np.tile(X2.ravel(), len(zs)), np.tile(X3.ravel(), len(zs))], axis=1)
    with np.errstate(all="ignore"):
        H = np.asarray(hfun(pts), dtype=float).reshape(len(zs), q)
        mean = H @ W
        return np.sqrt(np.maximum((H * H) @ W - mean * mean, 0.0))


def degenerate_slices(hfun, reach: float = OUTER_REACH) -> list:
    """The z_1 in [-reach, reach] where the slice h(z_1, ., .) becomes constant (its spread over N(0, I_2) vanishes,
    to DEGENERATE_RELATIVE of its largest value): there a slice's law of y collapses to an atom and the slices' CDFs
    change on the scale of the bins' edges, so the outer rule is graded toward them.  On a grid of step 0.01: the
    local minima of the spread, refined by golden section, and the ends of the intervals where every slice is
    constant (relu(z_1) z_2 z_3 for z_1 <= 0), refined by bisection; those within OUTER_GRADED_REACH."""
    zs = np.linspace(-reach, reach, int(round(200 * reach)) + 1)
    s = _slice_spread(hfun, zs)
    if not np.all(np.isfinite(s)) or not s.max() > 0:
        return []
    big = float(s.max())
    tol = DEGENERATE_RELATIVE * big

    def spread(v: float) -> float:
        return float(_slice_spread(hfun, np.array([v]))[0])

    found: list = []
    flat = s <= tol
    g = (math.sqrt(5) - 1) / 2
    for i in range(1, len(zs) - 1):
        if flat[i] and (flat[i - 1] or flat[i + 1]):
            if flat[i - 1] != flat[i + 1]:  # the end of a constant interval: bisection between flat and not
                lo, hi = (zs[i], zs[i + 1]) if flat[i - 1] else (zs[i], zs[i - 1])
                for _ in range(60):
                    mid = (lo + hi) / 2
                    lo, hi = (mid, hi) if spread(mid) <= tol else (lo, mid)
                found.append(float(lo))
            continue
        if s[i] <= s[i - 1] and s[i] <= s[i + 1] and s[i] < 0.05 * big:
            lo, hi = float(zs[i - 1]), float(zs[i + 1])
            for _ in range(90):  # golden section to the spacing of floats (the minimum may be a kink, |z_1 - p|)
                a, b = hi - g * (hi - lo), lo + g * (hi - lo)
                sa, sb = _slice_spread(hfun, np.array([a, b]))
                if sa <= sb:
                    hi = b
                else:
                    lo = a
            x = (lo + hi) / 2
            if spread(x) <= tol:
                found.append(x)
    out: list = []
    for x in found:
        if abs(x) <= OUTER_GRADED_REACH and not any(abs(x - p) < 1e-9 for p in out):
            out.append(x)
    return out


def outer_rule(points: list, order: int, reach: float = OUTER_REACH, breaks=()):
    """Nodes and weights (summing to 1) for z_1 ~ N(0, 1): Gauss-Legendre of ``order`` nodes on panels of width
    OUTER_PANEL over [-reach, reach], each panel next to a point of ``points`` cut geometrically toward it (factors
    OUTER_GRADING down to OUTER_TINY), and cut at each of ``breaks`` (where y jumps in z_1); the weights times the
    normal density."""
    b = set(np.linspace(-reach, reach, int(round(2 * reach / OUTER_PANEL)) + 1).tolist()) | set(map(float, breaks))
    for p in points:
        x = OUTER_TINY
        while x < OUTER_PANEL:
            b.update((p - x, p + x))
            x *= OUTER_GRADING
        b.update((p - OUTER_PANEL, p, p + OUTER_PANEL))
    e = np.array(sorted(v for v in b if -reach <= v <= reach))
    g, w = np.polynomial.legendre.leggauss(order)
    a, c = e[:-1], e[1:]
    xs = ((a + c)[:, None] + (c - a)[:, None] * g[None, :]) / 2
    ws = (c - a)[:, None] * w[None, :] / 2 * np.exp(-0.5 * xs * xs)
    return xs.ravel(), (ws / ws.sum()).ravel()


def _edges(hfun, xs, ws, cells: int, bins: int, reach: float, atoms: np.ndarray) -> Optional[np.ndarray]:
    """The bins' B - 1 inner edges: weighted quantiles (levels j / B) of the triangles' centroid values (the mean of
    their vertex values) on a mesh of ``cells`` per axis, each slice's mass its weight; the triangles at an atom (flat,
    at a value of ``atoms``) left out."""
    g = np.linspace(-reach, reach, cells + 1)
    h = g[1] - g[0]
    vals, mass = [], []
    for a, w in zip(xs, ws):
        H = _slice_values(hfun, float(a), cells, reach)
        if H is None:
            return None
        for f2, f3, p2, p3 in _KUHN2:
            o2, o3 = int(f2), int(f3)
            c2, c3 = g[:cells] + h * p2, g[:cells] + h * p3
            dens = (np.exp(-0.5 * c2 * c2)[:, None] * np.exp(-0.5 * c3 * c3)[None, :]).ravel()
            tri = np.stack([H[:-1, :-1], H[o2:cells + o2, o3:cells + o3], H[1:, 1:]], axis=-1).reshape(-1, 3)
            cen = tri.mean(axis=1)
            if len(atoms):
                sc = TIE * (1 + np.abs(tri).max(axis=1))
                near = np.min(np.abs(cen[:, None] - atoms[None, :]), axis=1) <= 1e3 * sc
                dens = np.where((np.ptp(tri, axis=1) <= sc) & near, 0.0, dens)
            vals.append(cen)
            mass.append(w * dens)
    v, m = np.concatenate(vals), np.concatenate(mass)
    o = np.argsort(v)
    q = np.cumsum(m[o])
    q /= q[-1]
    e = np.interp(np.arange(1, bins) / bins, q, v[o])
    # strictly increasing (a repeated edge would be an empty bin)
    return np.maximum.accumulate(e + 1e-13 * (1 + np.abs(e)) * np.arange(len(e)) / len(e))


def _cumulants(hfun, lat: np.ndarray, xs, ws, cells: int, edges: np.ndarray, reach: float,
               atoms: np.ndarray) -> Optional[tuple]:
    """(F (E, 1 + P), totals (1 + P,), atoms' sums (A, 1 + P)): F_f(y_e) = E[f 1{h-hat <= y_e}] over the continuous
    part at the edges, its totals, and E[f 1{y = atom}], for f = 1 and the features z_i z_j (i <= j < k), over the
    slices z_1 = xs (weights ws) in ``cells`` per axis, the k latent coordinates at the slice coordinates ``lat``;
    None when h is not finite at a node."""
    k = len(lat)
    P = k * (k + 1) // 2
    F = np.zeros((len(edges), 1 + P))
    total = np.zeros(1 + P)
    at = np.zeros((len(atoms), 1 + P))
    lo, h = -reach, 2 * reach / cells
    buf = np.zeros((len(edges) + 1, 1 + P))
    abuf = np.zeros((len(atoms), 1 + P))
    for a, w in zip(xs, ws):
        H = _slice_values(hfun, float(a), cells, reach)
        if H is None:
            return None
        buf[:] = 0.0
        abuf[:] = 0.0
        _slice_kernel(H, lo, h, float(a), lat, edges, TIE, MIN_MASS, atoms, buf, abuf)
        norm = w / (buf[-1, 0] + abuf[:, 0].sum())
        F += norm * buf[:-1]
        total += norm * buf[-1]
        at += norm * abuf
    mass = total[0] + at[:, 0].sum()
    return F / mass, total / mass, at / mass


def _binned(F: np.ndarray, total: np.ndarray, at: np.ndarray, k: int, step: int) -> np.ndarray:
    """E_y[G (x) G] (k^2 x k^2): each atom's P G (x) G, plus the continuous part from the bins between every
    ``step``-th edge, 2 ``step`` and 4 ``step`` (nested), extrapolated: the bias of B bins is c1 / B (where G is
    singular in the level, as next to an atom of a slice) plus c2 / B^2, so (8 op_B - 6 op_B/2 + op_B/4) / 3."""
    ops = []
    for st in (step, 2 * step, 4 * step):
        Fe = np.concatenate([np.zeros((1, F.shape[1])), F[st - 1::st], total[None, :]])
        cont = np.concatenate([np.diff(Fe, axis=0), at])
        keep = cont[:, 0] > 0
        pb = cont[keep, 0]
        G = second_moments_minus_identity(cont[keep, 1:], pb, k)
        ops.append(np.einsum("b,bij,bkl->ikjl", pb, G, G).reshape(k * k, k * k))
    return (8 * ops[0] - 6 * ops[1] + ops[2]) / 3


def slice_operator(response, n: int, k: int, rule: Optional[tuple] = None, outer: int = 0,
                   breaks=()) -> Optional[tuple]:
    """(operator, [the operators of the three rules coarser in one respect], description): E_y[G (x) G]
    (k^2 x k^2) for y = response(points), points (N, 3) with the k latent coordinates first, on the fine rule and on
    the rules with half the Gauss-Legendre nodes per panel, half the cells, half the bins; None when the rule does
    not apply (n not 3, h not finite at a node, or finitely many values of y).  rule: (Gauss-Legendre nodes
    per panel in z_1, cells per axis, bins) of the fine rule (default :data:`RULE`).  Atoms: the values y takes on
    more than ATOM_FRACTION of a seeded sample (a flat region of h), each counted apart from the bins.  ``outer``:
    the variable sliced (default the first), ``breaks``: its values where y jumps (panel edges of its rule)."""
    if n != 3 or outer not in (0, 1, 2):
        return None
    rest = [i for i in range(3) if i != outer]
    order_in = [outer] + rest  # slice coordinate j is the variable order_in[j]
    lat = np.array([order_in.index(i) for i in range(k)], dtype=np.int64)
    if outer:
        inner = response

        def response(p):
            q = np.empty_like(p)
            q[:, order_in] = p
            return inner(q)

    rng = np.random.default_rng(11)
    with np.errstate(all="ignore"):
        sample = np.asarray(response(rng.standard_normal((8192, n))), dtype=float)
    if not np.all(np.isfinite(sample)):
        return None
    vals, counts = np.unique(np.round(sample, 12), return_counts=True)
    if len(counts) <= MAX_LEVELS:
        return None
    atoms = np.sort(vals[counts > ATOM_FRACTION * len(sample)]).astype(float)
    order, cells, bins = rule or RULE
    points = degenerate_slices(response)
    xs, ws = outer_rule(points, order, breaks=breaks)
    edges = _edges(response, xs, ws, max(cells // 4, 16), bins, REACH, atoms)
    if edges is None:
        return None
    got = [_cumulants(response, lat, xs, ws, cells, edges, REACH, atoms),
           _cumulants(response, lat, *outer_rule(points, max(order // 2, 1), breaks=breaks), cells, edges, REACH,
                      atoms),
           _cumulants(response, lat, xs, ws, cells // 2, edges, REACH, atoms)]
    if any(g is None for g in got):
        return None
    fine = _binned(*got[0], k, 1)
    variants = [_binned(*got[1], k, 1), _binned(*got[2], k, 1), _binned(*got[0], k, 2)]
    where = ("; graded geometrically toward the slices where y is constant, at "
             + ", ".join(f"{p:.6g}" for p in points) if points else "")
    where += ("; panels cut where y jumps, at " + ", ".join(f"{p:.6g}" for p in breaks) if len(breaks) else "")
    how = (f"deterministic: in variable {outer + 1} Gauss-Legendre ({order} nodes per panel of width {OUTER_PANEL:g} "
           f"on [-{OUTER_REACH:g}, {OUTER_REACH:g}]{where}); in each slice the exact law of the piecewise-linear "
           f"interpolant of y on {cells} cells per axis of [-{REACH:g}, {REACH:g}]^2 (2 triangles per cell); "
           f"E_y[G (x) G] from {bins} quantile bins of y, extrapolated from a half and a quarter of them (Richardson "
           f"in 1/B and 1/B^2); error: twice the sum of the changes with half the nodes per panel, half the cells, "
           f"half the bins"
           + (f"; atoms of y (flat regions, at y = {', '.join(f'{v:.6g}' for v in atoms)}) hold "
              f"{got[0][2][:, 0].sum():.3g} of the mass, each adding P G (x) G" if len(atoms) else ""))
    return fine, variants, how
