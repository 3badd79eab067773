"""The store's views: what ``evalhydra query`` and docs/store.md read, over every version a run
holds (the tables and their migrations are :mod:`evalhydra.store.schema`).

Views are not migrations: :func:`create_views` makes every one, as its current SQL says, after any
migration has run; a view only reads the tables, so replacing one changes no stored row.
"""

from __future__ import annotations

import sqlite_utils

from evalhydra.store.rows import infra_error_sql

__all__ = ["GRADER_VIEWS", "JUDGE_VIEWS", "REPORT_VIEWS", "TRAJECTORY_VIEWS", "VERSION_JOIN", "VIEWS",
           "create_views", "latest_version_sql"]


#: Views of migration 1 (replaced by migration 2's).
BASE_VIEWS: dict[str, str] = {
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
#: Migration 22 adds ``side``: ``agent``, or ``user`` for a simulated user's turns (None before).
#: Migration 25 adds each request's reply ``model``, ``finish_reason``, ``response_id``, ``reasoning_tokens``.
TRAJECTORY_VIEWS: dict[str, str] = {
    "turns": _trajectory_view("turns", {k: k for k in (
        "turn", "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "latency_ms", "calls",
        "error_kind", "side", "model", "finish_reason", "response_id", "reasoning_tokens")}),
    "tool_calls": _trajectory_view("tool_calls", {
        "turn": "turn", "call_index": "index", "provider_id": "provider_id", "call_id": "id", "name": "name",
        "original_name": "original_name",
        "arguments": "arguments", "parsed_arguments": "parsed", "parallel": "parallel", "result": "result",
        "result_cut": "result_cut", "result_sha256": "result_sha256", "error_kind": "error_kind",
        "latency_ms": "latency_ms", "side": "side"}),
}


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


#: Migration 25: each endpoint's latest probe (``evalhydra probe tools``), a row per check.
PROBE_VIEWS: dict[str, str] = {
    "probe_latest": """
        select p.* from probes p join (select service, model, endpoint, api, max(probed_at) as probed_at
          from probes group by service, model, endpoint, api) latest
          on p.service is latest.service and p.model is latest.model and p.endpoint is latest.endpoint
          and p.api is latest.api and p.probed_at = latest.probed_at""",
}


def _all_views() -> dict[str, str]:
    """Every view, in the order the migrations made them: a later one replaces an earlier one of
    the same name (migration 2's ``eval_stats`` replaced migration 1's; migration 17's made every
    view over a run read the version its membership names)."""
    views: dict[str, str] = {}
    for made in (BASE_VIEWS, REPORT_VIEWS, GRADER_VIEWS, _history_views(), TRAJECTORY_VIEWS, JUDGE_VIEWS,
                 PROBE_VIEWS):
        views.update(made)
    return views


#: Every view by name, as :func:`create_views` makes it.
VIEWS: dict[str, str] = _all_views()


def create_views(db: sqlite_utils.Database) -> None:
    """Make (or replace) every view of :data:`VIEWS`."""
    for name, sql in VIEWS.items():
        db.create_view(name, sql, replace=True)
