"""Three defects a new user hits (issue 27): unused latent indices, inadmissible activations accepted by some commands
but not others, and preset typos without a suggestion."""
import json
import math
import time
import warnings

import numpy as np
import pytest
import sympy as sp

import theorykit as tk

from theorykit import conventions as cv
from theorykit.cli import main
from theorykit.errors import TheorykitError
from theorykit.symbolic.hermite import hermite_coefficients
from theorykit.symbolic.ingredients import Link, activation, link, loss
from theorykit.symbolic.links import analyse_link
from theorykit.symbolic.network import Network


def one_line_error(capsys, argv) -> str:
    """Run the CLI: exit status 2, nothing on stdout, exactly one line on stderr (no traceback, no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning on the way is a failure, not a printed line
        assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("theorykit: error: "), err
    return err.strip()


# ------------------------------------------------------------------------------ 1. unused latent indices
def test_unused_latent_indices_are_reindexed_and_the_renaming_is_recorded():
    z1, z2 = cv.z_symbol(1), cv.z_symbol(2)
    lk = link("z5**2")
    assert (lk.k, lk.latent, lk.expr) == (1, (cv.Z,), cv.Z ** 2)
    assert lk.reindexed == (("z5", "z"),) and "z5 -> z" in lk.note
    lk = link("z1*z3")
    assert (lk.k, lk.latent, lk.expr) == (2, (z1, z2), z1 * z2)
    assert lk.reindexed == (("z3", "z2"),) and "z3 -> z2" in lk.note
    lk = link("z2 + z4**2 + eps/2")
    assert (lk.k, lk.expr) == (2, z1 + z2 ** 2 + cv.EPS / 2) and lk.reindexed == (("z2", "z1"), ("z4", "z2"))
    # links that use 1..k (and presets) are unchanged and say nothing
    for spec in ("z**2", "z1", "z1*z2", "product", "staircase", "z1**2 + z2**2 + z3"):
        assert link(spec).reindexed == () and link(spec).note == ""


def test_reindexed_link_analysis_equals_the_compact_one():
    a, b = analyse_link("z5**2"), analyse_link("z**2")
    for key in ("k", "information_exponent", "generative_exponent", "easy_dim", "hard_dim"):
        assert getattr(a, key) == getattr(b, key), key
    assert (a.delta_alg.exact, a.delta_alg.value, a.delta_alg.error) == (sp.Rational(1, 2), 0.5, 0.0)
    assert any("z5 -> z" in n for n in a.notes)


def test_link_cli_says_it_reindexed(capsys):
    assert main(["link", "z5**2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["reindexed"] == {"z5": "z"} and r["k"] == 1 and r["hard_dim"] == 1
    assert r["delta_alg"]["exact"] == "1/2" and r["information_exponent"] == 2 and r["name"] == "z5**2"
    assert main(["link", "z**2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["reindexed"] == {}
    assert main(["link", "z5**2"]) == 0
    out = capsys.readouterr().out
    assert "(k = 1)" in out and "note: " in out and "z5 -> z" in out


# ------------------------------------------------------------------------------ 2. one admissibility check
BAD = "exp(x**2/2)"


def test_inadmissible_activation_refused_by_every_constructor():
    msgs = set()
    for build in (activation, lambda s: Network(s, "square"), lambda s: hermite_coefficients(s, 2),
                  lambda s: activation(sp.exp(cv.X ** 2 / 2))):
        with pytest.raises(TheorykitError) as e:
            build(BAD)
        msgs.add(str(e.value).replace("'exp(x**2/2)'", "NAME"))
    assert len(msgs) == 1, msgs
    (msg,) = msgs
    assert "E[sigma(G)^2] is infinite" in msg and "\n" not in msg


@pytest.mark.parametrize("spec", ["exp(x**2/4)", "exp(x**2)", "exp(exp(x))", "x*exp(x**2/3)", "sqrt(30 - x**2)",
                                  "1/(x - 1/100)", "exp(40*x)"])
def test_other_inadmissible_activations(spec):
    with pytest.raises(TheorykitError):
        activation(spec)


@pytest.mark.parametrize("spec", ["gelu", "relu", "tanh", "x**2", "x + 0.5*x**2", "x*tanh(x)", "softplus(x)",
                                  "sigmoid(x)", "exp(x)", "x*erf(x)", "quad", "erf", "linear", "he2", "he3",
                                  "exp(x**2/5)", "abs(x)", "sin(x)", "Max(0, x)", "x**3 - x", "Heaviside(x)",
                                  "1/(1 + x**2)", "log(1 + x**2)", "exp(-x**2)"])
def test_legitimate_activations_accepted(spec):
    a = activation(spec)
    Network(a, "square")
    t0 = time.perf_counter()
    for _ in range(20):
        activation(spec)
    assert time.perf_counter() - t0 < 0.5  # the check is cached: a construction costs no re-derivation


@pytest.mark.parametrize("argv", [
    ["threshold", "--activation", BAD, "--link", "phase-retrieval", "--loss", "square", "--eta", "1", "--t", "0"],
    ["hermite", BAD],
    ["derive", "--activation", BAD, "--loss", "square"],
    ["hessian", "--activation", BAD, "--link", "phase-retrieval", "--delta", "4", "--t", "0", "--eta", "1"],
    ["dmft", "--activation", BAD, "--link", "phase-retrieval", "--delta", "2", "--eta", "1", "--steps", "2"],
    ["simulate", "--activation", BAD, "--link", "phase-retrieval", "--delta", "2", "--d", "20", "--steps", "2",
     "--eta", "1"],
])
def test_every_command_refuses_with_the_same_line(capsys, argv):
    err = one_line_error(capsys, argv)
    assert "activation 'exp(x**2/2)'" in err and "E[sigma(G)^2] is infinite" in err, err


# ------------------------------------------------------------------------------ 3. preset typos
@pytest.mark.parametrize("build,spec,want", [
    (link, "sign-symetric", "unknown link 'sign-symetric': did you mean 'sign-symmetric'?"),
    (link, "phase-retreival", "unknown link 'phase-retreival': did you mean 'phase-retrieval'"),
    (link, "noisy-phase-retreival:s=0.3", "did you mean 'noisy-phase-retrieval'"),
    (link, "phase_retrieval", "did you mean 'phase-retrieval'"),
    (activation, "gleu", "unknown activation 'gleu': did you mean 'gelu'?"),
    (loss, "sqaure", "unknown loss 'sqaure': did you mean 'square'?"),
    # a preset-like name with no near preset gets the list; anything else keeps the parser's reason
    (link, "totally-unknown", "presets: "),
    (link, "z-epsilon", "unknown symbol 'epsilon'"),
    (activation, "y**2", "unknown symbol 'y'"),
    (activation, "__import__('os')", "forbidden characters"),
    (link, "open-file('x')", "unknown symbol 'open'"),
])
def test_unknown_names_get_a_suggestion_or_the_parsers_reason(build, spec, want):
    with pytest.raises(TheorykitError) as e:
        build(spec)
    assert want in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("argv,want", [
    (["link", "sign-symetric"], "did you mean 'sign-symmetric'?"),
    (["link", "phase-retreival"], "did you mean 'phase-retrieval'"),
    (["hermite", "gleu"], "did you mean 'gelu'?"),
])
def test_preset_typos_cli(capsys, argv, want):
    assert want in one_line_error(capsys, argv)


def test_a_directly_built_link_keeps_its_unused_coordinate():
    """The renumbering belongs to the constructor: a Link built with an unused coordinate stays as built, so the
    multi-index sup formula can still be checked on y = z2^2 with k = 2 (it reduces to the single-index 1/2)."""
    z1, z2 = cv.z_symbol(1), cv.z_symbol(2)
    a = analyse_link(Link("z2**2", z2 ** 2, 2, (z1, z2)))
    assert a.k == 2 and (a.easy_dim, a.hard_dim) == (0, 2) and a.link.reindexed == ()
    assert a.delta_alg.exact is None and a.delta_alg.error < 0.01
    assert abs(a.delta_alg.value - 0.5) <= a.delta_alg.error


# ------------------------------------------------------------------------------------------------ numerical failures
# (issue: one diverging delta ended the whole threshold with exit 2, the code for bad input; all-or-nothing answers)
_XQ = ["threshold", "--activation", "x + 0.5*x**2", "--link", "phase-retrieval", "--loss", "square", "--eta", "1",
       "--delta-range", "10", "40", "--points", "4", "--paths", "2048", "--replicas", "2"]


def test_threshold_answers_the_t_that_resolve_and_says_why_the_others_do_not(capsys):
    """sigma = x + x^2/2, eta = 1: at t = 50 the DMFT diverges at the low deltas of [10, 40], while t = 0 has
    its threshold inside the range.  t = 0 is answered, t = 50 carries its reason, the exit status is 0."""
    assert main(_XQ + ["--t", "0", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_t = {q["t"]: q for q in out["delta_star"]}
    assert by_t[0]["value"] is not None and 10 < by_t[0]["value"] < 40 and by_t[0]["error"] == ""
    assert by_t[50]["value"] is None and "undefined below it" in by_t[50]["error"]
    assert out["problem"]["activation"] == "x + 0.5*x**2"  # --json says which problem it solved
    # the text names its columns and says delta_alg is exact
    assert main(_XQ + ["--t", "0", "50"]) == 0
    txt = capsys.readouterr().out
    assert "delta_alg = 0.5 = 1/2 (exact)" in txt and "columns: delta* with its standard error" in txt
    assert "delta*(t = 50): the margin is positive from delta = " in txt


def test_no_t_resolved_is_no_answer_not_bad_input(capsys):
    from theorykit.errors import NoAnswer
    from theorykit.thresholds import delta_star

    assert main(_XQ + ["--t", "50"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("theorykit: no answer: delta*(t = 50)") and len(err.strip().splitlines()) == 1
    pr = tk.Problem("x + 0.5*x**2", "phase-retrieval", "square", delta=10.0, eta=1.0, steps=50)
    with pytest.raises(NoAnswer) as info:
        delta_star(pr, [50], delta_range=(10, 40), points=4, paths=2048, replicas=2)
    assert [q.t for q in info.value.partial] == [50] and "undefined below" in info.value.partial[0].error


def test_margins_trend_is_reported_when_the_range_is_too_low():
    from theorykit.thresholds.spectral import no_sign_change_reason

    msg = no_sign_change_reason(0, [(100.0, -0.09), (150.0, -0.05), (200.0, -0.0217)], [100.0, 150.0, 200.0])
    assert "still rises at the top (-0.0217 at delta = 200" in msg and "raise the range" in msg


def test_table_takes_delta_star_at_t_0_and_problem_has_one_dict_convention():
    from theorykit.report.table import parse_columns

    assert parse_columns("delta_star@t=0")[0].name == "delta_star@t=0"
    with pytest.raises(tk.TheorykitError, match="must be >= 1"):
        parse_columns("delta_nn@T=0")
    p = tk.Problem("gelu", "phase-retrieval", delta=2.0, eta=1.0, steps=1)
    assert tk.Problem.from_dict(p.as_dict()) == p and not hasattr(p, "to_dict")


def test_table_delta_star_bracket_is_not_shown_as_an_error_bar():
    import math

    from theorykit.report.table import cell_text

    df = tk.table("gelu", "sign-symmetric", "delta_star@t=0", losses=("logistic",), paths=2048, replicas=2,
                  delta_range=(2.0, 12.0))
    row = df.to_dict("records")[0]
    assert row["delta_star@t=0_status"] == "computed" and 2 < row["delta_star@t=0"] < 12
    assert math.isnan(row["delta_star@t=0_low"]) and "search bracket, not an error bar" in row["delta_star@t=0_how"]
    assert "[" not in cell_text(row, "delta_star@t=0")
    band = {"x": 7.0, "x_stderr": math.nan, "x_low": 6.5, "x_high": 7.5}
    assert cell_text(band, "x") == "7 (band 6.5–7.5)"


def test_an_off_scale_mark_is_a_labelled_arrow_not_a_data_point():
    import pandas as pd

    from theorykit.report import figures

    df = pd.DataFrame({"delta": [2.0, 3.0], "success_probability": [0.0, 0.5], "low": [0.0, 0.2],
                       "high": [0.2, 0.8]})
    fig = figures.success({"gelu": df}, marks={"gelu": {"delta_alg": 0.5, "delta_NN": 9.0}})
    ax = fig.axes[0]
    texts = [a.get_text() for a in ax.texts]
    assert "delta_alg = 0.5" in texts and "delta_NN = 9" in texts  # labelled arrows
    drawn = [line for line in ax.lines if len(line.get_xdata())]
    assert all(min(line.get_xdata()) >= 2.0 and max(line.get_xdata()) <= 3.0 for line in drawn
               if line.get_linestyle() == "None")  # no marker outside the data's own x range


# ---- the unbounded verdict does not depend on where the latent quadrature stops
SUPPORT_CASES = [  # (activation, link, loss, eta, unbounded): smooth, kinked, bounded link, unbounded activation
    ("gelu", "phase-retrieval", "square", 1.0, True),
    ("relu", "phase-retrieval", "square", 1.0, False),  # D = sigma'^2 (no Dirac term in the finite-n Hessian)
    ("gelu", "sign-symmetric", "logistic", 1.0, False),
    ("x**2", "phase-retrieval", "square", 0.1, True),
]


@pytest.mark.parametrize("act, lk, ls, eta, want", SUPPORT_CASES)
def test_unbounded_verdict_is_the_same_for_every_latent_rule(act, lk, ls, eta, want):
    from theorykit.thresholds.spectral import law_at

    p = tk.Problem(activation=act, link=lk, loss=ls, width=1, delta=10, eta=eta, steps=20)
    for kw in (dict(latent="gauss-hermite", order=16), dict(latent="gauss-hermite", order=32),
               dict(latent="monte-carlo")):
        law = law_at(tk.dmft(p, keep_law_at=[20], **kw), 20)
        assert law.tail["unbounded"] is want, (kw, law.tail)
        assert law.tail["support"]["how"].startswith("support")


def test_unbounded_verdict_of_the_issue_command(capsys):
    main(["hessian", "--activation", "gelu", "--link", "phase-retrieval", "--loss", "square", "--width", "1",
          "--eta", "1", "--delta", "10", "--t", "20", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["unbounded"] is True
    assert out["D_tail"]["support"]["unbounded"] is True
    assert any("unbounded below" in n for n in out["notes"])


def test_support_tail_on_closed_forms():
    from theorykit.spectra.hessian import support_tail

    z = np.linspace(-3, 3, 101)
    w = np.exp(-z ** 2 / 2)
    assert support_tail(lambda c: 1.0 - (c * z) ** 2, abs(z), w)["unbounded"] is True  # D = 1 - z^2
    assert support_tail(lambda c: -abs(c * z), abs(z), w)["unbounded"] is True  # D = -|z|: a constant slope
    assert support_tail(lambda c: -np.tanh(c * z) ** 2, abs(z), w)["unbounded"] is False  # saturates at -1
    assert support_tail(lambda c: np.exp(-(c * z) ** 2), abs(z), w)["unbounded"] is False  # bounded below by 0
    out = support_tail(lambda c: np.where(c > 4, np.nan, -(c * z) ** 2), abs(z), w)
    assert out["factors"] == [1.0, 2.0, 4.0]  # the sequence ends where D is not finite


# ---- delta*'s uncertainty: Student's t on the replica spread, and the bracket's interpolation error
def test_interpolation_error_of_a_known_parabola():
    from theorykit.rules import interpolation_error

    def f(x):
        return (x - 3.0) * (x + 1.0)  # root 3, curved

    a, b = 2.0, 4.0
    lin = a - f(a) * (b - a) / (f(b) - f(a))
    err = interpolation_error(lin, (a, f(a)), (b, f(b)), [(1.0, f(1.0)), (a, f(a)), (b, f(b))])
    assert err == pytest.approx(abs(lin - 3.0), rel=1e-9) and err > 0.1
    assert math.isnan(interpolation_error(lin, (a, f(a)), (b, f(b)), [(a, f(a)), (b, f(b))]))  # no third point


def test_delta_star_interval_uses_student_t_and_the_interpolation_error():
    from scipy.stats import t as student

    pr = tk.Problem("gelu", "sign-symmetric", "logistic", delta=9.0, eta=1.0, steps=5)
    q = tk.delta_star(pr, [0], deltas=[2.0, 3.0, 4.5, 8.0], paths=4096, replicas=4, refine=1, processes=1)[0]
    assert q.dof == 3
    assert math.isfinite(q.interpolation_error)
    lo, hi = q.interval95
    half = student.ppf(0.975, 3) * q.stderr + q.interpolation_error
    assert lo == pytest.approx(q.value - half) and hi == pytest.approx(q.value + half)
    d = q.as_dict()
    assert d["dof"] == 3 and d["interval95"] == [lo, hi] and d["interpolation_error"] == q.interpolation_error
    json.dumps(d)


def test_threshold_text_says_what_its_error_bar_covers(capsys):
    main(["threshold", "--activation", "gelu", "--link", "sign-symmetric", "--loss", "logistic", "--eta", "1",
          "--t", "0", "--delta-range", "2", "8", "--points", "4", "--paths", "4096"])
    out = capsys.readouterr().out
    assert "95% interval" in out and "3 degrees of freedom" in out and "not the latent rule" in out


def test_dmft_text_says_what_its_error_bars_cover(capsys):
    main(["dmft", "--activation", "linear", "--link", "z", "--loss", "square", "--delta", "3", "--eta", "0.3",
          "--steps", "3", "--paths", "4096"])
    out = capsys.readouterr().out
    assert "degrees of freedom" in out and "never the latent rule or the time grid" in out


def test_hessian_with_d_is_the_dmft_of_n_samples_and_sees_the_edge_of_stability(capsys):
    """`theorykit hessian ... --t 10 --d 400` on x + x^2/2 phase retrieval (square loss, eta = 0.5, delta = 8.437)
    solved the d -> infinity DMFT, which stops at step 6 through paths a sample of n points does not hold, and then
    told the user to give --d.  With d the DMFT is that of n = delta d samples and reaches t = 10.  Its bulk's right
    edge lambda_+ (top tail truncated at n) against GD's own Hessian at t = 10 (d = 400, the hard direction removed
    from the gradient, two seeds): eta lambda_max > 2 in GD and eta lambda_+ > 2 predicted (GD runs beyond its edge of
    stability), lambda_+ within 10% of GD's mean lambda_max (the finite-n edge of this unbounded-above law sits a few
    per cent below the truncated law's, as at t = 0 where the law is exact)."""
    d, delta, eta, T = 400, 8.437, 0.5, 10
    pr = tk.Problem("x + 0.5*x**2", "phase-retrieval", "square", delta=delta, eta=eta, steps=T)
    h = tk.hessian(pr, T, d=d, paths=16384, replicas=4)
    assert h.dmft.status == "ok" and h.law.truncation_n == 3375
    n = h.law.truncation_n
    tops = []
    for seed in range(2):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, d))
        y = X[:, 0] ** 2
        th = rng.standard_normal(d)
        th[0] = 0.0
        th /= np.linalg.norm(th)
        for t in range(T + 1):
            u = X @ th
            res, sp1 = u + u * u / 2 - y, 1 + u
            if t == T:
                tops.append(np.linalg.eigvalsh((X.T * (sp1 ** 2 + res)) @ X / n)[-1])
            g = X.T @ (res * sp1)
            g[0] = 0.0
            th -= eta / n * g
    assert min(tops) * eta > 2 and h.top_edge * eta > 2
    assert h.top_edge == pytest.approx(np.mean(tops), rel=0.10)
    assert main(["hessian", "--activation", "x + 0.5*x**2", "--link", "phase-retrieval", "--loss", "square",
                 "--delta", "8.437", "--eta", "0.5", "--t", "10", "--d", "400", "--paths", "16384", "--replicas", "4",
                 "--hessian-k", "2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["eta_top_edge"] == pytest.approx(eta * h.top_edge, rel=1e-12)
    assert any("edge of stability" in s for s in r["notes"])


@pytest.mark.parametrize("delta", [3.0, 8.0])
def test_hessian_right_edge_of_relu_at_init_is_the_exact_half_wishart_edge(delta):
    """The kinked case: ReLU with the square loss at t = 0 has D = 1{u > 0} (no sigma'' off the kink), so H is
    (1/2) times a Wishart matrix of ratio 2/delta and its bulk spans (1/2)(1 -+ sqrt(2/delta))^2; the DMFT's law
    gives both edges."""
    pr = tk.Problem("relu", "phase-retrieval", "square", delta=delta, eta=0.5, steps=1)
    h = tk.hessian(pr, 0, paths=4096, replicas=2)
    assert h.top_edge == pytest.approx(0.5 * (1 + math.sqrt(2 / delta)) ** 2, rel=1e-9)
    assert h.prediction.edge == pytest.approx(0.5 * (1 - math.sqrt(2 / delta)) ** 2, rel=1e-9)
