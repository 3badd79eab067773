"""json_fields (zig_eval's strings) and json_schema (paths of the best error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case
from evalhydra.matchers import MatchContext, build_matcher, validate_matcher
from evalhydra.matchers.jsonmatch import json_fields, json_schema_match, make_validator

SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "properties": {
        "answer": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
}


@pytest.mark.parametrize(
    ("output", "fields", "reason"),
    [
        ('{"answer": "OK"}', ["answer"], None),
        ('{"answer": null}', ["answer"], None),
        ('  {"answer": 1, "extra": 2}\n', ["answer"], None),
        ('{"other": 1}', ["answer"], "missing required json field"),
        ('{"answer": 1}', ["answer", "score"], "missing required json field"),
        ('{"nested": {"answer": 1}}', ["answer"], "missing required json field"),
        ("[1, 2]", ["answer"], "json output is not an object"),
        ('"text"', ["answer"], "json output is not an object"),
        ("null", ["answer"], "json output is not an object"),
        ("not json", ["answer"], "invalid json output"),
        ('{"answer": 1', ["answer"], "invalid json output"),
        ("", ["answer"], "invalid json output"),
        ('{"answer": NaN}', ["answer"], "invalid json output"),
        # no fence stripping for json_fields
        ('```json\n{"answer": 1}\n```', ["answer"], "invalid json output"),
    ],
)
def test_json_fields(output: str, fields: list[str], reason: str | None) -> None:
    result = json_fields(output, fields)
    assert (result.passed, result.reason, result.score) == (reason is None, reason, float(reason is None))


@pytest.mark.parametrize(
    ("output", "strip_fence", "reason"),
    [
        ('{"answer": 42}', True, None),
        ('```json\n{"answer": 42}\n```', True, None),
        ('```\n{"answer": 42}\n```', True, None),
        ('```json\n{"answer": 42}\n```', False, "invalid json output"),
        ("nope", True, "invalid json output"),
        ('{"answer": "x"}', True, "schema violation at $.answer: 'x' is not of type 'integer'"),
        ('{"answer": 1.5}', True, "schema violation at $.answer: 1.5 is not of type 'integer'"),
        ("{}", True, "schema violation at $: 'answer' is a required property"),
        (
            '{"answer": 1, "items": ["a", 2]}',
            True,
            "schema violation at $.items[1]: 2 is not of type 'string'",
        ),
    ],
)
def test_json_schema_match(output: str, strip_fence: bool, reason: str | None) -> None:
    result = json_schema_match(output, make_validator(SCHEMA, "m"), strip_fence=strip_fence)
    assert (result.passed, result.reason) == (reason is None, reason)


def test_json_schema_checks_formats() -> None:
    validator = make_validator({"type": "string", "format": "date-time"}, "m")
    assert json_schema_match('"2026-04-01T12:00:00Z"', validator).passed
    assert not json_schema_match('"yesterday"', validator).passed


async def test_json_schema_from_registry_files(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "answer.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "schemas" / "answer.yaml").write_text("type: object\nrequired: [answer]\n")
    context = MatchContext(case=Case(id="c", input="q"), output='{"answer": 1}')
    for path in ("schemas/answer.json", "schemas/answer.yaml"):
        spec = {"kind": "json_schema", "schema": path}
        assert validate_matcher(spec, "m", registry_root=tmp_path) == {**spec, "strip_fence": True}
        matcher = build_matcher(spec, registry_root=tmp_path, judges=None)
        assert (await matcher(context)).passed


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "no-such-type"}, r"^m: invalid JSON schema at \$\.type: "),
        ("missing.json", r"^m: schema file 'missing.json' not found"),
        ("/nonexistent/x.json", r"^m: schema file '/nonexistent/x.json' not found"),
        ("../x.json", r"has an empty, '\.' or '\.\.' segment"),
        ("bad.json", r"^m: cannot load schema file 'bad.json'"),
        ("list.json", r"^m: schema must be a JSON object"),
        (42, r"'schema' must be a JSON schema object or a registry-relative file path"),
    ],
)
def test_json_schema_validation_errors(tmp_path: Path, schema: object, message: str) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(EvalHydraError, match=message):
        validate_matcher({"kind": "json_schema", "schema": schema}, "m", registry_root=tmp_path)


def test_json_fields_config_is_checked(tmp_path: Path) -> None:
    spec = {"kind": "json_fields", "required_fields": [" answer "]}
    assert validate_matcher(spec, "m", registry_root=tmp_path)["required_fields"] == ["answer"]
    for bad in ([], [""], ["ok", 3], "answer"):
        with pytest.raises(EvalHydraError, match="'required_fields' must be a non-empty list"):
            validate_matcher({"kind": "json_fields", "required_fields": bad}, "m", registry_root=tmp_path)
