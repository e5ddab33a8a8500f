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
    r = tk.dmft(pr, keep_law_at=[3], bias_check=False, paths=2048, replicas=2, d=200)  # the DMFT of n = delta d
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


def test_every_result_is_a_frozen_dataclass():
    """What the public functions return cannot be changed after the fact (results say how they were obtained)."""
    import dataclasses

    from theorykit import claims, dynamics, referee, spectra, symbolic, thresholds

    classes = [dynamics.DMFTResult, dynamics.PathLaw, dynamics.ClosedFormDMFT, dynamics.LinearGDLimit,
               referee.SimulationResult, referee.HessianSpectrum, spectra.SpectralPrediction, spectra.HessianPrediction,
               spectra.HessianLaw, thresholds.DeltaStar, thresholds.DeltaNN, thresholds.DeltaDyn, thresholds.FiniteD,
               thresholds.HessianAt, thresholds.capture.CaptureThreshold, thresholds.capture.CaptureCurve,
               thresholds.capture.GrowthRate, symbolic.LinkAnalysis, symbolic.DeltaAlg, symbolic.HermiteExpansion,
               symbolic.Expectation, claims.CheckResult]
    loose = [c.__name__ for c in classes if not (dataclasses.is_dataclass(c) and c.__dataclass_params__.frozen)]
    assert not loose, loose


def test_one_cache_scheme(tmp_path):
    """theorykit.cache: content keys are stable and order-free; a record is read back under its key only; the table's
    cells, the plot's predictions, the validation cases and the seed files all go through it."""
    import inspect

    from theorykit import cache
    from theorykit.report import table, writer
    from theorykit.validation import seeds

    assert cache.content_key({"a": 1, "b": [1, 2]}) == cache.content_key({"b": [1, 2], "a": 1})
    assert cache.content_key({"a": 1}) != cache.content_key({"a": 2}) and len(cache.content_key({}, 12)) == 12
    store = cache.JsonCache(str(tmp_path / "c"))
    assert store.get("k") is None
    store.put("case_1/x y", {"rows": [1.5, float("nan")]})
    assert store.get("case_1/x y")["rows"][0] == 1.5 and store.path("case_1/x y").endswith("case_1-x-y.json")
    assert not list((tmp_path / "c").glob("*.tmp"))
    users = [table.build, table.cell_key, writer.cached_case, seeds.cache_file]
    assert all("JsonCache" in inspect.getsource(f) or "content_key" in inspect.getsource(f) for f in users)
