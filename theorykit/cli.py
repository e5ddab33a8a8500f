"""Command-line interface: ``theorykit COMMAND ... [--json]``.

Each command lives in ``theorykit/_cli/<command>.py`` and defines ``add_parser(subparsers)`` and
``run(args) -> dict`` (the JSON contract) and ``text(result) -> str`` (plain output), and optionally
``exit_status(result) -> int`` (a verdict that is not a success, e.g. check's "differs"); :data:`COMMANDS` registers
them statically (a new command is imported and added there).  A bad input exits with status 2 and a one-line
message on stderr; no traceback reaches the user.  Any other exception is an internal error (a bug): exit status 1 and
a one-line notice, or the full traceback with ``theorykit --debug COMMAND ...``.  ``theorykit --version`` prints
``theorykit <version>``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Optional

from .version import __version__
from .errors import NoAnswer, TheorykitError
# the command registry is static: a command module that fails to import is an internal bug and makes `theorykit`
# fail loudly here (never a silently missing or "unavailable" command)
from ._cli import derive, dmft as dmft_cmd, hermite, link as link_cmd, simulate as simulate_cmd, \
    spectral as spectral_cmd, sweep as sweep_cmd, hessian as hessian_cmd, threshold as threshold_cmd, \
    table as table_cmd, plot as plot_cmd, check as check_cmd, optimise as optimise_cmd

#: command name -> module under theorykit._cli (each defines add_parser, run and text), in help order
COMMANDS = {"hermite": hermite, "link": link_cmd, "derive": derive, "simulate": simulate_cmd,
            "spectral": spectral_cmd, "sweep": sweep_cmd, "dmft": dmft_cmd, "hessian": hessian_cmd,
            "threshold": threshold_cmd, "table": table_cmd, "optimise": optimise_cmd, "plot": plot_cmd,
            "check": check_cmd}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit status 2
        sys.stderr.write(f"theorykit: error: {message}\n")
        sys.exit(2)


#: what the top-level key "non_finite" of a --json output says: a value that was NaN or infinite is written null
NON_FINITE_NOTE = ("JSON has no NaN or infinity: these entries (path pattern -> count by kind) were not finite numbers "
                   "and are written null; the command's own keys (e.g. delta_alg.infinite, *_note) say why where known")


def _clean(obj, found: Optional[dict] = None, path: str = ""):
    """Make a result JSON-safe: NumPy types to Python ones, and every NaN or infinite float to None (JSON has neither,
    and a bare string such as "inf" in a numeric array is no number either).  Each such entry is counted in
    ``found`` (path pattern with list indices as [*] -> {"nan"|"inf"|"-inf": count}), which main() reports under the
    top-level key "non_finite"; commands say explicitly what a legitimately infinite value means (e.g. delta_alg's
    "infinite" and "reason")."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _clean(v, found, f"{path}.{k}" if path else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v, found, f"{path}[*]") for v in obj]
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist(), found, path)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        if math.isfinite(v):
            return v
        if found is not None:
            kind = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
            found.setdefault(path, {}).setdefault(kind, 0)
            found[path][kind] += 1
        return None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    return obj


def to_json(result) -> str:
    """The --json text of a command's result: strict JSON (no NaN/Infinity tokens), with a top-level "non_finite"
    report when some value was not finite (see :func:`_clean`)."""
    found: dict = {}
    out = _clean(result, found)
    if found and isinstance(out, dict):
        out["non_finite"] = {"note": NON_FINITE_NOTE, "entries": found}
    return json.dumps(out, indent=2, allow_nan=False)


def build_parser():
    p = _Parser(prog="theorykit", description="Theory of feature learning in two-layer networks.")
    p.add_argument("--version", action="version", version=f"theorykit {__version__}")
    p.add_argument("--debug", action="store_true", help="show the traceback of an internal error (a bug)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in COMMANDS.values():
        sp_ = mod.add_parser(sub)
        sp_.add_argument("--json", action="store_true", help="machine-readable output")
        sp_.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                         help="show the traceback of an internal error (a bug)")
        sp_.set_defaults(_module=mod)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        result = args._module.run(args)
        out = to_json(result) if args.json else args._module.text(result)
    except NoAnswer as e:  # a valid request the numerics could not answer: not a bad input
        sys.stderr.write(f"theorykit: no answer: {_first_line(e)}\n")
        return 4
    except TheorykitError as e:
        sys.stderr.write(f"theorykit: error: {_first_line(e)}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("theorykit: interrupted\n")
        return 130
    except Exception as e:  # not a bad input: a bug, reported as such (never disguised as a user error)
        if getattr(args, "debug", False):
            raise
        sys.stderr.write(f"theorykit: internal error: {type(e).__name__}: {_first_line(e)} "
                         f"(a bug; rerun with --debug for the traceback)\n")
        return 1
    print(out)
    # a command whose answer is a verdict (check: the claim differs) says so in its exit status too
    status = getattr(args._module, "exit_status", None)
    return status(result) if status else 0


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


if __name__ == "__main__":
    sys.exit(main())
