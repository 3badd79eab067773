"""The store's tables and numbered migrations (``PRAGMA user_version``), in order; the views are
:mod:`evalhydra.store.views`, made after any migration runs.

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

A migration never changes once released, and holds its own SQL (none calls application code);
a new schema is a new migration.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable

import sqlite_utils

__all__ = ["MIGRATIONS", "RESULT_COLUMNS", "SCHEMA_VERSION"]

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
    "finish_reason": str,
    "response_id": str,
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

def _migration_2(db: sqlite_utils.Database) -> None:
    """Report views: per-run stats, latest result per cell, failures, flakiness (now made by
    :func:`~evalhydra.store.views.create_views` after every migration)."""

def _migration_3(db: sqlite_utils.Database) -> None:
    """Pass rates leave infrastructure errors out (``eval_stats`` and ``run_summary`` too): views
    only, now made by :func:`~evalhydra.store.views.create_views`."""

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

def _migration_15(db: sqlite_utils.Database) -> None:
    """``results.grader_scores``: each OpenAI Evals criterion's ``{"score", "passed"}`` by name
    (JSON), and the ``grader_scores`` and ``grader_stats`` views over it."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    if "grader_scores" not in columns:
        db.conn.execute("alter table results add column grader_scores text")

def _migration_16(db: sqlite_utils.Database) -> None:
    """The grader views skip a ``grader_scores`` that is not JSON (a NaN written before scores were
    checked), rather than failing every query over them. Views only, now made by
    :func:`~evalhydra.store.views.create_views`."""

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

def _migration_19(db: sqlite_utils.Database) -> None:
    """Views of a tool loop's path (``turns``, ``tool_calls``), read from each result's details:
    they follow the version each run holds, as every other view does. Views only, now made by
    :func:`~evalhydra.store.views.create_views`."""

def _migration_20(db: sqlite_utils.Database) -> None:
    """``labels``: people's verdicts on outputs, keyed to the case and the output judged (its
    SHA-256), so they survive reruns and rejudges that keep the output; what ``calibrate``
    measures judges against."""
    db.conn.execute("""create table if not exists labels (id integer primary key, eval_id text not null,
      case_id text not null, output_sha256 text not null, label text not null, score real,
      labeller text not null default '', labelled_at text, note text,
      unique (eval_id, case_id, output_sha256, labeller))""")

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
                        [_output_with_digest(db.conn, eval_id, case_id, digest), label_id])

def _migration_22(db: sqlite_utils.Database) -> None:
    """``side`` in the ``turns`` and ``tool_calls`` views: who acted, the agent or a simulated user
    (a conversation's cells). Views only, made by :func:`~evalhydra.store.views.create_views`."""


def _migration_23(db: sqlite_utils.Database) -> None:
    """``simulator_audits``: people's audits of simulated users (did the simulator break the task?),
    keyed to the case and the transcript read (its SHA-256), as ``labels`` are to outputs."""
    db.conn.execute("""create table if not exists simulator_audits (id integer primary key,
      eval_id text not null, case_id text not null, transcript_sha256 text not null,
      broke integer not null, kind text, labeller text not null default '', labelled_at text, note text,
      unique (eval_id, case_id, transcript_sha256, labeller))""")


def _migration_24(db: sqlite_utils.Database) -> None:
    """``results.finish_reason`` and ``results.response_id``: how a chat cell's reply ended and the
    id the service gave it (OpenTelemetry's ``gen_ai.response.finish_reasons`` and ``.id``)."""
    columns = {row[1] for row in db.conn.execute("pragma table_info(results)")}
    for name in ("finish_reason", "response_id"):
        if name not in columns:
            db.conn.execute(f"alter table results add column {name} text")


def _migration_25(db: sqlite_utils.Database) -> None:
    """``probes``: each check of ``evalhydra probe tools`` (pass, fail or n/a, why, the raw evidence),
    keyed by probe and check, with the ``probe_latest`` view; the ``turns`` view gains each request's
    reply model, finish reason, id and reasoning tokens (views made by
    :func:`~evalhydra.store.views.create_views`)."""
    db.conn.execute("""create table if not exists probes (probe_id text not null, probed_at text,
      service text, model text, endpoint text, api text, check_id text not null, status text not null,
      detail text, evidence text, primary key (probe_id, check_id))""")


def _output_with_digest(conn: sqlite3.Connection, eval_id: str, case_id: str, digest: str) -> str | None:
    """Migration 21's own lookup, frozen: the case's stored output whose SHA-256 (of its UTF-8,
    lone surrogates kept) is ``digest``, "" for an empty one, None when none is."""
    for (output,) in conn.execute("select distinct output from results where eval_id = ? and case_id = ?",
                                  [eval_id, case_id]):
        text = output or ""
        if hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() == digest:
            return text
    return None


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _migration_1, _migration_2, _migration_3, _migration_4, _migration_5, _migration_6, _migration_7,
    _migration_8, _migration_9, _migration_10, _migration_11, _migration_12, _migration_13,
    _migration_14, _migration_15, _migration_16, _migration_17, _migration_18, _migration_19,
    _migration_20, _migration_21, _migration_22, _migration_23, _migration_24,
    _migration_25,
]
SCHEMA_VERSION = len(MIGRATIONS)
