"""The public surface: a small top level (the questions a user asks), the rest under the subpackages; presets usable
inside expressions; the thin front doors (tk.hessian, tk.table) agree with the pieces they call."""

import numpy as np
import pytest
import sympy as sp

import theorykit as tk
from theorykit import conventions as cv


def test_top_level_is_small_and_every_name_is_documented():
    assert len(tk.__all__) <= 20
    for name in tk.__all__:
        obj = getattr(tk, name)
        assert (obj.__doc__ or "").strip(), name
    # the rest is one level down, in the theory's order
    for sub, names in {"symbolic": ("Network", "expectation", "analyse_link"),
                       "dynamics": ("dmft_closed_form", "dmft_scan", "DMFTResult"),
                       "spectra": ("hessian_prediction", "spectral_threshold", "HessianLaw"),
                       "thresholds": ("capture_threshold", "FiniteD", "DeltaStar"),
                       "referee": ("simulate", "hessian_bottom", "summarise")}.items():
        mod = getattr(tk, sub)
        for n in names:
            assert n in mod.__all__ and getattr(mod, n) is not None, (sub, n)


def test_presets_are_functions_inside_expressions():
    x = cv.X
    gelu = tk.activation("gelu").expr
    assert sp.simplify(tk.activation("gelu(x) + x**2/4").expr - (gelu + x ** 2 / 4)) == 0
    assert sp.expand(tk.activation("quad(2*x) - he2(x)").expr) == 3 * x ** 2 + 1
    assert tk.activation("relu(x) + linear(x)/2").expr == sp.Max(0, x) + x / 2
    with pytest.raises(tk.TheorykitError, match="not allowed"):
        tk.activation("geluu(x)")


def test_hessian_front_door_is_the_law_and_prediction_of_the_dmft_at_t():
    from theorykit.spectra import hessian_prediction
    from theorykit.thresholds import law_at

    pr = tk.Problem("gelu", "sign-symmetric", "logistic", delta=9.0, eta=1.0, steps=3)
    h = tk.hessian(pr, 3, d=200, paths=2048, replicas=2)
    r = tk.dmft(pr, keep_law_at=[3], bias_check=False, paths=2048, replicas=2)
    law = law_at(r, 3, d=200)
    p = hessian_prediction(law)
    assert h.t == 3 and h.law.truncation_n == law.truncation_n == 1800
    assert h.prediction.edge == pytest.approx(p.edge, rel=1e-12)
    assert h.prediction.margin == pytest.approx(p.margin, rel=1e-12)
    with pytest.raises(tk.TheorykitError, match="t must be"):
        tk.hessian(pr, -1)


def test_table_front_door():
    df = tk.table(["gelu", "relu"], "phase-retrieval", "delta_alg")
    assert list(df["activation"]) == ["gelu", "relu"] and np.allclose(df["delta_alg"], 0.5)
    assert set(df["delta_alg_status"]) == {"computed"}
    with pytest.raises(tk.TheorykitError, match="unknown option"):
        tk.table("gelu", "phase-retrieval", "delta_alg", pathz=3)
    with pytest.raises(tk.TheorykitError, match="not among the activations"):
        tk.table("gelu", "phase-retrieval", "delta_alg", eta={"quad": 1.0})
