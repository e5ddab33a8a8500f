"""theorykit sweep ... --deltas 2,4,6 --seeds 8 [--processes P] [--out FILE.csv] [--json]

With --out the rows are appended as runs finish and rerunning the same command resumes an interrupted sweep (a file
written with other settings is refused).  Exit status 2, with one line, when every run failed.
"""
import math
import sys

from ._simargs import add_simulation_arguments, simulation_kwargs
from ..errors import TheorykitError


def add_parser(sub):
    p = sub.add_parser("sweep", help="success probability of finite-d GD vs delta, over seeds, in parallel")
    add_simulation_arguments(p, with_delta=False)
    p.add_argument("--deltas", required=True, help="comma-separated sample ratios, e.g. 2,4,6")
    p.add_argument("--seeds", default="8", help="a count N (seeds 0..N-1) or a comma-separated list")
    p.add_argument("--processes", type=int, default=None, help="worker processes (default: all CPUs)")
    p.add_argument("--out", default=None, help="CSV file: settings recorded in its header, each row appended as its "
                                               "run finishes; rerun the same command to resume an interrupted sweep")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when not a terminal")
    return p


def _floats(text, name):
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise TheorykitError(f"--{name}: expected comma-separated numbers, got {text!r}") from None


def run(args) -> dict:
    from ..referee.sweeps import failure_message, summarise, sweep

    deltas = _floats(args.deltas, "deltas")
    if "," in args.seeds:
        seeds = [int(s) for s in _floats(args.seeds, "seeds")]
    else:
        try:
            seeds = list(range(int(args.seeds)))
        except ValueError:
            raise TheorykitError(f"--seeds: expected a count or a list, got {args.seeds!r}") from None
    df = sweep(deltas, seeds, processes=args.processes, csv=args.out, progress=args.progress or None, quiet=True,
               **simulation_kwargs(args))
    bad = failure_message(df)
    if bad and (df.status == "failed").all():
        first = df.iloc[0]
        raise TheorykitError(f"every one of the {len(df)} runs failed" + (f" (recorded in {args.out})" if args.out
                             else "") + f"; first: delta={first.delta}, seed={first.seed}: {first.error}")
    if bad:
        sys.stderr.write(bad + "\n")
    summ = summarise(df)
    return {"runs": df.to_dict(orient="records"), "summary": summ.to_dict(orient="records"),
            "settings": df.attrs["settings"], "csv": args.out}


def _num(v, width: int, spec: str = ".3f") -> str:
    """A right-aligned number, or '-' for None / NaN (a delta whose every run failed)."""
    missing = v is None or (isinstance(v, float) and math.isnan(v))
    return f"{'-' if missing else format(v, spec):>{width}}"


def text(r) -> str:
    lines = ["  delta   runs  ok  div  fail   P(success)  +/- s.e.   95% interval   median escape",
             "  (P = successes / (ok + diverged); failed runs are excluded)"]
    for s in r["summary"]:
        ci = f"[{_num(s['low'], 5)}, {_num(s['high'], 5)}]"
        lines.append(f"  {s['delta']:<7.4g} {s['runs']:>4d} {s['ok']:>3d} {s['diverged']:>4d} {s['failed']:>5d}"
                     f"   {_num(s['success_probability'], 9)}  {_num(s['stderr'], 8)}  {ci:>15}"
                     f"  {_num(s['median_escape_time'], 8, 'g')}")
    if r["csv"]:
        lines.append(f"saved {r['csv']}")
    return "\n".join(lines)
