"""docs/eval-files.md documents every eval-file field, every matcher option and every dataset
field the code reads: a field added to the schema and not to the reference fails here."""

from __future__ import annotations

import dataclasses
import re

from evalhydra.config.schema import EvalConfig
from evalhydra.matchers.options import MATCHER_KINDS, REQUIRED
from evalhydra.registry.datasets import DATASET_FIELDS
from evalhydra.registry.definitions import EVAL_KEYS
from tests.conftest import REPO

REFERENCE = (REPO / "docs" / "eval-files.md").read_text()


def _section(title: str) -> str:
    return REFERENCE.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _first_column(table_text: str) -> set[str]:
    return set(re.findall(r"^\| `([^`]+)` \|", table_text, flags=re.M))


def test_every_eval_field_is_documented_and_nothing_else() -> None:
    fields = {f.name for f in dataclasses.fields(EvalConfig)} | set(EVAL_KEYS)
    assert _first_column(_section("Fields")) == fields


def test_every_matcher_and_its_options_are_documented() -> None:
    matchers = _section("Matchers")
    headings = re.findall(r"^### (.+)$", matchers, flags=re.M)
    documented_kinds = {kind for heading in headings for kind in re.findall(r"`([^`]+)`", heading)}
    assert documented_kinds == set(MATCHER_KINDS)
    for block in re.split(r"^### ", matchers, flags=re.M)[1:]:
        heading, body = block.split("\n", 1)
        for kind in re.findall(r"`([^`]+)`", heading):
            assert _first_column(body) == MATCHER_KINDS[kind], kind
            for option in REQUIRED.get(kind, ()):
                row = rf"^\| `{re.escape(option)}` \|[^|]+\| required"
                assert re.search(row, body, flags=re.M), (kind, option)


def test_every_dataset_field_is_documented() -> None:
    assert _first_column(_section("Dataset lines")) == set(DATASET_FIELDS)
