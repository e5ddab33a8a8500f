"""delta_NN = lim delta*(t) (issue 13 point 1, spectral criterion): the convergence rule on synthetic sequences, and
the API and CLI on a tiny DMFT scan.  The accuracy of delta*(t) itself is the Hessian issue's (tests/test_hessian_*)."""
import contextlib
import io
import json
import math

import pytest

import theorykit as tk
from theorykit.thresholds import DeltaStar, delta_nn_from, geometric_times

from theorykit.cli import main

THR = ["threshold", "--activation", "gelu", "--link", "sign-symmetric", "--loss", "logistic", "--eta", "1",
       "--paths", "2048", "--replicas", "2"]


def ok(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv) + ["--json"])
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue())


def _seq(values, edges=None, q=None, unbounded=False):
    edges = edges or [-0.1 / (1 + i) for i in range(len(values))]
    q = q or [-0.5] * len(values)
    return [DeltaStar(t=10 * 2 ** i, value=v, stderr=0.05, bracket=(v - 0.1, v + 0.1), edge=e, outlier=e - 1e-4,
                      overlap2=0.01, truncation_n=None, unbounded=unbounded, tried=(), method="synthetic",
                      D_low={"0.01": -0.2, "0.001": qq})
            for i, (v, e, qq) in enumerate(zip(values, edges, q))]


def test_a_settled_sequence_converges():
    r = delta_nn_from(_seq([5.0, 6.0, 6.5, 6.52, 6.53], edges=[-0.2, -0.1, -0.05, -0.0501, -0.0502]))
    assert r.converged and r.value == 6.53 and r.criterion == "spectral" and r.by_t == 160
    assert r.increments == pytest.approx((1.0, 0.5, 0.02, 0.01))
    d = r.as_dict()
    assert set(d) == {"value", "stderr", "criterion", "converged", "evidence"}
    assert not d["evidence"]["lower_bound"] and len(d["evidence"]["sequence"]) == 5


def test_a_rising_sequence_is_a_lower_bound():
    r = delta_nn_from(_seq([3.2, 5.5, 6.3, 6.95, 7.19]))  # the bounded setting's delta*(t), t <= 200 (hessian_bench)
    assert not r.converged and r.value == 7.19
    assert "not converged by t = 160" in r.note and r.as_dict()["evidence"]["lower_bound"]


def test_one_small_increment_is_not_enough_and_the_edge_must_settle():
    assert not delta_nn_from(_seq([5.0, 6.0, 6.5, 7.0, 7.01])).converged  # only the last increment is small
    # the edge moves by 0.02 against max(|edge|, |q|) = 0.1: 20%
    assert not delta_nn_from(_seq([6.0, 6.5, 6.52, 6.53], edges=[-0.2, -0.1, -0.05, -0.03], q=[-0.1] * 4)).converged
    # an edge tending to 0 as GD converges is measured against the low tail's width (|q|), not against itself
    to_zero = delta_nn_from(_seq([6.0, 6.5, 6.52, 6.53], edges=[-0.02, -0.01, -0.006, -0.003], q=[-0.37] * 4))
    assert to_zero.converged and to_zero.settled["edge_change"] == pytest.approx(0.003 / 0.37)
    moving_tail = _seq([6.0, 6.5, 6.52, 6.53], edges=[-0.05] * 4, q=[-0.5, -0.5, -0.5, -0.7])
    r = delta_nn_from(moving_tail)
    assert not r.converged and r.settled["D_q1e-3_change"] == pytest.approx(0.2 / 0.7)


def test_unbounded_laws_say_so():
    r = delta_nn_from(_seq([6.0, 6.5, 6.52, 6.53], edges=[-0.05] * 4, unbounded=True), d=1000)
    assert r.unbounded and "no left edge" in r.note and "d = 1000" in r.note and r.truncation == {"d": 1000}
    r = delta_nn_from(_seq([6.0, 6.5, 6.52, 6.53], edges=[-0.05] * 4, unbounded=True))
    assert "give d or n" in r.note


def test_bad_sequences_are_one_line_errors():
    with pytest.raises(tk.TheorykitError, match=">= 3 times"):
        delta_nn_from(_seq([5.0, 6.0]))
    with pytest.raises(tk.TheorykitError, match="undefined"):
        delta_nn_from(_seq([5.0, math.nan, 6.0]))
    with pytest.raises(tk.TheorykitError, match="tol"):
        delta_nn_from(_seq([5.0, 6.0, 6.1]), tol=0)
    with pytest.raises(tk.TheorykitError, match="first"):
        geometric_times(5, 4, first=10)


def test_geometric_times():
    assert geometric_times(1000, 6, 10) == [10, 25, 63, 158, 398, 1000]
    assert geometric_times(40, 3, 10) == [10, 20, 40]


def test_delta_nn_api_and_cli_on_a_tiny_scan():
    pr = tk.Problem("gelu", "sign-symmetric", "logistic", 1, delta=4.0, eta=1.0, steps=8)
    r = tk.delta_nn(pr, 8, points_t=3, first_t=2, delta_range=(2.0, 12.0), points=3, refine=0, paths=2048,
                    replicas=2)
    assert [q.t for q in r.sequence] == [2, 4, 8]
    assert all(2 <= q.value <= 12 for q in r.sequence) and r.criterion == "spectral"
    out = ok(THR + ["--t", "0", "--nn", "8", "--nn-points", "3", "--delta-range", "2", "12", "--points", "3",
                    "--refine", "0"])
    assert [q["t"] for q in out["delta_star"]] == [0]
    nn = out["delta_nn"]
    assert {"value", "criterion", "converged", "evidence"} <= set(nn)
    assert [q["t"] for q in nn["evidence"]["sequence"]] == [2, 4, 8] == out["settings"]["nn_times"]
    assert nn["value"] == pytest.approx(r.value, rel=1e-12)  # the same scan, the same seed
