"""The package's import layering: the theory's order symbolic -> problem -> dynamics -> spectra -> thresholds, the
finite-d referee beside it and never importing the theory (nor the theory the referee), the products (claims, report)
on top of both, the CLI above them; the validation studies (theorykit.validation) beside the products, imported by
nothing in the package.

Every import in every module (top level and inside functions, absolute and relative) is resolved to a module of the
package and checked against the allowed layers below; the module import graph (top-level imports) has no cycle.
Both checks are run on a synthetic bad package too, so that they can fail."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "theorykit"

SHARED = ("theorykit.conventions", "theorykit.errors", "theorykit._checks", "theorykit.defaults",
          "theorykit.problem", "theorykit.population", "theorykit.rules", "theorykit.symbolic", "theorykit.runner",
          "theorykit.cases", "theorykit.version", "theorykit.cache")
#: layer -> the layers it may import (its own included)
ALLOWED = {
    "shared": {"shared"},
    "dynamics": {"shared", "dynamics"},
    "spectra": {"shared", "dynamics", "spectra"},
    "thresholds": {"shared", "dynamics", "spectra", "thresholds"},
    "referee": {"shared", "referee"},
    "products": {"shared", "dynamics", "spectra", "thresholds", "referee", "products"},
    "validation": {"shared", "dynamics", "spectra", "thresholds", "referee", "products", "validation"},
    "cli": {"shared", "dynamics", "spectra", "thresholds", "referee", "products", "cli"},
    "package": {"shared", "dynamics", "spectra", "thresholds", "referee", "products", "cli", "package"},
}
PREFIXES = (("dynamics", "theorykit.dynamics"), ("spectra", "theorykit.spectra"),
            ("thresholds", "theorykit.thresholds"), ("referee", "theorykit.referee"), ("products", "theorykit.claims"),
            ("products", "theorykit.report"), ("validation", "theorykit.validation"), ("cli", "theorykit.cli"),
            ("cli", "theorykit._cli"))


def _modules(root=ROOT):
    out = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).with_suffix("")
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
    for lay, prefix in PREFIXES:
        if name == prefix or name.startswith(prefix + "."):
            return lay
    raise AssertionError(f"module {name} is in no layer: add it to tests/test_layering.py")


def _imports(name: str, path: pathlib.Path, modules: dict, top_level_only: bool = False):
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in (tree.body if top_level_only else ast.walk(tree)):
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


def layer_violations(root=ROOT) -> list:
    """'file:line: layer imports target (its layer)' for every import that crosses the layering upwards."""
    modules = _modules(root)
    bad = []
    for name, path in sorted(modules.items()):
        mine = layer(name)
        for line, target in _imports(name, path, modules):
            if layer(target) not in ALLOWED[mine]:
                bad.append(f"{path.relative_to(root.parent)}:{line}: {mine} imports {target} ({layer(target)})")
    return bad


def import_cycles(root=ROOT) -> list:
    """Cycles of the graph of module-level imports (module -> the package modules it imports at import time; a
    package's __init__ counts as the package), each as a list of module names."""
    modules = _modules(root)
    graph = {name: {t for _, t in _imports(name, path, modules, top_level_only=True) if t in modules and t != name}
             for name, path in modules.items()}
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_every_module_is_in_a_layer_and_imports_only_what_its_layer_may():
    bad = layer_violations()
    assert not bad, "\n".join(bad)


def test_the_import_graph_has_no_cycle():
    cycles = import_cycles()
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_nothing_in_the_package_imports_the_validation_studies_or_the_package_itself():
    """``import theorykit`` does not load the validation studies, and no subpackage imports ``theorykit`` back."""
    modules = _modules()
    bad = [f"{name}: {target}" for name, path in modules.items() if name != "theorykit"
           for _, target in _imports(name, path, modules)
           if target == "theorykit" or (layer(target) == "validation" and layer(name) != "validation")]
    assert not bad, "\n".join(bad)


def test_the_checks_can_fail(tmp_path):
    """A synthetic package with a referee module importing the theory, a theory module importing the CLI and a cycle
    between two dynamics modules: every check reports it."""
    pkg = tmp_path / "theorykit"
    for sub in ("referee", "dynamics", "_cli"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "referee" / "gd.py").write_text("from ..dynamics import solver\n")
    (pkg / "dynamics" / "solver.py").write_text("from . import plan\n\ndef f():\n    from .._cli import main\n")
    (pkg / "dynamics" / "plan.py").write_text("from .solver import f\n")
    (pkg / "_cli" / "main.py").write_text("")
    bad = layer_violations(pkg)
    assert any("referee imports theorykit.dynamics" in b for b in bad), bad
    assert any("dynamics imports theorykit._cli" in b for b in bad), bad
    cycles = import_cycles(pkg)
    assert any(set(c) >= {"theorykit.dynamics.solver", "theorykit.dynamics.plan"} for c in cycles), cycles


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
    in a shared module instead.  (Aliasing a public name to a private one, `import check_int as _check_int`, is
    fine.)"""
    modules = _modules()
    bad = []
    for name, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("theorykit")):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__") and a.name != "_cli":
                        bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {a.name}")
    assert not bad, "\n".join(bad)


TESTS = pathlib.Path(__file__).resolve().parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(path: pathlib.Path, modules=None) -> list:
    """'file:line: module._name' for every private (single-underscore) name of a theorykit module that the file
    ``path`` imports (`from theorykit.X import _name`) or reaches as an attribute (`mod._name`, `tk.a.b._name`, with
    mod bound to a theorykit module by an import of the file).  A private module (theorykit._cli, symbolic._parse) is
    allowed as a module, and so are its public names."""
    modules = set(modules if modules is not None else _modules())
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound, bad = {}, []  # local name -> the theorykit module it is bound to (by any import in the file)

    def flag(node, owner, attr):
        bad.append(f"{path.name}:{node.lineno}: {owner}.{attr}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "theorykit":
                    if a.asname:
                        bound[a.asname] = a.name
                    else:
                        bound["theorykit"] = "theorykit"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "theorykit" and not node.level:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in modules:
                    bound[a.asname or a.name] = sub
                elif _private(a.name):
                    flag(node, node.module, a.name)

    def resolve(node):
        """The theorykit module an expression (a name or an attribute chain) denotes, else None."""
        if isinstance(node, ast.Name):
            return bound.get(node.id)
        if isinstance(node, ast.Attribute):
            base = resolve(node.value)
            if base and f"{base}.{node.attr}" in modules:
                return f"{base}.{node.attr}"
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = resolve(node.value)
            if base and f"{base}.{node.attr}" not in modules:
                flag(node, base, node.attr)
    return bad


def test_tests_use_no_private_name_of_the_package():
    """A test goes through the public API (or a helper made public because it is a unit worth testing): it neither
    imports nor reaches a private name of a theorykit module, so that renaming a private helper never breaks a test."""
    modules = _modules()
    bad = [b for path in sorted(TESTS.rglob("*.py")) for b in private_uses(path, modules)]
    assert not bad, "\n".join(bad)


def test_the_private_name_check_can_fail(tmp_path):
    """Imports and attribute chains that reach a private name are reported; private modules and their public names
    are not."""
    f = tmp_path / "test_x.py"
    f.write_text("import theorykit as tk\nimport theorykit.referee.hessian as h\n"
                 "from theorykit.cli import _clean, to_json\nfrom theorykit import _cli\n"
                 "from theorykit.symbolic import _parse\n\n"
                 "def test():\n    h._check\n    tk.referee.hessian._lanczos\n    _parse.parse_expression\n"
                 "    _parse._CONSTANTS\n    _cli.table\n    h.hessian_bottom\n    obj._private\n")
    bad = private_uses(f)
    assert bad == ["test_x.py:3: theorykit.cli._clean", "test_x.py:8: theorykit.referee.hessian._check",
                   "test_x.py:9: theorykit.referee.hessian._lanczos",
                   "test_x.py:11: theorykit.symbolic._parse._CONSTANTS"], bad
