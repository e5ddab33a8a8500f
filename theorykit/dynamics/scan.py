"""Scan mode: one setting solved at a list of delta with common random numbers (docs/theory.md §3, numerics).

A threshold search (delta*(t), the Hessian theory's outlier margin) needs DMFT outputs that are smooth in delta.  Each
solve at one delta is already a deterministic function of the seed, but three things could still jump between
neighbouring delta: the 'auto' choices (latent rule, response estimator, bias check), the batch sizes, and which
single-path instabilities are excluded.  :func:`dmft_scan` freezes all three: the first solve's resolved choices are
passed explicitly to every other, and the paths excluded at any delta are excluded at every delta (a second pass
re-solves the deltas whose own exclusion differed from the union).  The same seed then gives the same latent nodes and
the same Gaussian innovations at every delta.
"""
from __future__ import annotations


import numpy as np

from ..errors import TheorykitError
from .solver import dmft


def dmft_scan(problem, deltas, **options) -> list:
    """DMFT results for ``problem.replace(delta=d)`` at every d in ``deltas`` (a list of > 0 numbers, no duplicates),
    with common random numbers and frozen choices (module docstring).  ``options`` are :func:`dmft`'s numeric options
    (paths, replicas, seed, keep_law_at, ...).  Every result's ``settings["scan"]`` records what was frozen."""
    from ..problem import Problem

    if not isinstance(problem, Problem):
        raise TheorykitError(f"dmft_scan takes a theorykit.Problem, got {type(problem).__name__}")
    from .._checks import check_deltas

    deltas = check_deltas(deltas)
    if "exclude" in options:
        raise TheorykitError("dmft_scan sets the path exclusion itself")
    first = dmft(problem.replace(delta=deltas[0]), **options)
    st = first.settings
    frozen = dict(latent=st["latent"], order=st["order"], response=st["response"],
                  window=(st["window"] or 0), bias_check=bool(st["bias_check"]))
    if st["response"] == "direct":
        frozen["response_paths"] = st["response_paths_per_replica"]
        frozen["fine_lags"] = st["fine_lags"]
    opts = {**options, **frozen}
    results = [first] + [dmft(problem.replace(delta=d), **opts) for d in deltas[1:]]
    union = [np.logical_or.reduce([r.excluded_masks[i] for r in results]) for i in range(len(first.excluded_masks))]
    redone = []
    for j, r in enumerate(results):
        if any(not np.array_equal(u, m) for u, m in zip(union, r.excluded_masks)):
            results[j] = dmft(problem.replace(delta=deltas[j]), **opts, exclude=union)
            redone.append(deltas[j])
    for r in results:
        r.settings["scan"] = {"deltas": deltas, "frozen": frozen, "excluded_paths": int(sum(u.sum() for u in union)),
                              "resolved_again_with_the_union": redone,
                              "how": "common random numbers (same seed, nodes and innovations at every delta), the "
                                     "first solve's 'auto' choices frozen, excluded paths united over delta"}
    return results
