"""Masking: every secret value a run sends (its services' keys and header values) replaced by
``***`` in text and in any JSON-like value, before anything is stored, printed or reported."""

from __future__ import annotations

from typing import Any

__all__ = ["MASK", "holds_secret", "mask_text", "mask_value"]


MASK = "***"


def mask_text(text: str | None, secrets: list[str]) -> str | None:
    """``text`` with every one of ``secrets`` replaced by ``***``."""
    if not text:
        return text
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def holds_secret(value: Any, secrets: list[str]) -> bool:
    """Whether any string in ``value`` (dict keys and values, list and tuple items, at any depth)
    holds one of ``secrets``: a look without building anything, so the usual answer (no) is cheap."""
    if isinstance(value, str):
        return any(secret in value for secret in secrets)
    if isinstance(value, dict):
        return any(holds_secret(k, secrets) or holds_secret(v, secrets) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(holds_secret(v, secrets) for v in value)
    return False


def mask_value(value: Any, secrets: list[str]) -> Any:
    """``value`` with every one of ``secrets`` masked in each string it holds: dict keys and values,
    list and tuple items, at any depth (:func:`mask_text` on each); other values as they are."""
    if not secrets:
        return value
    if isinstance(value, str):
        return mask_text(value, secrets)
    if isinstance(value, dict):
        return {mask_value(k, secrets): mask_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mask_value(v, secrets) for v in value)
    return value
