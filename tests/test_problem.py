"""Tests of theorykit.Problem (the learning problem, once), theorykit._checks and simulate(problem)."""
import doctest
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import theorykit as tk
from theorykit import problem as problem_module
from theorykit._checks import check_int, check_matrix, check_number, check_vector
from theorykit.errors import TheorykitError
from theorykit.problem import Problem

BASE = dict(activation="gelu", link="phase-retrieval", loss="square", width=2, delta=2.0, eta=0.5, steps=10)


def base(**changes):
    kw = {**BASE, **changes}
    return Problem(kw.pop("activation"), kw.pop("link"), kw.pop("loss"), kw.pop("width"), **kw)


# ------------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("changes,match", [
    (dict(delta=0), "delta must be > 0"),
    (dict(delta=float("inf")), "delta must be > 0"),
    (dict(delta="two"), "delta must be a number"),
    (dict(delta=None), "delta (n/d) is required"),
    (dict(ridge=-0.1), "ridge must be >= 0"),
    (dict(eta=0.0), "eta must be > 0"),
    (dict(steps=-1), "steps must be an integer >= 0"),
    (dict(steps=2.5), "steps must be an integer >= 0"),
    (dict(steps=True), "steps must be an integer >= 0"),
    (dict(eta=None), "give eta and steps"),
    (dict(schedule=[0.1, 0.2]), "not both"),
    (dict(eta=None, steps=None, schedule=[0.1, -0.2]), "positive step sizes"),
    (dict(eta=None, steps=None, schedule=[]), "schedule must not be empty"),
    (dict(width=0), "width m must be an integer in 1..4096"),
    (dict(width=5000), "width m must be an integer in 1..4096"),
    (dict(width=1.0), "width m must be an integer in 1..4096"),
    (dict(a=(1.0, 2.0, 3.0)), "a has 3 entries but 2 are needed"),
    (dict(b="0,x"), "b: 'x' is not a number"),
    (dict(a=[1.0, float("nan")]), "a must be finite"),
    (dict(Sigma0=[[1.0, 0.5], [0.0, 1.0]]), "Sigma0 must be symmetric positive semi-definite"),
    (dict(Sigma0=[[1.0, 2.0], [2.0, 1.0]]), "Sigma0 must be symmetric positive semi-definite"),
    (dict(Sigma0=[[1.0, 0.0, 0.0]]), "Sigma0 must be a 2 x 2 matrix"),
    (dict(M0=[[0.1, 0.2, 0.3]]), "M0 must be a 1 x 2 matrix"),
    (dict(activation="exp(x"), ""),
    (dict(activation="__import__('os')"), ""),
    (dict(link="nonsense_link"), ""),
    (dict(loss="huber:c=abc"), ""),
    (dict(activation=3), "activation must be a preset name"),
])
def test_validation_errors_are_one_line(changes, match):
    with pytest.raises(TheorykitError) as e:
        base(**changes)
    msg = str(e.value)
    assert msg and "\n" not in msg
    assert match in msg


def test_scalar_a_b_accepted_and_broadcast():
    p1 = base(width=1, a=1)
    assert p1.a is None and p1.a_vector.tolist() == [1.0]  # the default is stored as None
    p3 = base(width=3, a=0.5, b="1/4")
    assert p3.a == (0.5, 0.5, 0.5) and p3.b == (0.25, 0.25, 0.25)
    assert base(width=2, a="1,-1").a == (1.0, -1.0)
    assert base(width=2, a=np.array([2, 3])).a == (2.0, 3.0)
    assert base(width=1, a=np.float64(2.0)).a == (2.0,)
    # a given default equals the omitted one
    assert base(width=2, a=(1, 1), b=0, Sigma0=np.eye(2), M0=[[0, 0]]) == base(width=2)
    # schedule: a number is one step; Sigma0: a number s is s I; M0: a k-vector is the column of a width-1 M0
    assert base(eta=None, steps=None, schedule=0.3).schedule == (0.3,)
    assert base(Sigma0=2).Sigma0 == ((2.0, 0.0), (0.0, 2.0))
    assert base(width=1, M0=0.5).M0 == ((0.5,),)
    assert Problem("gelu", "staircase", delta=2, eta=1, steps=2, M0=[0.0, 0.3]).M0 == ((0.0,), (0.3,))


def test_fields_are_canonical_types():
    p = base(delta=2, eta=1, ridge=0, width=np.int64(2), steps=np.int64(4))
    assert type(p.delta) is float and type(p.eta) is float and type(p.ridge) is float
    assert type(p.width) is int and type(p.steps) is int
    assert base(ridge=-0.0).ridge == 0.0 and json.loads(base(ridge=-0.0).to_json())["ridge"] == 0.0
    assert "-0.0" not in base(ridge=-0.0).to_json()


def test_ingredient_objects_stored_as_specs():
    p = Problem(tk.activation("gelu"), tk.link("noisy-phase-retrieval:s=0.3"), tk.loss("logistic"), delta=1.0,
                eta=0.1, steps=1)
    assert (p.activation, p.link, p.loss) == ("gelu", "noisy-phase-retrieval:s=0.3", "logistic")
    assert p == Problem("gelu", " noisy-phase-retrieval:s=0.3 ", "logistic", delta=1.0, eta=0.1, steps=1)
    assert p.link_obj.expr == tk.link("noisy-phase-retrieval:s=0.3").expr


# ------------------------------------------------------------------------------------------------ properties
def test_derived_objects():
    p = base(width=3, a="1,-1,2", b=0.5, ridge=0.1)
    assert p.k == 1 and p.m == 3 and p.n_steps == 10
    assert p.etas.tolist() == [0.5] * 10
    net = p.network
    assert isinstance(net, tk.symbolic.Network) and net.m == 3 and net.a.tolist() == [1.0, -1.0, 2.0]
    assert net.b.tolist() == [0.5, 0.5, 0.5] and p.network is net
    q = base(eta=None, steps=None, schedule=[0.1, 0.2, 0.4])
    assert q.n_steps == 3 and q.etas.tolist() == [0.1, 0.2, 0.4] and q.eta is None and q.steps is None
    assert np.array_equal(q.Sigma0_matrix, np.eye(2)) and np.array_equal(q.M0_matrix, np.zeros((1, 2)))
    r = Problem("gelu", "staircase", delta=2, eta=1, steps=2)
    assert r.k == 2 and r.M0_matrix.shape == (2, 1)


def test_analysis_computed_once():
    p = base()
    a1 = p.analysis
    assert p.analysis is a1
    assert np.allclose(np.abs(a1.hard_basis), [[1.0]])  # phase retrieval: z is hard
    # the reading views are fresh arrays: mutating one never changes the problem
    e = p.etas
    e[:] = 99.0
    assert p.etas[0] == 0.5


def test_frozen_hashable_and_compared_by_value():
    p, q = base(), base()
    assert p == q and hash(p) == hash(q) and p is not q
    assert len({p, q, base(delta=3.0)}) == 2
    with pytest.raises(Exception):
        p.delta = 3.0
    assert pickle.loads(pickle.dumps(p)) == p
    assert "network" not in pickle.loads(pickle.dumps(p)).__dict__  # caches are not pickled


# ------------------------------------------------------------------------------------------------ replace
def test_replace_revalidates():
    p = base()
    q = p.replace(delta=4)
    assert q.delta == 4.0 and p.delta == 2.0 and q.replace(delta=2.0) == p
    with pytest.raises(TheorykitError, match="delta must be > 0"):
        p.replace(delta=-1)
    with pytest.raises(TheorykitError, match="no field 'deltaa'"):
        p.replace(deltaa=1)
    with pytest.raises(TheorykitError, match="a has 2 entries but 3 are needed"):
        base(a="1,-1").replace(width=3)
    # defaults follow a new width or link; a schedule replaces eta and steps and back
    assert p.replace(width=4).m == 4 and p.replace(link="staircase").M0_matrix.shape == (2, 2)
    s = p.replace(schedule=[0.1, 0.2])
    assert s.eta is None and s.steps is None and s.n_steps == 2
    assert s.replace(eta=0.5, steps=10) == p


# ------------------------------------------------------------------------------------------------ JSON and key
def _rich():
    return Problem("tanh", "noisy-phase-retrieval:s=0.3", "huber:c=2", 2, a="1,-1/3", b=(0.1, -0.2), delta=1.7,
                   ridge=0.05, eta=None, steps=None, schedule=(0.1, 0.2, 0.2), Sigma0=[[1.0, 0.3], [0.3, 2.0]],
                   M0=[[0.01, -0.02]])


@pytest.mark.parametrize("make", [base, _rich])
def test_json_round_trip(make):
    p = make()
    d = p.as_dict()
    assert d["format"] == problem_module.FORMAT
    back = Problem.from_json(p.to_json())
    assert back == p and back.key == p.key and back.to_json() == p.to_json()
    assert Problem.from_dict(json.loads(p.to_json(indent=2))) == p
    assert Problem.from_dict(d) == p and d == p.as_dict()  # from_dict does not consume its argument


def test_from_dict_errors_are_one_line():
    d = base().as_dict()
    for bad, match in [({**d, "format": "other/9"}, "unknown Problem format"), ({**d, "paths": 3}, "unknown Problem"),
                       ({k: v for k, v in d.items() if k != "link"}, "has no 'link'")]:
        with pytest.raises(TheorykitError, match=match):
            Problem.from_dict(bad)
    with pytest.raises(TheorykitError, match="not a Problem in JSON"):
        Problem.from_json("{not json")


def test_key_stable_across_processes():
    p = _rich()
    code = ("import theorykit as tk, sys; p = tk.Problem.from_json(sys.stdin.read()); "
            "print(p.key); print(tk.Problem('gelu', 'phase-retrieval', 'square', 2, delta=2.0, eta=0.5, steps=10).key)")
    out = subprocess.run([sys.executable, "-c", code], input=p.to_json(), capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.split()
    assert out == [p.key, base().key]
    assert len(p.key) == 64 and int(p.key, 16) >= 0


@pytest.mark.parametrize("change", [
    dict(activation="tanh"), dict(link="abs"), dict(loss="logistic"), dict(width=3), dict(a=(1.0, -1.0)),
    dict(b=0.1), dict(delta=2.0000000000000004), dict(ridge=1e-12), dict(eta=0.25), dict(steps=11),
    dict(schedule=[0.5] * 10), dict(Sigma0=[[1.0, 0.0], [0.0, 1.5]]), dict(M0=[[0.0, 1e-9]]),
])
def test_key_changes_when_any_field_changes(change):
    p = base()
    q = p.replace(**change)
    assert q != p and q.key != p.key


def test_docstring_example_runs():
    failures, tried = doctest.testmod(problem_module, verbose=False, raise_on_error=False)
    assert tried > 0 and failures == 0


# ------------------------------------------------------------------------------------------------ checks
def test_shared_checks():
    assert check_int("n", np.int32(3), 1) == 3 and type(check_int("n", np.int32(3), 1)) is int
    with pytest.raises(TheorykitError, match=r"n must be an integer in 1\.\.5, got 6"):
        check_int("n", 6, 1, 5)
    assert check_number("x", "0.5", lambda v: v > 0, "> 0") == 0.5
    with pytest.raises(TheorykitError, match="x must be a number, got True"):
        check_number("x", True, lambda v: True, "anything")
    assert check_vector("v", 2, 3) == (2.0, 2.0, 2.0) and check_vector("v", "1,2") == (1.0, 2.0)
    assert check_vector("v", [3]) == (3.0,)
    assert check_matrix("S", 1.5, (1, 1)) == ((1.5,),) and check_matrix("S", [1, 2, 3, 4], (2, 2)) == ((1, 2), (3, 4))
    # the old private names still work (dmft.py imports them from simulate)
    from theorykit import _checks

    sim_module = sys.modules["theorykit.referee.gd"]  # the attribute theorykit.simulate is the function

    assert sim_module._check_int is _checks.check_int and sim_module._check_number is _checks.check_number
    assert sim_module._Progress is _checks.Progress and sim_module.physical_memory is _checks.physical_memory


# ------------------------------------------------------------------------------------------------ simulate
SIM = dict(d=20, n_test=30, seed=7)


def _same(r1, r2):
    o1, o2 = r1.as_dict(), r2.as_dict()
    assert json.dumps(o1, sort_keys=True) == json.dumps(o2, sort_keys=True)  # floats by repr: bit-identical
    assert np.array_equal(r1.theta, r2.theta)


@pytest.mark.parametrize("kw", [
    dict(activation="gelu", link="phase-retrieval", loss="square", width=2, delta=2.0, steps=4, eta=0.5),
    dict(activation="tanh", link="noisy-phase-retrieval", loss="huber", width=3, a="1,-1,2", b="0,0.5,-1",
         delta=1.5, steps=3, eta=0.3, ridge=0.2),
])
def test_simulate_problem_equals_keywords(kw):
    r_kw = tk.simulate(**kw, **SIM)
    kw = dict(kw)
    p = Problem(kw.pop("activation"), kw.pop("link"), kw.pop("loss"), kw.pop("width"), **kw)
    r_p = tk.simulate(p, **SIM)
    _same(r_kw, r_p)
    _same(r_kw, tk.simulate(problem=p, **SIM))
    assert r_p.problem == p and r_kw.problem == p
    # the result re-runs from its own JSON: problem + numeric settings
    out = json.loads(json.dumps(r_p.as_dict()))
    s = out["settings"]
    again = tk.simulate(Problem.from_dict(out["problem"]), d=s["d"], n_test=s["n_test"], seed=s["seed"])
    _same(r_p, again)


def test_simulate_problem_conflicts_and_schedule():
    p = base(steps=3)
    with pytest.raises(TheorykitError, match="delta is part of the Problem"):
        tk.simulate(p, delta=3.0, **SIM)
    with pytest.raises(TheorykitError, match="problem must be a theorykit.Problem"):
        tk.simulate(problem="gelu", **SIM)
    # a constant schedule is constant-step GD
    r1 = tk.simulate(p, **SIM)
    r2 = tk.simulate(p.replace(schedule=[0.5, 0.5, 0.5]), **SIM)
    assert np.array_equal(r1.M, r2.M) and np.array_equal(r1.train_loss, r2.train_loss)
    assert r2.settings["eta"] is None and r2.settings["schedule"] == [0.5, 0.5, 0.5] and r2.settings["steps"] == 3
    # and a schedule changes the steps it says
    r3 = tk.simulate(p.replace(schedule=[0.5, 0.5, 0.1]), **SIM)
    assert np.array_equal(r1.M[:3], r3.M[:3]) and not np.array_equal(r1.M[3], r3.M[3])


def test_simulate_initial_law():
    """Theta(0) = Theta* M0 + G Sigma0^(1/2) / sqrt(d) with the same draw G."""
    d, seed = 400, 3
    p = Problem("gelu", "phase-retrieval", "square", 2, delta=1.0, eta=0.1, steps=0)
    S = np.array([[2.0, 0.5], [0.5, 1.0]])
    M0 = np.array([[0.6, -0.3]])
    r0 = tk.simulate(p, d=d, seed=seed, n_test=10)
    r = tk.simulate(p.replace(Sigma0=S, M0=M0), d=d, seed=seed, n_test=10)
    w, U = np.linalg.eigh(S)
    root = (U * np.sqrt(w)) @ U.T
    assert np.allclose(r.M[0], r0.M[0] @ root + M0, rtol=0, atol=1e-14)
    assert np.allclose(r.gram[0], S + M0.T @ M0, atol=0.25)  # d = 400: O(d^-1/2) fluctuations
    with pytest.raises(TheorykitError, match="init 'spectral'"):
        tk.simulate(p.replace(M0=M0), d=d, init="spectral", n_test=10)
