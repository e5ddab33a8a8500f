"""The simulator's fused GD kernel (theorykit/referee/_fused.py) against the NumPy path: one step's loss and X^T F,
whole runs, thread-count invariance, the fallback and its reasons.  Cases: smooth (GeLU), kinked (ReLU, and a user's
x*step(x)), bounded (tanh with logistic loss), unbounded (x^2), a custom activation (x*tanh(x)), |x|."""
import numpy as np
import pytest

import theorykit as tk
from theorykit.errors import TheorykitError
from theorykit.referee._fused import CHUNKS, fused_kernel

CASES = [("gelu", "square", 4), ("relu", "square", 1), ("tanh", "logistic", 2), ("quad", "square", 3),
         ("x*tanh(x)", "square", 1), ("abs(x)", "square", 5), ("x*step(x)", "logistic", 2),
         ("gelu", "logistic", 7)]  # the backward pass in fours, a pair and one row


@pytest.mark.parametrize("act,loss,m", CASES)
def test_one_step_matches_numpy(act, loss, m):
    rng = np.random.default_rng(hash((act, loss, m)) % 2**32)
    a = rng.choice([-1.0, 1.0], m)
    b = 0.1 * rng.standard_normal(m)
    net = tk.symbolic.Network(act, loss, m, a=list(a), b=list(b))
    fk, why = fused_kernel(net)
    assert fk is not None, why
    for n, d in ((1003, 37), (8, 5), (3, 7), (257, 64)):  # remainders of the 4-row tiles and of the chunks
        X = rng.standard_normal((n, d))
        theta = rng.standard_normal((d, m)) / np.sqrt(d)
        y = np.sign(X[:, 0]) if loss == "logistic" else X[:, 0] ** 2
        loss_sum, g = fk.step(X, y, theta)
        ref = net.evaluate(X @ theta, y)
        g_ref = X.T @ ref.F
        assert g.shape == (d, m)
        assert np.max(np.abs(g - g_ref)) <= 1e-12 * np.max(np.abs(g_ref))
        assert loss_sum == pytest.approx(float(np.sum(ref.loss)), rel=1e-12)
        # the forward-only pass (compiled without sigma' and l': the compiler may order the sums differently)
        assert fk.loss_sum(X, y, theta) == pytest.approx(loss_sum, rel=1e-14)
        # the train step and a test loss in one dispatch: the same numbers as two calls
        Xt, yt = np.ascontiguousarray(X[::-1][: max(1, n // 2)]), np.ascontiguousarray(y[::-1][: max(1, n // 2)])
        ls2, g2, test_sum = fk.step(X, y, theta, test=(Xt, yt, theta))
        assert ls2 == loss_sum and np.array_equal(g2, g) and test_sum == fk.loss_sum(Xt, yt, theta)


def test_threads_do_not_change_the_numbers():
    net = tk.symbolic.Network("gelu", "square", 3)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((999, 50))
    y = X[:, 0] ** 2
    theta = rng.standard_normal((50, 3)) / 7
    outs = [fused_kernel(net, threads)[0].step(X, y, theta) for threads in (1, 2, 3, CHUNKS)]
    for ls, g in outs[1:]:
        assert ls == outs[0][0] and np.array_equal(g, outs[0][1])  # bitwise: fixed chunks, summed in order


@pytest.mark.parametrize("act,link,loss,m,eta,delta", [
    ("gelu", "phase-retrieval", "square", 1, 1.0, 12.0),
    ("relu", "phase-retrieval", "square", 2, 0.5, 8.0),
    ("gelu", "sign-symmetric", "logistic", 1, 1.0, 9.0),
    ("quad", "phase-retrieval", "square", 1, 0.05, 6.0)])
def test_simulate_fused_equals_numpy(act, link, loss, m, eta, delta):
    kw = dict(delta=delta, d=120, steps=25, eta=eta, seed=3, ridge=0.01, hessian_every=10, hessian_k=3)
    a = tk.simulate(act, link, loss, m, kernel="numpy", **kw)
    b = tk.simulate(act, link, loss, m, kernel="fused", **kw)
    assert a.settings["kernel"] == "numpy" and b.settings["kernel"] == "fused"
    assert "one pass over X" in b.method["kernel"]
    for key in ("train_loss", "test_loss", "M", "gram"):
        x, z = getattr(a, key), getattr(b, key)
        assert np.max(np.abs(x - z)) <= 1e-9 * np.max(np.abs(x)), key
    assert a.escape_time == b.escape_time
    for ha, hb in zip(a.hessian, b.hessian):  # the Hessian steps evaluate the per-sample quantities as before
        np.testing.assert_allclose(ha["eigenvalues"], hb["eigenvalues"], rtol=1e-7, atol=1e-9)


def test_divergence_is_caught_at_the_same_step():
    kw = dict(delta=4.0, d=60, steps=40, eta=40.0, seed=1)
    a = tk.simulate("quad", "phase-retrieval", "square", 1, kernel="numpy", **kw)
    b = tk.simulate("quad", "phase-retrieval", "square", 1, kernel="fused", **kw)
    assert a.status == b.status == "diverged"
    assert a.diverged_at["step"] == b.diverged_at["step"]
    assert np.all(np.isfinite(b.train_loss))


def test_auto_and_the_fallback_say_why():
    small = tk.simulate("gelu", "phase-retrieval", "square", 1, delta=3.0, d=40, steps=3, eta=1.0)
    assert small.settings["kernel"] == "numpy" and "not worth compiling" in small.method["kernel"]
    with pytest.raises(TheorykitError, match="erfinv"):
        tk.simulate("erfinv(tanh(x)/2)", "phase-retrieval", "square", 1, delta=3.0, d=40, steps=3, eta=1.0,
                    kernel="fused")
    with pytest.raises(TheorykitError, match="kernel must be one of"):
        tk.simulate("gelu", "phase-retrieval", "square", 1, delta=3.0, d=40, steps=3, eta=1.0, kernel="gpu")
    with pytest.raises(TheorykitError, match="threads"):
        tk.simulate("gelu", "phase-retrieval", "square", 1, delta=3.0, d=40, steps=3, eta=1.0, threads=0)


def test_dirac_terms_in_a_users_derivative_are_dropped():
    """x*step(x) has sigma' = step(x) + x*DiracDelta(x): the vectorised sigma' is its almost-sure value (this
    used to raise NameError: DiracDelta from inside lambdify)."""
    net = tk.symbolic.Network("x*step(x)", "square", 1)
    s0, s1, _ = net.activation.numpy(np.array([-1.0, 2.0]))
    assert list(s0) == [0.0, 2.0] and list(s1) == [0.0, 1.0]


def test_sweep_workers_use_the_fused_kernel(tmp_path):
    """Forked workers (a parent that already ran the kernel holds a thread pool that does not survive fork)."""
    tk.simulate("gelu", "phase-retrieval", "square", 1, delta=3.0, d=60, steps=2, eta=1.0, kernel="fused")
    df = tk.sweep([3.0, 5.0], [0, 1], activation="gelu", link="phase-retrieval", loss="square", width=1, d=60,
                  steps=5, eta=1.0, kernel="fused", processes=2, csv=str(tmp_path / "s.csv"))
    assert list(df["status"]) == ["ok"] * 4


# --- storage "float32": X rounded to float32 as drawn, float64 arithmetic (issue 15 point 2) ---

@pytest.mark.parametrize("act,loss,m", [("gelu", "square", 4), ("relu", "square", 1), ("tanh", "logistic", 2),
                                        ("quad", "square", 3)])
def test_float32_storage_one_step_gradient_within_1e6(act, loss, m):
    """One step's gradient with X stored in float32 against X in float64 (same draws, same Theta): within 1e-6
    relative (the rounding of X gives ~1e-7); the fused kernel on float32 X against NumPy on the same float32 X: to
    rounding.  Smooth, kinked, bounded and unbounded activations."""
    rng = np.random.default_rng(5)
    net = tk.symbolic.Network(act, loss, m, a=list(rng.choice([-1.0, 1.0], m)), b=list(0.1 * rng.standard_normal(m)))
    fk, why = fused_kernel(net)
    assert fk is not None, why
    n, d = 2001, 300
    X = rng.standard_normal((n, d))
    X32 = X.astype(np.float32)
    theta = rng.standard_normal((d, m)) / np.sqrt(d)
    y = np.sign(X[:, 0]) if loss == "logistic" else X[:, 0] ** 2
    l64, g64 = fk.step(X, y, theta)
    l32, g32 = fk.step(X32, y, theta)
    assert np.linalg.norm(g32 - g64) <= 1e-6 * np.linalg.norm(g64)
    assert np.linalg.norm(g32 - g64) > 0  # the rounding is there: the float32 kernel really read float32 X
    assert l32 == pytest.approx(l64, rel=1e-6)
    ref = net.evaluate(X32 @ theta, y)  # NumPy promotes: float64 products of the rounded values
    assert np.max(np.abs(g32 - X32.T.astype(float) @ ref.F)) <= 1e-12 * np.max(np.abs(g32))
    assert l32 == pytest.approx(float(np.sum(ref.loss)), rel=1e-12)


def test_simulate_float32_storage():
    kw = dict(delta=8.0, d=120, steps=25, eta=0.5, seed=3, hessian_every=10, hessian_k=3)
    ref = tk.simulate("relu", "phase-retrieval", "square", 2, kernel="numpy", **kw)
    runs = {k: tk.simulate("relu", "phase-retrieval", "square", 2, kernel=k, storage="float32", **kw)
            for k in ("numpy", "fused")}
    for r in runs.values():
        assert r.settings["float"] == "float32" and "float32" in r.method["storage"]
        # the same draws rounded: the trajectory moves by the rounding of X, no more
        assert np.max(np.abs(r.train_loss - ref.train_loss)) <= 1e-5 * np.max(np.abs(ref.train_loss))
        np.testing.assert_allclose(r.hessian[-1]["eigenvalues"], ref.hessian[-1]["eigenvalues"], rtol=1e-4,
                                   atol=1e-6)
    a, b = runs["numpy"], runs["fused"]
    for key in ("train_loss", "test_loss", "M", "gram"):  # both kernels on the float32 X: to rounding
        assert np.max(np.abs(getattr(a, key) - getattr(b, key))) <= 1e-9 * np.max(np.abs(getattr(a, key))), key
    with pytest.raises(TheorykitError, match="storage must be one of"):
        tk.simulate("relu", "phase-retrieval", "square", 1, d=50, delta=2.0, steps=1, eta=0.1, storage="half")
    for bad in (dict(storage="half"), dict(kernel="bogus")):  # a sweep refuses them once, before any run
        with pytest.raises(TheorykitError, match="must be one of"):
            tk.sweep([2.0], [0], activation="relu", link="phase-retrieval", width=1, d=30, steps=1, eta=0.1,
                     processes=1, **bad)


def test_cli_storage(capsys, tmp_path):
    """--storage float32 reaches simulate (settings["float"]) and a sweep's CSV settings; the default leaves the sweep
    settings as before (so that older CSVs resume)."""
    import json

    from theorykit.cli import main

    argv = ["--activation", "gelu", "--link", "phase-retrieval", "--d", "60", "--steps", "3", "--eta", "0.5"]
    assert main(["simulate", *argv, "--delta", "4", "--storage", "float32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["float"] == "float32"
    for storage, csv in (("float64", tmp_path / "a.csv"), ("float32", tmp_path / "b.csv")):
        assert main(["sweep", *argv, "--deltas", "4", "--seeds", "1", "--processes", "1", "--storage", storage,
                     "--out", str(csv), "--json"]) == 0
        capsys.readouterr()
        from theorykit.referee.sweeps import read_csv

        settings = read_csv(str(csv)).attrs["settings"]["simulate"]
        assert settings.get("storage") == (None if storage == "float64" else "float32")


# --- compiled once per machine: the generated module and numba's cache beside it ---

_CACHE_PROBE = """
import numpy as np, theorykit as tk
from theorykit.referee._fused import fused_kernel
fk, why = fused_kernel(tk.symbolic.Network("tanh", "logistic", 3))
X = np.random.default_rng(0).standard_normal((41, 9))
print(repr(fk.step(X, np.sign(X[:, 0]), np.ones((9, 3)) / 3)[1].sum()))
s = fk._kernel.stats
print(sum(s.cache_hits.values()), sum(s.cache_misses.values()))
"""


def _probe(folder):
    import os
    import subprocess
    import sys

    env = dict(os.environ, THEORYKIT_KERNEL_CACHE=str(folder))
    p = subprocess.run([sys.executable, "-c", _CACHE_PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    value, counts = p.stdout.split("\n")[:2]
    return value, tuple(int(c) for c in counts.split())


def test_a_second_process_loads_the_compiled_kernel(tmp_path):
    value1, (hits1, misses1) = _probe(tmp_path)
    assert hits1 == 0 and misses1 == 1  # compiled, and saved
    assert len(list(tmp_path.glob("theorykit_fused_*.py"))) == 1
    value2, (hits2, misses2) = _probe(tmp_path)
    assert hits2 == 1 and misses2 == 0  # loaded, not compiled
    assert value2 == value1


def test_an_unwritable_cache_folder_compiles_in_the_process(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    value, (hits, _) = _probe(blocker / "kernels")  # a folder under a file cannot be made
    assert hits == 0  # compiled in the process
    assert value == _probe(tmp_path / "kernels")[0]


def test_module_source_refuses_a_name_it_cannot_import():
    from theorykit.referee._fused import module_source

    ns: dict = {}
    exec("def _lambdifygenerated(x):\n    return (erfinv(x), x)\n", ns)
    ok = {}
    exec("def _lambdifygenerated(y, yhat):\n    return (abs(y - yhat), 1.0)\n", ok)
    assert module_source(ns["_lambdifygenerated"], ok["_lambdifygenerated"]) is None
