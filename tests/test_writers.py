"""Every generated table goes through theorykit.report.writer.write_table (a CSV and a Markdown file whose header
states the regenerating command, date, machine and wall time): no script, benchmark or module opens a file for
writing by hand, except the files named below, each for a stated reason."""
import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
SCANNED = ("benchmarks", "scripts", "theorykit")
#: file -> why it may write a file itself
ALLOWED = {
    "theorykit/report/writer.py": "the one table writer",
    "theorykit/cache.py": "the one cache of finished records (JSON), not a table",
    "scripts/golden.py": "the JSON record of the golden numbers, not a table",
    "scripts/api_reference.py": "the docs page docs/api.md, not a table",
    "theorykit/runner.py": "the resumable job log of run_jobs (one row appended per finished job)",
    "theorykit/referee/_fused.py": "the on-disk kernel cache's generated module (Python source), not a table",
    "scripts/finite_d_wide.py": "the prediction's JSON record in tables/raw, saved before the GD runs, and each "
                                "case's result record (so that one case reruns alone), not tables",
    "scripts/cone_real_check.py": "a pickle cache of the capture ladders (outside the repository by default), "
                                  "not a table",
}
#: methods that write a file whatever their receiver (pathlib, pandas)
WRITING_METHODS = {"write_text", "write_bytes", "to_csv", "to_markdown", "to_excel"}


def file_writes(path: pathlib.Path) -> list:
    """'line: call' for each call in the file that opens a file for writing (open(..., mode with w, a, x or +)) or
    writes one by a pandas/pathlib method."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Name) and f.id == "open") or (isinstance(f, ast.Attribute) and f.attr == "open"
                                                             and ast.unparse(f.value) in ("io", "os", "codecs")):
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"),
                                                                  None)
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and not set(mode.value) & set("wax+"):
                continue
            if mode is None:
                continue
            out.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(f, ast.Attribute) and f.attr in WRITING_METHODS:
            out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


def test_tables_are_written_only_by_the_writer():
    bad = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel not in ALLOWED:
                bad += [f"{rel}:{w}" for w in file_writes(path)]
    assert not bad, ("write tables with theorykit.report.writer.write_table (or name the file in "
                     "tests/test_writers.py's ALLOWED with the reason):\n" + "\n".join(bad))
    assert all((REPO / rel).is_file() for rel in ALLOWED), "ALLOWED names a file that is gone"


def test_the_check_can_fail(tmp_path):
    f = tmp_path / "bench.py"
    f.write_text("import io\nimport pathlib\n\ndef main(out, df):\n    with open(out, 'w') as fh:\n        pass\n"
                 "    open(out + '.md', mode='a')\n    open(out)\n    open(out, 'rb')\n"
                 "    pathlib.Path(out).write_text('x')\n    df.to_csv(out)\n    io.open(out, 'w')\n")
    assert sorted(int(w.split(":")[0]) for w in file_writes(f)) == [5, 7, 10, 11, 12]
