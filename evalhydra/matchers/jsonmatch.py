"""JSON matchers: ``json_fields`` (zig_eval) and ``json_schema``.

``json_fields`` is zig_eval's: the whole output (no fence stripping) must be a
JSON object holding every ``required_fields`` root key (a null value counts).

``json_schema`` validates the output against a JSON Schema, given inline or as
a registry-relative ``.json``/``.yaml`` file. The validator class follows the
schema's ``$schema`` and defaults to Draft 2020-12; ``format`` is checked. With
``strip_fence`` (default true) a Markdown code fence around the whole output is
removed first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from evalhydra.core import safeyaml, strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.untrusted_schema import schema_errors, untrusted_validator
from evalhydra.core.values import MatchResult
from evalhydra.matchers.base import MatchContext, Matcher, sync_matcher
from evalhydra.matchers.common import fail, passed, strict_json_loads, strip_code_fence
from evalhydra.matchers.paths import resolve_registry_path

if TYPE_CHECKING:  # jsonschema is imported when a schema is first used: it takes ~1 s to load
    from jsonschema.protocols import Validator

__all__ = [
    "INVALID_JSON",
    "build_json_fields",
    "build_json_schema",
    "json_fields",
    "json_schema_match",
    "load_schema",
    "make_validator",
]

INVALID_JSON = "invalid json output"


def json_fields(output: str, required_fields: list[str]) -> MatchResult:
    """Pass when the output is a JSON object with every required root key.

    Returns:
        Score 1, or 0 with ``invalid json output``, ``json output is not an
        object`` or ``missing required json field``.
    """
    try:
        value = strictjson.loads(output)
    except ValueError:
        return fail(INVALID_JSON)
    if not isinstance(value, dict):
        return fail("json output is not an object")
    missing = [name for name in required_fields if name not in value]
    if missing:
        return fail("missing required json field", details={"missing_fields": missing})
    return passed()


def json_schema_match(output: str, validator: Validator, *, strip_fence: bool = True) -> MatchResult:
    """Validate the output as JSON against a schema validator.

    Args:
        output: The candidate output.
        validator: A jsonschema validator (see :func:`make_validator`).
        strip_fence: Remove a Markdown code fence around the whole output first.

    Returns:
        Score 1, or 0 with ``invalid json output`` or
        ``schema violation at <json path>: <message>`` for the best error.
    """
    text = strip_code_fence(output) if strip_fence else output
    try:
        instance = strict_json_loads(text)
    except ValueError:
        return fail(INVALID_JSON)
    from jsonschema.exceptions import best_match

    error = best_match(schema_errors(validator, instance))
    if error is None:
        return passed()
    details = {"json_path": error.json_path, "validator": str(error.validator)}
    return fail(f"schema violation at {error.json_path}: {error.message}", details=details)


def load_schema(schema: Any, root: Path, where: str) -> dict[str, Any] | bool:
    """Return the schema object: inline, or loaded from a registry-relative file.

    Raises:
        EvalHydraError: The file is unsafe, missing or unparseable, or the schema
            is neither an object nor a boolean.
    """
    if isinstance(schema, str):
        path = resolve_registry_path(root, schema.strip(), where=where, what="schema")
        try:
            text = path.read_text(encoding="utf-8")
            loaded = strictjson.loads_plain(text) if path.suffix == ".json" else safeyaml.load(text)
        except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
            raise EvalHydraError(f"{where}: cannot load schema file {schema!r}: {exc}") from None
        schema = loaded
    if not isinstance(schema, dict | bool):
        raise EvalHydraError(f"{where}: schema must be a JSON object (or a file holding one)")
    return schema


def make_validator(schema: dict[str, Any] | bool, where: str) -> Validator:
    """Check the schema against its metaschema and return a validator for it (formats checked;
    no ``$ref`` outside the schema followed, patterns time-bounded: :mod:`~evalhydra.core.untrusted_schema`).

    Raises:
        EvalHydraError: The schema is not a valid JSON Schema.
    """
    from jsonschema.exceptions import SchemaError

    try:
        return untrusted_validator(schema, formats=True)
    except SchemaError as exc:
        raise EvalHydraError(f"{where}: invalid JSON schema at {exc.json_path}: {exc.message}") from None


def build_json_fields(spec: dict[str, Any]) -> Matcher:
    """Build a ``json_fields`` matcher from a cleaned spec."""
    required = list(spec["required_fields"])

    def match(ctx: MatchContext) -> MatchResult:
        return json_fields(ctx.output, required)

    return sync_matcher(match)


def build_json_schema(spec: dict[str, Any], root: Path, where: str = "matcher") -> Matcher:
    """Build a ``json_schema`` matcher from a cleaned spec."""
    validator = make_validator(load_schema(spec["schema"], root, where), where)
    strip_fence = bool(spec.get("strip_fence", True))

    def match(ctx: MatchContext) -> MatchResult:
        return json_schema_match(ctx.output, validator, strip_fence=strip_fence)

    return sync_matcher(match)
