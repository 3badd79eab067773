"""Secrets never reach a stored config: redaction of config trees and overrides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["SECRET_MARKERS", "redact", "redact_overrides"]

SECRET_MARKERS = ("key", "token", "secret", "password", "authorization")


def redact(value: Any) -> Any:
    """Drop secret-looking values (header values, ``*key*`` fields) from a config tree.

    ``api_key_env`` names a variable, not a secret, so it is kept.
    """
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            lowered = str(key).lower()
            if key == "headers" and isinstance(item, dict):  # a ${env:NAME} reference is no secret
                out[key] = {h: v if isinstance(v, str) and "${env:" in v else "<redacted>"
                            for h, v in item.items()}
            elif (
                lowered != "api_key_env"
                and any(m in lowered for m in SECRET_MARKERS)
                and isinstance(item, str)
            ):
                out[key] = "<redacted>"
            else:
                out[key] = redact(item)
        return out
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_overrides(overrides: Sequence[str]) -> list[str]:
    """Command-line overrides with secret-looking values replaced (``headers.*``, ``*key*``, ``*token*``)."""
    out = []
    for item in overrides:
        key, sep, _ = item.partition("=")
        lowered = key.lower()
        secret = ".headers." in f".{lowered}" or (
            not lowered.endswith("api_key_env") and any(m in lowered for m in SECRET_MARKERS))
        out.append(f"{key}=<redacted>" if sep and secret else item)
    return out


