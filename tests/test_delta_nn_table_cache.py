"""The delta_nn table's case cache: a finished case is kept on disk and not recomputed (an interrupted run resumes)."""
import os
from types import SimpleNamespace

from theorykit.report.writer import cached_case
from theorykit.validation import delta_nn_table as tab


def cached(args, part, case, compute):
    """What the table does for each case: cached_case under <cache>/delta_nn with the table's case key."""
    return cached_case(args, part, case, compute, key=tab.case_key(args, part, case),
                       folder=os.path.join(args.cache, "delta_nn"))


def test_a_finished_case_is_read_back_not_recomputed(tmp_path):
    args = SimpleNamespace(cache=str(tmp_path), paths=1024, seeds=2)
    calls = []

    def compute(a, case):
        calls.append(case)
        return {"rows": [{"part": "nn", "setting": case[0], "value": 1.5}], "body": ["x"], "note": "n", "rule": "r"}

    case = ("bounded", 1000, 6, (4.0, 12.0), None, 6)
    first = cached(args, "nn", case, compute)
    again = cached(args, "nn", case, compute)
    assert calls == [case] and first == again
    other = cached(SimpleNamespace(cache=str(tmp_path), paths=2048, seeds=2), "nn", case, compute)
    assert len(calls) == 2 and other["rows"][0]["value"] == 1.5  # other paths: another key


def test_the_committed_table_is_read_back_by_case_key(tmp_path):
    """A clean checkout has no JSON cache: the rows the table already holds under a case's key are reused (typed back
    from the CSV) and rendered by Part 2, and a case whose key changed (other paths) is recomputed.  A kinked
    setting's key carries its own budget (at least KINKED_REPLICA_PATHS per replica, dyn_paths), which a smaller
    --paths does not change."""
    from theorykit import defaults

    stem = tmp_path / "t"
    case = ("pr-gelu", (4.0, 6.0), (25, 100), 0.05, 1000)
    args = SimpleNamespace(cache=str(tmp_path / "cache"), paths=1024, seeds=2, previous={})
    key = tab.case_key(args, "dyn", case)
    rows = [{"part": "dyn", "setting": "pr-gelu", "delta": 4.0, "t1": 25, "t2": 100, "gamma_dmft": -0.001,
             "gamma_dmft_se": 2e-4, "gamma_sim": -0.002, "gamma_sim_se": 1e-3, "kick_m0": 0.05, "kick_d": 1000,
             "escaped_before_window": 0, "seeds": 2, "delta_dyn": 7.5, "delta_dyn_se": 0.2, "case_key": key,
             "gamma_dmft_how": None, "converged": False}]
    from theorykit.report.writer import previous_rows, write_csv

    write_csv(str(stem) + ".csv", rows, list(rows[0]))
    args.previous = previous_rows(str(stem))
    back, md = [], []
    tab.part_dyn(args, back, md, [case])  # would run the DMFT and the kick test if the rows were not read back
    assert back[0]["gamma_dmft"] == -0.001 and back[0]["t1"] == 25
    assert back[0]["converged"] is False and back[0]["gamma_dmft_how"] is None
    text = "\n".join(md)
    assert "| pr-gelu | 4 | [25, 100] |" in text and "delta_dyn (DMFT) = 7.5" in text
    calls = []

    def compute(a, c):
        calls.append(c)
        return {"rows": [dict(rows[0], gamma_dmft=1.0)]}

    assert cached(args, "dyn", case, compute)["rows"][0]["gamma_dmft"] == -0.001 and calls == []
    other = SimpleNamespace(cache=args.cache, paths=2048, seeds=2, previous=args.previous)
    assert cached(other, "dyn", case, compute)["rows"][0]["gamma_dmft"] == 1.0 and len(calls) == 1
    relu = ("pr-relu",) + case[1:]
    assert tab.dyn_paths(args, "pr-relu") == tab.dyn_paths(other, "pr-relu") == 4 * defaults.KINKED_REPLICA_PATHS
    assert tab.case_key(args, "dyn", relu) == tab.case_key(other, "dyn", relu)
