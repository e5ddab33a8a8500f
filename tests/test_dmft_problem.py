"""dmft takes a Problem; its result carries the Problem and can be re-run from its own JSON."""
import json

import numpy as np
import pytest

import theorykit as tk


def test_dmft_problem_and_keyword_forms_agree_and_round_trip():
    pr = tk.Problem("gelu", "z+z**2/2", "square", 2, a=[1, -1], delta=2.0, eta=1.0, steps=3)
    r = tk.dmft(pr, paths=2048, replicas=2, processes=1)
    r2 = tk.dmft("gelu", "z+z**2/2", "square", 2, a=[1, -1], delta=2.0, eta=1.0, steps=3, paths=2048, replicas=2,
                 processes=1)
    assert np.array_equal(r.gram, r2.gram) and np.array_equal(r.test_loss, r2.test_loss)
    assert r.problem == pr and r2.problem == pr
    back = tk.Problem.from_dict(json.loads(json.dumps(r.as_dict()))["problem"])
    r3 = tk.dmft(back, paths=2048, replicas=2, processes=1)
    assert back.key == pr.key and np.array_equal(r3.gram, r.gram)


def test_dmft_problem_fields_are_not_given_twice():
    pr = tk.Problem("gelu", "z", delta=2.0, eta=1.0, steps=2)
    with pytest.raises(tk.TheorykitError, match="delta is part of the Problem"):
        tk.dmft(pr, delta=3.0)
    with pytest.raises(tk.TheorykitError, match="give a Problem"):
        tk.dmft("gelu")


def test_closed_form_and_capture_take_a_problem():
    pr = tk.Problem("quad", "z+z**2/2", "square", 2, a=[1, -1], delta=2, eta=1, steps=1)
    a = tk.dynamics.dmft_closed_form(pr).numeric()
    b = tk.dynamics.dmft_closed_form("quad", "z+z**2/2", "square", 2, a=[1, -1], delta=2, eta=1).numeric()
    assert a.keys() == b.keys() and all(np.allclose(np.asarray(a[k], float), np.asarray(b[k], float)) for k in a)
    pr2 = tk.Problem("gelu", "phase-retrieval", delta=11.0, eta=1.0, steps=20)
    kw = dict(hi=0.5, tol=0.1, paths=2048, replicas=2, processes=1)
    c1 = tk.thresholds.capture_threshold(pr2, **kw)
    c2 = tk.thresholds.capture_threshold("gelu", "phase-retrieval", delta=11.0, eta=1.0, steps=20, **kw)
    assert c1 == c2
    with pytest.raises(tk.TheorykitError, match="part of the Problem"):
        tk.thresholds.capture_threshold(pr2, delta=3.0)
