"""The extreme eigenvalues of many small diagonal-plus-rank-one matrices, compiled by numba.

Each per-sample Hessian of a two-layer network in the preactivations is D = diag(c) + s g g^T (docs/theory.md §3,
the per-sample curvature: c_j = l' a_j sigma''(r_j + b_j) / m, s = l'', g the network's gradient in r).  Its
eigenvalues are the c_j with g_j = 0 and the roots of the secular equation

    1 - s sum_j g_j^2 / (lambda - c_j) = 0,

one in each gap between consecutive distinct c_j with g_j != 0 and one beyond the last (above it for s > 0); a value
c_j shared by several such j is an eigenvalue too.  The smallest and largest eigenvalue therefore need two scalar
root findings per sample, against a batched LAPACK call per sample."""
from __future__ import annotations

import numba
import numpy as np

#: relative width at which a secular root's bracket is taken as converged
_REL = 1e-14
#: deflation tolerance (relative to the scale max|c| + sum w): below it a weight is dropped and two poles are one
_EPS = 4e-16


@numba.njit(cache=True, error_model="numpy")
def _rest(c: np.ndarray, w: np.ndarray, a: float, b: float, x: float) -> tuple:  # pragma: no cover - compiled
    """(R1, S1, R2, S2): sum_j w_j / (x - c_j) and sum_j w_j / (x - c_j)^2 over the weighted j with c_j < a (1) and
    with c_j > b (2) -- the poles outside the root's bracket."""
    r1 = s1 = r2 = s2 = 0.0
    for j in range(c.shape[0]):
        if w[j] > 0.0 and (c[j] < a or c[j] > b):
            q = 1.0 / (x - c[j])
            if c[j] < a:
                r1 += w[j] * q
                s1 += w[j] * q * q
            else:
                r2 += w[j] * q
                s2 += w[j] * q * q
    return r1, s1, r2, s2


@numba.njit(cache=True, error_model="numpy")
def _root(c: np.ndarray, w: np.ndarray, a: float, wa: float, b: float, wb: float,
          hi: float) -> float:  # pragma: no cover - compiled
    """The root of F(x) = sum_j w_j / (x - c_j) = 1 above the pole a (weight wa: the sum over the j at a) and below
    the pole b (weight wb; b = inf, wb = 0 for the top root, which lies below ``hi``).  Each step solves a model of F
    with the poles a and b exact and the other poles' sums replaced by zeta + eta / (x - a) (those below a) and
    zeta' + eta' / (x - b) (those above b), matched in value and slope at the current point (the "middle way" of
    the secular-equation solvers: at least Newton's order, and exact where the outer poles are far); inside a
    bracket kept by the sign of F - 1 (bisection where a step leaves it), until a step is below _REL of the
    scale."""
    top = wb == 0.0
    lo_, hi_ = a, (hi if top else b)
    scale = abs(a) + abs(hi_)
    x = hi_ if top else 0.5 * (a + b)
    for _ in range(100):
        r1, s1, r2, s2 = _rest(c, w, a, b, x)
        u = x - a
        eta1 = s1 * u * u
        WA = wa + eta1
        zeta = r1 - eta1 / u
        if top:
            F = wa / u + r1
            noise = F
            xn = a + WA / (1.0 - zeta) if zeta < 1.0 else 0.5 * (lo_ + hi_)
        else:
            v = x - b
            eta2 = s2 * v * v
            WB = wb + eta2
            zeta += r2 - eta2 / v
            F = wa / u + wb / v + r1 + r2
            noise = wa / u - wb / v + abs(r1) + abs(r2)
            # u' = x' - a solves q u'^2 + (WA + WB - q h) u' - WA h = 0 in (0, h): q = zeta - 1, h = b - a
            h = b - a
            q = zeta - 1.0
            B = WA + WB - q * h
            disc = max(B * B + 4.0 * q * WA * h, 0.0)
            sq = np.sqrt(disc)
            if B >= 0.0:
                xn = a + 2.0 * WA * h / (B + sq)
            elif q != 0.0:
                xn = a + (sq - B) / (2.0 * q)
            else:
                xn = 0.5 * (lo_ + hi_)
        if abs(F - 1.0) <= 8e-16 * noise:
            return x  # F is 1 to within its rounding: the root as well as F resolves it
        if F > 1.0:
            lo_ = x  # F falls through 1 at the root: F > 1 lies below it
        else:
            hi_ = x
        if abs(xn - x) <= _REL * scale:
            return xn  # converged (before the safeguard: x itself is now an end of the bracket)
        if not (lo_ < xn < hi_):
            xn = 0.5 * (lo_ + hi_)
        if hi_ - lo_ <= _REL * scale:
            return xn
        x = xn
    return x


@numba.njit(cache=True, error_model="numpy")
def _extremes(c: np.ndarray, w: np.ndarray) -> tuple:  # pragma: no cover - compiled
    """(smallest, largest) eigenvalue of diag(c) + W with W = sqrt(w) sqrt(w)^T, w >= 0.  First the deflations of
    the divide-and-conquer eigensolvers, each moving an eigenvalue by at most _EPS of the scale max|c| + sum w: a
    weight with sqrt(w_j sum w) below it is dropped (c_j is then an eigenvalue), and poles closer than it are
    merged (weights added at one of them) -- without them a root squeezed between two poles below the floats'
    resolution would not be found (GeLU's far tails give entries near the smallest floats)."""
    m = c.shape[0]
    total, big = 0.0, 0.0
    for j in range(m):
        total += w[j]
        big = max(big, abs(c[j]))
    tol = _EPS * (big + total)
    for j in range(m):
        if w[j] > 0.0 and w[j] * total <= tol * tol:
            w[j] = 0.0
    for j in range(m):
        if w[j] > 0.0:
            for k in range(j):
                if w[k] > 0.0 and abs(c[j] - c[k]) <= tol:
                    c[j] = c[k]
                    break
    free_lo, free_hi = np.inf, -np.inf
    jlo, jhi, total = np.inf, -np.inf, 0.0
    for j in range(m):
        if w[j] > 0.0:
            jlo = min(jlo, c[j])
            jhi = max(jhi, c[j])
            total += w[j]
        else:
            free_lo = min(free_lo, c[j])
            free_hi = max(free_hi, c[j])
    if total == 0.0:
        return free_lo, free_hi
    wlo, whi, count, nxt = 0.0, 0.0, 0, np.inf
    for j in range(m):
        if w[j] > 0.0:
            if c[j] == jhi:
                whi += w[j]
            if c[j] == jlo:
                wlo += w[j]
                count += 1
            elif c[j] < nxt:
                nxt = c[j]
    # the top root lies in (jhi, jhi + total]: there sum w / (x - c) <= total / (x - jhi) <= 1
    top = _root(c, w, jhi, whi, np.inf, 0.0, jhi + total)
    # the bottom: jlo itself when two weighted entries share it, else the root between jlo and the next weighted value
    if count >= 2:
        bottom = jlo
    elif nxt == np.inf:
        bottom = top
    else:
        wn = 0.0
        for j in range(m):
            if w[j] > 0.0 and c[j] == nxt:
                wn += w[j]
        bottom = _root(c, w, jlo, wlo, nxt, wn, nxt)
    return min(free_lo, bottom), max(free_hi, top)


@numba.njit(cache=True, error_model="numpy")
def rank_one_extremes(curv: np.ndarray, grad: np.ndarray, s: np.ndarray, lo: np.ndarray,
                      hi: np.ndarray) -> None:  # pragma: no cover - compiled
    """lo[i], hi[i] = the smallest and largest eigenvalue of diag(curv[i]) + s[i] grad[i] grad[i]^T ((N, m), (N, m),
    (N,)); NaN where an input is not finite."""
    N, m = curv.shape
    c = np.empty(m)
    w = np.empty(m)
    for i in range(N):
        sign = 1.0 if s[i] >= 0.0 else -1.0
        bad = not np.isfinite(s[i])
        for j in range(m):
            c[j] = sign * curv[i, j]
            w[j] = abs(s[i]) * grad[i, j] * grad[i, j]
            if not (np.isfinite(c[j]) and np.isfinite(w[j])):
                bad = True
        if bad:
            lo[i] = np.nan
            hi[i] = np.nan
            continue
        a, b = _extremes(c, w)
        if sign > 0.0:
            lo[i], hi[i] = a, b
        else:
            lo[i], hi[i] = -b, -a
