"""Issue 60, item 7: every option of the config schema has a one-line meaning, read from the
schema's own docs (a trailing comment, the comment above, or its class's ``Attributes:``), and
``--help``'s options show it, for the packaged config and for a project's own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from evalhydra.cli.app import options_help
from evalhydra.config import schema
from evalhydra.config.fielddocs import field_docs


def _schema_fields() -> list[tuple[str, str]]:
    found = []
    for cls in vars(schema).values():
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == schema.__name__:
            for f in dataclasses.fields(cls):
                owner = next(c for c in cls.__mro__ if f.name in c.__dict__.get("__annotations__", {}))
                found.append((owner.__name__, f.name))
    return sorted(set(found))


def test_every_schema_field_has_a_meaning() -> None:
    docs = field_docs()
    missing = [f"{cls}.{name}" for cls, name in _schema_fields() if not docs.get((cls, name))]
    assert missing == [], "document these fields in evalhydra/config/schema.py"
    assert docs[("MockBehaviour", "fixed_reply")] == "When set, every completion's content is this text"
    assert docs[("RunConfig", "retry_errors")].startswith("None: chat errors are re-sent")  # the lines above


def test_help_shows_each_option_with_its_meaning() -> None:
    lines = options_help([]).split("\n\n", 1)[1].splitlines()
    assert all("  # " in line for line in lines)
    shown = {line.split(":", 1)[0].strip(): line.split("  # ", 1)[1] for line in lines}
    assert shown["concurrency"] == "most cells in flight at once (a trio.CapacityLimiter)"
    assert shown["latency_ms"] == "Delay before every chat answer"  # inherited by MockConfig


def test_help_composes_a_projects_service(tmp_path: Path) -> None:
    (tmp_path / "conf" / "service").mkdir(parents=True)
    (tmp_path / "conf" / "service" / "mine.yaml").write_text("name: mine\nbase_url: http://127.0.0.1:1/v1\n")
    text = options_help(["--config-dir", str(tmp_path / "conf"), "service=mine"])
    assert "name: mine" in text and "base_url: http://127.0.0.1:1/v1" in text
