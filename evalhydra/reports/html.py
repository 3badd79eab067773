"""``report.html``: one self-contained page per run, sweep or comparison.

Rendered from a Jinja2 template with inline CSS, JS and SVG, and no network
access. The summary, the pass-rate chart (95 % intervals, clustered by case when trials repeat), the
comparisons and the trial statistics are plain HTML, readable without
JavaScript; the grid of cases × targets and each case's details are drawn by
the page's script from JSON embedded in the file, a screenful at a time, so a
100,000-result run opens quickly. Like every report it is a pure function of
the store (texts longer than :data:`TEXT_CAP` are cut, saying so).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any, TextIO

from evalhydra.analysis import aggregate as agg
from evalhydra.analysis.data import ReportData
from evalhydra.analysis.runsummary import TargetRow, header_facts, summary_of, target_rows
from evalhydra.analysis.selection import STATUS_SQL, Selection
from evalhydra.core import strictjson
from evalhydra.matchers.composite import matcher_parts
from evalhydra.reports.atomic import finite_json
from evalhydra.reports.trials import trials_json
from evalhydra.stats.clustered import pass_rate_interval

__all__ = ["STATUS_MARKS", "TEXT_CAP", "chart", "log_tail", "render_html", "store_folder", "write_html"]

#: Characters of an input, output or reason embedded per trial.
TEXT_CAP = 600
#: Bytes of an agent trial's stdout.log shown (its end).
LOG_TAIL = 1500
#: Every status has its own mark (and word) besides its colour-blind-safe (Okabe–Ito) colour in the CSS.
STATUS_MARKS = {"PASS": "✓", "EXCELLENT": "✓", "FAIL": "✗", "ERROR": "!", "TIMEOUT": "!"}


@cache
def _environment() -> Any:
    """The template environment, made on first use: Jinja2 is imported only by a run that writes HTML."""
    from jinja2 import Environment, PackageLoader, select_autoescape  # a visible share of start-up otherwise

    return Environment(loader=PackageLoader("evalhydra.reports", "templates"),
                       autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)

_TRIALS_SQL = f"""select eval_id, case_id, service_name, coalesce(model, '') as model, run_index,
  {STATUS_SQL} as status, score, substr(coalesce(input, ''), 1, {TEXT_CAP + 1}) as input,
  substr(coalesce(ideal, ''), 1, {TEXT_CAP + 1}) as ideal,
  substr(coalesce(output, ''), 1, {TEXT_CAP + 1}) as output,
  failure_reason, error_kind, feedback, rubric_scores, judge_model, judge_status_code, status_code,
  reply_model, substr(coalesce(reasoning, ''), 1, {TEXT_CAP + 1}) as reasoning,
  attempt_count, latency_ms, ttft_ms, reasoning_tokens,
  coalesce(prompt_tokens, 0) + coalesce(judge_prompt_tokens, 0) as tin,
  coalesce(completion_tokens, 0) + coalesce(judge_completion_tokens, 0) as tout,
  coalesce(cost_usd, 0) + coalesce(judge_cost_usd, 0) as cost, kind, tool_calls, details,
  stdout_log_path, cell_key
from {{table}} where {{where}} order by eval_id, case_id, service_name, model, run_index"""


def write_html(conn: sqlite3.Connection, sel: Selection, data: ReportData, out: TextIO, *,
               comparison: Mapping[str, Any] | None = None) -> None:
    """Write ``report.html`` for the selection to ``out``."""
    out.write(render_html(conn, sel, data, comparison=comparison))


def render_html(conn: sqlite3.Connection, sel: Selection, data: ReportData, *,
                comparison: Mapping[str, Any] | None = None) -> str:
    """The page's text (see the module docstring)."""
    targets = data.targets()
    labels = sorted({f"{t.key[2]}/{t.key[3]}" for t in targets})
    cases = list(_cases(conn, sel, labels))
    payload = _script_json({"targets": labels, "cases": cases, "marks": STATUS_MARKS})
    summary = summary_of(targets)
    rows = target_rows(summary)
    return _environment().get_template("report.html.j2").render(
        header=header_facts(summary, data.runs), rows=rows,
        runs=_run_rows(conn, sel) if len(sel.run_ids) > 1 else [],
        chart=chart(rows), comparisons=data.comparisons, comparison=comparison,
        trials=trials_json(data)["targets"], marks=STATUS_MARKS, payload=payload, graders=data.graders,
        judges=data.judges)


def _run_rows(conn: sqlite3.Connection, sel: Selection) -> list[dict[str, Any]]:
    """Per run (a sweep's jobs): results, passes, errors and the pass rate with its interval."""
    marks = ", ".join("?" * len(sel.run_ids))
    sql = (f"select run_id, started_at, total, passed, failed, errors, cost_usd from run_pass_rates "
           f"where run_id in ({marks}) order by started_at, run_id")
    histograms = agg.run_histograms(conn, sel.run_ids)
    rows = []
    for run_id, started, total, passed, failed, errors, cost in conn.execute(sql, sel.run_ids):
        rate = pass_rate_interval(histograms.get(run_id, {}))
        rows.append({"run": run_id, "started": started, "n": total, "passed": passed, "failed": failed,
                     "errors": errors, "rate": rate.estimate if rate.n_cases else None, "low": rate.low,
                     "high": rate.high, "cost": cost or 0.0})
    return rows


def chart(rows: Sequence[TargetRow]) -> dict[str, Any]:
    """Bars of pass rate with their interval per target (SVG coordinates in the template)."""
    bars = [{**asdict(r), "y": 24 + i * 26, "label": f"{r.eval} · {r.service}/{r.model}"}
            for i, r in enumerate(rows)]
    return {"bars": bars, "height": 40 + 26 * len(bars)}


def _cases(conn: sqlite3.Connection, sel: Selection, labels: list[str]) -> Iterator[dict[str, Any]]:
    """One object per (eval, case): its input and ideal, and each target's trials."""
    index = {label: i for i, label in enumerate(labels)}
    attempts = _attempts(conn, sel)
    root = store_folder(conn)
    cursor = conn.execute(_TRIALS_SQL.format(table=sel.table, where=sel.where), sel.params)
    names = [d[0] for d in cursor.description]
    current: dict[str, Any] | None = None
    for values in iter(lambda: cursor.fetchmany(2000), []):
        for value in values:
            row = dict(zip(names, value, strict=True))
            key = (row["eval_id"], row["case_id"])
            if current is None or (current["e"], current["c"]) != key:
                if current is not None:
                    yield current
                current = {"e": key[0], "c": key[1], "i": _cap(row["input"]), "d": _cap(row["ideal"]),
                           "t": {}}
            target = str(index[f"{row['service_name']}/{row['model']}"])
            current["t"].setdefault(target, []).append(_trial(row, attempts.get(row["cell_key"], []), root))
    if current is not None:
        yield current


#: JSON inside ``<script>``: every ``<``, ``>`` and ``&`` escaped, so no text ends the element or
#: opens a comment (``<!--<script>`` would swallow the rest of the page).
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def _script_json(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except ValueError:  # a NaN or an infinity, which JSON.parse refuses: shown as null
        text = json.dumps(finite_json(value), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return text.translate(_SCRIPT_SAFE)


def _number(value: Any) -> int | float | None:
    """A stored number as a number; anything else (a merged store may hold text in an INTEGER
    column) as None, so the page's script never inserts stored text as markup."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _trial(row: Mapping[str, Any], attempts: list[list[Any]], root: Path | None) -> dict[str, Any]:
    trial: dict[str, Any] = {"k": _number(row["run_index"]), "s": str(row["status"]),
                             "o": _cap(row["output"]), "sc": _number(row["score"]),
                             "ms": _number(row["latency_ms"]),
                             "tk": [_number(row["tin"]), _number(row["tout"])],
                             "$": round(float(_number(row["cost"]) or 0), 6)}
    reply_model = row["reply_model"] if row["reply_model"] != row["model"] else None
    optional = {"r": _cap(row["failure_reason"]), "ek": row["error_kind"], "fb": _cap(row["feedback"]),
                "rs": _json(row["rubric_scores"]), "jm": row["judge_model"],
                "js": _number(row["judge_status_code"]), "hs": _number(row["status_code"]),
                "rm": reply_model, "rz": _cap(row["reasoning"]), "a": attempts or None,
                "tt": _number(row["ttft_ms"]), "th": _number(row["reasoning_tokens"])}
    trial.update({k: v for k, v in optional.items() if v not in (None, "", [], {})})
    if row["kind"] == "agent":
        trial.update(_agent_extras(row, root))
    else:
        details = _json(row["details"]) or {}
        if details.get("attachments"):
            trial["at"] = details["attachments"]
        parts = matcher_parts(details)
        if parts:
            trial["pt"] = [[p["kind"], p["passed"], p["score"], _cap(p["reason"]), p["weight"]]
                           for p in parts]
        conversation = _conversation(details.get("trajectory"))
        if conversation:
            trial["cv"] = conversation
    return trial


def _conversation(trajectory: Any) -> dict[str, Any] | None:
    """A tool loop's conversation for the page: each turn as [role, text, [calls]] (texts capped),
    its stop reason and end state."""
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("transcript"), list):
        return None
    turns = []
    for message in trajectory["transcript"]:
        if not isinstance(message, dict):
            continue
        calls = [f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                 for c in message.get("tool_calls") or () if isinstance(c, dict)]
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content \
            else ""
        turns.append([str(message.get("role")), _cap(text), [_cap(c) for c in calls]])
    shown = {"t": turns, "sr": trajectory.get("stop_reason"),
             "st": _cap(json.dumps(trajectory.get("state"), ensure_ascii=False))
             if trajectory.get("state") is not None else None}
    user = trajectory.get("user")
    if isinstance(user, dict):  # a simulated user's dialogue: who stopped it
        shown["sb"] = str(user.get("stopped_by") or "limit")
    return shown


def _agent_extras(row: Mapping[str, Any], root: Path | None) -> dict[str, Any]:
    calls = _json(row["tool_calls"]) or []
    details = _json(row["details"]) or {}
    checks = ((details.get("verification_result") or {}).get("details")) or []
    return {"tc": [str(c.get("name")) for c in calls if isinstance(c, dict)],
            "ch": [[str(c.get("name")), bool(c.get("passed")), str(c.get("message") or "")] for c in checks],
            "log": log_tail(row["stdout_log_path"], root)}


def store_folder(conn: sqlite3.Connection) -> Path | None:
    """The folder of the store file, the only tree whose agent logs a report reads."""
    for _, name, file in conn.execute("pragma database_list"):
        if name == "main" and file:
            return Path(file).resolve().parent
    return None


def log_tail(path: Any, root: Path | None) -> str:
    """The end of an agent trial's ``stdout.log``, read only from the store's own folder.

    A store names the file, and a merged shard could name any file (``/proc/self/environ``):
    only a file called ``stdout.log`` that resolves inside the store's folder is read.
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        return "(stdout.log not found)"
    resolved = Path(path).resolve()
    if root is None or resolved.name != "stdout.log" or not resolved.is_relative_to(root):
        return "(stdout.log is not in the store's folder: not read)"
    if not resolved.is_file():
        return "(stdout.log not found)"
    with open(resolved, "rb") as handle:
        handle.seek(0, 2)
        handle.seek(max(0, handle.tell() - LOG_TAIL))
        return handle.read().decode("utf-8", "replace")


def _attempts(conn: sqlite3.Connection, sel: Selection) -> dict[str, list[list[Any]]]:
    """Per cell, its HTTP attempts: [call, attempt, status code, error kind]."""
    sql = (f"select a.cell_key, a.call, a.attempt, a.status_code, a.error_kind from attempts a "
           f"where a.cell_key in (select cell_key from {sel.table} where {sel.where}) "
           "order by a.cell_key, a.call, a.attempt")
    out: dict[str, list[list[Any]]] = {}
    for key, call, attempt, status, kind in conn.execute(sql, sel.params):
        out.setdefault(key, []).append([str(call), _number(attempt), _number(status), kind])
    return out


def _cap(text: Any) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= TEXT_CAP else value[:TEXT_CAP] + " … (cut; the store has it all)"


def _json(text: Any) -> Any:
    """A stored JSON column, decoded safely (None when it is not JSON)."""
    return strictjson.stored(text, None)
