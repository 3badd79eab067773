"""aiwg nlp-prod records: ``results.jsonl`` and ``summary.json``, built in SQL.

Each line of ``results.jsonl`` is one result of one run with every field of
aiwg's eval-result schema, produced by SQLite's ``json_object`` (compact, one
line, keys in schema order). Mapping from the store:

* ``run_id`` is the reported run (the cell's run, or the run that resumed it);
  ``pipeline`` is the eval id; ``step`` is left out (an eval scores the whole
  pipeline), as are ``failure_category`` and ``suggested_fix`` when they have no value.
* ``generator_model`` is the model; ``evaluator_model`` the judge model, or
  ``""`` when a deterministic matcher or a validator scored the result.
* ``feedback`` is the evaluator's feedback, else (on a failure) the failure
  reason, else ``""``; ``failure_category`` is null on a pass and outside the
  schema's enum becomes ``other``; ``pass_threshold`` defaults to 1.0 (a
  binary matcher passes only a perfect score).
* ``attempt_history`` is the refinement loop's history, or one entry for a
  single attempt; costs and tokens add the generation and judge calls.

Files are appended per run and never rewritten: a run whose ``run_id`` is
already in the file is skipped, so writing the same run twice (or a report
regenerated into the same directory) never duplicates lines.
"""

from __future__ import annotations

import fcntl
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from evalhydra.analysis.aggregate import Target, TargetAgg, run_histograms
from evalhydra.analysis.evalstats import evals_and_targets
from evalhydra.analysis.graders import grader_rows
from evalhydra.analysis.selection import PASSED_SQL, Selection
from evalhydra.stats.clustered import pass_rate_interval

__all__ = [
    "FAILURE_CATEGORIES",
    "RESULT_VERSION",
    "append_run_lines",
    "pipeline_name",
    "result_lines",
    "run_in_file",
    "summary_json",
]

RESULT_VERSION = "1.0.0"
FAILURE_CATEGORIES = ("format", "content", "hallucination", "missing_field",
                      "constraint_violation", "other")

_CATEGORIES = ", ".join(f"'{c}'" for c in FAILURE_CATEGORIES)
_BOOL = f"(case when {PASSED_SQL} then json('true') else json('false') end)"
_SCORE = "min(1.0, max(0.0, coalesce(score, 0.0)))"
_FEEDBACK = (f"(case when {PASSED_SQL} then coalesce(feedback, '') "
             "else coalesce(nullif(feedback, ''), failure_reason, '') end)")
_CATEGORY = (f"(case when {PASSED_SQL} or failure_category is null then null "
             f"when failure_category in ({_CATEGORIES}) then failure_category else 'other' end)")


def _json_or(column: str, kind: str, default: str) -> str:
    """The column's JSON if it holds a JSON ``kind`` (object/array), else ``default``."""
    return (f"(case when {column} is null then json('{default}') when json_valid({column})"
            f" and json_type({column}) = '{kind}' then json({column}) else json('{default}') end)")


_SINGLE = (f"json_array(json_object('attempt', 1, 'output', coalesce(output, ''), 'score', {_SCORE},"
           f" 'pass', {_BOOL}, 'feedback', {_FEEDBACK}))")
_HISTORY = (f"(case when attempt_history is null then {_SINGLE}"
            f" else {_json_or('attempt_history', 'array', '[]')} end)")
# A suite of OpenAI graders has no rubric: each criterion's score, scaled to [0, 1] by its range,
# stands for it (the schema's rubric_scores are numbers in [0, 1]).
_GRADERS = ("(select json_group_object(g.key, json_extract(g.value, '$.scaled')) from json_each("
            "grader_scores) g where json_type(g.value, '$.scaled') in ('real', 'integer'))")
_RUBRIC = (f"(case when rubric_scores is null and json_valid(grader_scores) then {_GRADERS}"
           f" else {_json_or('rubric_scores', 'object', '{}')} end)")

def _finite(column: str) -> str:
    """The column, or null when it holds an infinity (JSON has none; a NaN is stored as null)."""
    return f"(case when abs({column}) <= 1.7976931348623157e308 then {column} end)"


# Numbers: a missing cost, threshold or token count is written as an integer (0 or 1)
# rather than a float; SQLite formats integers much faster, and both are JSON numbers.
# ``?1`` is the run id, ``?2`` the time of a result that has none.
def _record(category: bool, fix: bool) -> str:
    """The line's object, with or without its two optional keys.

    The schema types ``failure_category`` and ``suggested_fix`` as strings, so a
    line leaves them out rather than write null (and ``step`` always).
    """
    optional = (f"'failure_category', {_CATEGORY}, " if category else "") + (
        "'suggested_fix', suggested_fix, " if fix else "")
    return f"""json_object(
  'version', '{RESULT_VERSION}', 'run_id', ?1, 'case_id', case_id, 'pipeline', eval_id,
  'generator_model', coalesce(model, ''),
  'evaluator_model', coalesce(judge_model, ''), 'input', coalesce(input, ''),
  'output', coalesce(output, ''), 'score', {_SCORE}, 'pass', {_BOOL},
  'pass_threshold', coalesce(min(1.0, max(0.0, pass_threshold)), 1), 'feedback', {_FEEDBACK},
  'rubric_scores', {_RUBRIC}, {optional}
  'attempts', max(1, coalesce(attempts, 1)),
  'attempt_history', {_HISTORY},
  'total_cost_usd', max(0, coalesce({_finite("cost_usd")}, 0) + coalesce({_finite("judge_cost_usd")}, 0)),
  'cost_breakdown', json_object(
    'generation_usd', coalesce({_finite("cost_usd")}, 0),
    'evaluation_usd', coalesce({_finite("judge_cost_usd")}, 0),
    'input_tokens', coalesce(prompt_tokens, 0) + coalesce(judge_prompt_tokens, 0),
    'output_tokens', coalesce(completion_tokens, 0) + coalesce(judge_completion_tokens, 0)),
  'evaluated_at', coalesce(evaluated_at, ?2), 'contamination_warning', json('false'))"""


# One of four objects, by which optional keys hold a value: SQLite evaluates only the
# branch taken. (A JSON merge patch of null keys does the same by parsing and rewriting
# every line, at a higher cost.)
LINE_SQL = f"""(case when {_CATEGORY} is null then
  (case when suggested_fix is null then {_record(False, False)} else {_record(False, True)} end)
  else (case when suggested_fix is null then {_record(True, False)} else {_record(True, True)} end) end)"""


def _run_times(conn: sqlite3.Connection, run_id: str) -> str:
    row = conn.execute("select coalesce(finished_at, started_at) from runs where run_id = ?",
                       (run_id,)).fetchone()
    return (row[0] if row else None) or "1970-01-01T00:00:00Z"


def result_lines(conn: sqlite3.Connection, run_id: str, sel: Selection) -> Iterator[list[str]]:
    """The run's ``results.jsonl`` lines (each ending in a newline), in store order, in chunks.

    Store order (``rowid``, the order results were written) needs no sort:
    SQLite reads the run's rows in that order from its ``run_id`` index.

    Args:
        conn: A connection to the store.
        run_id: The run the lines are recorded under.
        sel: That run's results.
    """
    sql = f"select {LINE_SQL} || char(10) from {sel.table} where {sel.where} order by rowid"
    params = (run_id, _run_times(conn, run_id), *sel.params)
    cursor = conn.execute(sql, params)
    for rows in iter(lambda: cursor.fetchmany(2000), []):
        yield [row[0] for row in rows]


_NEEDLE = '"run_id":"{}"'


def run_in_file(path: Path, run_id: str, chunk: int = 1 << 24) -> bool:
    """Whether ``path`` (a results.jsonl) already holds lines of ``run_id``."""
    if not path.exists():
        return False
    needle = _NEEDLE.format(run_id).encode()
    tail = b""
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            if needle in tail + block:
                return True
            tail = block[-len(needle):]
    return False


def append_run_lines(paths: Sequence[Path], run_id: str,
                     lines: Callable[[], Iterable[list[str]]]) -> list[Path]:
    """Append a run's lines to each file in ``paths`` that does not hold the run yet.

    The files are locked (exclusive ``flock``, in path order) for the check
    and the append, so parallel jobs appending to one cumulative file neither
    interleave nor duplicate. ``lines`` is called once, only if needed, and
    its chunks (lists of lines) are written to every file that lacks the run.

    Returns:
        The files appended to.
    """
    with ExitStack() as stack:
        handles = []
        for path in sorted({Path(p) for p in paths}):
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(path.open("a", encoding="utf-8", buffering=1 << 20))
            fcntl.flock(handle, fcntl.LOCK_EX)
            if not run_in_file(path, run_id):
                handles.append((path, handle))
        if handles:
            for chunk in lines():
                for _, handle in handles:
                    handle.writelines(chunk)
            for _, handle in handles:
                handle.flush()
        return [path for path, _ in handles]


_RUN_ID = re.compile(r"^eval-(?P<slug>[a-z0-9-]+)-[a-f0-9]{8}$")


def pipeline_name(run_id: str, eval_ids: list[str]) -> str:
    """The summary's ``pipeline``: the eval id of a one-eval run, else the run's slug."""
    if len(eval_ids) == 1:
        return eval_ids[0]
    match = _RUN_ID.match(run_id)
    return match.group("slug") if match else run_id


def _top_failures(conn: sqlite3.Connection, sel: Selection) -> list[dict[str, Any]]:
    sql = (f"select case_id, {_SCORE}, {_FEEDBACK} from {sel.table} where ({sel.where})"
           f" and not {PASSED_SQL} order by rowid limit 3")
    return [{"case_id": c, "score": s, "feedback": f} for c, s, f in conn.execute(sql, sel.params)]


def summary_json(conn: sqlite3.Connection, run_id: str, sel: Selection,
                 targets: Mapping[Target, TargetAgg] | None = None) -> dict[str, Any]:
    """aiwg's ``summary.json`` for one run (the full summary schema).

    ``failure_breakdown`` counts failures per ``failure_category``; failures
    without one count as ``error`` (infrastructure errors) or
    ``uncategorized``. ``top_failures`` are the first three failures in
    ``results.jsonl`` order.

    Args:
        conn: A connection to the store.
        run_id: The run.
        sel: Its results.
        targets: Its per-target totals, if already computed.
    """
    if targets is None:
        targets = evals_and_targets(conn, sel)[1]
    total = TargetAgg(("", "", "", ""))
    for t in targets.values():
        total.merge(t)
    n = total.n
    return {
        "run_id": run_id,
        "pipeline": pipeline_name(run_id, sorted({key[1] for key in targets})),
        "evaluated_at": total.last_evaluated or _run_times(conn, run_id),
        "total_cases": n,
        "passed": total.passed,
        "failed": n - total.passed,
        "pass_rate": total.passed / n if n else 0.0,
        "avg_score": total.score / n if n else 0.0,
        "avg_attempts": total.attempts / n if n else 0.0,
        "total_cost_usd": total.cost_usd,
        "failure_breakdown": dict(sorted(total.categories.items())),
        "top_failures": _top_failures(conn, sel),
        **_uncertainty(conn, run_id),
        # after aiwg's keys: where the tokens went (thinking is part of the output)
        "tokens": {"input": total.input_tokens, "output": total.output_tokens,
                   "reasoning": total.reasoning_tokens},
        "cache_hits": total.cached,
        # an OpenAI Evals suite's criteria: each one's results, passes, pass rate and mean score
        **({"graders": graders} if (graders := grader_rows(conn, sel)) else {}),
    }


def _uncertainty(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The run's pass rate over scored results (mean over cases) with its case-clustered interval.

    aiwg's ``pass_rate`` counts infrastructure errors as failures; these keys, after
    aiwg's, leave them out, as the terminal summary and the gates do.
    """
    rate = pass_rate_interval(run_histograms(conn, [run_id]).get(run_id, {}))
    return {"scored_pass_rate": rate.estimate, "pass_rate_ci_low": rate.low,
            "pass_rate_ci_high": rate.high, "ci_method": rate.method, "n_cases": rate.n_cases}
