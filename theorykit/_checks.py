"""Argument checks, the progress bar and the memory guard: one copy, shared by every module of the package.

Every check raises :class:`theorykit.errors.TheorykitError` with a one-line message naming the argument, and returns
the value in its canonical type (``float``, ``int``, tuple of floats).  Scalars are accepted wherever a vector of
length 1 is (:func:`check_vector`, :func:`check_matrix`).

The names are public inside the package (no leading underscore) so modules import them from here instead of from
each other's private helpers; :mod:`theorykit.referee.gd` re-exports the old private names for code that still uses
them.
"""
from __future__ import annotations

import math
import numbers
import os
import sys
import time
from typing import Callable, Optional

import numpy as np

from .errors import TheorykitError

#: fraction of physical memory above which a computation is refused
MEMORY_FRACTION = 0.6


# ------------------------------------------------------------------------------------------------ scalars
def check_deltas(deltas, at_least: int = 1) -> list:
    """``deltas`` as a list of floats: at least ``at_least`` distinct positive finite numbers, in the order given."""
    from .errors import TheorykitError

    try:
        out = [float(d) for d in deltas]
    except (TypeError, ValueError):
        raise TheorykitError(f"deltas must be a list of numbers, got {deltas!r}") from None
    if len(out) < at_least or any(not (math.isfinite(d) and d > 0) for d in out):
        raise TheorykitError(f"deltas must be at least {at_least} positive finite number(s), got {deltas!r}")
    if len(set(out)) != len(out):
        raise TheorykitError(f"deltas must not repeat, got {out}")
    return out


def check_number(name: str, value, cond: Callable[[float], bool], what: str) -> float:
    """``float(value)`` if it is a finite number satisfying ``cond``; else a one-line error 'NAME must be WHAT'."""
    if isinstance(value, bool):
        raise TheorykitError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TheorykitError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or not cond(v):
        raise TheorykitError(f"{name} must be {what}, got {value!r}")
    return v


def check_int(name: str, value, lo: int, hi: Optional[int] = None) -> int:
    """``int(value)`` for an integer (Python or NumPy, not bool) in lo..hi (hi None: no upper bound)."""
    ok = not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= lo
    if ok and hi is not None:
        ok = value <= hi
    if not ok:
        bound = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise TheorykitError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def _is_scalar(value) -> bool:
    return isinstance(value, (numbers.Number, np.number, str)) or (isinstance(value, np.ndarray) and value.ndim == 0)


def _float(name: str, value) -> float:
    """One entry: a number, a numeric string ('0.5', '1/3') or a SymPy number, as a finite float (-0.0 -> 0.0)."""
    if isinstance(value, bool):
        raise TheorykitError(f"{name}: {value!r} is not a number")
    try:
        if isinstance(value, str):
            from fractions import Fraction

            v = float(Fraction(value.strip()))
        else:
            v = float(value)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise TheorykitError(f"{name}: {value!r} is not a number") from None
    if not math.isfinite(v):
        raise TheorykitError(f"{name} must be finite, got {value!r}")
    return v + 0.0  # -0.0 -> 0.0, so equal problems print (and hash) alike


# ------------------------------------------------------------------------------------------------ arrays
def check_vector(name: str, value, length: Optional[int] = None, *, broadcast: bool = True) -> tuple:
    """A tuple of finite floats from a scalar, a comma-separated string ('1,-1'), a sequence or an array.

    A scalar (or a string without commas) is a vector of length 1, or, with ``broadcast``, ``length`` copies of it.
    ``length`` (None: any length >= 1) is checked.
    """
    if isinstance(value, str) and "," in value:
        items = [s for s in value.split(",")]
    elif _is_scalar(value):
        items = [value] * (length if (broadcast and length is not None) else 1)
    else:
        try:
            arr = np.asarray(value, dtype=object)
        except Exception:
            raise TheorykitError(f"{name} must be a number or a sequence of numbers, got {value!r}") from None
        if arr.ndim == 0:
            items = [arr.item()] * (length if (broadcast and length is not None) else 1)
        elif arr.ndim != 1:
            raise TheorykitError(f"{name} must be a number or a flat sequence of numbers, got shape {arr.shape}")
        else:
            items = list(arr)
    out = tuple(_float(name, v) for v in items)
    if not out:
        raise TheorykitError(f"{name} must not be empty")
    if length is not None and len(out) != length:
        raise TheorykitError(f"{name} has {len(out)} entries but {length} are needed")
    return out


def check_matrix(name: str, value, shape: tuple) -> tuple:
    """A (rows, cols) matrix as a tuple of tuples of finite floats, from nested sequences, an array, a flat sequence
    of rows*cols entries, or a scalar (for shape (1, 1); a scalar times the identity for a square shape)."""
    rows, cols = shape
    if _is_scalar(value):
        s = _float(name, value)
        if rows == cols:
            return tuple(tuple(s if i == j else 0.0 for j in range(cols)) for i in range(rows))
        if rows * cols == 1:
            return ((s,),)
        raise TheorykitError(f"{name} must be a {rows} x {cols} matrix, got the scalar {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TheorykitError(f"{name} must be a {rows} x {cols} matrix of numbers") from None
    if arr.shape != (rows, cols) and arr.size == rows * cols and arr.ndim <= 2:
        arr = arr.reshape(rows, cols)
    if arr.shape != (rows, cols):
        raise TheorykitError(f"{name} must be a {rows} x {cols} matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise TheorykitError(f"{name} must be finite")
    return tuple(tuple(float(v) + 0.0 for v in row) for row in arr)


# ------------------------------------------------------------------------------------------------ progress
class Progress:
    """A tiny progress bar on stderr (updates at most every 0.1 s): ``LABEL [####    ] i/total UNIT  t s``.

    ``label`` and ``unit`` have no defaults: each caller names what it counts, and advances the bar by exactly that
    unit (``update(i)`` with i of those units done), so that the bar counts what it says it counts."""

    def __init__(self, total, stream=None, width=30, *, label: str, unit: str):
        self.total, self.stream, self.width = max(total, 1), stream or sys.stderr, width
        self.label, self.unit = label, unit
        self.t0 = self.last = time.monotonic()
        self.done = 0

    def tick(self):
        """One more unit done (for callers that count one event at a time, e.g. an ``on_solve`` hook)."""
        self.done += 1
        self.update(self.done)

    def update(self, i, force=False):
        now = time.monotonic()
        if not force and now - self.last < 0.1:
            return
        self.last = now
        frac = min(i / self.total, 1.0)
        bar = "#" * int(frac * self.width)
        self.stream.write(f"\r{self.label} [{bar:<{self.width}}] {i}/{self.total} {self.unit} "
                          f"{now - self.t0:6.1f}s")
        self.stream.flush()

    def close(self, i=None):
        self.update(self.done if i is None else i, force=True)
        self.stream.write("\n")
        self.stream.flush()


# ------------------------------------------------------------------------------------------------ loss at t = 0
def loss_undefined_at_start(loss, values, y=None, yhat=None, what: str = "training sample") -> Optional[TheorykitError]:
    """The one-line error for a loss that is not finite at the initial point (t = 0), or None when it is finite.

    A NaN (or infinite) loss before any step is a property of the loss, the link and the initial predictions -- the
    loss is undefined there (e.g. log(y) or sqrt(y) for a link that produces y <= 0) -- not a divergence of gradient
    descent, so no hint on eta applies.  ``loss``: the Loss (for its expression); ``values``: the per-sample losses (or
    one aggregate); ``y``, ``yhat``: the matching samples, to name a witness."""
    v = np.atleast_1d(np.asarray(values, dtype=float))
    bad = ~np.isfinite(v)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    kind = "undefined (NaN)" if np.isnan(v[i]) else "infinite"
    expr = getattr(loss, "expr", loss)
    at = ""
    if y is not None and yhat is not None:
        at = f" at y = {float(np.ravel(y)[i]):.6g}, yhat = {float(np.ravel(yhat)[i]):.6g} (a {what})"
    return TheorykitError(f"the loss is {kind} at t = 0, before any step: l(y, yhat) = {expr}{at}; this is not a "
                          "divergence (no step was taken): use a loss defined at every y the link produces and every "
                          "prediction of the network")


# ------------------------------------------------------------------------------------------------ memory
def physical_memory() -> Optional[int]:
    """Bytes of physical memory (os.sysconf), or None where unknown."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def fmt_bytes(b: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit, s in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= s:
            return f"{b / s:.3g} {unit}"
    return f"{int(b)} B"
