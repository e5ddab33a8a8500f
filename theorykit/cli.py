"""Command-line interface: ``theorykit COMMAND ... [--json]``.

Each command lives in ``theorykit/_cli/<command>.py`` and defines ``add_parser(subparsers)`` and
``run(args) -> dict`` (the JSON contract) and ``text(result) -> str`` (plain output).  A bad input exits with
status 2 and a one-line message on stderr; no traceback reaches the user.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys

from .errors import TheorykitError

#: command name -> module under theorykit._cli
COMMANDS = ["hermite", "link", "derive", "simulate", "spectral", "sweep", "dmft"]


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


class _Broken:
    """Stands in for a command module that failed to import: the command reports why, the others still work."""

    def __init__(self, name, exc):
        self.name, self.exc = name, exc

    def add_parser(self, sub):
        p = sub.add_parser(self.name, help=f"(unavailable: {type(self.exc).__name__})")
        p.add_argument("rest", nargs="*")
        return p

    def run(self, args):
        raise TheorykitError(f"command '{self.name}' is unavailable: {type(self.exc).__name__}: {self.exc}")


def build_parser():
    p = _Parser(prog="theorykit", description="Theory of feature learning in two-layer networks.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules = {}
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"theorykit._cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"theorykit._cli.{name}":
                continue  # command not built yet
            mod = _Broken(name, e)
        except Exception as e:  # one broken command must not take the others down
            mod = _Broken(name, e)
        sp_ = mod.add_parser(sub)
        sp_.add_argument("--json", action="store_true", help="machine-readable output")
        sp_.set_defaults(_module=mod)
        modules[name] = mod
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        result = args._module.run(args)
    except TheorykitError as e:
        sys.stderr.write(f"theorykit: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("theorykit: interrupted\n")
        return 130
    if args.json:
        print(json.dumps(_clean(result), indent=2))
    else:
        print(args._module.text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
