"""The learning problem, once: :class:`Problem` (what is learned, by which network, with how many samples and steps).

A Problem holds the model (activation sigma, link h, loss l, width m, second-layer weights a, biases b), the sample
ratio delta = n/d, the ridge, the step sizes (a constant eta for ``steps`` steps, or a ``schedule`` eta_0..eta_{T-1})
and the initial law (theta^0 ~ N(0, Sigma0) on the complement of the latent subspace, M_0 = M0).  It says nothing about
*how* a quantity is computed (d and seed of a simulation, paths of a DMFT): those are a solver's numeric settings.

Every solver takes one; a result carries the Problem it answers, so ``Problem.from_dict(result["problem"])`` re-runs it.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import KW_ONLY, dataclass
from functools import cached_property
from typing import Any, Optional, cast

import numpy as np

from . import defaults
from ._checks import check_int, check_matrix, check_number, check_vector
from .errors import TheorykitError

#: tag of the JSON form (``as_dict()["format"]``); part of the hashed text, so a new form gives new keys
FORMAT = "theorykit.Problem/1"

_SPEC_KINDS = ("activation", "link", "loss")


@functools.lru_cache(maxsize=256)
def _build(kind: str, spec: str):
    """The ingredient object of a spec string (memoised: a delta scan of Problems builds sigma, h, l once)."""
    from .symbolic import ingredients

    return getattr(ingredients, kind)(spec)


def _spec(kind: str, value) -> tuple[str, Any]:
    """(canonical spec string, ingredient object) of a preset name / expression string / ingredient object."""
    import sympy as sp

    from .symbolic import ingredients

    cls: type[Any] = {"activation": ingredients.Activation, "link": ingredients.Link, "loss": ingredients.Loss}[kind]
    if isinstance(value, str):
        spec = value.strip()
        if not spec:
            raise TheorykitError(f"{kind} must not be empty")
        return spec, _build(kind, spec)
    if isinstance(value, sp.Expr) and kind == "activation":
        value = ingredients.activation(value)
    if not isinstance(value, cls):
        raise TheorykitError(f"{kind} must be a preset name, an expression string or a theorykit {cls.__name__}, "
                             f"got {type(value).__name__}")
    try:
        obj = _build(kind, value.name)
        same = obj.expr == value.expr
    except TheorykitError:
        same = False
    if not same:
        raise TheorykitError(f"the {kind} {value.name!r} cannot be rebuilt from its name (a Problem stores specs, "
                             f"to round-trip through JSON): pass its preset name or expression string")
    return value.name, obj


def _is_identity(S: tuple) -> bool:
    return all(v == (1.0 if i == j else 0.0) for i, row in enumerate(S) for j, v in enumerate(row))


@dataclass(frozen=True)
class Problem:
    """A learning problem: model, sample ratio, ridge, step sizes and initial law (module docstring).

    The problem is the one of docs/theory.md §1: full-batch GD on L(Theta) = (1/n) sum_i l(y_i, f(Theta^T x_i)) +
    (ridge/2) ||Theta||_F^2, with f(r) = (1/m) sum_j a_j sigma(r_j + b_j), n = delta d and
    Theta^{t+1} = (1 - eta_t ridge) Theta^t - eta_t grad, from the initial law theta^0 ~ N(0, Sigma0), M_0 = M0
    (docs/theory.md §1 and §3).

    Parameters
    ----------
    activation, link, loss : str or ingredient
        Preset names or expression strings, stored as given (stripped); ingredient objects
        (:func:`theorykit.activation` ...) are stored as their name, which must rebuild them.  ``loss`` defaults to
        "square".
    width : int
        m, an integer in 1..4096 (default 1).
    a, b : number, str or sequence, optional
        Second-layer weights and biases: a number (broadcast to all m units), '1,-1', or a sequence of m numbers;
        stored as a tuple of floats, or None for the default (all 1, all 0; a given value equal to the default is
        stored as None too).
    delta : float
        n/d > 0 (required).
    ridge : float
        lambda >= 0 (default 0).
    eta, steps : float, int
        Constant step size eta > 0 for ``steps`` >= 0 steps, or
    schedule : sequence of float
        the step sizes eta_0..eta_{T-1} > 0 (a tuple of floats; a number is one step): exactly one of (eta and steps)
        or schedule.
    Sigma0 : number or nested sequence, optional
        m x m symmetric positive semi-definite covariance of theta^0 (nested tuples; a number s is s I); None
        (default) = identity, and an identity is stored as None.
    M0 : nested sequence, optional
        k x m initial overlap M_0 = Theta*^T Theta^0 (k from the link); None (default) = 0, and a zero matrix is
        stored as None.

    Returns
    -------
    Problem
        A frozen, hashable value compared by value (equal fields, equal problems).

        * ``problem.replace(**changes)`` returns a new, re-validated Problem (``replace(schedule=...)`` drops eta and
          steps and ``replace(eta=..., steps=...)`` drops a schedule; a default a, b, Sigma0, M0 follows a new width
          or link).
        * ``as_dict()`` / ``to_json()`` and ``Problem.from_dict()`` / ``Problem.from_json()`` round-trip to an equal
          Problem.  ``key`` is the sha256 of the canonical JSON (sorted keys, floats by repr): the same in every
          process and session, and different when any field is; result caches are keyed by it.
        * Derived objects are built on first use and kept: ``network`` (:class:`theorykit.Network`), ``link_obj``,
          ``activation_obj``, ``loss_obj``, ``analysis`` (:func:`theorykit.analyse_link` of the link, computed
          once).  ``k`` (latent dimension), ``m`` (width), ``etas`` (the step sizes as a NumPy array, shape (T,)),
          ``n_steps``, ``a_vector``, ``b_vector`` (shape (m,)), ``Sigma0_matrix`` (m, m), ``M0_matrix`` (k, m) are
          read-only views in NumPy form.

    Raises
    ------
    TheorykitError
        Construction validates everything and raises :class:`theorykit.TheorykitError` with a one-line message.

    Examples
    --------
    >>> import theorykit as tk
    >>> p = tk.Problem("gelu", "phase-retrieval", delta=2, eta=0.5, steps=10)
    >>> p.delta, p.k, p.m, p.etas[:2].tolist()
    (2.0, 1, 1, [0.5, 0.5])
    >>> tk.Problem.from_json(p.to_json()) == p
    True
    >>> q = p.replace(delta=3.0)
    >>> q.delta, q.key != p.key
    (3.0, True)
    >>> tk.Problem("gelu", "phase-retrieval", width=2, a=1, delta=2, eta=0.5, steps=10).a is None  # the default
    True
    >>> tk.Problem("gelu", "phase-retrieval", width=3, a=0.5, delta=2, eta=0.5, steps=10).a  # broadcast
    (0.5, 0.5, 0.5)
    """

    activation: Any
    link: Any
    loss: Any = defaults.LOSS
    width: int = defaults.WIDTH
    _: KW_ONLY
    a: Optional[tuple] = None
    b: Optional[tuple] = None
    delta: Optional[float] = None
    ridge: float = defaults.RIDGE
    eta: Optional[float] = None
    steps: Optional[int] = None
    schedule: Optional[tuple] = None
    Sigma0: Optional[tuple] = None
    M0: Optional[tuple] = None

    def __post_init__(self):
        put = functools.partial(object.__setattr__, self)
        # the scalars first (the order the solvers always checked them in)
        if self.delta is None:
            raise TheorykitError("delta (n/d) is required")
        put("delta", check_number("delta", self.delta, lambda v: v > 0, "> 0"))
        put("ridge", check_number("ridge", self.ridge, lambda v: v >= 0, ">= 0") + 0.0)
        if self.schedule is not None:
            if self.eta is not None or self.steps is not None:
                raise TheorykitError("give either eta and steps, or a schedule, not both")
            sched = check_vector("schedule", self.schedule, broadcast=False)
            if any(v <= 0 for v in sched):
                raise TheorykitError("the schedule must be a non-empty array of positive step sizes")
            put("schedule", sched)
        else:
            if self.eta is None or self.steps is None:
                raise TheorykitError("give eta and steps (or a schedule)")
            put("steps", check_int("steps", self.steps, 0))
            put("eta", check_number("eta", self.eta, lambda v: v > 0, "> 0"))
        # the model
        put("width", check_int("width m", self.width, 1, defaults.MAX_WIDTH))
        for kind in _SPEC_KINDS:
            spec, obj = _spec(kind, getattr(self, kind))
            put(kind, spec)
            self.__dict__[f"{kind}_obj"] = obj  # fills the cached_property
        m, k = self.width, self.__dict__["link_obj"].k
        for name, default in (("a", float(defaults.A)), ("b", float(defaults.B))):
            v = getattr(self, name)
            if v is not None:
                v = check_vector(name, v, m)
                put(name, None if all(x == default for x in v) else v)
        if self.Sigma0 is not None:
            S = check_matrix("Sigma0", self.Sigma0, (m, m))
            arr = np.array(S)
            if not np.allclose(arr, arr.T) or np.linalg.eigvalsh(arr)[0] < -1e-12:
                raise TheorykitError("Sigma0 must be symmetric positive semi-definite")
            put("Sigma0", None if _is_identity(S) else S)
        if self.M0 is not None:
            M = self.M0
            if m == 1 and not isinstance(M, str) and np.ndim(M) == 1 and len(M) == k:
                M = [[v] for v in M]  # a k-vector is the single column of a width-1 M0
            M = check_matrix("M0", M, (k, m))
            put("M0", None if all(v == 0.0 for row in M for v in row) else M)

    # ------------------------------------------------------------------ pickling: the fields only (no caches)
    def __getstate__(self):
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ------------------------------------------------------------------ derived objects (built once)
    @cached_property
    def activation_obj(self):
        return _build("activation", self.activation)

    @cached_property
    def link_obj(self):
        return _build("link", self.link)

    @cached_property
    def loss_obj(self):
        return _build("loss", self.loss)

    @cached_property
    def network(self):
        """The :class:`theorykit.Network` of (activation, loss, width, a, b)."""
        from .symbolic.network import Network

        return Network(self.activation_obj, self.loss_obj, self.width, a=self.a, b=self.b)

    @cached_property
    def analysis(self):
        """:func:`theorykit.analyse_link` of the link (exponents, easy/hard subspaces, delta_alg), computed once."""
        from .symbolic.links import analyse_link

        return analyse_link(self.link_obj)

    # ------------------------------------------------------------------ NumPy views (fresh arrays)
    @property
    def k(self) -> int:
        """Number of latent directions of the link."""
        return self.link_obj.k

    @property
    def m(self) -> int:
        return self.width

    @property
    def n_steps(self) -> int:
        """T, the number of GD steps (t = 0..T)."""
        return cast(int, self.steps) if self.schedule is None else len(self.schedule)  # steps is set without a schedule

    @property
    def etas(self) -> np.ndarray:
        """(T,) the step sizes eta_0..eta_{T-1}."""
        if self.schedule is not None:
            return np.array(self.schedule, dtype=float)
        return np.full(cast(int, self.steps), self.eta)  # steps is set without a schedule

    @property
    def a_vector(self) -> np.ndarray:
        return np.full(self.m, float(defaults.A)) if self.a is None else np.array(self.a)

    @property
    def b_vector(self) -> np.ndarray:
        return np.full(self.m, float(defaults.B)) if self.b is None else np.array(self.b)

    @property
    def Sigma0_matrix(self) -> np.ndarray:
        return np.eye(self.m) if self.Sigma0 is None else np.array(self.Sigma0)

    @property
    def M0_matrix(self) -> np.ndarray:
        return np.zeros((self.k, self.m)) if self.M0 is None else np.array(self.M0)

    # ------------------------------------------------------------------ changes
    def replace(self, **changes) -> "Problem":
        """A new Problem with ``changes`` applied and everything re-validated (class docstring)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TheorykitError(f"Problem has no field {unknown[0]!r} (fields: {', '.join(sorted(names))})")
        if changes.get("schedule") is not None:
            changes.setdefault("eta", None)
            changes.setdefault("steps", None)
        elif (changes.get("eta") is not None or changes.get("steps") is not None) and "schedule" not in changes:
            changes["schedule"] = None
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ JSON
    def as_dict(self) -> dict:
        """The JSON-safe form: every field (tuples as lists) plus ``format``."""
        def lists(v):
            return [lists(x) for x in v] if isinstance(v, tuple) else v

        out = {f.name: lists(getattr(self, f.name)) for f in dataclasses.fields(self)}
        out["format"] = FORMAT
        return out

    def to_json(self, indent: Optional[int] = None) -> str:
        """``as_dict()`` as JSON; without ``indent`` it is the canonical text that ``key`` hashes."""
        if indent is None:
            return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
        return json.dumps(self.as_dict(), sort_keys=True, indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> "Problem":
        """The inverse of :meth:`as_dict`."""
        if not isinstance(data, dict):
            raise TheorykitError(f"a Problem is read from a dict, got {type(data).__name__}")
        data = dict(data)
        fmt = data.pop("format", FORMAT)
        if fmt != FORMAT:
            raise TheorykitError(f"unknown Problem format {fmt!r} (this theorykit reads {FORMAT!r})")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TheorykitError(f"unknown Problem field {unknown[0]!r}")
        for req in ("activation", "link"):
            if req not in data:
                raise TheorykitError(f"the Problem has no {req!r}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> "Problem":
        """The inverse of :meth:`to_json`."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as e:
            raise TheorykitError(f"not a Problem in JSON: {str(e).splitlines()[0]}") from None
        return cls.from_dict(data)

    @cached_property
    def key(self) -> str:
        """sha256 (hex) of the canonical JSON: a stable cache key."""
        return hashlib.sha256(self.to_json().encode("ascii")).hexdigest()

    def __str__(self):
        step = (f"eta = {self.eta:g}, {self.steps} steps" if self.schedule is None
                else f"schedule of {len(self.schedule)} steps")
        return (f"{self.activation} / {self.link} / {self.loss}, m = {self.m}, delta = {self.delta:g}, {step}"
                + (f", ridge = {self.ridge:g}" if self.ridge else ""))


#: the Problem's fields, in order: the keyword arguments a function with a Problem form takes for them
FIELDS = tuple(f.name for f in dataclasses.fields(Problem))


def problem_or_keywords(caller: str, first, *, problem=None, required=(), unset=None, build=False,
                        **given) -> tuple[Optional[Problem], dict]:
    """The two forms of every function that takes a learning problem, ``f(problem, ...)`` and the keyword form
    ``f(activation, link, ..., delta=..., ...)``, as one: returns (the Problem or None, its fields).

    caller: the function's name, for the messages.  first: its first positional argument, a :class:`Problem` or the
    activation.  problem: a Problem given by keyword instead (``simulate(problem=...)``).  given: the keyword
    arguments the function received for Problem fields (names in :data:`FIELDS`; a field it does not take is left
    out).  unset: field -> the function's own default, a value that means "not given" as None does.

    * Problem form: every keyword in ``given`` must be unset, else ``TheorykitError("CALLER(problem, ...): NAME is
      part of the Problem; use problem.replace(NAME=...)")``.  The fields are the Problem's (Sigma0, M0 as NumPy
      matrices, None where they are the default).
    * Keyword form: every name in ``required`` must be given (else ``"CALLER: give a Problem, or activation, link and
      delta (keyword form)"``, naming the required ones).  The fields are the keywords as given (``first`` as the
      activation, None for a field not given); with ``build`` the Problem is built from them (None: the Problem's
      default), else it is None and the caller checks the raw values itself (an exact SymPy delta, say).
    """
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise TypeError(f"problem_or_keywords: {unknown[0]!r} is not a Problem field")
    unset = unset or {}
    if problem is not None:
        if isinstance(first, Problem):
            raise TheorykitError(f"{caller}: give the Problem once (first argument or problem=)")
        if not isinstance(problem, Problem):
            raise TheorykitError(f"{caller}: problem must be a theorykit.Problem, got {type(problem).__name__}")
        first, given = problem, {"activation": first, **given}
    if isinstance(first, Problem):
        for name in FIELDS:
            v = given.get(name)
            if v is not None and not (name in unset and v == unset[name]):
                raise TheorykitError(f"{caller}(problem, ...): {name} is part of the Problem; use "
                                     f"problem.replace({name}=...)")
        fields = {name: getattr(first, name) for name in FIELDS}
        fields["Sigma0"] = None if first.Sigma0 is None else first.Sigma0_matrix
        fields["M0"] = None if first.M0 is None else first.M0_matrix
        return first, fields
    missing = [name for name in required if given.get(name) is None]
    if missing:
        names = ["activation", *required]
        raise TheorykitError(f"{caller}: give a Problem, or {', '.join(names[:-1])} and {names[-1]} (keyword form)")
    fields = {name: given.get(name) for name in FIELDS}
    fields["activation"] = first
    if not build:
        return None, fields
    return Problem(first, fields["link"], **{k: v for k, v in fields.items()
                                             if v is not None and k not in ("activation", "link")}), fields
