"""Every row a run stores, masked: each secret the run sends (its services' keys and header
values) replaced by ``***`` in every string of the result row and its attempt rows."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from evalhydra.core.masking import mask_value
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
    texts = {f.name: mask_value(value, secrets) for f in fields(row)
             if isinstance(value := getattr(row, f.name), str | dict | list | tuple)}
    return replace(row, **texts), [mask_value(a, secrets) for a in attempts]
