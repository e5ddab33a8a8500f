"""Golden outputs: fixed-seed results of every solver agree with tests/golden/outputs.json to 1e-12 (relative to each
array's scale).  A restructuring must move no number; a change meant to move numbers regenerates the record with
``python scripts/golden.py --write`` and says so in its commit.  The comparison runs in a subprocess under the BLAS
kernel the record was made with (scripts/golden.py PINNED_ENV: OpenBLAS picks its kernel by CPU, and the
phase-retrieval DMFT amplifies the kernels' rounding to ~1e-8)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_golden_outputs_unchanged():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "golden.py")], capture_output=True, text=True,
                       timeout=900)
    bad = [line for line in p.stdout.splitlines() if line.split() and line.split()[-1] not in ("0",)
           and not line.startswith("max") and float(line.split()[-1]) > 1e-12]
    assert p.returncode == 0 and not bad, (p.returncode, bad, p.stderr[-2000:])
