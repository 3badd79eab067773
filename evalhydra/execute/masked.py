"""Every row a run stores, masked: each secret the run sends (its services' keys and header
values) replaced by ``***`` in every string of the result row and its attempt rows."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from evalhydra.core.masking import holds_secret, mask_value
from evalhydra.plan.model import RunPlan
from evalhydra.services.openai.secrets import secrets_of
from evalhydra.store.rows import ResultRow

__all__ = ["masked_rows", "run_secrets"]


def run_secrets(plan: RunPlan) -> list[str]:
    """Every secret the run's services send (the candidate's and the judges'), masked out of
    every row it stores."""
    chat = [s for s in (plan.service, *plan.judges.values()) if s.kind == "openai"]
    return secrets_of(chat)


def masked_rows(row: ResultRow, attempts: list[dict[str, Any]],
                secrets: list[str]) -> tuple[ResultRow, list[dict[str, Any]]]:
    """A cell's rows with every secret masked in every string they hold: the one exit to the
    store (and so to every report and the terminal summary) whatever put it there (an echoing
    endpoint, a tool that returned it, a model that passed it on, an exception's text)."""
    if not secrets:
        return row, attempts
    texts = {name: mask_value(value, secrets) for name in _FIELDS
             if holds_secret(value := getattr(row, name), secrets)}
    if any(holds_secret(a, secrets) for a in attempts):
        attempts = [mask_value(a, secrets) for a in attempts]
    return (replace(row, **texts) if texts else row), attempts  # rebuilt only where a secret is


#: The result row's fields, in order.
_FIELDS = tuple(f.name for f in fields(ResultRow))
