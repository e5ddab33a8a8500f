"""The delta_nn table's case cache: a finished case is kept on disk and not recomputed (an interrupted run resumes)."""
from types import SimpleNamespace

from theorykit.compare import delta_nn_table as tab


def test_a_finished_case_is_read_back_not_recomputed(tmp_path):
    args = SimpleNamespace(cache=str(tmp_path), paths=1024, seeds=2)
    calls = []

    def compute(a, case):
        calls.append(case)
        return {"rows": [{"part": "nn", "setting": case[0], "value": 1.5}], "body": ["x"], "note": "n", "rule": "r"}

    case = ("bounded", 1000, 6, (4.0, 12.0), None, 6)
    first = tab._cached(args, "nn", case, compute)
    again = tab._cached(args, "nn", case, compute)
    assert calls == [case] and first == again
    other = tab._cached(SimpleNamespace(cache=str(tmp_path), paths=2048, seeds=2), "nn", case, compute)
    assert len(calls) == 2 and other["rows"][0]["value"] == 1.5  # other paths: another key
