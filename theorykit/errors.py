"""Exceptions raised by theorykit.

Every user-facing failure is a :class:`TheorykitError` carrying a one-line message; the CLI prints
that message on stderr and exits with status 2 for a bad input, 4 for :class:`NoAnswer` (a valid request the
numerics could not answer).  Code deep inside SymPy or SciPy never leaks a
traceback to the user: the public entry points translate its failures into these errors.
"""


class TheorykitError(ValueError):
    """A bad input or an impossible request, with a one-line explanation.

    It computes nothing, so docs/theory.md has no equation for it; every public function of theorykit (docs/theory.md
    §1 to §8) reports a user-facing failure as this error (or a subclass: ParseError, DivergenceError,
    TimeLimitError), and the CLI prints its message on stderr and exits with status 2.  It is a ValueError.

    Parameters
    ----------
    message : str
        The one-line explanation.

    Returns
    -------
    TheorykitError
        The exception, to be raised; ``str(err)`` is the message.

    Examples
    --------
    >>> import theorykit as tk
    >>> try:
    ...     tk.Problem("gelu", "phase-retrieval", eta=0.5, steps=10)
    ... except tk.TheorykitError as err:
    ...     print(err)
    delta (n/d) is required
    >>> issubclass(tk.TheorykitError, ValueError)
    True
    """


class ParseError(TheorykitError):
    """A user expression was rejected by the whitelist parser (it was never evaluated)."""


class DivergenceError(TheorykitError):
    """A numerical iteration left the finite numbers (e.g. GD with too large a step)."""


class TimeLimitError(TheorykitError):
    """A symbolic or numeric computation ran past its wall-clock limit (the message says how to raise it)."""


class NoAnswer(TheorykitError):
    """A valid request that the numerics could not answer (no sign change of a margin on the grid, a DMFT that
    diverged at every point): the message says what was tried and what to change.  Not a bad input: the CLI exits 4.
    ``partial``: what was computed on the way (e.g. delta_star's entries, each with its ``error``), or None."""

    def __init__(self, message: str, partial=None):
        super().__init__(message)
        self.partial = partial
