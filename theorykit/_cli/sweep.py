"""theorykit sweep ... --deltas 2,4,6 --seeds 8 [--processes P | --scheduler ADDRESS] [--out FILE.csv]
[--keep overlap|full ...] [--json]

With --out the rows are appended as runs finish and rerunning the same command resumes an interrupted sweep; the
same settings with more deltas or seeds extend it (a file written with other settings is refused).  --keep adds each
run's trajectories (per step: overlap_t and success_t; M_t, gram_t, train_loss_t, test_loss_t) to its row.  Exit
status 2, with one line, when every run failed.
"""
import math
import sys

from ._args import (SEED_MAX, add_simulation_arguments, add_worker_arguments, check_args, check_workers,
                    simulation_kwargs)
from ..errors import TheorykitError


def add_parser(sub):
    p = sub.add_parser("sweep", help="success probability of finite-d GD vs delta, over seeds, in parallel",
                       description="Success probability of finite-d GD vs delta, over seeds, in parallel.",
                       epilog="example: theorykit sweep --activation relu --link phase-retrieval --d 100 --steps 100 "
                              "--eta 0.5 --deltas 2,4,6 --seeds 8 --out sweep.csv")
    add_simulation_arguments(p, with_delta=False)
    p.add_argument("--deltas", required=True, help="comma-separated distinct sample ratios n/d > 0, e.g. 2,4,6")
    p.add_argument("--seeds", default="8", help="a count N >= 1 (seeds 0..N-1) or a comma-separated list of distinct "
                                               "integers >= 0 (default 8)")
    add_worker_arguments(p)
    p.add_argument("--out", default=None, help="CSV file: settings recorded in its header, each row appended as its "
                                               "run finishes; rerun the same command to resume an interrupted sweep")
    p.add_argument("--keep", action="append", choices=["overlap", "full"], default=None,
                   help="also record each run's trajectories (repeatable): overlap (hard overlap and success per "
                        "step), full (M, gram, train loss and population test loss per step)")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when not a terminal")
    return p


#: the most runs (deltas x seeds) one sweep command takes
MAX_RUNS = 10 ** 6


def _floats(text, name):
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise TheorykitError(f"--{name}: expected comma-separated numbers, got {text!r}") from None


def _deltas(text):
    deltas = _floats(text, "deltas")
    if not deltas:
        raise TheorykitError(f"--deltas: no value given in {text!r}")
    bad = [v for v in deltas if not (math.isfinite(v) and v > 0)]
    if bad:
        raise TheorykitError(f"--deltas: every delta must be a positive finite number, got {bad[0]!r}")
    if len(set(deltas)) != len(deltas):
        raise TheorykitError(f"--deltas: duplicate delta in {text!r}")
    return deltas


def _seeds(text):
    def one(t):
        try:
            v = int(t.strip())
        except ValueError:
            raise TheorykitError(f"--seeds: seeds are integers >= 0, got {t.strip()!r}") from None
        if not 0 <= v <= SEED_MAX:
            raise TheorykitError(f"--seeds: seeds are integers in 0..{SEED_MAX}, got {t.strip()!r}")
        return v

    if "," in text:
        seeds = [one(t) for t in text.split(",") if t.strip()]
        if not seeds:
            raise TheorykitError(f"--seeds: no seed given in {text!r}")
        if len(set(seeds)) != len(seeds):
            raise TheorykitError(f"--seeds: duplicate seed in {text!r}")
        return seeds
    try:
        count = int(text.strip())
    except ValueError:
        raise TheorykitError(f"--seeds: expected a count N >= 1 or a comma-separated list, got {text!r}") from None
    if not 1 <= count <= MAX_RUNS:
        raise TheorykitError(f"--seeds: the count must be in 1..{MAX_RUNS}, got {text!r}")
    return list(range(count))


def run(args) -> dict:
    from ..referee.sweeps import failure_message, summarise, sweep

    check_args(args)
    deltas = _deltas(args.deltas)
    seeds = _seeds(args.seeds)
    if len(deltas) * len(seeds) > MAX_RUNS:
        raise TheorykitError(f"{len(deltas)} deltas x {len(seeds)} seeds = {len(deltas) * len(seeds)} runs: at most "
                             f"{MAX_RUNS} in one sweep")
    check_workers(args)
    df = sweep(deltas, seeds, processes=args.processes, csv=args.out, progress=args.progress or None, quiet=True,
               scheduler=args.scheduler, keep=args.keep or (), **simulation_kwargs(args))
    bad = failure_message(df)
    if bad and (df.status == "failed").all():
        first = df.iloc[0]
        raise TheorykitError(f"every one of the {len(df)} runs failed" + (f" (recorded in {args.out})" if args.out
                             else "") + f"; first: delta={first.delta}, seed={first.seed}: {first.error}")
    if bad:
        sys.stderr.write(bad + "\n")
    summ = summarise(df)
    runs, summary = _nulls(df.to_dict(orient="records")), _nulls(summ.to_dict(orient="records"))
    out = {"runs": runs, "summary": summary, "settings": df.attrs["settings"], "csv": args.out}
    # JSON has no NaN: an empty cell is null, and null_means says what it means for each key that has one
    means = {f"runs[*].{k}": NULL_MEANS.get(k, "empty") for k in sorted({k for r in runs for k, v in r.items()
                                                                          if v is None and k in NULL_MEANS})}
    means.update({f"summary[*].{k}": NULL_MEANS_SUMMARY.get(k, "empty")
                  for k in sorted({k for r in summary for k, v in r.items() if v is None and k in NULL_MEANS_SUMMARY})})
    if means:
        out["null_means"] = means
    return out


#: what a null cell of a run means (JSON output; the CSV leaves it empty)
NULL_MEANS = {"escape_time": "the run never reached the success overlap within --steps (or it failed)",
              "success": "the run failed (no result)", "final_overlap": "the run failed",
              "max_overlap": "the run failed",
              "final_train_loss": "the run failed", "final_test_loss": "the run failed"}
NULL_MEANS_SUMMARY = {"median_escape_time": "no run that finished escaped at this delta",
                      "success_probability": "every run at this delta failed",
                      "stderr": "every run at this delta failed",
                      "low": "every run at this delta failed", "high": "every run at this delta failed"}


def _nulls(records):
    """NaN (pandas' empty cell) -> None; kept trajectories (arrays) -> lists."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v.tolist() if hasattr(v, "tolist") else v)
             for k, v in r.items()} for r in records]


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
