"""The package's import layering (issue 10 point 4): the theory's order symbolic -> problem -> dynamics -> spectra, the
finite-d referee beside it and never importing the theory (nor the theory the referee), compare/ on top of both.

Every import in every module (top level and inside functions, absolute and relative) is resolved to a module of the
package and checked against the allowed layers below."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "theorykit"

SHARED = ("theorykit.conventions", "theorykit.errors", "theorykit._checks", "theorykit.defaults",
          "theorykit.problem", "theorykit.population", "theorykit.rules", "theorykit.symbolic", "theorykit.runner")
#: layer -> the layers it may import (its own included)
ALLOWED = {
    "shared": {"shared"},
    "dynamics": {"shared", "dynamics"},
    "spectra": {"shared", "dynamics", "spectra"},
    "thresholds": {"shared", "dynamics", "spectra", "thresholds"},
    "referee": {"shared", "referee"},
    "compare": {"shared", "dynamics", "spectra", "thresholds", "referee", "compare", "package"},
    "cli": {"shared", "dynamics", "spectra", "thresholds", "referee", "compare", "cli", "package"},
    "package": {"shared", "dynamics", "spectra", "thresholds", "referee", "compare", "cli", "package"},
}


def _modules():
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def layer(name: str) -> str:
    if name == "theorykit":
        return "package"
    if any(name == s or name.startswith(s + ".") for s in SHARED):
        return "shared"
    for lay, prefix in (("dynamics", "theorykit.dynamics"), ("spectra", "theorykit.spectra"),
                        ("thresholds", "theorykit.thresholds"), ("referee", "theorykit.referee"),
                        ("compare", "theorykit.compare"), ("cli", "theorykit.cli"), ("cli", "theorykit._cli")):
        if name == prefix or name.startswith(prefix + "."):
            return lay
    raise AssertionError(f"module {name} is in no layer: add it to tests/test_layering.py")


def _imports(name: str, path: pathlib.Path, modules: dict):
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "theorykit":
                    yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "theorykit":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                yield node.lineno, (sub if sub in modules else target)


def test_every_module_is_in_a_layer_and_imports_only_what_its_layer_may():
    modules = _modules()
    bad = []
    for name, path in sorted(modules.items()):
        mine = layer(name)
        for line, target in _imports(name, path, modules):
            if layer(target) not in ALLOWED[mine]:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {mine} imports {target} ({layer(target)})")
    assert not bad, "\n".join(bad)


def test_referee_and_theory_are_apart():
    """The two directions that matter most, stated on their own."""
    assert "dynamics" not in ALLOWED["referee"] and "spectra" not in ALLOWED["referee"]
    assert "referee" not in ALLOWED["dynamics"] and "referee" not in ALLOWED["spectra"]
    assert layer("theorykit.referee.gd") == "referee" and layer("theorykit.dynamics.solver") == "dynamics"


def test_no_public_function_shadows_its_submodule():
    """`theorykit.X` is the submodule X whenever a submodule X exists (issue 10 point 8)."""
    import importlib
    import types

    import theorykit

    for name in _modules():
        parts = name.split(".")
        if len(parts) < 2:
            continue
        parent = importlib.import_module(".".join(parts[:-1]))
        attr = getattr(parent, parts[-1], None)
        assert attr is None or isinstance(attr, types.ModuleType), f"{name}: shadowed by {attr!r}"
    assert theorykit is not None


def test_no_private_helper_is_imported_across_modules():
    """`from theorykit.X import _name` is a private helper reaching across modules (issue 10 point 8): make it public
    in a shared module instead.  (Aliasing a public name to a private one, `import check_int as _check_int`, is fine.)"""
    modules = _modules()
    bad = []
    for name, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("theorykit")):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__") and a.name != "_cli":
                        bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {a.name}")
    assert not bad, "\n".join(bad)
