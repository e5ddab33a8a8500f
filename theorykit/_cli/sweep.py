"""theorykit sweep ... --deltas 2,4,6 --seeds 8 [--processes P] [--out FILE.csv] [--json]"""
from ._simargs import add_simulation_arguments, simulation_kwargs
from ..errors import TheorykitError


def add_parser(sub):
    p = sub.add_parser("sweep", help="success probability of finite-d GD vs delta, over seeds, in parallel")
    add_simulation_arguments(p, with_delta=False)
    p.add_argument("--deltas", required=True, help="comma-separated sample ratios, e.g. 2,4,6")
    p.add_argument("--seeds", default="8", help="a count N (seeds 0..N-1) or a comma-separated list")
    p.add_argument("--processes", type=int, default=None, help="worker processes (default: all CPUs)")
    p.add_argument("--out", default=None, help="CSV file (settings recorded in its header)")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when not a terminal")
    return p


def _floats(text, name):
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise TheorykitError(f"--{name}: expected comma-separated numbers, got {text!r}") from None


def run(args) -> dict:
    from ..referee.sweeps import sweep, summarise

    deltas = _floats(args.deltas, "deltas")
    if "," in args.seeds:
        seeds = [int(s) for s in _floats(args.seeds, "seeds")]
    else:
        try:
            seeds = list(range(int(args.seeds)))
        except ValueError:
            raise TheorykitError(f"--seeds: expected a count or a list, got {args.seeds!r}") from None
    df = sweep(deltas, seeds, processes=args.processes, csv=args.out, progress=args.progress or None,
               **simulation_kwargs(args))
    summ = summarise(df)
    return {"runs": df.to_dict(orient="records"), "summary": summ.to_dict(orient="records"),
            "settings": df.attrs["settings"], "csv": args.out}


def text(r) -> str:
    lines = ["  delta   runs  ok  div  fail   P(success)  +/- s.e.  median escape"]
    for s in r["summary"]:
        lines.append(f"  {s['delta']:<7.4g} {s['runs']:>4d} {s['ok']:>3d} {s['diverged']:>4d} {s['failed']:>5d}"
                     f"   {s['success_probability']:>9.3f}  {s['stderr']:>8.3f}  {s['median_escape_time']:>8}")
    if r["csv"]:
        lines.append(f"saved {r['csv']}")
    return "\n".join(lines)
