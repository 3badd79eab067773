"""The report writer over real stores: every artifact, byte-identical, seed-exact, schema-valid."""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from evalhydra.analysis.baselines import baseline_comparisons_sql
from evalhydra.analysis.compare import adjust_family, split_paired
from evalhydra.analysis.evalstats import evals_and_targets
from evalhydra.analysis.selection import select_runs
from evalhydra.core.zig_numbers import integral_numbers
from evalhydra.reports.writer import ALL_FORMATS, normalize_formats, write_run_reports
from evalhydra.stats.rates import wilson_interval
from evalhydra.store.db import open_store
from tests.reference import zig
from tests.reports.support import (
    MockStore,
    mock_store,
    random_rows,
    read_jsonl,
    result_row,
    result_schema,
    summary_keys,
    write_run,
)

__all__ = ["mock_store"]  # the session fixture, imported so pytest finds it

RUN_ID = re.compile(r"^eval-[a-z0-9-]+-[a-f0-9]{8}$")


def _report(ms: MockStore, names: list[str], out: Path, formats: tuple[str, ...] = ALL_FORMATS,
            **kwargs: object) -> list[Path]:
    store = open_store(ms.path, read_only=True)
    try:
        return write_run_reports(store, [ms.runs[n] for n in names], out, formats=formats,
                                 cumulative=False, **kwargs)  # type: ignore[arg-type]
    finally:
        store.close()


def test_every_format_is_written_and_regenerates_byte_identical(mock_store: MockStore,
                                                                tmp_path: Path) -> None:
    names = ["base", "flaky", "judge"]
    first = _report(mock_store, names, tmp_path / "a")
    assert {p.name for p in first} == {
        "runs.json", "evals.json", "baseline_comparisons.json", "paired_comparisons.json", "trials.json",
        "summary.json", "results.jsonl", "report.md", "summary.md", "report.txt", "junit.xml", "report.html",
        "openai_output_items.jsonl", "openai_run.json"}
    _report(mock_store, names, tmp_path / "b")
    _report(mock_store, names, tmp_path / "a")  # again into the same directory
    for path in first:
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name
    assert len(read_jsonl(tmp_path / "a" / "results.jsonl")) == 18  # appended once per run


#: zig_eval's BaselineComparison fields, in its order.
SEED_COMPARISON_KEYS = ("group", "eval_id", "target_kind", "service_name", "baseline_name", "candidate_name",
                        "baseline_pass_rate", "candidate_pass_rate", "delta_pass_rate", "delta_ci_low",
                        "delta_ci_high", "confidence_level")


def test_seed_artifacts_equal_the_zig_functions_over_the_rows(mock_store: MockStore,
                                                              tmp_path: Path) -> None:
    ids = [mock_store.runs[n] for n in ("base", "flaky", "judge")]
    _report(mock_store, ["base", "flaky", "judge"], tmp_path, ("json", "text"))
    store = open_store(mock_store.path, read_only=True)
    rows = list(store.run_rows(ids))
    store.close()
    runs_text = json.dumps(integral_numbers(zig.runs_json(rows)), indent=2, ensure_ascii=False) + "\n"
    assert (tmp_path / "runs.json").read_text() == runs_text
    evals_text = json.dumps(integral_numbers(zig.evals_json(rows)), indent=2, ensure_ascii=False) + "\n"
    assert (tmp_path / "evals.json").read_text() == evals_text  # 1, not 1.0, as zig_eval writes
    expected = zig.baseline_comparisons(rows, baseline_service="mock")
    adjust_family(expected["baseline_comparisons"])  # the report's verdicts are adjusted together
    seed, paired = split_paired(expected["baseline_comparisons"])
    written = json.loads((tmp_path / "baseline_comparisons.json").read_text())
    assert written == {"schema_version": 2, "baseline_comparisons": seed}
    assert all(list(c) == list(SEED_COMPARISON_KEYS) for c in written["baseline_comparisons"])
    assert json.loads((tmp_path / "paired_comparisons.json").read_text())["paired_comparisons"] == paired
    assert expected["baseline_comparisons"] and paired, "two services and two models give comparisons"
    assert (tmp_path / "report.txt").read_text() == zig.text_report(rows)


@pytest.mark.parametrize("seed", [0, 1])
def test_sql_stats_and_comparisons_equal_python_on_random_rows(tmp_path: Path, seed: int) -> None:
    rows = random_rows(seed, 600)  # stored out of zig_eval's order
    store = open_store(tmp_path / "s.db")
    write_run(store, "eval-rand-cccccccc", rows)
    stored = list(store.run_rows(["eval-rand-cccccccc"]))
    sel = select_runs(store.conn, ["eval-rand-cccccccc"])
    doc, targets = evals_and_targets(store.conn, sel)
    assert doc == zig.evals_json(stored)
    assert sum(t.n for t in targets.values()) == 600
    for baseline in ("svc-0", "svc-2"):
        got = baseline_comparisons_sql(store.conn, sel, doc, baseline_service=baseline)
        assert got == zig.baseline_comparisons(stored, baseline_service=baseline)
    store.close()


def test_every_results_jsonl_line_is_a_valid_aiwg_record(mock_store: MockStore, tmp_path: Path) -> None:
    _report(mock_store, list(mock_store.runs), tmp_path, ("jsonl",))
    lines = read_jsonl(tmp_path / "results.jsonl")
    assert len(lines) == 6 + 6 + 6 + 10
    schema = result_schema()
    validator = jsonschema.Draft202012Validator(schema)
    optional_nulls = {"step", "failure_category", "suggested_fix"}  # omitted when they have no value
    for line in lines:
        validator.validate(line)
        assert set(schema["required"]) <= set(line)
        assert set(schema["properties"]) - set(line) <= optional_nulls
        assert None not in line.values()
        assert RUN_ID.match(line["run_id"]) and line["attempts"] >= 1
    by_run = {line["run_id"] for line in lines}
    assert by_run == set(mock_store.runs.values())
    aiwg = [line for line in lines if line["pipeline"] == "aiwg.simple_chain"]
    assert aiwg[0]["rubric_scores"] and aiwg[0]["pass_threshold"] == 0.85
    errors = [line for line in lines if line["generator_model"] == "mock-flaky" and not line["pass"]]
    assert errors and all(e["feedback"] for e in errors)  # the failure reason becomes feedback


def test_results_jsonl_is_appended_per_run_and_kept_cumulative(mock_store: MockStore,
                                                               tmp_path: Path) -> None:
    store_copy = tmp_path / "copy" / "store.db"
    store_copy.parent.mkdir()
    with sqlite3.connect(mock_store.path) as src, sqlite3.connect(store_copy) as dst:
        src.backup(dst)
    store = open_store(store_copy, read_only=True)
    for name in ("base", "judge", "base"):
        write_run_reports(store, [mock_store.runs[name]], tmp_path / "out", formats=["jsonl"])
    store.close()
    lines = read_jsonl(tmp_path / "out" / "results.jsonl")
    expected = [mock_store.runs["base"]] * 6 + [mock_store.runs["judge"]] * 6
    assert [line["run_id"] for line in lines] == expected
    assert read_jsonl(store_copy.parent / "results.jsonl") == lines


def test_summary_json_has_the_full_summary_schema(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    rows = [result_row("eval-sum-dddddddd", f"c{i}", passed=i % 3 == 0, score=0.2 * (i % 5),
                       feedback=f"fix {i}", failure_category=["bogus", "format", None][i % 3],
                       suggested_fix="Be brief.") for i in range(9)]
    write_run(store, "eval-sum-dddddddd", rows)
    write_run_reports(store, ["eval-sum-dddddddd"], tmp_path / "out", formats=["jsonl"], cumulative=False)
    store.close()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    # aiwg's keys in order, then evalhydra's
    assert list(summary) == [*summary_keys(), "scored_pass_rate", "pass_rate_ci_low", "pass_rate_ci_high",
                             "ci_method", "n_cases", "tokens", "cache_hits"]
    assert (summary["total_cases"], summary["passed"], summary["failed"]) == (9, 3, 6)
    assert summary["pass_rate"] == pytest.approx(1 / 3)
    low, high = wilson_interval(3, 9)  # one trial per case: Wilson over the results
    assert (summary["pass_rate_ci_low"], summary["pass_rate_ci_high"]) == (low, high)
    assert (summary["ci_method"], summary["n_cases"], summary["scored_pass_rate"]) == ("wilson", 9, 1 / 3)
    assert summary["pipeline"] == "g.e" and summary["avg_attempts"] == 1.0
    assert summary["failure_breakdown"] == {"format": 3, "uncategorized": 3}
    assert [f["case_id"] for f in summary["top_failures"]] == ["c1", "c2", "c4"]
    assert all(set(f) == {"case_id", "score", "feedback"} for f in summary["top_failures"])


def test_junit_xml_parses_with_one_testcase_per_trial(mock_store: MockStore, tmp_path: Path) -> None:
    _report(mock_store, ["base", "flaky"], tmp_path, ("junit",))
    root = ET.parse(tmp_path / "junit.xml").getroot()
    cases = root.findall(".//testcase")
    assert root.tag == "testsuites" and len(cases) == 12 == int(root.get("tests", "0"))
    errors = [c for c in cases if c.find("error") is not None]
    assert len(errors) == 3 == int(root.get("errors", "0"))
    assert all(e.find("error").get("type") == "server_error" for e in errors)  # type: ignore[union-attr]
    assert {c.get("name") for c in cases} >= {"case-1 [trial 1]", "case-2 [trial 3]"}
    for suite in root.findall("testsuite"):
        assert int(suite.get("tests", "0")) == len(suite.findall("testcase"))


def test_junit_failures_carry_reasons_and_survive_nasty_output(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    nasty = "a]]>b <x> & \x00\x1b \"q\""
    write_run(store, "eval-nasty-eeeeeeee", [result_row("eval-nasty-eeeeeeee", "c1", passed=False,
                                                        output=nasty, failure_reason=nasty)])
    write_run_reports(store, ["eval-nasty-eeeeeeee"], tmp_path, formats=["junit"], cumulative=False)
    store.close()
    (case,) = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "FAIL"
    assert failure.get("message", "").startswith("a]]>b <x> &") and "<x>" in (failure.text or "")


def test_trials_json_gives_unbiased_pass_at_k(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    rows = [result_row("eval-trials-ffffffff", "c1", t, passed=t <= 2) for t in (1, 2, 3, 4)]
    rows += [result_row("eval-trials-ffffffff", "c2", t) for t in (1, 2, 3, 4)]
    rows.append(result_row("eval-trials-ffffffff", "c2", 5, passed=False, status="ERROR",
                           error_kind="timeout"))  # an error is not a sample
    write_run(store, "eval-trials-ffffffff", rows)
    write_run_reports(store, ["eval-trials-ffffffff"], tmp_path, formats=["json"], cumulative=False)
    store.close()
    (target,) = json.loads((tmp_path / "trials.json").read_text())["targets"]
    assert target["pass_at_k"]["1"] == pytest.approx((0.5 + 1) / 2)
    assert target["pass_at_k"]["2"] == pytest.approx((1 - 1 / 6 + 1) / 2)
    assert target["pass_hat_k"]["2"] == pytest.approx((1 / 6 + 1) / 2)
    assert list(target["pass_at_k"]) == ["1", "2", "3", "4"]
    assert target["stability"] == {"stable": 1, "flaky": 1, "broken": 0, "no_result": 0}
    assert target["flaky_cases"] == [{"case_id": "c1", "passed": 2, "trials": 4, "flakiness": 1.0}]


def test_unknown_format_is_a_user_error() -> None:
    from evalhydra.core.errors import EvalHydraError

    assert normalize_formats("md, JSON,md") == ("md", "json")
    with pytest.raises(EvalHydraError, match="Unknown report format: pdf"):
        normalize_formats(["pdf"])


def test_runs_json_over_several_chunks_prints_every_score_as_the_reference(tmp_path: Path) -> None:
    """4,500 results (three chunks of SQLite rows) whose scores repeat, are fractions of
    17 digits, need an exponent, are integral, negative zero or missing."""
    scores = [None, 0.0, -0.0, 1.0, 0.85, 0.1 + 0.2, 1 / 3, 1e-05, 2.5e-7, 1e16, 123456.789, 7.0]
    rows = [result_row("eval-many-dddddddd", f"c{i:05d}", passed=i % 3 == 0, score=scores[i % len(scores)])
            for i in range(4500)]
    store = open_store(tmp_path / "s.db")
    write_run(store, "eval-many-dddddddd", rows)
    stored = list(store.run_rows(["eval-many-dddddddd"]))
    write_run_reports(store, ["eval-many-dddddddd"], tmp_path / "out", formats=("json",), cumulative=False)
    store.close()
    expected = json.dumps(integral_numbers(zig.runs_json(stored)), indent=2, ensure_ascii=False) + "\n"
    written = (tmp_path / "out" / "runs.json").read_text().splitlines()
    lines = expected.splitlines()
    assert len(written) == len(lines)
    assert [(a, b) for a, b in zip(written, lines, strict=True) if a != b][:3] == []
    assert '"score": 0.30000000000000004' in expected and '"score": 1e-05' in expected


@pytest.mark.parametrize(("category", "fix"), [(None, None), ("format", None), (None, "Quote the figure."),
                                              ("invented", "Name the source.")])
def test_results_jsonl_leaves_out_only_the_optional_keys_without_a_value(tmp_path: Path, category: str | None,
                                                                         fix: str | None) -> None:
    row = result_row("eval-opt-eeeeeeee", "c1", passed=False, failure_category=category, suggested_fix=fix)
    store = open_store(tmp_path / "s.db")
    write_run(store, "eval-opt-eeeeeeee", [row])
    write_run_reports(store, ["eval-opt-eeeeeeee"], tmp_path / "out", formats=("jsonl",), cumulative=False)
    store.close()
    (line,) = read_jsonl(tmp_path / "out" / "results.jsonl")
    schema = result_schema()
    assert list(line) == [key for key in schema["properties"] if key in line]  # the schema's order
    expected_category = None if category is None else category if category == "format" else "other"
    assert (line.get("failure_category"), line.get("suggested_fix")) == (expected_category, fix)
    assert "step" not in line and None not in line.values()
    jsonschema.Draft202012Validator(schema).validate(line)
