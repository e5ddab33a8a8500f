"""delta_alg of a noiseless multi-index link with k = 2 or 3 latent directions by deterministic quadrature over the
sphere (docs/theory.md §2, "Multi-index links by quadrature").

delta_alg = 1 / rho, rho the largest eigenvalue of M -> E_y[G(y) M G(y)] on symmetric k x k matrices, with
G(y) = E[zz^T | y] - I.  Write z = r w, r ~ chi_k independent of w, uniform on the sphere S^{k-1}.

* **Homogeneous links of degree p > 0**, h(r w) = r^p h(w) (z1 z2, z1 z2 z3, |z1 z2|, z1^2 + z2^2, ...): for fixed
  w the map r -> y is monotone, so with s = ln|y| and r_w(s) = (e^s / |h(w)|)^(1/p),

      |y| p(y)             = E_w[ 1{y h(w) > 0} g(r_w) ],                     g(r) = r f_R(r) / p,
      |y| p(y) G_ij(y)     = E_w[ 1{y h(w) > 0} g(r_w) (r_w^2 w_i w_j - delta_ij) ],

  and E_y[G_ij G_kl] = sum over the sign of y of int ds (|y| p G_ij)(|y| p G_kl) / (|y| p).  The integrand is
  smooth in s and in w (it vanishes to all orders where h(w) -> 0, since r_w -> infinity), so the trapezoidal rule
  in s and in the angle(s), with Gauss-Legendre in cos(polar angle) for k = 3, converges fast.
* **Degree 0 with finitely many values** (sign(z1 z2), ...): y = h(w), E[z_i z_j | w] = k w_i w_j, and
  G(c) = E[(k w w^T - I) 1{h(w) = c}] / P(h(w) = c).  On each circle of the rule the jumps of h in the azimuth are
  located by bisection (to 1e-14) and each piece integrated by Gauss-Legendre.

Both are computed at two resolutions; the error reported is their difference (plus 1e-12).  Other links (noisy,
non-homogeneous, degree 0 with a continuum of values, k > 3) return None and are left to the caller's other tiers.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

#: homogeneous links: (the double-exponential rule's level in cos(polar) (k = 3), its level on the circles, nodes in
#: ln|y|), coarse and fine
HOMOGENEOUS_RULES = {2: [(0, 5, 400), (0, 6, 800)], 3: [(3, 4, 150), (4, 5, 200)]}
#: degree-0 links: (azimuth grid on which the jumps are looked for, circles (k = 3)), coarse and fine
LEVEL_RULES = {2: [(1024, 1), (2048, 1)], 3: [(512, 48), (1024, 96)]}
#: distinct values of y on the sample below which a degree-0 link is taken as piecewise constant
MAX_LEVELS = 64


def homogeneous_degree(response, k: int, seed: int = 7) -> Optional[float]:
    """p when h(lambda z) = lambda^p h(z) for lambda > 0 at 200 random points (relative 1e-9), p a multiple of 1/2
    in [0, 12]; else None.  ``response`` maps (N, k) arrays to (N,)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((200, k))
    try:
        y1, y2, y3 = (np.asarray(response(c * z), dtype=float) for c in (1.0, 2.0, 3.0))
    except Exception:
        return None
    if not (np.all(np.isfinite(y1)) and np.all(np.isfinite(y2)) and np.all(np.isfinite(y3))):
        return None
    big = np.abs(y1) > 1e-8 * max(np.max(np.abs(y1)), 1e-300)
    if not np.any(big):
        return None
    with np.errstate(all="ignore"):
        ps = np.log(np.abs(y2[big] / y1[big])) / math.log(2.0)
    p = round(2 * float(np.median(ps))) / 2
    if not (0 <= p <= 12):
        return None
    for c, yc in ((2.0, y2), (3.0, y3)):
        if not np.allclose(yc, c ** p * y1, rtol=1e-9, atol=1e-12 * max(1.0, float(np.max(np.abs(yc))))):
            return None
    return p


def _circle_points(k: int, u: Optional[float]):
    """phi -> points (..., k) on the unit circle (k = 2) or on the circle at cos(polar) = u of the sphere (k = 3)."""
    def pts(phi):
        phi = np.asarray(phi, dtype=float)
        if k == 2:
            return np.stack([np.cos(phi), np.sin(phi)], axis=-1)
        sn = math.sqrt(max(0.0, 1 - u * u))
        return np.stack([sn * np.cos(phi), sn * np.sin(phi), np.full_like(phi, u)], axis=-1)
    return pts


def _zeros_on_circle(hfun, n0: int = 720) -> np.ndarray:
    """The zeros of phi -> h on [0, 2 pi): sign changes by bisection, touching zeros (|h| with a local minimum that
    reaches 0) by golden-section search; to about 1e-15."""
    grid = 2 * np.pi * np.arange(n0) / n0
    hv = hfun(grid)
    scale = float(np.max(np.abs(hv)))
    if scale == 0:
        return np.array([])
    nxt = np.roll(hv, -1)
    out = list(grid[hv == 0])
    ch = np.nonzero(hv * nxt < 0)[0]
    if len(ch):
        lo, hi = grid[ch], grid[ch] + 2 * np.pi / n0
        slo = np.sign(hv[ch])
        for _ in range(60):
            mid = (lo + hi) / 2
            same = np.sign(hfun(mid)) == slo
            lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
        out += list((lo + hi) / 2)
    a = np.abs(hv)
    mins = np.nonzero((a < np.roll(a, 1)) & (a <= np.roll(a, -1)) & (a < 0.05 * scale) & (hv * nxt >= 0)
                      & (hv * np.roll(hv, 1) >= 0) & (hv != 0))[0]
    if len(mins):
        lo, hi = grid[mins] - 2 * np.pi / n0, grid[mins] + 2 * np.pi / n0
        g = (math.sqrt(5) - 1) / 2
        for _ in range(80):
            c, d = hi - g * (hi - lo), lo + g * (hi - lo)
            left = np.abs(hfun(c)) < np.abs(hfun(d))
            lo, hi = np.where(left, lo, c), np.where(left, d, hi)
        x = (lo + hi) / 2
        out += list(x[np.abs(hfun(x)) < 1e-12 * scale])
    return np.unique(np.round(np.mod(out, 2 * np.pi), 15))


def _tanh_sinh(level: int):
    """Nodes x in (-1, 1) with 1 + x and 1 - x computed without cancellation, and weights summing to 2: the
    double-exponential rule with step 1 / 2^level on t in [-3.2, 3.2] (it resolves an integrand that varies on every
    scale near the ends)."""
    h = 2.0 ** -level
    t = np.arange(-int(3.2 / h), int(3.2 / h) + 1) * h
    v = np.pi / 2 * np.sinh(t)
    e = np.exp(-2 * np.abs(v))
    one_minus_abs = 2 * e / (1 + e)  # 1 - |tanh v|
    w = h * np.pi / 2 * np.cosh(t) * 4 * e / (1 + e) ** 2  # h dx/dt = h (pi/2) cosh t sech^2 v
    return np.sign(v), one_minus_abs, w * 2 / w.sum()


def _de_nodes(a: np.ndarray, b: np.ndarray, level: int):
    """The double-exponential rule on each interval [a_i, b_i]: (nodes (I, n), weights (I, n) summing to b_i - a_i),
    the nodes near either end computed as an offset from that end."""
    sg, om, w1 = _tanh_sinh(level)
    half = (np.asarray(b) - np.asarray(a))[:, None] / 2
    x = np.where(sg[None, :] < 0, np.asarray(a)[:, None] + half * om[None, :],
                 np.asarray(b)[:, None] - half * om[None, :])
    return x, half * w1[None, :]


def _polar_cuts(count, n0: int = 257) -> list:
    """The cos(polar) values in (-1, 1) where the zero set of h on the circles changes (a circle on which h vanishes
    identically, or a change in the number of zeros: a circle tangent to a zero curve), by bisection to 1e-15."""
    grid = np.linspace(-1, 1, n0)[1:-1]
    c = [count(u) for u in grid]
    cuts = [u for u, ci in zip(grid, c) if ci < 0]  # whole circles of zeros on the grid (u = 0 is on it)
    for j in range(len(grid) - 1):
        if c[j] == c[j + 1] or c[j] < 0 or c[j + 1] < 0:
            continue
        lo, hi = grid[j], grid[j + 1]
        for _ in range(52):
            mid = (lo + hi) / 2
            if count(mid) == c[j]:
                lo = mid
            else:
                hi = mid
        cuts.append((lo + hi) / 2)
    return sorted(set(cuts))


def _sphere(k: int, level_polar: int, level: int, hfun_points, cuts: dict):
    """Points (N, k) and weights (N,) (summing to 1) on S^{k-1}.  On each circle (k = 2: the circle; k = 3: circles of
    constant cos(polar) = u), the double-exponential rule between consecutive zeros of h (the integrands vary on
    every scale near them), the trapezoid where h has none; for k = 3 the circles sit at the nodes of the
    double-exponential rule in u (step 2^-level_polar) on each interval between the u where the zero set changes
    (:func:`_polar_cuts`), and at the poles' ends."""
    if k == 3:
        def count(u):
            pts = _circle_points(3, u)
            hv = hfun_points(pts(2 * np.pi * np.arange(64) / 64))
            if np.max(np.abs(hv)) <= 1e-13 * scale3:
                return -1
            return len(_zeros_on_circle(lambda ph: hfun_points(pts(ph))))

        probe = np.random.default_rng(5).standard_normal((4000, 3))
        scale3 = float(np.max(np.abs(hfun_points(probe / np.linalg.norm(probe, axis=1, keepdims=True)))))
        if "polar" not in cuts:  # shared by the coarse and the fine rule
            cuts["polar"] = _polar_cuts(count)
        ends = np.array([-1.0] + cuts["polar"] + [1.0])
        U, WU = _de_nodes(ends[:-1], ends[1:], level_polar)
        rows = list(zip(U.ravel(), WU.ravel()))
    else:
        rows = [(None, 2.0)]
    P, W = [], []
    for u, wu in rows:
        pts = _circle_points(k, u)
        zs = _zeros_on_circle(lambda ph: hfun_points(pts(ph)))
        if len(zs) == 0:
            n = 64 * 2 ** level
            phi, wt = 2 * np.pi * (np.arange(n) + 0.5) / n, np.full(n, 1.0 / n)
        else:
            phi, wt = _de_nodes(zs, np.concatenate([zs[1:], [zs[0] + 2 * np.pi]]), level)
            phi, wt = phi.ravel(), wt.ravel() / (2 * np.pi)
        P.append(pts(phi))
        W.append(wt * wu / 2)
    return np.concatenate(P), np.concatenate(W)


def _log_chi_density(r, k: int):
    """ln f_R(r) for r ~ chi_k."""
    return (k - 1) * np.log(r) - r * r / 2 - (k / 2 - 1) * math.log(2) - math.lgamma(k / 2)


def _operator_homogeneous(response, k: int, p: float, res: tuple, cuts: dict) -> np.ndarray:
    """E_y[G (x) G] as the k^2 x k^2 array of ``links._numeric_G_operator`` (op[(i,k),(j,l)] = E[G_ij G_kl])."""
    level_polar, level, n_s = res
    w_pts, w = _sphere(k, level_polar, level, lambda x: np.asarray(response(x.reshape(-1, k)), dtype=float).reshape(
        x.shape[:-1]), cuts)
    h = np.asarray(response(w_pts), dtype=float)
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    P = np.stack([w_pts[:, i] * w_pts[:, j] for i, j in pairs], axis=1)  # (N, pairs)
    delta = np.array([1.0 if i == j else 0.0 for i, j in pairs])
    K = np.zeros((len(pairs), len(pairs)))
    hmax = float(np.max(np.abs(h)))
    if hmax == 0:
        return np.zeros((k * k, k * k))
    # s = ln|y| from where r = 16 on the ray of the largest |h| (the chi density is e^-128 beyond) downwards, in blocks,
    # until a block adds less than 1e-16 of the total: |y| p(y) decays like |y|^alpha as y -> 0, with alpha = k / p
    # for a link without zeros on the sphere and smaller near its zeros (y = z2^2: alpha = 1/2)
    s_hi = math.log(hmax) + p * math.log(16.0)
    ds = p * (36.0 / k + math.log(16.0)) / n_s
    block = max(8, n_s // 4)

    def part(svals, sign):
        keep = sign * h > 0
        out = np.zeros((len(pairs), len(pairs)))
        if not np.any(keep):
            return out
        lh, wk, Pk = np.log(np.abs(h[keep])), w[keep], P[keep]
        for chunk in np.array_split(np.arange(len(svals)), max(1, (len(svals) * int(keep.sum())) // 2_000_000)):
            lr = (svals[chunk, None] - lh[None, :]) / p  # ln r, (S, N)
            r = np.exp(lr)
            with np.errstate(under="ignore"):
                g = np.exp(_log_chi_density(r, k) + lr - math.log(p)) * wk  # r f_R(r) / p times the weight
            dens = g.sum(axis=1)  # |y| p(y)
            A = (g * r * r) @ Pk - dens[:, None] * delta[None, :]  # |y| p(y) G_ij(y)
            ok = dens > 1e-300
            out += ds * (A[ok].T / dens[ok]) @ A[ok]
        return out

    top = s_hi
    for _ in range(400):
        svals = top - ds * np.arange(block)
        add = part(svals, 1.0) + part(svals, -1.0)
        K += add
        top = svals[-1] - ds
        if np.abs(add).max() <= 1e-16 * max(np.abs(K).max(), 1e-300) and top < s_hi - p * 36.0 / k:
            break
    return _pairs_to_operator(K, pairs, k)


def _pairs_to_operator(K: np.ndarray, pairs: list, k: int) -> np.ndarray:
    idx = {}
    for a, (i, j) in enumerate(pairs):
        idx[(i, j)] = idx[(j, i)] = a
    op = np.zeros((k, k, k, k))
    for i in range(k):
        for j in range(k):
            for kk in range(k):
                for ll in range(k):
                    op[i, kk, j, ll] = K[idx[(i, j)], idx[(kk, ll)]]
    return op.reshape(k * k, k * k)


def _pieces(response, k: int, az_grid: np.ndarray, u: Optional[float]):
    """Azimuth intervals [a, b) on which h is constant, on the circle at cos(polar) = u (k = 3) or the unit circle:
    the jumps between grid points are located by bisection.  Returns [(a, b, value)]."""
    pts = _circle_points(k, u)
    vals = np.asarray(response(pts(az_grid)), dtype=float)
    jumps = np.nonzero(vals != np.roll(vals, -1))[0]
    if len(jumps) == 0:
        return [(0.0, 2 * np.pi, float(vals[0]))]
    lo = az_grid[jumps]
    hi = np.where(jumps + 1 < len(az_grid), az_grid[(jumps + 1) % len(az_grid)], az_grid[0] + 2 * np.pi)
    left = vals[jumps]
    for _ in range(60):
        mid = (lo + hi) / 2
        same = np.asarray(response(pts(mid)), dtype=float) == left
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    cuts = np.sort((lo + hi) / 2 % (2 * np.pi))
    edges = np.concatenate([cuts, [cuts[0] + 2 * np.pi]])
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        out.append((a, b, float(response(pts(np.array([(a + b) / 2])))[0])))
    return out


def _operator_levels(response, k: int, res: tuple) -> np.ndarray:
    """E_y[G (x) G] for a degree-0 link with finitely many values (y = h(w))."""
    n_az, n_pol = res
    gx, gw = np.polynomial.legendre.leggauss(24)
    az_grid = 2 * np.pi * (np.arange(n_az) + 0.5) / n_az
    rows = [(None, 1.0)] if k == 2 else list(zip(*np.polynomial.legendre.leggauss(n_pol)))
    mom: dict = {}  # value -> (mass, E[w w^T 1{h = value}])
    for u, wu in rows:
        for a, b, c in _pieces(response, k, az_grid, u):
            phi = (a + b) / 2 + (b - a) / 2 * gx
            wt = gw * (b - a) / 2 / (2 * np.pi) * (1.0 if k == 2 else wu / 2)
            wp = _circle_points(k, u)(phi)
            m, S = mom.get(c, (0.0, np.zeros((k, k))))
            mom[c] = (m + wt.sum(), S + np.einsum("n,ni,nj->ij", wt, wp, wp))
    op = np.zeros((k, k, k, k))
    for m, S in mom.values():
        if m <= 0:
            continue
        G = k * S / m - np.eye(k)
        op += m * np.einsum("ij,kl->ikjl", G, G)
    return op.reshape(k * k, k * k)


def sphere_operator(link) -> Optional[tuple]:
    """(coarse operator, fine operator, description) for a noiseless link with k = 2 or 3 that is homogeneous of
    degree p > 0, or of degree 0 with at most MAX_LEVELS values; None otherwise."""
    k = link.k
    if link.noisy or k not in HOMOGENEOUS_RULES:
        return None
    p = homogeneous_degree(link.response, k)
    if p is None:
        return None
    if p > 0:
        rules = HOMOGENEOUS_RULES[k]
        cuts: dict = {}
        ops = [_operator_homogeneous(link.response, k, p, r, cuts) for r in rules]
        lp, lv, ns = rules[1]
        how = (f"quadrature on the sphere: y homogeneous of degree {p:g} in z fixes |z| on each ray; trapezoid in "
               f"ln|y| ({ns} nodes), double-exponential rule (step 2^-{lv}) between the zeros of y on "
               + ("the circle" if k == 2 else f"circles of constant cos(polar), themselves at the nodes of a "
                                              f"double-exponential rule (step 2^-{lp}) between the cos(polar) where "
                                              f"the zero set changes")
               + "; error: against the rule with half the nodes")
        return ops[0], ops[1], how
    sample = link.response(np.random.default_rng(3).standard_normal((20000, k)))
    if len(np.unique(sample)) > MAX_LEVELS:
        return None
    rules = LEVEL_RULES[k]
    ops = [_operator_levels(link.response, k, r) for r in rules]
    how = (f"quadrature on the sphere: y depends on z / |z| only and takes {len(np.unique(sample))} values; its jumps "
           f"located by bisection, Gauss-Legendre between them" + (f" ({rules[1][1]} circles)" if k == 3 else "")
           + "; error: against the rule with half the nodes")
    return ops[0], ops[1], how
