"""The package layout is the pipeline: imports go one way, from the command line down to the store.

Each rule names a package and the evalhydra packages (or modules) it may not
import; the test reads every module's imports with ``ast``, so a lazy import
inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "evalhydra"

#: package -> what it must never import (``evalhydra.<name>`` prefixes).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "store": ("agents", "cli", "config", "execute", "http", "matchers", "plan", "registry", "reports",
              "services", "testing"),
    "http": ("agents", "cli", "config", "execute", "matchers", "plan", "registry", "reports", "services",
             "store", "testing"),
    "registry": ("agents", "cli", "execute", "http", "matchers", "plan", "reports", "services", "store",
                 "testing", "config.compose", "config.registry_options"),
    "matchers": ("agents", "cli", "execute", "http", "plan", "registry", "reports", "services", "store"),
    "services": ("agents", "cli", "execute", "matchers", "plan", "reports", "store", "testing"),
    "agents": ("cli", "execute", "http", "plan", "reports", "services", "store"),
    "plan": ("cli", "execute", "http", "reports", "services", "store"),
    "execute": ("cli", "reports"),
    "reports": ("agents.command", "agents.executor", "agents.loader", "cli", "config.compose",
                "config.registry_options", "config.schema", "execute", "http", "matchers", "plan", "registry",
                "services", "testing"),
    "testing": ("agents", "cli", "config", "execute", "http", "matchers", "plan", "registry", "reports",
                "services", "store"),
    "config": ("agents", "cli", "execute", "http", "matchers", "plan", "reports", "services", "store",
               "testing"),
}
#: The only modules below the command line that may import Hydra.
HYDRA_ALLOWED = ("config/compose.py",)


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def _modules(package: str) -> list[Path]:
    return sorted((PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_follow_the_pipeline(package: str) -> None:
    bad = []
    for path in _modules(package):
        for name in _imports(path):
            for banned in FORBIDDEN[package]:
                prefix = f"evalhydra.{banned}"
                if name == prefix or name.startswith(prefix + "."):
                    bad.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_only_config_and_cli_import_hydra() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("cli/") or rel in HYDRA_ALLOWED:
            continue
        bad += [f"{rel} imports {n}" for n in _imports(path)
                if n.split(".")[0] in ("hydra", "hydra_plugins")]
    assert not bad, "\n".join(bad)


def test_every_package_says_its_job() -> None:
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 5, f"{init.relative_to(PACKAGE)} has no docstring saying its job"


def test_the_rules_cover_every_package() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages - {"cli"} == set(FORBIDDEN), "a package without an import rule"
