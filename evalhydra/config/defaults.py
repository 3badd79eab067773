"""Defaults with one home: the schema, the subcommands and the reports read them here."""

from __future__ import annotations

__all__ = ["DEFAULT_REPORT_FORMATS", "DEFAULT_STORE_PATH", "SWEEP_REPORT_FORMATS"]

#: ``store.path`` and every subcommand's ``--store``.
DEFAULT_STORE_PATH = "outputs/evalhydra.db"
#: ``report``: the formats a run writes when none are configured.
DEFAULT_REPORT_FORMATS: tuple[str, ...] = ("json", "md")
#: The formats of the report written when a sweep ends.
SWEEP_REPORT_FORMATS: tuple[str, ...] = ("json", "md", "text")
