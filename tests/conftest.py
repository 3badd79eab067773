"""Shared fixtures: composed configs, registries in tmp_path, real stores."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from evalhydra.http.pool import TRANSPORTS, TransportPool

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"  # vendored copies of the seed systems' real data
ZIG_FIXTURE = FIXTURES / "zig_eval_registry"
AIWG_FIXTURE = FIXTURES / "aiwg_nlp_prod"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Each test runs in its own directory with no registry override leaking in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALHYDRA_REGISTRY", raising=False)
    yield
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()


@pytest.fixture(scope="session")
def fake_agent_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake agent as an executable run by this interpreter, not by whatever ``python3`` is on PATH.

    A venv need not be activated for its interpreter to run the tests, so the script's
    ``#!`` line names ``sys.executable`` itself.
    """
    path = tmp_path_factory.mktemp("bin") / "fake-agent"
    path.write_text(f"#!{sys.executable}\nimport runpy\n"
                    "runpy.run_module('evalhydra.agents.fake_agent', run_name='__main__')\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def compose(tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose the packaged config with a store under tmp_path and progress off."""
    from evalhydra.compose.compose import compose_config

    def _compose(*overrides: str) -> DictConfig:
        base = [f"store.path={tmp_path / 'store.db'}", "run.progress=false"]
        return compose_config([*base, *overrides])

    return _compose


def write_registry(
    root: Path,
    *,
    evals: dict[str, dict[str, Any]],
    data: dict[str, str],
    services: list[dict[str, Any]] | None = None,
) -> Path:
    """Create a small zig_eval registry under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "services.json").write_text(json.dumps(services or []))
    for rel, spec in evals.items():
        path = root / "evals" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec))
    for rel, text in data.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def smoke_eval(eval_id: str = "g.e", dataset: str = "data/g/e/test.jsonl", **extra: Any) -> dict[str, Any]:
    """A minimal valid eval definition."""
    group = eval_id.split(".")[0]
    return {
        "id": eval_id,
        "group": group,
        "description": "d",
        "dataset_path": dataset,
        "split": "test",
        "matcher": {"kind": "exact_match"},
        "default_run_count": 1,
        **extra,
    }


@pytest.fixture
def copy_fixture(tmp_path: Path) -> Callable[[Path], Path]:
    """Copy a vendored fixture directory into tmp_path (fixtures are read-only)."""

    def _copy(src: Path) -> Path:
        dst = tmp_path / src.name
        shutil.copytree(src, dst)
        for p in dst.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        return dst

    return _copy


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    """One mock server process per test module (``python -m evalhydra.services.mock``)."""
    from tests.helpers import mock_process

    with mock_process() as url:
        yield url


@pytest.fixture
def url(mock_url: str) -> str:
    """The module's mock process with default settings and zeroed counters."""
    from evalhydra.services.mock import MockSettings
    from tests.helpers import mock_call

    mock_call(mock_url, "config", MockSettings().to_dict())
    mock_call(mock_url, "reset", {})
    return mock_url


@pytest.fixture(params=TRANSPORTS)
def wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once per transport: a service left at ``transport: lean`` gets this one.

    In-process services only (a CLI subprocess keeps its config's transport).
    """
    original = TransportPool.__init__
    chosen = str(request.param)

    def init(self: TransportPool, url: str, concurrency: int, transport: Any = None, *,
             kind: str = "lean", **options: Any) -> None:
        original(self, url, concurrency, transport, kind=chosen if kind == "lean" else kind, **options)

    monkeypatch.setattr(TransportPool, "__init__", init)
    return chosen
