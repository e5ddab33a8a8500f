"""Exceptions raised by theorykit.

Every user-facing failure is a :class:`TheorykitError` carrying a one-line message; the CLI prints
that message on stderr and exits with status 2.  Code deep inside SymPy or SciPy never leaks a
traceback to the user: the public entry points translate its failures into these errors.
"""


class TheorykitError(ValueError):
    """A bad input or an impossible request, with a one-line explanation."""


class ParseError(TheorykitError):
    """A user expression was rejected by the whitelist parser (it was never evaluated)."""


class DivergenceError(TheorykitError):
    """A numerical iteration left the finite numbers (e.g. GD with too large a step)."""


class TimeLimitError(TheorykitError):
    """A symbolic or numeric computation ran past its wall-clock limit (the message says how to raise it)."""
