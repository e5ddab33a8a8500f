"""The specification lives in the project: docs/theory.md exists, every "docs/theory.md §N" citation in the package
names a section that exists, the package no longer cites the developers' THEORY.md (which users do not have), and
the generated API reference docs/api.md is current."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "theory.md"
PACKAGE = ROOT / "theorykit"

#: a citation: "docs/theory.md" followed by one or more section marks, e.g. "docs/theory.md §3 and §3.2", "... §3, §3.2"
CITATION = re.compile(r"docs/theory\.md((?:\s*(?:,|and|&)?\s*§\d+(?:\.\d+)*[A-Za-z]*)+)")
#: a section mark; trailing letters are kept so that a stale "§3b" fails instead of reading as §3
SECTION = re.compile(r"§(\d+(?:\.\d+)*[A-Za-z]*)")
#: a numbered section heading of docs/theory.md, e.g. "## §3.1 Kinks ..."
HEADING = re.compile(r"^#{1,6}\s+§(\d+(?:\.\d+)*)(?=\s|$)", re.MULTILINE)
#: the sections the package and the README rely on
REQUIRED = {"1", "2", "3", "3.1", "3.2", "4", "5", "6", "7", "8"}


def _package_files():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _sections() -> set:
    return set(HEADING.findall(DOC.read_text(encoding="utf-8")))


def test_theory_doc_exists_with_its_numbered_sections():
    assert DOC.is_file(), "docs/theory.md is missing"
    missing = REQUIRED - _sections()
    assert not missing, f"docs/theory.md lacks the sections {sorted(missing)}"


def test_every_citation_names_an_existing_section():
    sections = _sections()
    files = _package_files() + [ROOT / "README.md"]
    cited, bad = 0, []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            for sec in SECTION.findall(match.group(1)):
                cited += 1
                if sec not in sections:
                    line = text.count("\n", 0, match.start()) + 1
                    bad.append(f"{path.relative_to(ROOT)}:{line}: §{sec}")
    assert cited > 0, "no docs/theory.md citation found (has the citation format changed?)"
    assert not bad, "citations of sections that docs/theory.md does not have:\n" + "\n".join(bad)


def test_package_does_not_cite_THEORY_md():
    bad = []
    for path in _package_files():
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bTHEORY\b", line):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "THEORY.md citations left (use 'docs/theory.md §N'):\n" + "\n".join(bad)


def _api_reference():
    import importlib.util

    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "scripts" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_is_current():
    """docs/api.md is generated from the package (scripts/api_reference.py): regenerated in memory, it must equal the
    committed page, so the reference cannot go stale.  After changing a public name or docstring, run
    `python scripts/api_reference.py` and commit docs/api.md."""
    api = ROOT / "docs" / "api.md"
    assert api.is_file(), "docs/api.md is missing: run python scripts/api_reference.py"
    page = _api_reference().render()
    assert page == api.read_text(encoding="utf-8"), (
        "docs/api.md is out of date with the package: run python scripts/api_reference.py and commit docs/api.md")


def test_api_reference_covers_the_public_names():
    import theorykit

    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [n for n in theorykit.__all__ if f"`theorykit.{n}`" not in page]
    assert not missing, f"public names missing from docs/api.md: {missing}"


# ------------------------------------------------------------------ numpydoc docstrings of theorykit.__all__
#: the numpydoc sections every public name's docstring has (Examples too for functions and classes)
NUMPYDOC_SECTIONS = ("Parameters", "Returns", "Examples")


def _section_titles(doc: str) -> set:
    """The numpydoc section titles of a docstring: a line followed by a line of dashes of the same length."""
    lines = [line.strip() for line in doc.splitlines()]
    return {a for a, b in zip(lines, lines[1:]) if a and b == "-" * len(a)}


def _public_names():
    import theorykit

    return list(theorykit.__all__)


@pytest.mark.parametrize("name", _public_names())
def test_public_docstring_has_numpydoc_sections(name):
    import inspect

    import theorykit

    doc = inspect.getdoc(getattr(theorykit, name)) or ""
    missing = [s for s in NUMPYDOC_SECTIONS if s not in _section_titles(doc)]
    assert not missing, f"theorykit.{name}: docstring lacks the numpydoc sections {missing}"
    assert "docs/theory.md" in doc, f"theorykit.{name}: docstring does not cite docs/theory.md"
    raw = getattr(theorykit, name).__doc__.splitlines()
    # as written in the source: the first line after 'def ...:' and four spaces of indentation, the last one with """
    widths = [len(line) + (7 if i == 0 else 0) + (3 if i == len(raw) - 1 else 0) for i, line in enumerate(raw)]
    assert max(widths) <= 120, f"theorykit.{name}: a docstring line longer than 120 characters in the source"


@pytest.mark.parametrize("name", _public_names())
def test_public_docstring_examples_run(name):
    """The Examples of each public name run as doctests (only its own docstring, not its methods')."""
    import doctest

    import theorykit

    obj = getattr(theorykit, name)
    finder = doctest.DocTestFinder(recurse=False)
    tests = [t for t in finder.find(obj, f"theorykit.{name}", globs={}) if t.examples]
    assert tests, f"theorykit.{name}: no doctest example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"theorykit.{name}: {result.failed} of {result.attempted} doctest examples failed"


def test_ci_runs_the_readme_test_command():
    """.ci/run runs exactly the README's test command (install, ruff, mypy on the public API, pytest)."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    cmd = next(line.strip() for line in readme.splitlines() if "pip install '.[test]'" in line)
    assert cmd in ci and "ruff check" in cmd and "&& mypy &&" in cmd and "pytest -q" in cmd


def test_mypy_checks_every_module_behind_all():
    """pyproject.toml's [tool.mypy] files (what .ci/run type-checks) hold the module of every name in
    theorykit.__all__."""
    import sys

    import theorykit

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    files = set(re.findall(r'^\s*"(theorykit/[\w/]+\.py)",\s*$', text.split("[tool.mypy]")[1].split("\n[")[0], re.M))
    for name in theorykit.__all__:
        module = getattr(theorykit, name).__module__
        path = Path(sys.modules[module].__file__).resolve().relative_to(Path(theorykit.__file__).resolve().parents[1])
        assert path.as_posix() in files, f"theorykit.{name} is defined in {path}, which mypy does not check"
