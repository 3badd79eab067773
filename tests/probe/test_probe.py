"""Issue 65, items 1 and 2: ``evalhydra probe tools`` against the compliant mock (every check
passes), against each serving fault the mock can inject (the probe finds it, alone and combined),
and through a real process: exit codes, JSON, JUnit, the store's ``probes`` table."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import pytest
import trio

from evalhydra.probe.checks import run_checks
from evalhydra.probe.exchange import Exchange
from evalhydra.probe.run import ProbeReport, probe_endpoint
from evalhydra.probe.stream_checks import STREAM_CHECKS
from tests.helpers import litellm_in_front_of, mock_call, mock_process, run_cli

#: Each fault the mock injects, and the check that must fail for it.
FAULTS = {
    "no_ids": "call_ids_present",
    "same_ids": "call_ids_unique",
    "stop_finish": "finish_reason",
    "empty_arguments": "no_argument_tool",
    "no_index": "stream_index_present",
    "reused_index": "stream_index_distinct",
    "names_repeated": "stream_name_once",
    "last_bare": "stream_final_delta",
    "utf8_split": "stream_utf8",
    "marker_in_content": "no_markup_in_content",
    "stream_differs": "stream_equals_whole",
    "parallel_ignored": "parallel_tool_calls_false",
    "required_ignored": "tool_choice_required",
    "turn_ids": "call_ids_across_turns",
}
#: Faults that do not hide one another (each leaves the calls the others' checks read).
TOGETHER = ("same_ids", "stop_finish", "reused_index", "names_repeated", "last_bare", "utf8_split",
            "parallel_ignored", "required_ignored", "turn_ids")


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with mock_process() as url:
        yield url


def _probe(url: str, wire: str | None, api: str = "chat") -> ProbeReport:
    mock_call(url, "config", {"tool_wire": wire})
    try:
        return trio.run(lambda: probe_endpoint(url, {}, "mock-model", api=api))
    finally:
        mock_call(url, "config", {"tool_wire": None})


def _failed(report: ProbeReport) -> set[str]:
    return {check.id for check, _ in report.failed}


def test_the_compliant_mock_passes_every_check_in_few_requests(mock_url: str) -> None:
    report = _probe(mock_url, None)
    assert report.counts() == {"pass": 25, "fail": 0, "n/a": 0}, [(c.id, v) for c, v in report.verdicts
                                                                  if v.status != "pass"]
    assert len(report.exchanges) < 100 and report.seconds < 60
    responses = _probe(mock_url, None, "responses")
    assert {c.id: v.status for c, v in responses.verdicts} == {
        "responses_call_id": "pass", "responses_pairing": "pass", "responses_reasoning": "n/a"}


@pytest.mark.parametrize(("fault", "check"), FAULTS.items())
def test_each_fault_is_found_by_its_check(mock_url: str, fault: str, check: str) -> None:
    report = _probe(mock_url, fault)
    assert check in _failed(report)
    (verdict,) = [v for c, v in report.verdicts if c.id == check]
    assert verdict.evidence  # the raw field or chunk that shows it


def test_faults_together_are_each_found(mock_url: str) -> None:
    report = _probe(mock_url, ",".join(TOGETHER))
    assert {FAULTS[f] for f in TOGETHER} <= _failed(report)


def test_an_unpaired_responses_call_is_found_and_reasoning_items_round_trip(mock_url: str) -> None:
    unpaired = _probe(mock_url, "responses_unpaired", "responses")
    assert _failed(unpaired) == {"responses_call_id", "responses_pairing"}  # the mock refuses the orphan
    mock_call(mock_url, "config", {"reasoning": "reasoning_content"})
    try:
        thinking = _probe(mock_url, None, "responses")
    finally:
        mock_call(mock_url, "config", {"reasoning": None})
    assert {c.id: v.status for c, v in thinking.verdicts}["responses_reasoning"] == "pass"


def test_oversized_replies_are_cut_and_fail_without_being_read_whole(mock_url: str) -> None:
    mock_call(mock_url, "config", {"oversized_rate": 1.0})  # every reply a valid completion over 8 MiB
    try:
        report = trio.run(lambda: probe_endpoint(mock_url, {}, "mock-model", quick=True))
    finally:
        mock_call(mock_url, "config", {"oversized_rate": 0.0})
    whole = [e for e in report.exchanges.values() if not e.request.get("stream")]
    assert whole and all(not e.ok and "over 262144 bytes" in (e.error or "") for e in whole)
    assert all(not e.ok for e in report.exchanges.values())
    verdicts = {c.id: v.status for c, v in report.verdicts}
    assert verdicts["single_call"] == verdicts["parallel_calls"] == verdicts["stream_complete"] == "fail"


def test_a_hung_server_leaves_the_unsent_probes_not_applicable(mock_url: str) -> None:
    mock_call(mock_url, "config", {"hang_rate": 1.0})
    try:
        report = trio.run(lambda: probe_endpoint(mock_url, {}, "mock-model", quick=True, timeout_s=0.5))
    finally:
        mock_call(mock_url, "config", {"hang_rate": 0.0})
    assert report.unreachable == "no probe was answered before the deadline" and report.verdicts == []


def test_a_reply_shaped_past_the_api_fails_its_check_instead_of_ending_the_probe() -> None:
    hostile = Exchange("single_stream", {}, status=200, chunks=[
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c", "function": "not an object"}]}}]}])
    sent = {"single_stream": hostile, "parallel_stream": Exchange("parallel_stream", {}, status=200)}
    verdicts = {c.id: v for c, v in run_checks(STREAM_CHECKS, sent)}
    assert verdicts["stream_first_delta"].status == "fail"
    assert "not shaped as the API says (AttributeError" in verdicts["stream_first_delta"].detail
    assert verdicts["stream_equals_whole"].detail == "probe 'single' was not sent"


def test_the_command_stores_the_checks_and_writes_junit(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    done = run_cli("probe", "tools", "--format", "junit", "--out", str(tmp_path / "probe.xml"),
                   f"store.path={store}", 'service.mock.tool_wire="turn_ids"', cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # a check failed
    suite = ElementTree.parse(tmp_path / "probe.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("25", "1")
    (failed,) = [case for case in suite if case.find("failure") is not None]
    assert failed.get("name") == "call_ids_across_turns"
    rows = sqlite3.connect(store).execute("select check_id, status, evidence from probe_latest").fetchall()
    assert len(rows) == 25 and {r[0] for r in rows if r[1] == "fail"} == {"call_ids_across_turns"}
    assert json.loads(next(r[2] for r in rows if r[1] == "fail")) == ["call_0", "call_0"]


@pytest.mark.slow
def test_the_command_exits_3_when_nothing_answers_and_2_on_a_typo(tmp_path: Path) -> None:
    gone = run_cli("probe", "tools", "--format", "json", "--no-store", "service.mock.enabled=false",
                   "service.base_url=http://127.0.0.1:9/v1", cwd=tmp_path)
    assert gone.returncode == 3 and json.loads(gone.stdout)["unreachable"].startswith("ConnectError")
    typo = run_cli("probe", "tools", "servce=x", cwd=tmp_path)
    assert typo.returncode == 2 and typo.stderr.startswith("error: servce") and "Traceback" not in typo.stderr
    (tmp_path / "a-file").write_text("")
    blocked = run_cli("probe", "tools", "--quick", "--no-store", "--out", str(tmp_path / "a-file" / "p.json"),
                      cwd=tmp_path)
    assert blocked.returncode == 2 and blocked.stderr.startswith("error: --out ")
    assert "a file stands where its folder would be" in blocked.stderr and "Traceback" not in blocked.stderr
    made = run_cli("probe", "tools", "--quick", "--no-store", "--out", str(tmp_path / "new" / "p.txt"),
                   cwd=tmp_path)
    assert made.returncode == 0 and "passed" in (tmp_path / "new" / "p.txt").read_text()


#: What LiteLLM's proxy (1.108.7, the test extras' pin) makes of a fault behind it, as measured:
#: the checks that fail through the proxy. It repairs some (it gives a whole reply's calls ids of its
#: own), turns others into another fault (deltas without an index all get index 0, so parallel
#: calls merge), and loses what a bare final delta carried.
THROUGH_LITELLM = {
    None: set(),
    "no_ids": {"stream_first_delta"},
    "no_index": {"stream_index_distinct"},
    "last_bare": {"stream_equals_whole"},
    "turn_ids": {"call_ids_across_turns"},
    "stream_differs": {"stream_equals_whole"},
}
PROXY_KEY = "sk-proxy-master-0123456789abcdef"


@pytest.mark.slow
def test_litellms_proxy_in_front_of_the_mock(mock_url: str, tmp_path: Path) -> None:
    found = {}
    key = {"Authorization": f"Bearer {PROXY_KEY}"}
    with litellm_in_front_of(mock_url, tmp_path, PROXY_KEY) as base:
        for fault in THROUGH_LITELLM:
            mock_call(mock_url, "config", {"tool_wire": fault})
            found[fault] = _failed(trio.run(lambda: probe_endpoint(base, key, "mock-model")))
        mock_call(mock_url, "config", {"tool_wire": None})
        responses = trio.run(lambda: probe_endpoint(base, key, "mock-model", api="responses"))
    assert found == THROUGH_LITELLM
    assert not responses.failed and len(responses.verdicts) == 3


@pytest.mark.slow
def test_check_probes_the_service_of_a_tool_loop_eval(tmp_path: Path) -> None:
    """Item 4: ``evalhydra check`` of a tool-loop eval adds the quick probe, a warning per failure."""
    clean = run_cli("check", "eval=tools.order_desk", cwd=tmp_path)
    assert clean.returncode == 0 and "quick probe of 'mock'): 14 passed, 0 failed" in clean.stdout
    faulty = run_cli("check", "eval=tools.order_desk", 'service.mock.tool_wire="reused_index"', cwd=tmp_path)
    assert "13 passed, 1 failed" in faulty.stdout
    assert "warning: mock: stream_index_distinct:" in faulty.stderr
    assert "evalhydra probe tools" in faulty.stderr
    plain = run_cli("check", cwd=tmp_path)  # no tool loop: no probe
    assert plain.returncode == 0 and "quick probe" not in plain.stdout


@pytest.mark.slow
def test_a_runs_summary_names_the_server_faults_its_tool_loops_met(tmp_path: Path) -> None:
    """Item 4: a tool loop meeting a known wire fault says so in the run's summary, with the probe."""
    def run(store: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return run_cli("eval=tools.order_desk", f"store.path={tmp_path / store}", f"hydra.run.dir={tmp_path}",
                       *extra, cwd=tmp_path)

    clean = run("a.db")
    assert clean.returncode == 0 and "server faults" not in clean.stdout + clean.stderr
    faulty = run("b.db", 'service.mock.tool_wire="turn_ids,stop_finish"')
    said = faulty.stdout + faulty.stderr
    assert "did not end with finish_reason tool_calls: 2 cells" in said
    assert "a call id the server gave twice in one conversation: 2 cells" in said
    assert "run evalhydra probe tools service=mock" in said
