"""Directions of the initial hard-overlap vector at width m >= 3 (docs/theory.md §5, "Any width").

The finite-d prediction needs the capture radius m*(t; u) -- the smallest initial overlap captured by t along the
unit m-vector u -- for every direction u on the sphere S^(m-1).  GD's law is invariant under a group G acting on u:
the flip u -> -u when the link is even along the hard direction, and permutations of exchangeable neurons (equal
a_j, b_j, and a Sigma_0 unchanged by exchanging them: :func:`neuron_classes`).  So m* is computed on a few *anchor*
directions (:func:`anchor_directions`: the symmetric ones, then farthest-point samples), and the capture strength
s = 1/m* (0 on an anchor that never captures) is interpolated between them (:class:`StrengthInterpolant`): a
quadratic gauge sqrt(q^T G q) -- a matrix G >= 0 unchanged by the group (:func:`invariant_forms`), fitted to the
anchors -- plus the remainder interpolated by

* :class:`ConeInterpolant` -- linearly on the facets of the convex hull of the anchors' orbit images: the
  barycentric mean of the facet's vertices' values at the point where the ray through q leaves the hull
  (the m = 2 rule, linear between neighbouring rays, on the sphere);
* :func:`interpolate_strength` -- the fallback where the hull cannot be built: inverse-distance weighting in the
  orbit distance, s(q) = sum_k w_k s_k / sum_k w_k, w_k = (1 - c_k(q))^(-m/2), c_k(q) = max_{g in G} q . g u_k.

For a permutation group the maximum over g is a sort (rearrangement inequality): within each class of exchangeable
neurons the largest q . P u is the product of both vectors' components sorted alike (:func:`orbit_cos`), so it costs
O(m log m) per pair whatever the group's order.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import TheorykitError

#: anchors are chosen by farthest-point sampling from this many scrambled-Sobol' directions (and the symmetric ones)
ANCHOR_CLOUD = 2048
#: directions of the standard normal on S^(m-1) averaged over for P at m >= 3 (scrambled Sobol', a power of two)
SPHERE_POINTS = 4096
#: ConeInterpolant gives way to inverse-distance weighting when one anchor has more orbit images than this
ORBIT_LIMIT = 4096


def neuron_classes(problem) -> tuple:
    """The classes of exchangeable neurons: neurons with equal a_j and b_j, split further unless exchanging any two
    of a class leaves Sigma_0 unchanged.  A tuple of index tuples, in order of first index."""
    a, b, S = problem.a_vector, problem.b_vector, problem.Sigma0_matrix
    m = len(a)
    out: list[list[int]] = []
    for j in range(m):
        for cls in out:
            i = cls[0]
            if a[i] == a[j] and b[i] == b[j]:
                perm = np.arange(m)
                perm[[i, j]] = perm[[j, i]]
                if np.array_equal(S[np.ix_(perm, perm)], S):
                    cls.append(j)
                    break
        else:
            out.append([j])
    return tuple(tuple(c) for c in out)


def _sort_classes(X: np.ndarray, classes: tuple) -> np.ndarray:
    """X (..., m) with the components of each class sorted in decreasing order."""
    Y = np.array(X, dtype=float, copy=True)
    for cls in classes:
        if len(cls) > 1:
            idx = list(cls)
            Y[..., idx] = -np.sort(-Y[..., idx], axis=-1)
    return Y


def orbit_cos(Q: np.ndarray, A: np.ndarray, flip: bool, classes: tuple) -> np.ndarray:
    """max over the group of q . g a for unit rows q of Q (N, m) and a of A (K, m): (N, K).  The group: permutations
    within each class of ``classes``, and u -> -u when ``flip``."""
    As = _sort_classes(A, classes)
    c = _sort_classes(Q, classes) @ As.T
    if flip:
        c = np.maximum(c, _sort_classes(-np.asarray(Q, dtype=float), classes) @ As.T)
    return np.clip(c, -1.0, 1.0)


def special_directions(m: int, classes: tuple) -> list:
    """The symmetric directions (not normalised), in order: one neuron of each class alone; for each class of two or
    more, two of its neurons with opposite overlaps (e_i - e_j: an even target such as z^2 is fitted by a pair
    sigma(c z) + sigma(-c z), the way GD escapes at width 4 with a = +-1); for each class of four or more, its two
    halves with opposite overlaps; all neurons alike; each class's neurons alike."""
    out = []
    for cls in classes:
        v = np.zeros(m)
        v[cls[0]] = 1.0
        out.append(v)
    for cls in classes:
        if len(cls) > 1:
            v = np.zeros(m)
            v[cls[0]], v[cls[1]] = 1.0, -1.0
            out.append(v)
    for cls in classes:
        if len(cls) >= 4:  # the class in two opposite halves (pairs of pairs)
            v = np.zeros(m)
            h = len(cls) // 2
            v[list(cls[:h])], v[list(cls[h:2 * h])] = 1.0, -1.0
            out.append(v)
    out.append(np.ones(m))
    for cls in classes:
        if 1 < len(cls) < m:
            w = np.zeros(m)
            w[list(cls)] = 1.0
            out.append(w)
    return out


def anchor_directions(m: int, flip: bool, classes: tuple, count: int, seed: int = 0) -> np.ndarray:
    """At least ``count`` unit m-vectors spread over the fundamental domain: every symmetric direction of
    :func:`special_directions` (not two on one orbit), then farthest-point sampling in the orbit distance from a
    cloud of ANCHOR_CLOUD scrambled-Sobol' directions until there are ``count``.  (K, m); each row its class-sorted
    representative."""
    from ..rules import sobol_normal

    if count < 1:
        raise TheorykitError(f"anchor_directions needs count >= 1, got {count}")
    special = special_directions(m, classes)
    cloud = np.vstack([np.asarray(special), sobol_normal(ANCHOR_CLOUD, m, seed).nodes])
    cloud = _sort_classes(cloud / np.linalg.norm(cloud, axis=1, keepdims=True), classes)
    chosen = [0]
    nearest = orbit_cos(cloud, cloud[:1], flip, classes)[:, 0]
    for j in range(1, len(special)):  # every symmetric direction, unless it repeats an anchor's orbit
        if nearest[j] < 1 - 1e-12:
            chosen.append(j)
            nearest = np.maximum(nearest, orbit_cos(cloud, cloud[j:j + 1], flip, classes)[:, 0])
    while len(chosen) < min(count, len(cloud)):  # then the farthest point from the anchors
        j = int(np.argmin(nearest))
        if nearest[j] > 1 - 1e-12:
            break  # the domain is exhausted (a tiny orbit space)
        chosen.append(j)
        nearest = np.maximum(nearest, orbit_cos(cloud, cloud[j:j + 1], flip, classes)[:, 0])
    return cloud[chosen]


def sphere_directions(m: int, seed: int = 0) -> np.ndarray:
    """SPHERE_POINTS unit m-vectors, a scrambled-Sobol' normal sample normalised (the average over the direction of
    g ~ N(0, I_m) in P at m >= 3)."""
    from ..rules import sobol_normal

    W = sobol_normal(SPHERE_POINTS, m, seed).nodes
    return W / np.linalg.norm(W, axis=1, keepdims=True)


def orbit_images(a: np.ndarray, flip: bool, classes: tuple, limit: int = ORBIT_LIMIT) -> Optional[np.ndarray]:
    """The distinct images g a over the group (flip, permutations within classes): (n, m), or None when there are
    more than ``limit``."""
    from itertools import permutations, product

    per_class = []
    total = 2 if flip else 1
    for cls in classes:
        vals = {tuple(np.round(p, 12)) for p in permutations(a[list(cls)])} if len(cls) > 1 else {
            tuple(np.round(a[list(cls)], 12))}
        per_class.append(sorted(vals))
        total *= len(vals)
        if total > limit:
            return None
    out = []
    for combo in product(*per_class):
        v = np.empty(len(a))
        for cls, vals in zip(classes, combo):
            v[list(cls)] = vals
        out.append(v)
        if flip:
            out.append(-v)
    return np.unique(np.round(np.asarray(out), 12), axis=0)


class ConeInterpolant:
    """The capture strength as a homogeneous, piecewise-linear function: the convex hull of the anchors' orbit
    images (every facet a simplex of m images) splits R^m into cones; on the cone of facet (p_1 .. p_m),
    S(q) = sum_i lam_i s(p_i) with q = sum_i lam_i p_i.  On the circle this is the m = 2 rule (the strength linear
    between neighbouring rays, up to the chord-versus-angle parameterisation).  A capture region {mu: S(mu) > 1}
    that is a slab or a cylinder -- only some neurons' overlaps matter -- is then represented where inverse-distance
    weights are not (they drive the strength to that of the nearest anchor, 0 next to a direction that never
    captures).  ``ok`` is False when the images are too many (ORBIT_LIMIT, per anchor) or their hull does not hold
    the origin inside (a problem without the flip whose anchors miss a half-space)."""

    def __init__(self, anchors: np.ndarray, flip: bool, classes: tuple):
        from scipy.spatial import ConvexHull, QhullError

        self.ok = False
        pts, owner = [], []
        for k, a in enumerate(np.asarray(anchors, dtype=float)):
            img = orbit_images(a, flip, classes)
            if img is None:
                return
            pts.append(img)
            owner += [k] * len(img)
        P = np.vstack(pts)
        self.owner = np.asarray(owner)
        m = P.shape[1]
        try:
            hull = ConvexHull(P, qhull_options="Qt")  # triangulated: a flat facet splits into simplices
        except (QhullError, ValueError):
            return
        eq = hull.equations
        if not np.all(eq[:, -1] < -1e-9):
            return  # the origin is not inside
        mats = np.transpose(P[hull.simplices], (0, 2, 1))  # columns: the facet's vertices
        good = np.abs(np.linalg.det(mats)) > 1e-10  # triangulation can leave zero-volume simplices: not used
        if not good.any():
            return
        self.normals = eq[good, :m] / -eq[good, -1:]  # a ray t q leaves through the facet with the largest normal.q
        self.vertices = hull.simplices[good]  # (F, m) indices into P
        self.inverse = np.linalg.inv(mats[good])
        self.ok = True

    def coordinates(self, Q: np.ndarray, chunk: int = 256, top: int = 8) -> tuple:
        """(anchor index (N, m), lam (N, m)): the barycentric coordinates on q's exit facet of the point where the ray
        through q leaves the hull (q = c sum_i lam_i p_i, sum_i lam_i = 1, c > 0).  The simplices of
        one flat facet share its hyperplane: among the ``top`` facets with the largest normal . q, the one whose
        coordinates are all >= 0 (to rounding; else the least negative) among those on the exit hyperplane."""
        Q = np.asarray(Q, dtype=float)
        F = len(self.vertices)
        kk = min(top, F)
        idx = np.empty((len(Q), Q.shape[1]), dtype=int)
        lam = np.empty_like(Q)
        for i in range(0, len(Q), chunk):
            q = Q[i:i + chunk]
            sc = q @ self.normals.T  # (c, F)
            cand = np.argpartition(-sc, kk - 1, axis=1)[:, :kk] if kk < F else np.tile(np.arange(F), (len(q), 1))
            csc = np.take_along_axis(sc, cand, axis=1)
            on = csc >= csc.max(axis=1, keepdims=True) * (1 - 1e-9) - 1e-12
            L = np.einsum("ckij,cj->cki", self.inverse[cand], q)  # (c, kk, m)
            worst = np.where(on, L.min(axis=2), -np.inf)
            pick = np.argmax(worst, axis=1)
            face = cand[np.arange(len(q)), pick]
            idx[i:i + chunk] = self.owner[self.vertices[face]]
            lam[i:i + chunk] = L[np.arange(len(q)), pick]
        lam = np.where(lam > 1e-12, lam, 0.0)  # rounding noise would carry a "captured from the bottom" 1e12
        return idx, lam / lam.sum(axis=1, keepdims=True)

    @staticmethod
    def evaluate(coords: tuple, strengths) -> np.ndarray:
        idx, lam = coords
        return (lam * np.asarray(strengths, dtype=float)[idx]).sum(axis=1)


def invariant_forms(m: int, classes: tuple) -> np.ndarray:
    """A basis (p, m, m) of the symmetric m x m matrices left unchanged by every permutation within ``classes``:
    per class its identity block and (two neurons or more) its all-ones block off the diagonal; per pair of classes
    the all-ones block between them.  (A quadratic form is even, so the flip adds nothing.)"""
    out = []
    for i, ca in enumerate(classes):
        ia = list(ca)
        E = np.zeros((m, m))
        E[ia, ia] = 1.0
        out.append(E)
        if len(ca) > 1:
            E = np.zeros((m, m))
            E[np.ix_(ia, ia)] = 1.0
            E[ia, ia] = 0.0
            out.append(E)
        for cb in classes[i + 1:]:
            E = np.zeros((m, m))
            E[np.ix_(ia, list(cb))] = 1.0
            out.append(E + E.T)
    return np.asarray(out)


class StrengthInterpolant:
    """The capture strength at m >= 3 from the anchors' (docs/theory.md §5, "Any width"): a quadratic gauge plus the
    interpolated remainder,

        s(q) = sqrt(q^T G q) + I[s_k - sqrt(u_k^T G u_k)](q),

    with G the positive semidefinite matrix invariant under the group that fits s_k^2 = u_k^T G u_k over the anchors
    u_k in least squares, subject to G u_k = 0 on the anchors that never capture (s_k = 0; then its negative
    eigenvalues set to 0), and I the cone interpolation of the remainders
    (:class:`ConeInterpolant`; :func:`interpolate_strength` where the hull cannot be built).  Exact on the anchors,
    and everywhere for a capture region {mu: mu^T G mu > 1} -- a ball, a slab, a cylinder over the neurons whose
    overlaps matter -- which a piecewise-linear interpolation of s is not: on a facet whose exit point lies inside
    the unit sphere it understates s.  Without a gauge (fewer usable anchors than invariant forms, or forms of
    deficient rank) it is the cone interpolation of s itself.  Strengths >= ``always`` (a stand-in for "captured
    from the bottom rung") are left out of the fit."""

    def __init__(self, anchors: np.ndarray, flip: bool, classes: tuple, always: float = np.inf):
        self.anchors = np.asarray(anchors, dtype=float)
        self.flip, self.classes, self.always = flip, classes, always
        self.cone = ConeInterpolant(self.anchors, flip, classes)
        self.basis = invariant_forms(self.anchors.shape[1], classes)
        self.forms = np.einsum("ki,pij,kj->kp", self.anchors, self.basis, self.anchors)  # (K, p)

    def prepare(self, Q: np.ndarray) -> tuple:
        """What :meth:`evaluate` needs of the unit rows of Q (N, m), which do not depend on the strengths."""
        Q = np.asarray(Q, dtype=float)
        return Q, (self.cone.coordinates(Q) if self.cone.ok else None)

    def gauge(self, strengths) -> Optional[np.ndarray]:
        """G (m, m), or None where the anchors do not determine it."""
        s = np.asarray(strengths, dtype=float)
        use = s < self.always
        p = len(self.basis)
        N = np.eye(p)  # theta = N phi: G u = 0 on every anchor that never captures (u^T G u = 0 with G >= 0)
        zero = self.anchors[use & (s == 0.0)]
        if len(zero):
            C = np.einsum("pij,kj->kip", self.basis, zero).reshape(-1, p)
            _, sv, Vt = np.linalg.svd(C)
            N = Vt[int(np.sum(sv > 1e-10 * max(sv[0], 1e-300))):].T
        F = self.forms[use] @ N
        if N.shape[1] == 0 or len(F) < F.shape[1] or np.linalg.matrix_rank(F) < F.shape[1]:
            return None
        theta = N @ np.linalg.lstsq(F, s[use] ** 2, rcond=None)[0]
        lam, U = np.linalg.eigh(np.tensordot(theta, self.basis, axes=1))
        return (U * np.maximum(lam, 0.0)) @ U.T

    def evaluate(self, prepared: tuple, strengths) -> np.ndarray:
        """s at the rows of the prepared Q: (N,), >= 0."""
        Q, coords = prepared
        s = np.asarray(strengths, dtype=float)
        G = self.gauge(s)
        if G is None:
            base, rest = 0.0, s
        else:
            base = np.sqrt(np.maximum(np.einsum("ni,ij,nj->n", Q, G, Q), 0.0))
            rest = s - np.sqrt(np.maximum(np.einsum("ki,ij,kj->k", self.anchors, G, self.anchors), 0.0))
        out = base + (ConeInterpolant.evaluate(coords, rest) if coords is not None else
                      interpolate_strength(Q, self.anchors, rest, self.flip, self.classes))
        return np.maximum(out, 0.0)


def interpolate_strength(Q: np.ndarray, anchors: np.ndarray, strengths, flip: bool, classes: tuple) -> np.ndarray:
    """Shepard interpolation of the anchors' capture strengths at the unit rows of Q (see the module docstring):
    (N,).  A query on an anchor's orbit takes that anchor's strength.  (The fallback of :class:`ConeInterpolant`.)"""
    s = np.asarray(strengths, dtype=float)
    m = anchors.shape[1]
    c = orbit_cos(Q, anchors, flip, classes)
    gap = 1.0 - c
    hit = gap <= 1e-12
    w = np.where(hit, 0.0, np.where(hit, 1.0, gap) ** (-0.5 * m))
    out = (w @ s) / w.sum(axis=1)
    on = hit.any(axis=1)
    if on.any():
        out[on] = s[np.argmax(hit[on], axis=1)]
    return out
