"""The store's tables, views and numbered migrations (``PRAGMA user_version``).

Tables:

* ``runs``: one row per invocation (config with secrets removed, fingerprint,
  status ``running|completed|interrupted|failed``).
* ``results``: every version of every cell (:class:`~evalhydra.store.rows.ResultRow`),
  one per ``(cell_key, run_id)``: a run that sends a cell again adds a version and never
  changes another run's. Resume is "skip the cells whose newest version is here (and
  done)".
* ``run_cells``: which cells belong to which run, and which version (``result_run_id``:
  the run that wrote it; a resumed run reuses versions stored by earlier runs, so reports
  of a run cover its whole plan and never change).
* ``attempts``: every HTTP attempt (status, error kind, latency) for auditing.
* ``claims``: cells a running invocation is about to send or is sending, with
  a lease that expires if its process dies (:mod:`~evalhydra.store.claims`),
  so two processes on one store never send a cell twice.
* ``batches``: every batch job sent to a provider (:mod:`~evalhydra.store.batches`).
* ``run_summaries``: each finished run's per-target totals and case histograms
  (:mod:`evalhydra.analysis.runsummary`), what ``evalhydra view`` lists and opens.
* ``labels``: people's PASS/FAIL verdicts on stored outputs (``evalhydra label``), by case and
  output hash (and text); the ``judge_labels`` and ``judge_agreement`` views set them beside each
  judge's verdicts.
* ``case_fractions``: each finished run's per-case counts and trial digests
  (:mod:`evalhydra.store.fractions`), what comparisons of finished runs read.

A migration never changes once released; a new schema is a new migration.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import sqlite_utils

from evalhydra.store.labels import stored_output
from evalhydra.store.rows import infra_error_sql

__all__ = ["GRADER_VIEWS", "JUDGE_VIEWS", "MIGRATIONS", "REPORT_VIEWS", "RESULT_COLUMNS", "SCHEMA_VERSION",
           "TRAJECTORY_VIEWS", "VERSION_JOIN", "latest_version_sql"]

RESULT_COLUMNS: dict[str, type] = {
    "cell_key": str,
    "run_id": str,
    "group": str,
    "eval_id": str,
    "service_name": str,
    "model": str,
    "requested_model": str,
    "run_index": int,
    "case_id": str,
    "kind": str,
    "status": str,
    "input": str,
    "ideal": str,
    "output": str,
    "tool_calls": str,
    "passed": int,
    "score": float,
    "failure_reason": str,
    "error_kind": str,
    "status_code": int,
    "attempt_count": int,
    "retried": int,
    "judge_attempt_count": int,
    "judge_retried": int,
    "judge_status_code": int,
    "judge_service": str,
    "judge_model": str,
    "latency_ms": int,
    "prompt_tokens": int,
    "completion_tokens": int,
    "cached_tokens": int,
    "judge_prompt_tokens": int,
    "judge_completion_tokens": int,
    "cost_usd": float,
    "judge_cost_usd": float,
    "details": str,
    "feedback": str,
    "rubric_scores": str,
    "failure_category": str,
    "suggested_fix": str,
    "pass_threshold": float,
    "attempts": int,
    "attempt_history": str,
    "duration_s": float,
    "exit_code": int,
    "log_path": str,
    "stdout_log_path": str,
    "trial_dir": str,
    "case_hash": str,
    "evaluated_at": str,
    "reply_model": str,
    "reasoning": str,
    "reasoning_tokens": int,
    "ttft_ms": float,
    "first_answer_ms": float,
    "output_tps": float,
    "cached": int,
    "cached_latency_ms": float,
    "saved_usd": float,
    "batched": int,
    "grader_scores": str,
}


def _migration_1(db: sqlite_utils.Database) -> None:
    db.table("runs").create(
        {
            "run_id": str,
            "parent_run_id": str,
            "kind": str,
            "started_at": str,
            "finished_at": str,
            "status": str,
            "overrides": str,
            "config": str,
            "fingerprint": str,
            "version": str,
            "sweep_dir": str,
            "job_num": int,
            "hostname": str,
            "pid": int,
            "cells_total": int,
            "cells_run": int,
        },
        pk="run_id",
        if_not_exists=True,
    )
    db.table("results").create(RESULT_COLUMNS, pk="cell_key", if_not_exists=True)
    db.table("run_cells").create(
        {"run_id": str, "cell_key": str}, pk=("run_id", "cell_key"), if_not_exists=True
    )
    db.table("attempts").create(
        {
            "cell_key": str,
            "run_id": str,
            "call": str,
            "attempt": int,
            "status_code": int,
            "error_kind": str,
            "latency_ms": float,
            "error_message": str,
        },
        pk=("cell_key", "run_id", "call", "attempt"),
        if_not_exists=True,
    )
    for cols in (["run_id"], ["eval_id", "service_name", "model"], ["evaluated_at"]):
        db.table("results").create_index(cols, if_not_exists=True)
    db.table("run_cells").create_index(["cell_key"], if_not_exists=True)
    _create_views(db)


def _create_views(db: sqlite_utils.Database) -> None:
    views = {
        "run_results": """
            select rc.run_id as member_run_id, r.* from run_cells rc
            join results r on r.cell_key = rc.cell_key""",
        "eval_stats": """
            select eval_id, service_name, model, count(*) as total,
              sum(passed) as passed, sum(error_kind is not null) as errors,
              round(avg(passed), 4) as pass_rate, round(avg(latency_ms), 1) as mean_latency_ms,
              sum(retried) as retried_runs, sum(coalesce(cost_usd, 0)) as cost_usd
            from results group by eval_id, service_name, model""",
        "run_summary": """
            select ru.run_id, ru.started_at, ru.status, count(r.cell_key) as cells,
              sum(r.passed) as passed, round(avg(r.passed), 4) as pass_rate,
              sum(r.error_kind is not null) as errors
            from runs ru left join run_cells rc on rc.run_id = ru.run_id
            left join results r on r.cell_key = rc.cell_key group by ru.run_id""",
    }
    for name, sql in views.items():
        db.create_view(name, sql, replace=True)


def _migration_2(db: sqlite_utils.Database) -> None:
    """Report views: per-run stats, latest result per cell, failures, flakiness."""
    _create_report_views(db)


def _migration_3(db: sqlite_utils.Database) -> None:
    """Pass rates leave infrastructure errors out (``eval_stats`` and ``run_summary`` too)."""
    _create_report_views(db)


def _create_report_views(db: sqlite_utils.Database) -> None:
    for name, sql in REPORT_VIEWS.items():
        db.create_view(name, sql, replace=True)


_RUN_MEMBERS = """
    from run_cells rc join results r on r.cell_key = rc.cell_key
    join runs ru on ru.run_id = rc.run_id"""
# An infrastructure error (HTTP failure, timeout, agent ERROR/TIMEOUT): not a failure, and
# left out of pass rates (pass_rate = passed / (total - errors)).
_ERR = infra_error_sql("r.")
_COUNTS = f"""count(r.cell_key) as total, coalesce(sum(r.passed), 0) as passed,
          count(r.cell_key) - coalesce(sum(r.passed), 0) - coalesce(sum({_ERR}), 0) as failed,
          coalesce(sum({_ERR}), 0) as errors,
          round(1.0 * sum(r.passed) / nullif(count(r.cell_key) - sum({_ERR}), 0), 4) as pass_rate"""
_COST = "round(sum(coalesce(r.cost_usd, 0) + coalesce(r.judge_cost_usd, 0)), 6) as cost_usd"

#: Views of migrations 2 and 3 (documented in docs/store.md with example queries).
REPORT_VIEWS: dict[str, str] = {
    # One row per eval × service × model over every stored result (replaces migration 1's).
    "eval_stats": f"""
        select r.eval_id, r.service_name, r.model, count(*) as total, sum(r.passed) as passed,
          sum({_ERR}) as errors,
          round(1.0 * sum(r.passed) / nullif(count(*) - sum({_ERR}), 0), 4) as pass_rate,
          round(avg(r.latency_ms), 1) as mean_latency_ms, sum(r.retried) as retried_runs,
          {_COST}
        from results r group by r.eval_id, r.service_name, r.model""",
    # One row per run (replaces migration 1's).
    "run_summary": f"""
        select ru.run_id, ru.started_at, ru.status, count(r.cell_key) as cells,
          sum(r.passed) as passed,
          round(1.0 * sum(r.passed) / nullif(count(r.cell_key) - sum({_ERR}), 0), 4) as pass_rate,
          sum({_ERR}) as errors
        from runs ru left join run_cells rc on rc.run_id = ru.run_id
        left join results r on r.cell_key = rc.cell_key group by ru.run_id""",
    # One row per run × eval × service × model.
    "run_eval_stats": f"""
        select rc.run_id, ru.started_at, r."group", r.eval_id, r.service_name, r.model,
          {_COUNTS},
          round(avg(r.latency_ms), 1) as mean_latency_ms, sum(r.retried) as retried_runs,
          sum(coalesce(r.attempt_count, 0)) as total_attempts,
          sum(coalesce(r.prompt_tokens, 0) + coalesce(r.judge_prompt_tokens, 0)) as input_tokens,
          sum(coalesce(r.completion_tokens, 0) + coalesce(r.judge_completion_tokens, 0))
            as output_tokens,
          {_COST}
        {_RUN_MEMBERS}
        group by rc.run_id, r."group", r.eval_id, r.service_name, r.model""",
    # One row per run: results, passes, failures, errors, pass rate, cost.
    "run_pass_rates": f"""
        select ru.run_id, ru.started_at, ru.finished_at, ru.status, ru.kind,
          {_COUNTS},
          coalesce({_COST.replace(" as cost_usd", "")}, 0) as cost_usd
        from runs ru left join run_cells rc on rc.run_id = ru.run_id
        left join results r on r.cell_key = rc.cell_key
        group by ru.run_id""",
    # The most recent result of every (eval, service, model, case, trial), any run.
    "latest_results": """
        select * from (
          select r.*, row_number() over (
            partition by r.eval_id, r.service_name, r.model, r.case_id, r.run_index
            order by r.evaluated_at desc, r.cell_key desc) as recency
          from results r)
        where recency = 1""",
    # Every failing or erroring result, with the run it belongs to.
    "failures": f"""
        select rc.run_id, r.eval_id, r.service_name, r.model, r.case_id, r.run_index,
          coalesce(r.status, case when r.error_kind is not null then 'ERROR' else 'FAIL' end)
            as status,
          {_ERR} as is_error, r.error_kind, r.failure_reason, r.failure_category,
          r.suggested_fix, r.score, r.output, r.evaluated_at
        {_RUN_MEMBERS}
        where not coalesce(r.passed, 0)""",
    # Per run × eval × service × model × case, over trials without an infrastructure error.
    "case_flakiness": f"""
        select run_id, eval_id, service_name, model, case_id, trials, errors, passed,
          case when trials = errors then 'NO RESULT' when passed = trials - errors then 'STABLE'
               when passed = 0 then 'BROKEN' else 'FLAKY' end as verdict,
          round(2.0 * min(passed, trials - errors - passed) / nullif(trials - errors, 0), 4)
            as flakiness
        from (
          select rc.run_id, r.eval_id, r.service_name, r.model, r.case_id, count(*) as trials,
            sum({_ERR}) as errors, sum(r.passed) as passed
          {_RUN_MEMBERS}
          group by rc.run_id, r.eval_id, r.service_name, r.model, r.case_id)""",
}


def _migration_4(db: sqlite_utils.Database) -> None:
    """Results of a run in zig_eval's sort order straight from an index.

    ``runs.json`` lists a run's results sorted by (group, eval, service, trial,
    case, model); without this index SQLite sorts them in a temp B-tree, a large
    share of that report's time. It replaces the ``(run_id)`` index, its prefix, so
    writes maintain no more indexes than before.
    """
    db.conn.execute("drop index if exists idx_results_run_id")
    db.conn.execute(
        "create index if not exists idx_results_run_seed_order on results "
        '(run_id, "group", eval_id, service_name, run_index, case_id, model)'
    )


def _migration_5(db: sqlite_utils.Database) -> None:
    """Agent rows spell tool-call arguments ``arguments``, as chat rows do (was ``args``)."""
    rows = db.conn.execute(
        "select cell_key, tool_calls from results where kind = 'agent' and tool_calls like '%\"args\"%'"
    ).fetchall()
    for key, text in rows:
        calls = json.loads(text)
        renamed = [{"arguments": c.pop("args", None), **c} if isinstance(c, dict) else c for c in calls]
        db.conn.execute("update results set tool_calls = ? where cell_key = ?",
                        [json.dumps(renamed, ensure_ascii=False, sort_keys=True), key])


def _migration_6(db: sqlite_utils.Database) -> None:
    """Cell claims: which run is sending a cell, until when (unix seconds)."""
    db.conn.execute(
        "create table if not exists claims (cell_key text primary key, run_id text not null, "
        "expires_at real not null)"
    )
    db.conn.execute("create index if not exists idx_claims_run_id on claims (run_id)")


def _migration_7(db: sqlite_utils.Database) -> None:
    """``runs.exit_code`` (what the invocation exited with, for sweeps on any launcher), and what
    zrb's experiment.json records of an agent run: the CLI's ``--version`` and the case dirs."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(runs)")}
    for name, kind in (("exit_code", "integer"), ("agent_cli_version", "text"), ("agent_case_dirs", "text")):
        if name not in columns:
            db.conn.execute(f"alter table runs add column {name} {kind}")


def _migration_8(db: sqlite_utils.Database) -> None:
    """No index of claims by run: a claim now ends when its result is stored, so the table holds
    only the cells in flight (and a run's infrastructure errors until it ends), and the statements
    by run (renewal, release) read a few hundred rows. The index cost every claim and every
    stored result a third B-tree update."""
    db.conn.execute("drop index if exists idx_claims_run_id")


def _migration_9(db: sqlite_utils.Database) -> None:
    """``results.reply_model``: the model a reply named. ``model`` is the model asked for, so an
    endpoint answering with a dated snapshot (``m1-2024-08-06`` for ``m1``) keeps one target.
    Chat rows stored before named the reply's model in ``model``: it moves to ``reply_model``."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    if "reply_model" in columns:
        return
    db.conn.execute("alter table results add column reply_model text")
    db.conn.execute("update results set reply_model = model, model = requested_model where kind = 'chat'"
                    " and requested_model is not null and model is not requested_model")


def _migration_10(db: sqlite_utils.Database) -> None:
    """``results.reasoning`` and ``results.reasoning_tokens``: a reasoning model's thinking, taken
    out of the scored answer, and the completion tokens it took."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    for name, kind in (("reasoning", "text"), ("reasoning_tokens", "integer")):
        if name not in columns:
            db.conn.execute(f"alter table results add column {name} {kind}")


def _migration_11(db: sqlite_utils.Database) -> None:
    """``results.ttft_ms``, ``first_answer_ms`` and ``output_tps``: what a user of a streamed
    answer waits for (time to the first token, to the first answer token after the thinking)
    and how fast the rest comes."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    for name in ("ttft_ms", "first_answer_ms", "output_tps"):
        if name not in columns:
            db.conn.execute(f"alter table results add column {name} real")


def _migration_12(db: sqlite_utils.Database) -> None:
    """``results.cached``, ``cached_latency_ms`` and ``saved_usd``: an answer taken from the response
    cache (1), the latency it had when it was fetched, and what sending it again would have cost."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    for name, kind in (("cached", "integer"), ("cached_latency_ms", "real"), ("saved_usd", "real")):
        if name not in columns:
            db.conn.execute(f"alter table results add column {name} {kind}")


def _migration_13(db: sqlite_utils.Database) -> None:
    """``batches``: every batch job sent to a provider (``service.batch.enabled``), recorded before
    it is created, so a rerun adopts it instead of paying again; ``results.batched``: 1 for a cell
    answered through one."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    if "batched" not in columns:
        db.conn.execute("alter table results add column batched integer")
    db.table("batches").create(
        {
            "batch_key": str,  # ours; also in the provider batch's metadata (evalhydra_batch)
            "run_id": str,
            "service": str,
            "endpoint": str,  # the API base, without credentials
            "api_key_env": str,  # the variable holding the key (never the key)
            "status": str,  # submitting, the provider's; done: every cell stored; lost: unknown to it
            "batch_id": str,
            "input_file_id": str,
            "output_file_id": str,
            "error_file_id": str,
            "custom_ids": str,  # JSON list: cell keys (a judge call: key#n)
            "lines": int,
            "request_counts": str,
            "message": str,
            "output": str,  # the output file, kept until every cell of the batch is stored
            "errors": str,  # the error file, likewise
            "submitted_at": float,  # epoch seconds
            "collected_at": float,  # epoch seconds: when output and errors were downloaded into the row
            "created_at": str,
            "updated_at": str,
        },
        pk="batch_key",
        if_not_exists=True,
    )


def _migration_14(db: sqlite_utils.Database) -> None:
    """``run_summaries``: a finished run's per-target totals and case histograms (JSON), saved when it
    ends, so the viewer lists and opens a run of any size without a pass over its results; and an
    index of results by (eval, case), the viewer's grid order."""
    db.table("run_summaries").create(
        {"run_id": str, "cells": int, "summary": str, "saved_at": str}, pk="run_id", if_not_exists=True)
    # The viewer's grid pages a run's cases in order, and its case page reads one case's trials.
    db.conn.execute("create index if not exists idx_results_eval_case on results (eval_id, case_id)")
    # A result written over a stored one (a retried error, a rejudge, a merge) makes the summaries of
    # the runs holding that cell stale: they are dropped, and the viewer computes them again. A
    # REPLACE deletes the old row, which fires the delete trigger on connections with
    # recursive_triggers on (every writing connection: :func:`evalhydra.store.db.connect`); new
    # rows fire nothing.
    for event in ("delete", "update"):
        db.conn.execute(f"""create trigger if not exists run_summaries_stale_on_{event}
          after {event} on results begin delete from run_summaries where run_id in
            (select run_id from run_cells where cell_key = old.cell_key); end""")


def _migration_18(db: sqlite_utils.Database) -> None:
    """``case_fractions``: a finished run's per-case counts (results, trials, passes, scored), its
    median time to first token and a digest of each trial's verdict and output, saved when it ends
    (with ``case_fraction_runs`` marking which runs have them), so comparing two large runs pairs
    their cases without a pass over their results."""
    db.conn.execute("""create table if not exists case_fractions (run_id text not null, "group" text,
      eval_id text not null, service_name text, model text, case_id text not null, results integer,
      trials integer, passed integer, scored integer, ttft_ms real, digest text)""")
    db.conn.execute('create index if not exists idx_case_fractions on case_fractions'
                    ' (run_id, "group", eval_id, case_id)')
    db.table("case_fraction_runs").create({"run_id": str, "cells": int}, pk="run_id", if_not_exists=True)


def _trajectory_view(path: str, columns: dict[str, str]) -> str:
    """A view of one list of each result's ``details.trajectory`` (``path``), a row per entry, with
    ``columns`` (name -> the entry's key) beside the result's identity."""
    picked = ", ".join(f"json_extract(e.value, '$.{key}') as {name}" for name, key in columns.items())
    return f"""
        select rc.run_id, r.cell_key, r.eval_id, r.service_name, r.model, r.case_id, r.run_index, {picked},
          json_extract(r.details, '$.trajectory.stop_reason') as stop_reason
        from run_cells rc join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id,
          json_each(case when json_valid(r.details)
            then json_extract(r.details, '$.trajectory.{path}') end) e"""


#: Views of migration 19: a tool loop's path, read from each result's ``details.trajectory``:
#: ``turns``, a row per request of a loop; ``tool_calls``, a row per call, in the model's order.
TRAJECTORY_VIEWS: dict[str, str] = {
    "turns": _trajectory_view("turns", {k: k for k in (
        "turn", "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "latency_ms", "calls",
        "error_kind")}),
    "tool_calls": _trajectory_view("tool_calls", {
        "turn": "turn", "call_index": "index", "provider_id": "provider_id", "call_id": "id", "name": "name",
        "original_name": "original_name",
        "arguments": "arguments", "parsed_arguments": "parsed", "parallel": "parallel", "result": "result",
        "result_cut": "result_cut", "result_sha256": "result_sha256", "error_kind": "error_kind",
        "latency_ms": "latency_ms"}),
}


def _migration_19(db: sqlite_utils.Database) -> None:
    """Views of a tool loop's path (``turns``, ``tool_calls``), read from each result's details:
    they follow the version each run holds, as every other view does."""
    for name, sql in TRAJECTORY_VIEWS.items():
        db.create_view(name, sql, replace=True)


def _migration_20(db: sqlite_utils.Database) -> None:
    """``labels``: people's verdicts on outputs, keyed to the case and the output judged (its
    SHA-256), so they survive reruns and rejudges that keep the output; what ``calibrate``
    measures judges against."""
    db.conn.execute("""create table if not exists labels (id integer primary key, eval_id text not null,
      case_id text not null, output_sha256 text not null, label text not null, score real,
      labeller text not null default '', labelled_at text, note text,
      unique (eval_id, case_id, output_sha256, labeller))""")


#: Views of migration 15: an OpenAI Evals suite's criteria (``openai_graders``), by name.
GRADER_VIEWS: dict[str, str] = {
    # One row per run × result × criterion: its score and verdict.
    "grader_scores": """
        select rc.run_id, r.cell_key, r."group", r.eval_id, r.service_name, r.model, r.case_id,
          r.run_index, g.key as grader, json_extract(g.value, '$.score') as score,
          json_extract(g.value, '$.passed') as passed
        from run_cells rc join results r on r.cell_key = rc.cell_key,
          json_each(case when json_valid(r.grader_scores) then r.grader_scores else '{}' end) g
        where r.grader_scores is not null""",
    # One row per run × eval × service × model × criterion: its pass rate and mean score.
    "grader_stats": """
        select run_id, eval_id, service_name, model, grader, count(*) as results,
          sum(passed) as passed, round(1.0 * sum(passed) / count(*), 4) as pass_rate,
          round(avg(score), 4) as mean_score
        from grader_scores group by run_id, eval_id, service_name, model, grader""",
}


def _migration_15(db: sqlite_utils.Database) -> None:
    """``results.grader_scores``: each OpenAI Evals criterion's ``{"score", "passed"}`` by name
    (JSON), and the ``grader_scores`` and ``grader_stats`` views over it."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    if "grader_scores" not in columns:
        db.conn.execute("alter table results add column grader_scores text")
    for name, sql in GRADER_VIEWS.items():
        db.create_view(name, sql, replace=True)


def _migration_16(db: sqlite_utils.Database) -> None:
    """The grader views skip a ``grader_scores`` that is not JSON (a NaN written before scores were
    checked), rather than failing every query over them."""
    for name, sql in GRADER_VIEWS.items():
        db.create_view(name, sql, replace=True)


#: How a run's membership names the version it holds: the row of ``results`` its run wrote.
VERSION_JOIN = "r.cell_key = rc.cell_key and r.run_id = rc.result_run_id"


def latest_version_sql(alias: str = "results.") -> str:
    """SQL true when the ``results`` row ``alias`` (the table alias with its dot) is the newest
    version of its cell: the latest ``evaluated_at``, then the larger run id (an order every
    merge of the same rows agrees on)."""
    return (f"not exists (select 1 from results newer where newer.cell_key = {alias}cell_key and "
            f"(coalesce(newer.evaluated_at, ''), newer.run_id) > (coalesce({alias}evaluated_at, ''), "
            f"{alias}run_id))")


def _history_views() -> dict[str, str]:
    """Every view over results, as migration 17 leaves them: a run's views go through the version
    its membership names; the views over the whole store read each cell's newest version."""
    members = f"""
    from run_cells rc join results r on {VERSION_JOIN}
    join runs ru on ru.run_id = rc.run_id"""
    views = {name: sql.replace(_RUN_MEMBERS, members) for name, sql in REPORT_VIEWS.items()}
    left_join = "left join results r on r.cell_key = rc.cell_key"
    views = {name: sql.replace(left_join, f"left join results r on {VERSION_JOIN}")
             for name, sql in views.items()}
    views["eval_stats"] = views["eval_stats"].replace(
        "from results r group by", f"from results r where {latest_version_sql('r.')} group by")
    views["latest_results"] = """
        select * from (
          select r.*, row_number() over (
            partition by r.eval_id, r.service_name, r.model, r.case_id, r.run_index
            order by r.evaluated_at desc, r.run_id desc, r.cell_key desc) as recency
          from results r)
        where recency = 1"""
    views["run_results"] = f"""
            select rc.run_id as member_run_id, r.* from run_cells rc
            join results r on {VERSION_JOIN}"""
    views["grader_scores"] = GRADER_VIEWS["grader_scores"].replace(
        "join results r on r.cell_key = rc.cell_key", f"join results r on {VERSION_JOIN}")
    views["grader_stats"] = GRADER_VIEWS["grader_stats"]
    return views


def _migration_17(db: sqlite_utils.Database) -> None:
    """Results are history. A cell keeps every version a run wrote (``results`` unique on
    ``(cell_key, run_id)``, no longer keyed by cell), and ``run_cells.result_run_id`` names the
    version each run produced or reused, so a later run never changes what an earlier one
    measured. The saved run summaries' drop-on-overwrite triggers go: a finished run's rows no
    longer change. Runs recorded before keep the rows they have now (their one version)."""
    conn = db.conn
    columns = conn.execute("pragma table_info(results)").fetchall()
    indexes = [sql for (sql,) in conn.execute(
        "select sql from sqlite_master where type = 'index' and tbl_name = 'results' and sql is not null")]
    names = ", ".join(f'"{c[1]}"' for c in columns)
    declared = ", ".join(f'"{c[1]}" {c[2]}' for c in columns)
    conn.execute(f"create table results_history ({declared})")
    conn.execute(f"insert into results_history (rowid, {names}) select rowid, {names} from results")
    conn.execute("drop table results")  # and its triggers: a finished run's summary stays right
    conn.execute("pragma legacy_alter_table = on")  # the views name "results": leave them be
    try:
        conn.execute("alter table results_history rename to results")
    finally:
        conn.execute("pragma legacy_alter_table = off")
    for sql in indexes:
        conn.execute(sql)
    conn.execute("create unique index if not exists idx_results_version on results (cell_key, run_id)")
    run_columns = {row[1] for row in conn.execute("pragma table_info(run_cells)")}
    if "result_run_id" not in run_columns:
        conn.execute("alter table run_cells add column result_run_id text")
    conn.execute("update run_cells set result_run_id = (select r.run_id from results r"
                 " where r.cell_key = run_cells.cell_key)")
    for name, sql in _history_views().items():
        db.create_view(name, sql, replace=True)


#: Views of migration 21: each judge against people's labels, in plain SQL (what ``calibrate``
#: counts): ``judge_labels``, a row per labelled output × judge (service, model and matcher
#: settings) with the latest label and the judge's newest verdict; ``judge_agreement``, per judge,
#: the confusion counts and error rates.
JUDGE_VIEWS: dict[str, str] = {
    "judge_labels": f"""
        select eval_id, judge_service, judge_model, judge_settings, case_id, output, human_passed,
          judge_passed, labeller, run_id, evaluated_at from (
          select *, row_number() over (
              partition by eval_id, judge_service, judge_model, judge_settings, case_id, output
              order by evaluated_at desc, run_id desc) as recency from (
            select r.eval_id, coalesce(r.judge_service, '') as judge_service, r.judge_model,
              coalesce((select j.value from runs ru, json_each(case when json_valid(ru.judges)
                then ru.judges else '{{}}' end) j where ru.run_id = r.run_id and j.key = r.eval_id), '')
                as judge_settings,
              r.case_id, r.output, l.label = 'PASS' as human_passed,
              case when r.passed then 1 else 0 end as judge_passed, l.labeller, r.run_id, r.evaluated_at
            from labels l join results r on r.eval_id = l.eval_id and r.case_id = l.case_id
              and r.output = l.output
            where l.id = (select l2.id from labels l2 where l2.eval_id = l.eval_id and l2.case_id = l.case_id
                and l2.output_sha256 = l.output_sha256 order by l2.labelled_at desc, l2.id desc limit 1)
              and r.judge_model is not null and not {infra_error_sql("r.")}))
        where recency = 1""",
    "judge_agreement": """
        select eval_id, judge_service, judge_model, judge_settings, count(*) as labels,
          sum(human_passed and judge_passed) as true_pos, sum(human_passed and not judge_passed) as false_neg,
          sum(not human_passed and not judge_passed) as true_neg,
          sum(not human_passed and judge_passed) as false_pos,
          round(1.0 * sum(human_passed and judge_passed) / nullif(sum(human_passed), 0), 4) as sensitivity,
          round(1.0 * sum(not human_passed and not judge_passed) / nullif(sum(not human_passed), 0), 4)
            as specificity,
          round(1.0 * sum(human_passed = judge_passed) / count(*), 4) as agreement
        from judge_labels group by eval_id, judge_service, judge_model, judge_settings""",
}


def _migration_21(db: sqlite_utils.Database) -> None:
    """``labels.output``: the labelled output's text beside its hash (filled from the stored results),
    so plain SQL can join labels to results; ``runs.judges``: per eval a judge scored, the
    fingerprint of its matcher settings (rubric, prompt, passing score…), so verdicts given under
    other settings count as another judge's; and the ``judge_labels`` and ``judge_agreement`` views."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(labels)")}
    if "output" not in columns:
        db.conn.execute("alter table labels add column output text")
    if "judges" not in {row[1] for row in db.conn.execute("pragma table_info(runs)")}:
        db.conn.execute("alter table runs add column judges text")
    for label_id, eval_id, case_id, digest in db.conn.execute(
            "select id, eval_id, case_id, output_sha256 from labels where output is null").fetchall():
        db.conn.execute("update labels set output = ? where id = ?",
                        [stored_output(db.conn, eval_id, case_id, digest), label_id])
    for name, sql in JUDGE_VIEWS.items():
        db.create_view(name, sql, replace=True)


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _migration_1, _migration_2, _migration_3, _migration_4, _migration_5, _migration_6, _migration_7,
    _migration_8, _migration_9, _migration_10, _migration_11, _migration_12, _migration_13,
    _migration_14, _migration_15, _migration_16, _migration_17, _migration_18, _migration_19,
    _migration_20, _migration_21,
]
SCHEMA_VERSION = len(MIGRATIONS)
