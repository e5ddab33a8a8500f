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
