"""Tests for evalhydra.reports.zig: zig_eval's JSON artifacts and text report."""

from __future__ import annotations

import json
import random
import sqlite3
from typing import Any

import pytest

from evalhydra.reports.zig import format_text_report
from tests.reference.zig import (
    baseline_comparisons,
    compute_stats,
    evals_json,
    evals_json_sql,
    latency_ms_int,
    run_result_json,
    runs_json,
    text_report,
)

RUN_KEYS = [
    "group",
    "eval_id",
    "service_name",
    "model",
    "run_index",
    "case_id",
    "output",
    "passed",
    "score",
    "failure_reason",
    "status_code",
    "attempt_count",
    "retried",
    "judge_attempt_count",
    "judge_retried",
    "judge_status_code",
    "latency_ms",
]
STATS_KEYS = [
    "counts",
    "pass_rate",
    "confidence_level",
    "pass_rate_ci_low",
    "pass_rate_ci_high",
    "latency",
    "retries",
]
SEED_COMPARISON_KEYS = [
    "group",
    "eval_id",
    "target_kind",
    "service_name",
    "baseline_name",
    "candidate_name",
    "baseline_pass_rate",
    "candidate_pass_rate",
    "delta_pass_rate",
    "delta_ci_low",
    "delta_ci_high",
    "confidence_level",
]
PAIRED_KEYS = [
    "n_cases",
    "trials_max",
    "difference",
    "ci_low",
    "ci_high",
    "method",
    "test",
    "p_value",
    "p_holm",
    "min_p",
    "std_error",
    "mcnemar_p",
    "regressed",
    "improved",
    "judge_flips",
    "verdict",
]


def row(
    service: str = "svc-a",
    model: str = "m1",
    *,
    case: str = "case-1",
    run: int = 1,
    passed: bool = True,
    latency: float | None = 10,
    group: str = "smoke",
    eval_id: str = "reply_ok",
    retried: bool = False,
    attempts: int | None = 1,
) -> dict[str, Any]:
    """A results row as the store returns it (0/1 ints, extra columns)."""
    return {
        "id": 99,  # extra columns are ignored
        "run_id": "r1",
        "group": group,
        "eval_id": eval_id,
        "service_name": service,
        "model": model,
        "run_index": run,
        "case_id": case,
        "output": "OK" if passed else "",
        "passed": int(passed),
        "score": 1 if passed else 0,
        "failure_reason": None if passed else "output did not exactly match ideal",
        "status_code": 200,
        "attempt_count": attempts,
        "retried": int(retried),
        "judge_attempt_count": 0,
        "judge_retried": None,
        "judge_status_code": None,
        "latency_ms": latency,
        "cost_usd": 0.0,
    }


# --- runs.json ---


def test_run_result_json_keys_types_and_nulls() -> None:
    doc = run_result_json(row(passed=False, latency=12.5, retried=True, attempts=2))
    assert list(doc) == RUN_KEYS
    assert doc["passed"] is False and doc["retried"] is True
    assert isinstance(doc["score"], float) and doc["score"] == 0.0
    assert doc["latency_ms"] == 13  # whole ms, half up
    assert doc["judge_retried"] is False  # a bool, as zig_eval writes it, when no judge ran
    text = json.dumps(doc)
    assert '"judge_status_code": null' in text
    assert '"judge_retried": false' in text


def test_run_result_json_judge_fields() -> None:
    source = row() | {"judge_attempt_count": 2, "judge_retried": 1, "judge_status_code": 200}
    doc = run_result_json(source)
    assert (doc["judge_attempt_count"], doc["judge_retried"], doc["judge_status_code"]) == (
        2,
        True,
        200,
    )


def test_latency_ms_int() -> None:
    assert [latency_ms_int(v) for v in (None, 0, 2.4999, 2.5, 3.5, -4, 7)] == [0, 0, 2, 3, 4, 0, 7]


def test_runs_json_sorted_like_the_seed() -> None:
    rows = [
        row("svc-b", case="a"),
        row("svc-a", "m2", case="b", run=2),
        row("svc-a", "m1", case="b", run=2),
        row("svc-a", case="z", run=1),
        row("svc-a", case="a", run=10),
        row("svc-a", case="a", group="aaa"),
    ]
    doc = runs_json(rows)
    assert list(doc) == ["schema_version", "runs"]
    assert doc["schema_version"] == 2
    order = [(r["group"], r["service_name"], r["run_index"], r["case_id"], r["model"]) for r in doc["runs"]]
    assert order == [
        ("aaa", "svc-a", 1, "a", "m1"),
        ("smoke", "svc-a", 1, "z", "m1"),
        ("smoke", "svc-a", 2, "b", "m1"),
        ("smoke", "svc-a", 2, "b", "m2"),
        ("smoke", "svc-a", 10, "a", "m1"),  # run_index sorts numerically
        ("smoke", "svc-b", 1, "a", "m1"),
    ]


# --- stats ---


def test_compute_stats_seed_latency_and_key_order() -> None:
    rows = [row(latency=v, passed=v != 40) for v in (40, 10, 30, 20)]
    rows[0]["retried"], rows[0]["attempt_count"] = 1, 3
    stats = compute_stats(rows)
    assert list(stats) == STATS_KEYS
    assert list(stats["counts"]) == ["total_runs", "passed", "failed"]
    assert list(stats["latency"]) == ["mean_ms", "p50_ms", "p95_ms"]
    assert list(stats["retries"]) == ["retried_runs", "total_attempts"]
    assert stats["counts"] == {"total_runs": 4, "passed": 3, "failed": 1}
    assert stats["latency"] == {"mean_ms": 25.0, "p50_ms": 20, "p95_ms": 40}
    assert isinstance(stats["latency"]["mean_ms"], float)
    assert stats["retries"] == {"retried_runs": 1, "total_attempts": 6}
    assert stats["pass_rate"] == 0.75
    assert stats["confidence_level"] == 0.95


def test_compute_stats_wilson_seed_numbers() -> None:
    stats = compute_stats([row(), row(passed=False)])
    assert round(stats["pass_rate_ci_low"], 4) == 0.0945
    assert round(stats["pass_rate_ci_high"], 4) == 0.9055


def test_compute_stats_empty() -> None:
    stats = compute_stats([])
    assert stats["counts"] == {"total_runs": 0, "passed": 0, "failed": 0}
    assert stats["pass_rate"] == 0.0
    assert (stats["pass_rate_ci_low"], stats["pass_rate_ci_high"]) == (0.0, 0.0)
    assert stats["latency"] == {"mean_ms": 0.0, "p50_ms": 0, "p95_ms": 0}


# --- evals.json ---


def test_evals_json_first_seen_grouping_and_keys() -> None:
    rows = [
        row("svc-b", "m9", eval_id="later"),
        row("svc-b", "m2"),
        row("svc-a", "m1"),
        row("svc-b", "m1", passed=False),
        row("svc-b", "m9", eval_id="later", passed=False),
    ]
    doc = evals_json(rows)
    assert list(doc) == ["schema_version", "evals"]
    assert [e["eval_id"] for e in doc["evals"]] == ["later", "reply_ok"]
    first = doc["evals"][1]
    assert list(first) == ["group", "eval_id", "stats", "services"]
    assert [s["service_name"] for s in first["services"]] == ["svc-b", "svc-a"]
    service = first["services"][0]
    assert list(service) == ["service_name", "stats", "models"]
    assert [m["model"] for m in service["models"]] == ["m2", "m1"]
    assert list(service["models"][0]) == ["model", "stats"]
    assert first["stats"]["counts"] == {"total_runs": 3, "passed": 2, "failed": 1}
    assert service["stats"]["counts"]["total_runs"] == 2
    assert list(first["stats"]) == STATS_KEYS


def test_evals_json_empty() -> None:
    assert evals_json([]) == {"schema_version": 2, "evals": []}


# --- text report ---

GOLDEN = """\
eval reply_ok group=smoke
  summary: total=3 passed=2 failed=1 pass_rate=66.67% ci95=[20.77%, 93.85%] \
mean_ms=20.00 p50_ms=20 p95_ms=30 retried_runs=1 total_attempts=4
  service svc-a
    summary: total=2 passed=1 failed=1 pass_rate=50.00% ci95=[9.45%, 90.55%] \
mean_ms=20.00 p50_ms=10 p95_ms=30 retried_runs=1 total_attempts=3
    model m1
      summary: total=2 passed=1 failed=1 pass_rate=50.00% ci95=[9.45%, 90.55%] \
mean_ms=20.00 p50_ms=10 p95_ms=30 retried_runs=1 total_attempts=3
  service svc-b
    summary: total=1 passed=1 failed=0 pass_rate=100.00% ci95=[20.65%, 100.00%] \
mean_ms=20.00 p50_ms=20 p95_ms=20 retried_runs=0 total_attempts=1
    model m2
      summary: total=1 passed=1 failed=0 pass_rate=100.00% ci95=[20.65%, 100.00%] \
mean_ms=20.00 p50_ms=20 p95_ms=20 retried_runs=0 total_attempts=1

eval other group=json
  summary: total=1 passed=0 failed=1 pass_rate=0.00% ci95=[0.00%, 79.35%] \
mean_ms=5.00 p50_ms=5 p95_ms=5 retried_runs=0 total_attempts=1
  service svc-a
    summary: total=1 passed=0 failed=1 pass_rate=0.00% ci95=[0.00%, 79.35%] \
mean_ms=5.00 p50_ms=5 p95_ms=5 retried_runs=0 total_attempts=1
    model m1
      summary: total=1 passed=0 failed=1 pass_rate=0.00% ci95=[0.00%, 79.35%] \
mean_ms=5.00 p50_ms=5 p95_ms=5 retried_runs=0 total_attempts=1
"""


def test_text_report_golden() -> None:
    rows = [
        row("svc-a", latency=10),
        row("svc-a", latency=30, passed=False, retried=True, attempts=2),
        row("svc-b", "m2", latency=20),
        row(group="json", eval_id="other", latency=5, passed=False),
    ]
    assert text_report(rows) == GOLDEN
    assert format_text_report(evals_json(rows)) == GOLDEN


def test_text_report_empty() -> None:
    assert text_report([]) == "No eval results.\n"


# --- baseline comparisons ---


def test_service_baseline_seed_numbers_and_keys() -> None:
    rows = [
        row("base", case="c1"),
        row("base", case="c2", passed=False),
        row("cand", case="c1"),
        row("cand", case="c2"),
    ]
    doc = baseline_comparisons(rows, baseline_service="base")
    assert list(doc) == ["schema_version", "baseline_comparisons"]
    (item,) = [c for c in doc["baseline_comparisons"] if c["target_kind"] == "service"]
    assert list(item) == [*SEED_COMPARISON_KEYS, "paired"]
    assert item["service_name"] is None
    assert (item["baseline_name"], item["candidate_name"]) == ("base", "cand")
    assert (item["baseline_pass_rate"], item["candidate_pass_rate"]) == (0.5, 1.0)
    assert item["delta_pass_rate"] == 0.5
    assert round(item["delta_ci_low"], 4) == -0.5631
    assert round(item["delta_ci_high"], 4) == 0.9055
    assert item["confidence_level"] == 0.95
    assert '"service_name": null' in json.dumps(item)


def test_service_baseline_eight_vs_nine_of_ten() -> None:
    rows = [row("base", case=f"c{i}", passed=i < 8) for i in range(10)]
    rows += [row("cand", case=f"c{i}", passed=i < 9) for i in range(10)]
    (item,) = baseline_comparisons(rows, baseline_service="base")["baseline_comparisons"][:1]
    assert round(item["delta_ci_low"], 4) == -0.3475
    assert round(item["delta_ci_high"], 4) == 0.4920
    paired = item["paired"]
    assert list(paired) == PAIRED_KEYS
    assert paired["n_cases"] == 10
    assert paired["difference"] == pytest.approx(0.1)
    assert paired["improved"] == ["c8"] and paired["regressed"] == []
    assert paired["mcnemar_p"] == 1.0
    assert paired["method"] == "newcombe-paired"
    assert paired["ci_low"] <= paired["difference"] <= paired["ci_high"]


def test_evals_without_the_baseline_are_skipped() -> None:
    rows = [
        row("cand", eval_id="no-base"),
        row("other", eval_id="no-base"),
        row("base"),
        row("cand"),
        row("other"),
    ]
    items = baseline_comparisons(rows, baseline_service="base")["baseline_comparisons"]
    service_items = [c for c in items if c["target_kind"] == "service"]
    assert [(c["eval_id"], c["candidate_name"]) for c in service_items] == [
        ("reply_ok", "cand"),
        ("reply_ok", "other"),
    ]


def test_model_baseline_defaults_to_first_seen_model() -> None:
    rows = [
        row("svc", "m-first", case="c1"),
        row("svc", "m-first", case="c2"),
        row("svc", "m-second", case="c1", passed=False),
        row("svc", "m-second", case="c2"),
        row("svc", "m-third", case="c1"),
        row("solo", "only-model"),
    ]
    items = baseline_comparisons(rows, baseline_service=None)["baseline_comparisons"]
    assert all(c["target_kind"] == "model" for c in items)
    assert [(c["service_name"], c["baseline_name"], c["candidate_name"]) for c in items] == [
        ("svc", "m-first", "m-second"),
        ("svc", "m-first", "m-third"),
    ]
    second = items[0]
    assert list(second) == [*SEED_COMPARISON_KEYS, "paired"]
    assert second["delta_pass_rate"] == -0.5
    assert second["paired"]["regressed"] == ["c1"]
    assert second["paired"]["n_cases"] == 2
    assert items[1]["paired"]["n_cases"] == 1  # only c1 is shared


def test_model_baseline_override_and_missing_model() -> None:
    rows = [row("svc", "m1"), row("svc", "m2"), row("other", "m1"), row("other", "m3")]
    items = baseline_comparisons(
        rows, baseline_service=None, baseline_models={"svc": "m2", "other": "absent"}
    )["baseline_comparisons"]
    assert [(c["service_name"], c["baseline_name"], c["candidate_name"]) for c in items] == [
        ("svc", "m2", "m1")
    ]


def test_services_come_before_models() -> None:
    rows = [row("base", "m1"), row("base", "m2"), row("cand", "m1")]
    items = baseline_comparisons(rows, baseline_service="base")["baseline_comparisons"]
    assert [c["target_kind"] for c in items] == ["service", "model"]


def test_paired_is_null_without_shared_keys_or_with_ambiguous_keys() -> None:
    disjoint = [row("base", case="c1"), row("cand", case="c2")]
    (item,) = baseline_comparisons(disjoint, baseline_service="base")["baseline_comparisons"]
    assert item["paired"] is None
    assert '"paired": null' in json.dumps(item)
    # "base" ran two models on the same (case, run): no one-to-one pairing
    ambiguous = [row("base", "m1"), row("base", "m2"), row("cand", "m1")]
    items = baseline_comparisons(ambiguous, baseline_service="base")["baseline_comparisons"]
    assert items[0]["target_kind"] == "service" and items[0]["paired"] is None


def test_repeated_trials_of_one_case_are_one_cluster() -> None:
    """Three trials of one case are one observation of the case, not three coins."""
    rows = [row("base", run=r, passed=True) for r in (1, 2, 3)]
    rows += [row("cand", run=r, passed=False) for r in (1, 2, 3)]
    (item,) = baseline_comparisons(rows, baseline_service="base")["baseline_comparisons"]
    paired = item["paired"]
    assert (paired["n_cases"], paired["trials_max"], paired["difference"]) == (1, 3, -1.0)
    assert paired["regressed"] == ["case-1"] and paired["mcnemar_p"] is None
    # one case tells nothing about other cases: no verdict
    assert (paired["ci_low"], paired["ci_high"], paired["p_value"]) == (-1.0, 1.0, 0.5)
    assert paired["verdict"] == "cannot reach p < 0.05 with 1 case"


# --- evals.json in SQL ---

COLUMNS = [*RUN_KEYS, "run_id"]


def make_db(rows: list[dict[str, Any]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    quoted = ", ".join(f'"{c}"' for c in COLUMNS)
    conn.execute(f"CREATE TABLE results ({quoted})")
    marks = ", ".join("?" for _ in COLUMNS)
    conn.executemany(
        f"INSERT INTO results ({quoted}) VALUES ({marks})",
        [[r[c] for c in COLUMNS] for r in rows],
    )
    return conn


def random_rows(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        item = row(
            f"svc-{rng.randrange(3)}",
            f"m{rng.randrange(3)}",
            case=f"c{rng.randrange(20)}",
            run=rng.randrange(1, 4),
            passed=rng.random() < 0.6,
            latency=rng.choice([rng.randrange(0, 50), rng.random() * 500, None]),
            group=f"g{rng.randrange(2)}",
            eval_id=f"e{rng.randrange(3)}",
            retried=rng.random() < 0.2,
            attempts=rng.choice([1, 2, 3, None]),
        )
        item["run_id"] = "keep" if i % 4 else "drop"
        rows.append(item)
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evals_json_sql_equals_python(seed: int) -> None:
    rows = random_rows(seed, 1500)
    conn = make_db(rows)
    assert evals_json_sql(conn, "", ()) == evals_json(rows)
    kept = [r for r in rows if r["run_id"] == "keep"]
    assert evals_json_sql(conn, "run_id = ?", ("keep",)) == evals_json(kept)
    assert evals_json_sql(conn, "run_id = :r", {"r": "keep"}) == evals_json(kept)


def test_evals_json_sql_small_groups_and_seed_percentiles() -> None:
    rows = [row(latency=v) for v in (40, 10, 30, 20)] + [row("solo", latency=7)]
    doc = evals_json_sql(make_db(rows))
    assert doc == evals_json(rows)
    assert doc["evals"][0]["services"][0]["stats"]["latency"] == {
        "mean_ms": 25.0,
        "p50_ms": 20,
        "p95_ms": 40,
    }


def test_evals_json_sql_empty_and_row_factory_untouched() -> None:
    conn = make_db([])
    assert evals_json_sql(conn, "", ()) == {"schema_version": 2, "evals": []}
    assert conn.row_factory is None
