"""Golden outputs: fixed-seed results of every solver agree with tests/golden/outputs.json to 1e-12 (relative to each
array's scale).  A restructuring must move no number; a change meant to move numbers regenerates the record with
``python scripts/golden.py --write`` and says so in its commit."""
import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_golden_outputs_unchanged():
    spec = importlib.util.spec_from_file_location("golden", os.path.join(ROOT, "scripts", "golden.py"))
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    with open(golden.PATH) as f:
        old = json.load(f)
    diff = golden.compare(golden.compute(), old)
    bad = {k: v for k, v in diff.items() if not v <= 1e-12}
    assert not bad, bad
