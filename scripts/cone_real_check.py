#!/usr/bin/env python
"""The capture-strength rules at width 4 on the DMFT's own capture radii (issue 30 point 4).

    python scripts/cone_real_check.py [--cache FILE] [--probe]

1. finite_d at width 4 (GeLU, phase retrieval, square loss, a = (1, -1, 1, -1), eta = 1, horizon 200; deltas 10 and 13,
   d = 400 and 800, 16384 paths in 4 replicas, no root finding) with 12 anchors instead of the default 7 (the first 7
   of the 12 are the default ones); the capture ladders and V_eff kept in FILE (default /tmp/cone_real_check.pkl;
   reused when it exists: about 12 min on 2 cores otherwise).
2. For each (delta, d): P(capture by 200) from the first 7 anchors and from all 12, with the committed rule
   (theorykit.thresholds.directions.StrengthInterpolant: a quadratic gauge plus the cone interpolation of the rest)
   and with the cone interpolation of s alone (ConeInterpolant); and the strengths 1/m*(200) that each rule predicts
   from the 7 at the 5 other anchors, beside the measured ones.
3. With --probe (delta = 10, about 4 min): m*(200) measured on 6 directions where the two 12-anchor rules' P
   contributions differ most (farthest-point picks, one per orbit), with the same ladder options as finite_d; then
   DMFT runs from m0 = 0.5, 0.7, 0.9, 0.99 along 5 directions (pure a = -1 ones, all neurons alike, and two picks)
   to see whether capture happens above the ladder's top rung.
"""
from __future__ import annotations

import argparse
import os
import pickle

import numpy as np
from scipy.stats import chi2

import theorykit as tk
import theorykit.thresholds.capture as cap
from theorykit.thresholds.capture import (BRACKET_FACTOR, FINITE_D_WIDE_LADDER, _ray_star, _S_ALWAYS, capture_curve,
                                          capture_probabilities)
from theorykit.thresholds.directions import (ConeInterpolant, StrengthInterpolant, _sort_classes, orbit_cos,
                                             sphere_directions)

T = 200
ALWAYS = _S_ALWAYS * (1 - 1e-9)


def problem(delta):
    return tk.Problem("gelu", "phase-retrieval", "square", 4, a=[1, -1, 1, -1], delta=delta, eta=1.0, steps=T)


def record(path):
    calls, orig, orig_at, now = [], cap.capture_probabilities, cap._finite_d_at, {}

    def at(problem_, dl, *args, **kw):
        now["delta"] = dl
        return orig_at(problem_, dl, *args, **kw)

    def rec(curves, flip, swap, V, V_se, tm, d, classes=None):
        calls.append(dict(delta=now["delta"], curves=curves, flip=flip, V=V, tm=tm, d=d, classes=classes))
        return orig(curves, flip, swap, V, V_se, tm, d, classes=classes)

    cap.capture_probabilities, cap._finite_d_at = rec, at
    tk.finite_d(problem(8.0), [10.0, 13.0], [400, 800], T, paths=16384, replicas=4, rays=12, refine=0, progress=True)
    cap.capture_probabilities, cap._finite_d_at = orig, orig_at
    with open(path, "wb") as fh:
        pickle.dump(calls, fh)
    return calls


def directions(c):
    Vk = 0.5 * (c["V"][c["tm"]] + c["V"][c["tm"]].T)
    lam, Q = np.linalg.eigh(Vk)
    Bw = sphere_directions(4) @ (Q * np.sqrt(lam)).T
    sc = (Bw ** 2).sum(1)
    return Bw / np.sqrt(sc)[:, None], sc


def strengths(curves):
    return np.array([_ray_star(cc, T)[0] for _, cc in curves]), np.asarray([cc.direction for _, cc in curves])


def rule(name, A, c, s, Q):
    if name == "cone":
        cone = ConeInterpolant(A, c["flip"], c["classes"])
        return cone.evaluate(cone.coordinates(Q), s)
    r = StrengthInterpolant(A, c["flip"], c["classes"], always=ALWAYS)
    return r.evaluate(r.prepare(Q), s)


def contributions(st, sc, d):
    with np.errstate(divide="ignore"):
        r2 = np.where(st >= ALWAYS, 0.0, np.where(st > 0, 1.0 / st ** 2, np.inf))
    return chi2.sf(d * r2 / sc, 4)


def report(calls):
    for c in calls:
        q, sc = directions(c)
        s, A = strengths(c["curves"])
        print(f"delta {c.get('delta', '?')}, d = {c['d']}: strengths 1/m*(200) on the 12 anchors {np.round(s, 1)}")
        for n in (7, 12):
            # the committed rule through finite_d's own P; the cone alone (no longer in it) by the same formula
            committed = capture_probabilities(c["curves"][:n], c["flip"], False, c["V"], 0 * c["V"], c["tm"], c["d"],
                                              classes=c["classes"])[0][T]
            alone = float(np.mean(contributions(rule("cone", A[:n], c, s[:n], q), sc, c["d"])))
            print(f"  {n} anchors: P gauge + cone {committed:.3f}, cone alone {alone:.3f}")
        for nm in ("gauge", "cone"):
            print(f"  from 7 anchors, {nm}: {np.round(rule(nm, A[:7], c, s[:7], A[7:]), 1)} at the other 5, "
                  f"measured {np.round(s[7:], 1)}")


def probe(calls):
    c = next(c for c in calls if c.get("delta") == 10.0 and c["d"] == 400)
    q, sc = directions(c)
    s, A = strengths(c["curves"])
    diff = np.abs(contributions(rule("cone", A, c, s, q), sc, 400) - contributions(rule("gauge", A, c, s, q), sc, 400))
    cand = _sort_classes(q[np.argsort(-diff)[:400]], c["classes"])
    cand = cand * np.sign(cand[:, :1])
    chosen, near = [0], orbit_cos(cand, cand[:1], c["flip"], c["classes"])[:, 0]
    while len(chosen) < 6:
        j = int(np.argmin(near))
        chosen.append(j)
        near = np.maximum(near, orbit_cos(cand, cand[j:j + 1], c["flip"], c["classes"])[:, 0])
    pr = problem(10.0)
    m0s = np.geomspace(*FINITE_D_WIDE_LADDER[:2], FINITE_D_WIDE_LADDER[2])
    opts = dict(paths=16384, replicas=2, seed=0, response="direct")
    for u in cand[chosen]:
        g, cv = rule("gauge", A, c, s, u[None])[0], rule("cone", A, c, s, u[None])[0]
        curve = capture_curve(pr, T, m0s, direction=tuple(u), refine=2, guess=float(1 / np.sqrt(max(g * cv, 1e-12))),
                              step=BRACKET_FACTOR ** 0.25, search="bracket", **opts)
        ms = curve.m_star[T]
        print(f"  u = {np.round(u, 3)}: strength gauge + cone {g:.2f}, cone alone {cv:.2f}, measured "
              + ("< 1/0.5 (never captured by the top rung)" if ms is None else f"{1 / ms:.2f}"))
    for u in [cand[chosen[1]], cand[chosen[0]], (0, 1, 0, 0), (0, 1, 0, -1), (1, 1, 1, 1)]:
        u = np.asarray(u, dtype=float) / np.linalg.norm(u)
        cv = capture_curve(pr, T, [0.5, 0.7, 0.9, 0.99], direction=tuple(u), search="ladder", **opts)
        print(f"  u = {np.round(u, 3)}: cos^2(200) from m0 = 0.5, 0.7, 0.9, 0.99: "
              f"{np.round(np.asarray(cv.cos2)[:, -1], 3)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="/tmp/cone_real_check.pkl")
    ap.add_argument("--probe", action="store_true")
    a = ap.parse_args()
    if os.path.exists(a.cache):
        with open(a.cache, "rb") as fh:
            calls = pickle.load(fh)
    else:
        calls = record(a.cache)
    report(calls)
    if a.probe:
        probe(calls)


if __name__ == "__main__":
    main()
