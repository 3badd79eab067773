"""zrb-llm-evaluator's artifacts from the store: results.json, experiment.json, report.md pieces.

Agent rows are turned back into zrb's :class:`~evalhydra.agents.models.TrialResult`
(:func:`trial_from_row`), so ``results.json`` and ``experiment.json`` are pure
functions of the store; :func:`status_label`, :func:`summary_row` and
:func:`trial_details` render zrb's report.md rows for :mod:`evalhydra.reports.markdown`.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalhydra.agents.models import DEFAULT_CLI, MIN_TIMEOUT_S, TrialResult
from evalhydra.core import strictjson
from evalhydra.core.values import PASSING
from evalhydra.reports.atomic import write_json_atomic

__all__ = [
    "STATUS_ICONS",
    "experiment_from_store",
    "inline_text",
    "status_label",
    "summary_row",
    "table_cell",
    "trial_details",
    "trial_from_row",
    "validation_score",
    "write_agent_artifacts",
]

STATUS_ICONS = {"EXCELLENT": "👍", "PASS": "✅", "FAIL": "❌", "TIMEOUT": "⏱️", "ERROR": "⚠️"}
#: zrb statuses that count as passed.

Row = dict[str, Any]


def table_cell(text: Any) -> str:
    """Table-cell text: pipes escaped, line breaks flattened."""
    return inline_text(text).replace("|", "\\|")


def inline_text(text: Any) -> str:
    """Single-line text: line breaks become spaces."""
    return " ".join(str(text).splitlines())


def status_label(status: str) -> str:
    icon = STATUS_ICONS.get(status)
    return f"{icon} {status}" if icon else table_cell(status)


def validation_score(r: Row) -> float | None:
    verdict = r.get("verification_result")
    return float(verdict["score"]) if verdict else None


def _bold_if(text: str, condition: bool) -> str:
    return f"**{text}**" if condition else text


def summary_row(r: Row, best: dict[str, Any] | None) -> str:
    score = validation_score(r)
    b = best if best is not None and r["status"] in PASSING else {}
    duration = _bold_if(f"{float(r['duration']):.2f}", float(r["duration"]) == b.get("duration"))
    score_text = "" if score is None else _bold_if(f"{score:.2f}", score == b.get("score"))
    total = _bold_if(str(r["total_tokens"]), r["total_tokens"] == b.get("total_tokens"))
    tools = _bold_if(str(r["tool_call_count"]), r["tool_call_count"] == b.get("tool_call_count"))
    return (
        f"| {table_cell(r['model'])} | {table_cell(r['test_case'])} | {r['trial_index']} | "
        f"{status_label(r['status'])} | {duration} | {score_text} | {total} | {r['input_tokens']} | "
        f"{r['output_tokens']} | {r['cache_read_tokens']} | {tools} |\n"
    )


def trial_details(r: Mapping[str, Any], text: Callable[[Any], str] = inline_text) -> list[str]:
    """zrb's Per-Trial Details block of one trial; ``text`` renders labels (one line by default,
    as they are for zrb's own report.md)."""
    lines = [
        f"### {text(r['model'])} / {text(r['test_case'])} / Trial {r['trial_index']}\n\n",
        f"- **Status**: {status_label(r['status'])}\n",
        f"- **Duration**: {float(r['duration']):.2f}s\n",
        f"- **Exit code**: {r['exit_code']}\n",
        f"- **History path**: {text(r['log_path'])}\n",
    ]
    if r.get("stdout_log_path"):
        lines.append(f"- **Stdout log path**: {text(r['stdout_log_path'])}\n")
    lines.append(
        f"- **Tokens**: total={r['total_tokens']}, input={r['input_tokens']}, "
        f"output={r['output_tokens']}, cache={r['cache_read_tokens']}\n"
    )
    if r["tool_call_count"] > 0:
        names = ", ".join(text(n) for n in r["tool_calls"])
        lines.append(f"- **Tool calls** ({r['tool_call_count']}): {names}\n")
    verdict = r.get("verification_result")
    if verdict is not None:
        lines.append(f"- **Validation score**: {float(verdict['score'])}\n")
        for check in verdict.get("details") or []:
            mark = "✓" if check["passed"] else "✗"
            message = text(check.get("message", ""))
            lines.append(f"  - {text(check['name'])}: {mark} {message}\n")
    lines.append("\n")
    return lines


def trial_from_row(row: dict[str, Any]) -> TrialResult:
    """Rebuild the zrb TrialResult of a stored agent row (for results.json and report.md)."""
    details = row.get("details")
    decoded = _json(details)
    details = decoded if isinstance(decoded, dict) else {}
    return TrialResult(
        id=_trial_id(details.get("trial_id"), row["cell_key"]),
        model=row["model"],
        test_case=row["case_id"],
        trial_index=row["run_index"],
        status=row["status"],
        duration=float(row.get("duration_s") or 0.0),
        exit_code=int(row.get("exit_code") or 0),
        log_path=row.get("log_path") or "",
        stdout_log_path=row.get("stdout_log_path") or "",
        verification_result=details.get("verification_result"),
        total_tokens=int(details.get("total_tokens") or 0),
        input_tokens=int(row.get("prompt_tokens") or 0),
        output_tokens=int(row.get("completion_tokens") or 0),
        cache_read_tokens=int(row.get("cached_tokens") or 0),
        tool_calls=list(details.get("tool_call_names") or []),
        tool_call_count=int(details.get("tool_call_count") or 0),
        cost_usd=float(row.get("cost_usd") or 0.0),
        trial_dir=row.get("trial_dir") or "",
    )


def _trial_id(stored: str | None, cell_key: str) -> str:
    """zrb's dashed uuid4 (rows stored before ids were dashed hold 32 hex digits)."""
    if stored and len(stored) == 32:
        return str(uuid.UUID(hex=stored))
    return stored or uuid4_from(cell_key)


def experiment_from_store(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """zrb's ``experiment.json`` for the agent rows of some runs (a pure function of the store).

    ``zrb-llm-evaluator report --dir`` reads it (its ``Experiment`` model): the id is a
    uuid4 derived from the first run's id, and ``config`` is zrb's ``ExperimentConfig``
    rebuilt from the run's own config.
    """
    first = runs[0] if runs else {}
    trials = [trial_from_row(r).to_dict() for r in rows if r.get("kind") == "agent"]
    return {
        "id": uuid4_from(str(first.get("run_id"))),
        "config": _zrb_config(runs, trials),
        "results": trials,
        "started_at": first.get("started_at"),
        "completed_at": runs[-1].get("finished_at") if runs else None,
    }


def uuid4_from(text: str) -> str:
    """A dashed uuid4 made from ``text`` (the same text gives the same id)."""
    return str(uuid.UUID(bytes=hashlib.sha256(text.encode()).digest()[:16], version=4))


def _zrb_config(runs: list[dict[str, Any]], trials: list[dict[str, Any]]) -> dict[str, Any]:
    """zrb's ``ExperimentConfig`` of the runs: models, case dirs, trials, parallelism, CLI."""
    first = runs[0] if runs else {}
    config = _json(first.get("config")) or {}
    service, run = config.get("service") or {}, config.get("run") or {}
    dirs = [d for r in runs for d in _json(r.get("agent_case_dirs")) or []]
    return {
        "models": list(dict.fromkeys(t["model"] for t in trials)),
        "test_case_dirs": list(dict.fromkeys(dirs)) or sorted({t["test_case"] for t in trials}),
        "trials": max((t["trial_index"] for t in trials), default=1),
        "parallelism": int(run.get("concurrency") or 1),
        "timeout": max(int(MIN_TIMEOUT_S), math.ceil(float(service.get("timeout_s") or MIN_TIMEOUT_S))),
        "cli_name": service.get("cli_name") or DEFAULT_CLI.get(service.get("template") or "", "zrb"),
        "cli_version": first.get("agent_cli_version") or "",
        "env_prefix": service.get("env_prefix") or "ZRB",
    }


def _json(value: Any) -> Any:
    """A stored JSON column, decoded safely (None when it is not JSON)."""
    return strictjson.stored(value, None)


def write_agent_artifacts(experiment: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write zrb's ``results.json`` and ``experiment.json`` (atomically) when there are agent trials."""
    if not experiment["results"]:
        return []
    write_json_atomic(out_dir / "results.json", experiment["results"])
    write_json_atomic(out_dir / "experiment.json", experiment)
    return [out_dir / "results.json", out_dir / "experiment.json"]
