"""Command-line interface: ``theorykit COMMAND ... [--json]``.

Each command lives in ``theorykit/_cli/<command>.py`` and defines ``add_parser(subparsers)`` and
``run(args) -> dict`` (the JSON contract) and ``text(result) -> str`` (plain output); :data:`COMMANDS` registers
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

from . import __version__
from .errors import TheorykitError
# the command registry is static: a command module that fails to import is an internal bug and makes `theorykit`
# fail loudly here (never a silently missing or "unavailable" command)
from ._cli import derive, dmft as dmft_cmd, hermite, link as link_cmd, simulate as simulate_cmd, \
    spectral as spectral_cmd, sweep as sweep_cmd

#: command name -> module under theorykit._cli (each defines add_parser, run and text), in help order
COMMANDS = {"hermite": hermite, "link": link_cmd, "derive": derive, "simulate": simulate_cmd,
            "spectral": spectral_cmd, "sweep": sweep_cmd, "dmft": dmft_cmd}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit status 2
        sys.stderr.write(f"theorykit: error: {message}\n")
        sys.exit(2)


def _clean(obj):
    """Make a result JSON-safe: NaN/inf -> None is never silent: they are refused upstream; here only cast types."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


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
        out = json.dumps(_clean(result), indent=2) if args.json else args._module.text(result)
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
    return 0


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


if __name__ == "__main__":
    sys.exit(main())
