"""JSON Schemas from outside checked without I/O and in bounded time.

A tool's argument schema, an OpenAI Evals item schema and a ``json_schema`` matcher's schema are
written by others, and the instances checked against them by a model. jsonschema's defaults
would fetch a ``$ref`` over HTTP (or open a ``file:`` one) and run ``pattern`` with Python's
backtracking ``re``, so a schema could make a run send a request nobody asked for, or freeze it
on a model-chosen string. :func:`untrusted_validator` builds a validator that:

* resolves ``$ref`` only inside the schema itself (a local registry; any other URI is refused
  and reported as the schema's problem, :data:`UNRESOLVABLE`);
* runs ``pattern``, ``patternProperties`` and ``additionalProperties``' pattern matching with the
  ``regex`` package's time bound (:data:`PATTERN_TIMEOUT_S`): a pattern that takes longer fails
  the instance, saying so.

jsonschema and regex are imported when a schema is first checked (the command line starts
without them).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["PATTERN_TIMEOUT_S", "UNRESOLVABLE", "schema_errors", "untrusted_validator"]

#: Longest one pattern may take on one string.
PATTERN_TIMEOUT_S = 0.05
#: The start of the message of an instance whose schema refers outside itself.
UNRESOLVABLE = "the schema refers to"


class _SlowPattern(Exception):
    """A pattern that took longer than :data:`PATTERN_TIMEOUT_S`."""


def _search(pattern: str, text: str) -> bool:
    import regex

    try:
        return regex.search(pattern, text, timeout=PATTERN_TIMEOUT_S) is not None
    except TimeoutError:
        raise _SlowPattern(pattern) from None


def _refuse(uri: str) -> Any:
    import referencing.exceptions

    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


def _slow(pattern: str, text: str) -> Any:
    from jsonschema.exceptions import ValidationError

    return ValidationError(f"pattern {pattern!r} took longer than {PATTERN_TIMEOUT_S:g} s on"
                           f" {text[:80]!r} (it backtracks): the check gives up")


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    try:
        if not _search(pattern, instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")
    except _SlowPattern:
        yield _slow(pattern, instance)


def _pattern_properties(validator: Any, patterns: Mapping[str, Any], instance: Any,
                        schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = _search(pattern, key)
            except _SlowPattern:
                yield _slow(pattern, key)
                continue
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = []
    for key in instance:
        if key in known:
            continue
        try:
            if any(_search(pattern, key) for pattern in patterns):
                continue
        except _SlowPattern as slow:
            yield _slow(str(slow), key)
            continue
        extras.append(key)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        listed = ", ".join(repr(e) for e in sorted(extras, key=str))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def untrusted_validator(schema: Mapping[str, Any] | bool, *, formats: bool = False) -> Any:
    """A validator of ``schema`` that does no I/O and bounds its patterns' time.

    Args:
        schema: The schema (its ``$schema`` picks the draft; 2020-12 by default).
        formats: Check ``format`` too.

    Raises:
        jsonschema.SchemaError: ``schema`` is no valid JSON Schema.
    """
    import jsonschema
    import referencing

    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    base.check_schema(schema)
    bounded = jsonschema.validators.extend(base, {"pattern": _pattern, "additionalProperties": _additional,
                                                  "patternProperties": _pattern_properties})
    return bounded(schema, registry=referencing.Registry(retrieve=_refuse),  # type: ignore[call-arg]
                   format_checker=base.FORMAT_CHECKER if formats else None)


def schema_errors(validator: Any, instance: Any) -> Iterator[Any]:
    """``validator``'s errors on ``instance``; a ``$ref`` outside the schema is one more error
    (:data:`UNRESOLVABLE`), never a request or a file read."""
    import referencing.exceptions
    from jsonschema.exceptions import ValidationError

    try:
        yield from validator.iter_errors(instance)
    except referencing.exceptions.Unresolvable as exc:
        yield ValidationError(f"{UNRESOLVABLE} {getattr(exc, 'ref', exc)!s}, outside itself: only refs"
                              " within the schema (#/...) are followed")
