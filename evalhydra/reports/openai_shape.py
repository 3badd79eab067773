"""A run in the OpenAI Evals API's shapes (the ``openai`` report format).

``openai_output_items.jsonl`` holds one ``eval.run.output_item`` per result, as
``client.evals.runs.output_items.list`` returns them: the item it graded
(``datasource_item``, with its position), the ``sample`` (input messages, the
answer, the model, usage, an error), each criterion's result (``name``, ``type``,
``score``, ``passed``) and the status. ``openai_run.json`` holds what a run object
sums up: ``result_counts``, ``per_testing_criteria_results`` and
``per_model_usage``. So a run here reads like one exported from OpenAI and the two
can be compared side by side. Sampling settings a result does not record
(``temperature``, ``top_p``, ``seed``, ``max_completion_tokens``) are given as
OpenAI's defaults, 1, 1, 0 and 0.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from evalhydra.analysis.graders import grader_rows
from evalhydra.analysis.selection import PASSED_SQL, Selection
from evalhydra.core import strictjson
from evalhydra.reports.atomic import finite_json, stream_atomic, write_json_atomic
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["OPENAI_FILES", "write_openai_files"]

#: The files of the ``openai`` format.
OPENAI_FILES = ("openai_output_items.jsonl", "openai_run.json")

_COLUMNS = (f"run_id, eval_id, case_id, run_index, input, output, coalesce(reply_model, model), "
            f"coalesce(prompt_tokens, 0), coalesce(completion_tokens, 0), coalesce(cached_tokens, 0), "
            f"error_kind, failure_reason, grader_scores, details, {PASSED_SQL}, {INFRA_ERROR_SQL}, "
            f"cast(coalesce(strftime('%s', evaluated_at), 0) as integer), cell_key")


def write_openai_files(conn: sqlite3.Connection, sel: Selection, out_dir: Path) -> list[Path]:
    """Write the selection's output items and run summary in OpenAI's shapes."""
    items = out_dir / OPENAI_FILES[0]
    stream_atomic(items, lambda out: _write_items(conn, sel, out))
    run = out_dir / OPENAI_FILES[1]
    write_json_atomic(run, _run_document(conn, sel))
    return [items, run]


def _write_items(conn: sqlite3.Connection, sel: Selection, out: TextIO) -> None:
    for item in _output_items(conn, sel):
        out.write(json.dumps(finite_json(item), ensure_ascii=False, sort_keys=True) + "\n")


def _output_items(conn: sqlite3.Connection, sel: Selection) -> Iterator[dict[str, Any]]:
    sql = sel.source(_COLUMNS) + " order by eval_id, case_id, run_index, service_name, model"
    positions: dict[tuple[str, str], int] = {}
    per_eval: dict[str, int] = {}
    for row in conn.execute(sql, sel.params):
        (run_id, eval_id, case_id, trial, given, output, model, prompt, completion, cached, error, reason,
         scores, details, passed, errored, created, key) = row
        if (eval_id, case_id) not in positions:  # the item's place in its eval's data, from 0
            positions[eval_id, case_id] = per_eval[eval_id] = per_eval.get(eval_id, -1) + 1
        position = positions[eval_id, case_id]
        yield {
            "object": "eval.run.output_item", "id": f"outputitem_{key[:24]}_{trial}", "run_id": run_id,
            "eval_id": eval_id, "created_at": created, "datasource_item_id": position,
            "datasource_item": _item(details, case_id),
            "status": "error" if errored else "pass" if passed else "fail",
            "results": _results(scores),
            "sample": {"input": _messages(given), "output": [{"role": "assistant", "content": output or ""}],
                       "model": model or "", "finish_reason": "stop" if not error else "",
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion, "cached_tokens": cached},
                       "error": {"code": error or "", "message": (reason or "") if error else ""},
                       "temperature": 1.0, "top_p": 1.0, "seed": 0, "max_completion_tokens": 0},
        }


def _item(details: Any, case_id: str) -> dict[str, Any]:
    """The OpenAI item a result graded (kept in ``details``), else its case id."""
    found = strictjson.stored(details, None)
    item = found.get("item") if isinstance(found, dict) else None
    return item if isinstance(item, dict) else {"id": case_id}


def _results(scores: Any) -> list[dict[str, Any]]:
    """Each criterion's result; an errored one scores 0 and carries its error in ``sample``."""
    found = strictjson.stored(scores, None)
    if not isinstance(found, dict):
        return []
    results = []
    for name, entry in found.items():
        entry = entry if isinstance(entry, dict) else {}
        score = entry.get("score")
        results.append({"name": name, "type": entry.get("type"), "passed": bool(entry.get("passed")),
                        "score": float(score) if isinstance(score, int | float) else 0.0,
                        "sample": {"error": entry["error"]} if entry.get("error") else None})
    return results


def _messages(given: Any) -> list[dict[str, str]]:
    """A result's input as OpenAI's sample lists it: ``{role, content}`` messages."""
    found = strictjson.stored(given, given)
    if isinstance(found, list) and all(isinstance(m, dict) for m in found):
        return [{"role": str(m.get("role", "user")), "content": _text(m.get("content"))} for m in found]
    return [{"role": "user", "content": _text(found)}]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _per_criterion(conn: sqlite3.Connection, sel: Selection) -> list[dict[str, Any]]:
    """Each criterion's passes and failures over every target of the selection."""
    sums: dict[str, list[int]] = {}
    for row in grader_rows(conn, sel):
        counts = sums.setdefault(row["grader"], [0, 0])
        counts[0] += row["passed"]
        counts[1] += row["n"] - row["passed"]
    return [{"testing_criteria": name, "passed": passed, "failed": failed}
            for name, (passed, failed) in sorted(sums.items())]


def _run_document(conn: sqlite3.Connection, sel: Selection) -> dict[str, Any]:
    """``result_counts``, ``per_testing_criteria_results`` and ``per_model_usage`` of the selection."""
    counts = f"count(*), coalesce(sum({PASSED_SQL}), 0), coalesce(sum({INFRA_ERROR_SQL}), 0)"
    total, passed, errored = conn.execute(sel.source(counts), sel.params).fetchone()
    usage = conn.execute(sel.source(
        "coalesce(reply_model, model), count(*), coalesce(sum(prompt_tokens), 0), "
        "coalesce(sum(completion_tokens), 0), coalesce(sum(cached_tokens), 0)")
        + " group by 1 order by 1", sel.params).fetchall()
    return {
        "object": "eval.run", "run_ids": list(sel.run_ids),
        "result_counts": {"total": total, "passed": passed, "errored": errored,
                          "failed": total - passed - errored},
        "per_testing_criteria_results": _per_criterion(conn, sel),
        "per_model_usage": [{"run_model_name": model or "", "invocation_count": n, "prompt_tokens": p,
                             "completion_tokens": c, "total_tokens": p + c, "cached_tokens": cached}
                            for model, n, p, c, cached in usage],
    }
