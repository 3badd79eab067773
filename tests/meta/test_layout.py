"""The package's layers hold: import-linter's contracts in pyproject.toml, checked on every run.

The contract lists the layers top to bottom; each may import only those below it,
and a lazy import inside a function counts too. ``evalhydra/__init__.py`` draws the
same picture for a reader.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "evalhydra"
PYPROJECT = REPO / "pyproject.toml"


def _contracts() -> list[dict[str, object]]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def _layers() -> list[list[str]]:
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    assert isinstance(layers, list)
    return [[name.strip() for name in layer.split("|")] for layer in layers]


def test_the_import_contracts_are_kept() -> None:
    # in a process of its own: a test that imported absl (rouge-score's) leaves a logging handler
    # on a closed capture stream, which import-linter's process would write to
    check = ("import sys; from importlinter.cli import lint_imports; "
             f"sys.exit(lint_imports(config_filename={str(PYPROJECT)!r}, no_cache=True))")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_package_is_in_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    placed = {name for layer in _layers() for name in layer}
    assert packages == placed, "a package without a layer, or a layer without a package"


def test_the_package_docstring_draws_the_layers_in_order() -> None:
    """The drawing's lines name the contract's layers, top to bottom, as ``a | b`` then their job."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))) or ""
    drawing = [line.strip().split("  ")[0] for line in doc.split("::", 1)[1].strip().splitlines()]
    assert drawing == [" | ".join(layer) for layer in _layers()]


def test_the_foundation_imports_nothing_else_of_evalhydra() -> None:
    bad = []
    for path in sorted((PACKAGE / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            bad += [f"{path.name} imports {n}" for n in names
                    if n.split(".")[0] == "evalhydra" and not n.startswith("evalhydra.core")]
    assert not bad, "\n".join(bad)


def test_every_package_says_its_job() -> None:
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 5, f"{init.relative_to(PACKAGE)} has no docstring saying its job"


def test_the_wheel_lists_every_package() -> None:
    """setuptools' package list is explicit: a package left out is missing from the wheel."""
    listed = set(tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def test_every_module_is_named_in_its_packages_guide() -> None:
    """A package's ``__init__`` docstring is its guide: it names each of its modules and packages."""
    missing = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        folder = init.parent
        names = [m.stem for m in folder.glob("*.py") if m.stem != "__init__"]
        names += [d.name for d in folder.iterdir() if (d / "__init__.py").exists()]
        missing += [f"{folder.relative_to(REPO)}: {name}" for name in sorted(names)
                    if not re.search(rf"\b{re.escape(name)}\b", doc)]
    assert not missing, "name these modules in their package's __init__ docstring:\n" + "\n".join(missing)


def test_the_development_guides_layer_table_names_the_contracts_layers() -> None:
    guide = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    table = guide.split("| layer (top to bottom) | its job |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ", 1)[0] for line in table.strip().splitlines()[1:]]
    named = [re.findall(r"`(?:evalhydra/)?(\w+)/`", row) for row in rows]
    assert named == _layers()


def test_every_test_file_named_for_a_module_names_one_that_exists() -> None:
    """``tests/PKG/test_PKG_NAME.py`` tests ``evalhydra/PKG/NAME``; a test named for a behaviour
    leaves the package's name out (``tests/viewer/test_compare_page.py``)."""
    stale = []
    for path in sorted((REPO / "tests").glob("*/test_*.py")):
        package, name = path.parent.name, path.stem.removeprefix("test_")
        module = name.removeprefix(f"{package}_")
        named_for_a_module = (PACKAGE / package).is_dir() and module != name
        exists = (PACKAGE / package / f"{module}.py").exists() or (PACKAGE / package / module).is_dir()
        if named_for_a_module and not exists:
            stale.append(str(path.relative_to(REPO)))
    assert not stale, f"named for modules that do not exist: {stale}"


#: The longest a module may grow (issue 61, item 5): past it, split it by concern.
MAX_MODULE_LINES = 450


def test_no_module_is_over_450_lines() -> None:
    long = {str(path.relative_to(REPO)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split by concern: {long}"
