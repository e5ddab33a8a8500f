"""``theorykit optimise``: search a family of activations (and losses) for the fewest samples (docs/optimise.md).

A family is an expression with named parameters, ``"gelu(x) + c*x**2"`` with ``c`` in [-1, 1]; a candidate is the
expression with numbers in place of the names, parsed by the same whitelist as any user expression (nothing is
evaluated).  The objective is a column of ``theorykit table`` (:mod:`theorykit.report.table`): ``finite_d@d=D:T=T``
(the default: the finite-d midpoint, the answer validated against GD), ``delta_star@t=T`` (t = 0 included, ``:d=D``
for a law unbounded below) or ``delta_nn@T=T``.  Lower is better (fewer samples per dimension).

The search (1 or 2 parameters): a grid of ``grid`` points per parameter, then ``refine`` rounds that fit a quadratic
to the best point and its grid neighbours (a parabola in 1-d, a full quadratic on the 3 x 3 neighbourhood in 2-d)
and evaluate its minimiser when it lies inside the neighbourhood.  Every candidate uses the same random numbers (the
DMFT's seed is fixed), so the objective is smooth in the parameters.  The reported best is the best evaluated point;
its parameter uncertainty is the spread of the fitted minimiser when the neighbourhood's values are redrawn within
their standard errors (or half the grid step where the fit has no minimum inside).  Candidates whose expression is
refused, or whose evaluation fails (GD unstable at this eta, no crossing in the bracket), are recorded with their
one-line reason and skipped.  Evaluations are cached by the candidate Problem's hash (``cache``): a rerun reads them
back, an interrupted search resumes.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import TheorykitError

#: names a parameter may not take: the variables of expressions and the functions and presets of the parser
RESERVED = {"x", "y", "yhat", "z", "eps", "pi", "E", "e", "I", "oo"}
MAX_PARAMS = 2


@dataclass(frozen=True)
class Param:
    """A named parameter of a family and its bounds."""

    name: str
    low: float
    high: float


def parse_params(spec) -> list:
    """'c=-1:1' strings, (name, low, high) tuples or {name: (low, high)} -> [Param]; one-line errors."""
    items = list(spec.items()) if isinstance(spec, dict) else list(spec if not isinstance(spec, str) else [spec])
    out: list = []
    for it in items:
        lo: object
        hi: object
        if isinstance(it, str):
            name, eq, rng = it.partition("=")
            lo, colon, hi = rng.partition(":")
            if not eq or not colon:
                raise TheorykitError(f"--param {it!r}: write NAME=LOW:HIGH, e.g. c=-1:1")
        elif isinstance(it, tuple) and len(it) == 2:
            name, (lo, hi) = it
        elif isinstance(it, tuple) and len(it) == 3:
            name, lo, hi = it
        else:
            raise TheorykitError(f"a parameter is NAME=LOW:HIGH or (name, low, high), got {it!r}")
        name = str(name).strip()
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) or name in RESERVED:
            raise TheorykitError(f"parameter name {name!r}: a letter then letters, digits or _, not one of "
                                 f"{', '.join(sorted(RESERVED))}")
        try:
            low, high = float(lo), float(hi)  # type: ignore[arg-type]  # str or number, checked here
        except (TypeError, ValueError):
            raise TheorykitError(f"parameter {name}: bounds must be numbers, got {lo!r}, {hi!r}") from None
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise TheorykitError(f"parameter {name}: need finite LOW < HIGH, got {low:g}, {high:g}")
        if any(p.name == name for p in out):
            raise TheorykitError(f"parameter {name} is given twice")
        out.append(Param(name, low, high))
    if not out:
        raise TheorykitError("give at least one parameter (--param NAME=LOW:HIGH)")
    if len(out) > MAX_PARAMS:
        raise TheorykitError(f"at most {MAX_PARAMS} parameters (got {len(out)}): fix the others in the expression")
    return out


def substitute(expr: str, values: dict) -> str:
    """The expression with each parameter name (a whole word) replaced by its value in parentheses."""
    out = str(expr)
    for name, v in values.items():
        out = re.sub(rf"\b{re.escape(name)}\b", f"({float(v)!r})", out)
    return out


def _mentions(expr: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", str(expr)) is not None


@dataclass
class OptimiseResult:
    """What :func:`optimise` found.

    best: {params {name: value}, value, stderr, param_stderr {name: s.e.}, how}; evaluations: [{params, value,
    stderr, low, high, status ("ok" | "failed" | "refused" | "cached"), error, seconds, stage ("grid" | "refine")}]
    in the order evaluated; baseline: the same objective for the baseline activation (None if not asked); delta_alg:
    the link's threshold (the floor no activation can beat); ingredients: per "winner" and "baseline", the Hermite
    coefficients mu_0..mu_4 and the law of the per-sample curvature D at initialisation (mean, 1e-3 quantile of its
    lower tail, min over paths); settings: the family, link, loss, width, eta, objective, options; method; seconds.
    """

    best: dict
    evaluations: list
    baseline: Optional[dict]
    delta_alg: Optional[float]
    ingredients: dict
    settings: dict
    method: str
    seconds: float = 0.0
    params: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"best": self.best, "evaluations": self.evaluations, "baseline": self.baseline,
                "delta_alg": self.delta_alg, "ingredients": self.ingredients, "settings": self.settings,
                "method": self.method, "seconds": self.seconds}

    def curve(self):
        """The evaluated points as a DataFrame sorted by parameter(s): params, value, stderr, low, high, status."""
        import pandas as pd

        rows = [{**e["params"], **{k: e[k] for k in ("value", "stderr", "low", "high", "status", "stage")}}
                for e in self.evaluations]
        return pd.DataFrame(rows).sort_values([p.name for p in self.params]).reset_index(drop=True)


def parabola_minimum(x, v):
    """(minimiser, minimum) of the parabola through three points, or None when it opens downward."""
    A = np.vstack([np.square(x), x, np.ones(3)]).T
    a, b, c = np.linalg.solve(A, v)
    if a <= 0:
        return None
    w = -b / (2 * a)
    return np.array([w]), float(a * w * w + b * w + c)


def _vertex_on_axis(X, v):
    """:func:`parabola_minimum` on the one column of X (n, 1)."""
    return parabola_minimum(X[:, 0], v)


def quadratic_minimum(X, v):
    """Minimiser of the least-squares quadratic through >= 6 points in the plane, or None (no minimum)."""
    x, y = X[:, 0], X[:, 1]
    A = np.vstack([x * x, y * y, x * y, x, y, np.ones_like(x)]).T
    c = np.linalg.lstsq(A, v, rcond=None)[0]
    H = np.array([[2 * c[0], c[2]], [c[2], 2 * c[1]]])
    if np.any(np.linalg.eigvalsh(H) <= 0):
        return None
    w = np.linalg.solve(H, -c[3:5])
    return w, float(c[0] * w[0] ** 2 + c[1] * w[1] ** 2 + c[2] * w[0] * w[1] + c[3] * w[0] + c[4] * w[1] + c[5])


class _Search:
    """The evaluations of one search: candidates by parameter tuple, cached by the candidate Problem's hash."""

    def __init__(self, family, params, objective, options, cache, progress, processes, log, total=1,
                 scheduler=None):
        from .table import TableOptions, parse_columns

        self.family, self.params = family, params
        cols = parse_columns(objective)
        if len(cols) != 1 or cols[0].kind not in ("delta_star", "delta_nn", "finite_d"):
            raise TheorykitError(f"objective {objective!r}: one of delta_star@t=T, delta_nn@T=T, finite_d@d=D:T=T")
        self.column = cols[0]
        self.options = TableOptions(**options)
        from ..cache import JsonCache

        self.store = JsonCache(cache) if cache else None
        self.evals, self.by_key = [], {}
        self.processes, self.log, self.scheduler = max(1, int(processes or 1)), log, scheduler
        self.bar = None
        if progress:
            from .._checks import Progress

            self.bar = Progress(total, label="optimise", unit="candidates")
        self.done = 0

    def problem(self, values):
        from ..problem import Problem

        f = self.family
        act = substitute(f["activation"], values)
        eta = f["eta"] if f.get("eta_reference") is None else f["eta"] * f["eta_reference"] / slope_energy(act)
        return Problem(act, f["link"], substitute(f["loss"], values), f["width"], eta=eta, delta=1.0, steps=1)

    def _one(self, values, stage, cached_only=False):
        """The record of one candidate; with ``cached_only`` None unless it is refused or in the cache.  The computed
        cell travels back under "_cell" (the caller stores it when the evaluation ran without the cache)."""
        from .table import cell_key, evaluate_cell

        rec = {"params": dict(values), "value": math.nan, "stderr": math.nan, "low": math.nan, "high": math.nan,
               "status": "ok", "error": "", "stage": stage, "seconds": 0.0}
        try:
            pr = self.problem(values)
        except TheorykitError as e:
            rec.update(status="refused", error=str(e).splitlines()[0])
            return rec
        rec["eta"] = float(pr.eta)
        if cached_only:
            kept = self.store.get(cell_key(pr, self.column, self.options)) if self.store is not None else None
            if kept is None:
                return None
            cell, status = {"seconds": 0.0, **kept}, "cached"
        else:
            cell, status = evaluate_cell(pr, self.column, self.options, self.store)
        rec["_cell"] = cell if status == "computed" else None
        rec.update({k: cell[k] for k in ("value", "stderr", "low", "high", "error", "seconds")},
                   how=cell.get("how", ""), note=cell.get("note", ""), escape_time=cell.get("escape_time"),
                   status={"computed": "ok", "cached": "cached", "failed": "failed"}[status])
        if rec["status"] in ("ok", "cached") and not math.isfinite(rec["value"]):
            rec.update(status="failed", error=rec.get("note") or rec.get("how") or "no finite value")
        return rec

    def run(self, points, stage):
        """Evaluate the parameter tuples not evaluated yet (in parallel with processes > 1)."""
        todo = []
        for pt in points:
            k = tuple(round(float(v), 12) for v in pt)
            if k not in self.by_key and k not in [t[0] for t in todo]:
                todo.append((k, {p.name: float(v) for p, v in zip(self.params, k)}))
        from ..runner import map_tasks
        from .table import cell_key

        if self.scheduler is not None:
            # the cluster's workers need not see the cache folder: it is read and written here
            known = [self._one(vals, stage, cached_only=True) for _, vals in todo]
            away = [i for i, r in enumerate(known) if r is None]
            got = map_tasks(_evaluate, [(self, todo[i][1], stage) for i in away], scheduler=self.scheduler)
            for i, rec in zip(away, got):
                known[i] = rec
                if self.store is not None and rec.get("_cell") is not None:
                    self.store.put(cell_key(self.problem(todo[i][1]), self.column, self.options), rec["_cell"])
            recs = known
        else:
            recs = map_tasks(_evaluate, [(self, vals, stage) for _, vals in todo], processes=self.processes)
        for (k, _), rec in zip(todo, recs):
            rec.pop("_cell", None)
            self.by_key[k] = rec
            self.evals.append(rec)
            self.done += 1
            if self.bar is not None:
                self.bar.update(self.done)
            if self.log:
                self.log(rec)

    def ok(self):
        return [(k, r) for k, r in self.by_key.items() if r["status"] in ("ok", "cached")]

    def __getstate__(self):  # the worker processes need no progress bar or log
        d = dict(self.__dict__)
        d.update(bar=None, log=None, scheduler=None)
        if self.scheduler is not None:
            d["store"] = None  # on a cluster the cache stays with the caller
        return d


#: the step-size rules of :func:`optimise` (``eta_rule``), as the result's settings state them
ETA_RULES = {
    "fixed": "fixed: every candidate runs at this eta (an unstable candidate fails and is reported)",
    "matched": "matched: candidate c runs at eta x E[sigma_ref'(G)^2] / E[sigma_c'(G)^2], G ~ N(0, 1), sigma_ref the "
               "baseline (or, without one, the family at the middle of its bounds): every candidate's linearised step "
               "eta E[sigma'^2] is the reference's, so a steeper activation takes proportionally smaller steps (an "
               "unstable candidate still fails and is reported)",
}


def slope_energy(activation: str) -> float:
    """E[sigma'(G)^2] for G ~ N(0, 1) (= sum_k k mu_k^2 in normalised Hermite coefficients): the scale of the
    activation's linearised step, used by ``eta_rule="matched"``.  Closed form where one exists, else quadrature."""
    import sympy as sp

    from .. import conventions as cv
    from ..symbolic.gaussian import expectation
    from ..symbolic.ingredients import activation as make_activation

    e = expectation(sp.diff(make_activation(activation).expr, cv.X) ** 2, [cv.X])
    v = float(e.value) if e.value is not None else math.nan
    if not (math.isfinite(v) and v > 0):
        raise TheorykitError(f"E[sigma'(G)^2] of {activation!r} is {v!r}: the matched step size needs it finite and "
                             f"> 0")
    return v


def _evaluate(args):
    search, values, stage = args
    return search._one(values, stage)


def _neighbourhood(ok, steps, npar):
    """(X, values, stderrs, fit, best) around the best evaluated point: in 1-d the best with its nearest evaluated
    neighbour on each side (a parabola), in 2-d every evaluated point within one grid step (a quadratic, >= 6
    points); fit None when there are too few (the best sits on the boundary, or points failed)."""
    if len(ok) < 3:
        return None, None, None, None, None
    kbest, _ = min(ok, key=lambda kr: kr[1]["value"])
    kbest = np.array(kbest)
    pts = [(np.array(k), r) for k, r in ok]
    if npar == 1:
        left = [(k, r) for k, r in pts if k[0] < kbest[0]]
        right = [(k, r) for k, r in pts if k[0] > kbest[0]]
        if not left or not right:
            return None, None, None, None, kbest
        chosen = [max(left, key=lambda kr: kr[0][0]), min(right, key=lambda kr: kr[0][0])]
        chosen += [(k, r) for k, r in pts if k[0] == kbest[0]]
        fit = _vertex_on_axis
    else:
        chosen = [(k, r) for k, r in pts if np.all(np.abs(k - kbest) <= steps * 1.0001)]
        if len(chosen) < 6:
            return None, None, None, None, kbest
        fit = quadratic_minimum
    X = np.array([k for k, _ in chosen])
    v = np.array([r["value"] for _, r in chosen])
    se = np.array([r["stderr"] if math.isfinite(r["stderr"]) else 0.0 for _, r in chosen])
    return X, v, se, fit, kbest


def _probe_toward_failure(search, kbest):
    """1-d: where the best point's neighbour on one side failed (or was refused), the midpoint between them (when it
    is not evaluated yet and lies more than 1e-6 of the range away); else None."""
    if kbest is None:
        return None
    bad = [k[0] for k, r in search.by_key.items() if r["status"] not in ("ok", "cached")]
    ok = [k[0] for k, _ in search.ok()]
    p = search.params[0]
    for side in (-1, 1):
        if any((u - kbest[0]) * side > 0 for u in ok):
            continue  # an evaluated neighbour on this side
        cands = [u for u in bad if (u - kbest[0]) * side > 0]
        if cands:
            u = min(cands, key=lambda w: abs(w - kbest[0]))
            mid = 0.5 * (u + kbest[0])
            if abs(mid - kbest[0]) > 1e-6 * (p.high - p.low) and (round(mid, 12),) not in search.by_key:
                return np.array([mid])
    return None


def _vertex_spread(fit, X, v, se, rng, draws=200):
    """Standard deviation of the fitted minimiser over redraws of the values within their standard errors."""
    out = []
    for _ in range(draws):
        w = fit(X, v + rng.standard_normal(v.shape) * se)
        if w is not None:
            out.append(w[0])
    if len(out) < draws // 2:
        return None
    return np.std(np.array(out), axis=0, ddof=1)


def optimise(activation, link, params, objective: str = "finite_d@d=400:T=150", *, loss: str = "square",
             width: int = 1, eta: float = 1.0, eta_rule: str = "fixed", baseline: Optional[str] = "gelu",
             grid: int = 5, refine: int = 2,
             cache: Optional[str] = None, processes: int = 1, scheduler=None, progress: bool = False,
             ingredients: bool = True, log=None, **options) -> OptimiseResult:
    """Search the family for the parameters that minimise the objective (module docstring: how; docs/optimise.md).

    The objective is a threshold of docs/theory.md §5 for each candidate: delta*(t), delta_NN, or the finite-d
    midpoint delta_1/2(d, T) ("At your d and horizon"), computed as ``theorykit table`` computes that column.

    Parameters
    ----------
    activation : str
        The family's activation, an expression in x with the parameters' names (e.g. "gelu(x) + c*x**2"), or a
        preset (then the parameters must appear in ``loss``).
    link : str
        The link (preset or expression), fixed.
    params : "c=-1:1", a list of such strings, or {name: (low, high)}
        One or two parameters with their bounds.
    objective : str
        A table column: "finite_d@d=D:T=T" (default d = 400, T = 150), "delta_star@t=T" (":d=D" for a law unbounded
        below) or "delta_nn@T=T".  Lower is better.
    loss, width, eta :
        The loss (may carry parameters too), the width m and the step size.
    eta_rule : "fixed" or "matched"
        "fixed": every candidate at ``eta``; "matched": candidate c at eta E[sigma_ref'^2] / E[sigma_c'^2]
        (:data:`ETA_RULES`; the reference is the baseline).  Each evaluation records the eta it ran at.
    baseline : str or None
        An activation evaluated with the same objective for comparison (default "gelu").
    grid, refine : int
        Grid points per parameter (>= 3) and quadratic refinement rounds (>= 0).
    cache : folder or None
        Where evaluations are kept and read back (keyed by the candidate Problem, the objective and the options).
    processes : int
        Candidates evaluated at once (each evaluation also runs its own DMFT replicas).
    scheduler : str or distributed.Client, optional
        A Dask scheduler's address ("tcp://host:8786") or a Client: the candidates of each stage (the grid, then
        each refinement) run as tasks on that cluster instead of local processes; the cache stays here.
    options :
        :class:`theorykit.report.table.TableOptions` fields: paths, replicas, deltas (the bracket of finite_d: its
        ends), delta_range (of delta_star), seeds.

    Returns
    -------
    OptimiseResult
        best (params, value, stderr, param_stderr, how, smooth, at_bound), evaluations, baseline, delta_alg,
        ingredients, settings, method, seconds; ``curve()`` as a DataFrame, ``as_dict()`` for JSON.

    Raises
    ------
    TheorykitError
        A bad parameter spec, a parameter in neither expression, an unknown objective or option, bad grid/refine or
        eta, or no candidate that could be evaluated.

    Examples
    --------
    >>> import theorykit as tk
    >>> r = tk.optimise("x**2 + c*x", "phase-retrieval", "c=-1:1", "delta_star@t=0:d=1000", grid=3, refine=0,
    ...                 baseline=None, ingredients=False, paths=1024, replicas=2, delta_range=(1.0, 20.0))
    >>> len(r.evaluations), sorted(r.best["params"])
    (3, ['c'])
    """
    from .._checks import check_int

    t0 = time.perf_counter()
    ps = parse_params(params)
    grid, refine = check_int("grid", grid, 3), check_int("refine", refine, 0)
    for p in ps:
        if not (_mentions(activation, p.name) or _mentions(loss, p.name)):
            raise TheorykitError(f"parameter {p.name} appears in neither the activation nor the loss")
    if not (isinstance(eta, (int, float)) and math.isfinite(eta) and eta > 0):
        raise TheorykitError(f"eta must be a number > 0, got {eta!r}")
    if eta_rule not in ETA_RULES:
        raise TheorykitError(f"eta_rule must be one of {', '.join(ETA_RULES)}, got {eta_rule!r}")
    family = {"activation": str(activation), "link": str(link), "loss": str(loss), "width": int(width),
              "eta": float(eta), "eta_reference": None}
    if eta_rule == "matched":
        ref = baseline or substitute(str(activation), {p.name: 0.5 * (p.low + p.high) for p in ps})
        family["eta_reference"] = slope_energy(ref)
    try:
        search = _Search(family, ps, objective, options, cache, progress, processes, log,
                         total=grid ** len(ps) + refine, scheduler=scheduler)
    except TypeError as e:
        raise TheorykitError(f"optimise: unknown option ({e})") from None
    axes = [np.linspace(p.low, p.high, grid) for p in ps]
    mesh = np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(ps), -1).T
    search.run(mesh, "grid")
    steps = np.array([(p.high - p.low) / (grid - 1) for p in ps])  # the neighbourhood of a point: one grid step
    lows, highs = np.array([p.low for p in ps]), np.array([p.high for p in ps])
    spread, rng, last, rough, vertex = None, np.random.default_rng(0), None, "", None
    for round_ in range(refine + 1):
        X, v, se, fit, kbest = _neighbourhood(search.ok(), steps, len(ps))
        if fit is None:
            probe = _probe_toward_failure(search, kbest) if (len(ps) == 1 and round_ < refine) else None
            if probe is None:
                break
            search.run([probe], "refine")  # the best's neighbour failed: look halfway to it instead
            continue
        got = fit(X, v)
        spread = _vertex_spread(fit, X, v, se, rng) if np.any(se > 0) else None
        inside = (got is not None and np.all(np.abs(got[0] - kbest) <= steps * 1.0001)
                  and np.all(got[0] >= lows) and np.all(got[0] <= highs))
        vertex = got[0] if inside else None
        if round_ == refine or not inside:
            break
        key = tuple(round(float(u), 12) for u in got[0])
        if key in search.by_key or (last is not None and np.allclose(got[0], last, rtol=0, atol=1e-9)):
            break  # the fit's minimiser is already evaluated: converged
        last = got[0]
        search.run([last], "refine")
        rec = search.by_key[key]
        if rec["status"] in ("ok", "cached"):  # does the objective follow the quadratic there?
            tol = 3 * float(np.hypot(np.max(se), rec["stderr"] if math.isfinite(rec["stderr"]) else 0.0))
            if abs(rec["value"] - got[1]) > max(tol, 1e-9 * abs(got[1])):
                rough = (f"the objective does not follow the fitted quadratic near the best point (at "
                         f"{', '.join(f'{p.name} = {u:.4g}' for p, u in zip(ps, last))} it is {rec['value']:.4g}, "
                         f"the fit said {got[1]:.4g}): it is not smooth there (a jump of the smallest-delta "
                         f"root, or noise), so no parameter error is claimed")
                spread = None
                break
    if search.bar is not None:
        search.bar.close(search.done)
    ok = search.ok()
    if not ok:
        first = search.evals[0]["error"] if search.evals else "no candidate"
        raise TheorykitError(f"no candidate of the family could be evaluated (first: {first})")
    kbest, rbest = min(ok, key=lambda kr: kr[1]["value"])
    at_edge = [p.name for p in ps if rbest["params"][p.name] <= p.low or rbest["params"][p.name] >= p.high]
    if rough:
        pse, how = {p.name: math.nan for p in ps}, rough
    elif spread is not None and not at_edge:
        # the spread of the fitted minimiser, and its distance from the best evaluated point when the last fit's
        # minimiser was not evaluated (the refinements ran out)
        off = (np.abs(vertex - np.array([rbest["params"][p.name] for p in ps])) if vertex is not None
               else np.zeros(len(ps)))
        pse = {p.name: float(np.hypot(s_, o)) for p, s_, o in zip(ps, spread, off)}
        how = ("parameter s.e.: spread of the fitted quadratic's minimiser over redraws of the neighbourhood's values "
               "within their standard errors" + (", combined with its distance from the best evaluated point (the "
                                                  "minimiser itself was not evaluated: more --refine)"
                                                  if np.any(off > 1e-9) else ""))
    else:
        pse = {p.name: float(s) / 2 for p, s in zip(ps, steps)}
        how = "parameter s.e.: half the grid step (no quadratic minimum inside the neighbourhood)"
    if at_edge:
        how += (f"; the best point lies on the bound of {', '.join(at_edge)}: the optimum may lie beyond, widen the "
                f"bounds")
    best = {"params": dict(rbest["params"]), "value": rbest["value"], "stderr": rbest["stderr"],
            "param_stderr": pse, "how": how, "smooth": not rough, "at_bound": at_edge}
    base = None
    if baseline:
        from .table import evaluate_cell

        try:
            bp = _baseline_problem(family, baseline, search)
            cell, _ = evaluate_cell(bp, search.column, search.options, search.store)  # cached like the candidates
            base = {"activation": str(baseline), "eta": float(bp.eta), "escape_time": cell.get("escape_time"),
                    **{k: cell[k] for k in ("value", "stderr", "low", "high", "error")}}
        except TheorykitError as e:
            base = {"activation": str(baseline), "value": math.nan, "stderr": math.nan, "low": math.nan,
                    "high": math.nan, "error": str(e).splitlines()[0]}
    winner = search.problem(rbest["params"])
    alg = winner.analysis.delta_alg.value
    ingr = {}
    if ingredients:
        ingr["winner"] = {**_ingredients(winner), "escape_time": rbest.get("escape_time")}
        if baseline:
            try:
                ingr["baseline"] = {**_ingredients(_baseline_problem(family, baseline, search)),
                                    "escape_time": (base or {}).get("escape_time")}
            except TheorykitError as e:
                ingr["baseline"] = {"error": str(e).splitlines()[0]}
    settings = {**family, "params": [{"name": p.name, "low": p.low, "high": p.high} for p in ps],
                "objective": search.column.name, "grid": grid, "refine": refine, "baseline": baseline,
                "options": search.options.key(), "eta_rule": ETA_RULES[eta_rule]}
    method = (f"grid of {grid} per parameter, then up to {refine} quadratic refinements; objective "
              f"{search.column.name} by theorykit.report.table's cell (common random numbers: one DMFT seed for "
              f"every candidate); {len(search.evals)} evaluations, "
              f"{sum(e['status'] == 'cached' for e in search.evals)} read from the cache")
    return OptimiseResult(best=best, evaluations=search.evals, baseline=base, delta_alg=alg, ingredients=ingr,
                          settings=settings, method=method, seconds=time.perf_counter() - t0, params=ps)


def _baseline_problem(family, baseline, search):
    from ..problem import Problem

    f = family
    loss = substitute(f["loss"], {p.name: 0.5 * (p.low + p.high) for p in search.params}) \
        if any(_mentions(f["loss"], p.name) for p in search.params) else f["loss"]
    eta = f["eta"] if f.get("eta_reference") is None else f["eta"] * f["eta_reference"] / slope_energy(baseline)
    return Problem(baseline, f["link"], loss, f["width"], eta=eta, delta=1.0, steps=1)


def _ingredients(problem) -> dict:
    """Hermite coefficients mu_0..mu_4 of the activation and the law of the per-sample curvature D at t = 0."""
    from ..dynamics import dmft
    from ..symbolic.hermite import hermite_coefficients

    out = {"activation": problem.activation}
    try:
        h = hermite_coefficients(problem.activation, 4)
        out["hermite"] = [float(c) for c in h.values()]
    except TheorykitError as e:
        out["hermite"], out["hermite_error"] = None, str(e).splitlines()[0]
    try:
        r = dmft(problem.replace(delta=4.0, steps=0), paths=4096, replicas=2, processes=1, kernels=True)
        tail = np.asarray(r.D_tail)[0]
        Ru = np.asarray((r.kernels or {})["R_u"])[0, 0]  # R_u(0, 0) = E[D^0]
        out["D_t0"] = {"mean": float(np.trace(Ru) / Ru.shape[0]), "min": float(tail[0]), "q1e-3": float(tail[-1]),
                       "how": "DMFT at t = 0 (the law of D does not depend on delta there), 4096 paths"}
    except (TheorykitError, AttributeError, IndexError, KeyError) as e:
        out["D_t0"] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    return out


def figure(result: OptimiseResult, path: str) -> list:
    """The objective against the parameter (1 parameter: curve with error bars; 2: the evaluated points coloured
    by value), the best point, the baseline and delta_alg; writes path.png and path.pdf."""
    from .figures import pyplot, save

    plt = pyplot()
    df = result.curve()
    ok = df[df["status"].isin(["ok", "cached"])]
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    names = [p.name for p in result.params]
    if len(names) == 1:
        n = names[0]
        ax.errorbar(ok[n], ok["value"], yerr=2 * ok["stderr"].fillna(0.0), marker="o", ms=4, capsize=2,
                    label=f"{result.settings['objective']} (± 2 s.e.)")
        ax.plot([result.best["params"][n]], [result.best["value"]], "r*", ms=12, label="best")
        if result.baseline and math.isfinite(result.baseline["value"]):
            ax.axhline(result.baseline["value"], color="k", ls="--", lw=1,
                       label=f"baseline {result.baseline['activation']}")
        if result.delta_alg is not None:
            ax.axhline(result.delta_alg, color="g", ls=":", lw=1, label="delta_alg")
        ax.set_xlabel(n)
        ax.set_ylabel("delta (samples per dimension)")
    else:
        sc = ax.scatter(ok[names[0]], ok[names[1]], c=ok["value"], cmap="viridis", s=60)
        fig.colorbar(sc, ax=ax, label=result.settings["objective"])
        ax.plot([result.best["params"][names[0]]], [result.best["params"][names[1]]], "r*", ms=14, label="best")
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
    ax.set_title(f"{result.settings['activation']} on {result.settings['link']}", fontsize=9)
    ax.legend(fontsize=7)
    return save(fig, path)
