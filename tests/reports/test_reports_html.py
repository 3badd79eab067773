"""report.html: a pure function of the store, self-contained, and working in a real browser.

The browser tests load the generated file in headless Chromium (Debian's ``chromium``,
installed by ``.ci/run``) and read the DOM after the page's script ran; a filter and a
case's details are chosen through the URL fragment, as a link to them would.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
from omegaconf import DictConfig

from evalhydra.cli.store_commands import main
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from evalhydra.reports.writer import write_run_reports
from evalhydra.stats.rates import wilson_interval
from evalhydra.store.db import open_store
from tests.helpers import mock_call, numbered_registry

Compose = Callable[..., DictConfig]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def page(compose: Compose, url: str, tmp_path: Path) -> Path:
    """report.html of a run of 6 cases × 2 trials where case c1 fails and c2 errors on trial 1."""
    registry = numbered_registry(tmp_path / "reg", 6)
    mock_call(url, "config", {"fail_first_n": 1, "fail_status": 503})  # c0 trial 1 errors
    lines = (registry / "data/g/e/test.jsonl").read_text().replace('"ideal": "V1"', '"ideal": "NOPE"')
    (registry / "data/g/e/test.jsonl").write_text(lines)
    plan = build_plan(compose(f"registry={registry}", "eval=g", "service=mock", "service.mock.enabled=false",
                              f"service.base_url={url}", "trials=2", "run.concurrency=1", "report=[html]"))
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    return tmp_path / "out" / "report.html"


class _Text(HTMLParser):
    """The text of one element (by id) and the data-key of every grid row."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []
        self.stack: list[str] = []
        self.text: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and found.get("data-key"):
            self.keys.append(str(found["data-key"]))
        self.stack.append(str(found.get("id") or ""))

    def handle_endtag(self, tag: str) -> None:
        if self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        for name in filter(None, self.stack):
            self.text[name] = self.text.get(name, "") + data + " "


def _dom(page: Path, fragment: str = "") -> _Text:
    assert CHROMIUM, "chromium is needed (apt-get install chromium; .ci/run installs it)"
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
            "--dump-dom", page.resolve().as_uri() + fragment]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert "<tbody>" in res.stdout, res.stderr[-2000:]
    parsed = _Text()
    parsed.feed(res.stdout)
    return parsed


def test_the_page_is_one_self_contained_file_regenerated_byte_for_byte(page: Path, tmp_path: Path) -> None:
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']https?://""", text) and "@import" not in text  # no network
    assert "<style>" in text and "<svg" in text and '<script type="application/json" id="data">' in text
    store = open_store(tmp_path / "store.db", read_only=True)
    run_id = store.resolve_run_ids(["latest"])[0]
    write_run_reports(store, [run_id], tmp_path / "again", formats=["html"], cumulative=False)
    store.close()
    assert (tmp_path / "again" / "report.html").read_bytes() == page.read_bytes()


def test_the_summary_tables_need_no_javascript(page: Path) -> None:
    parsed = _Text()
    parsed.feed(page.read_text())
    summary = " ".join(parsed.text["targets"].split())
    # the error is left out; the rate is the mean over 6 cases (c0 1/1, c1 0/2, the rest 2/2) and the
    # interval is clustered by case: Wilson on the effective size (6 cases, t-corrected)
    low, high = wilson_interval(5, 6)  # 6 cases, mean 5/6: the clustered interval's floor, the cases
    assert f"g.e mock mock-model 12 9 2 1 83.3% [{low:.1%}, {high:.1%}]" in summary
    assert parsed.keys == []  # the grid is drawn by the script


@pytest.mark.slow
def test_the_grid_its_filters_and_a_case_in_chromium(page: Path) -> None:
    everything = _dom(page)
    assert everything.keys == [f"g.e/c{i}" for i in range(6)]
    assert "showing 6 of 6 cases" in everything.text["count"]
    assert _dom(page, "#filter=failures").keys == ["g.e/c1"]
    assert _dom(page, "#filter=errors").keys == ["g.e/c0"]
    assert _dom(page, "#filter=all&q=exactly%20V4").keys == ["g.e/c4"]
    detail = _dom(page, "#case=g.e/c1").text["detail"]
    assert "g.e / c1" in detail and "NOPE" in detail and "output did not exactly match ideal" in detail
    assert "candidate#1 200" in detail


@pytest.mark.slow
def test_view_writes_the_page_and_prints_its_path(page: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")  # no browser to open: the path is printed
    assert main(["view", "--store", str(tmp_path / "store.db"), "--out", str(tmp_path / "v")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "v" / "report.html")
    assert _dom(tmp_path / "v" / "report.html").keys[:1] == ["g.e/c0"]


def test_a_sweeps_page_has_a_row_per_job_and_cases_name_their_attachments(compose: Compose,
                                                                          tmp_path: Path) -> None:
    for trials in ("1", "2"):
        assert run_plan(build_plan(compose("eval=multimodal", f"trials={trials}")),
                        output_dir=tmp_path / f"run{trials}") == 0
    store = open_store(tmp_path / "store.db", read_only=True)
    runs = store.resolve_run_ids([r["run_id"] for r in store.runs()])
    write_run_reports(store, runs, tmp_path / "both", formats=["html"], cumulative=False)
    store.close()
    parsed = _Text()
    text = (tmp_path / "both" / "report.html").read_text()
    parsed.feed(text)
    assert all(run in parsed.text["run-table"] for run in runs)
    assert '"at":["reference image"]' in text  # the attachment's label from the dataset


@pytest.mark.slow
def test_agent_trials_show_tool_calls_checks_and_the_end_of_stdout_log(compose: Compose,
                                                                      tmp_path: Path) -> None:
    plan = build_plan(compose("service=fake_agent", "eval=agent_cases", "report=[html]",
                              f"run.agent_trials_dir={tmp_path / 'trials'}"))
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    text = (tmp_path / "out" / "report.html").read_text()
    assert '"tc":[' in text and '"ch":[[' in text and '"log":"' in text
    assert "(stdout.log not found)" not in text
    detail = _dom(tmp_path / "out" / "report.html", "#case=agent_cases/hello-file").text["detail"]
    assert "tool calls" in detail and "checks" in detail and "end of stdout.log" in detail


def test_view_compare_puts_the_paired_comparison_on_the_page(compose: Compose, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a", "b"):
        assert run_plan(build_plan(compose("eval=smoke", "trials=2")), output_dir=tmp_path / name) == 0
    store = open_store(tmp_path / "store.db", read_only=True)
    first, second = sorted(store.runs(), key=lambda r: r["started_at"])
    store.close()
    monkeypatch.setenv("CI", "true")
    args = ["view", "--store", str(tmp_path / "store.db"), "--compare", first["run_id"], second["run_id"],
            "--out", str(tmp_path / "cmp")]
    assert main(args) == 0
    capsys.readouterr()
    parsed = _Text()
    parsed.feed((tmp_path / "cmp" / "report.html").read_text())
    text = " ".join(parsed.text["comparisons"].split())
    shown = f"smoke.reply_ok {first['run_id']} {second['run_id']} 100.0% 100.0% 2 +0.0 [+0.0, +0.0]"
    assert shown in text  # 2 cases, percentage points
    assert "all evals" in text


@pytest.mark.slow
def test_a_tool_loops_conversation_reads_in_report_html(compose: Compose, tmp_path: Path) -> None:
    """Issue 51, item 6: each turn, call and result of the order desk, its stop reason and end state."""
    plan = build_plan(compose("eval=tools.order_desk", "report=[html]", f"store.path={tmp_path / 's.db'}"))
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    detail = _dom(tmp_path / "out" / "report.html", "#case=tools.order_desk/broken-7").text["detail"]
    assert "conversation" in detail and "stopped: model_stopped" in detail
    assert 'refund({"order_id":7,"reason":"damaged"})' in detail
    assert "order 7: delivered, box damaged" in detail
    assert '"refund_count": 1' in detail


@pytest.mark.slow
def test_a_simulated_users_dialogue_reads_in_report_html(compose: Compose, tmp_path: Path) -> None:
    """Issue 63, item 7: a conversation with a simulated user reads as a dialogue: each side named,
    the agent's calls between, who stopped it."""
    store = f"store.path={tmp_path / 's.db'}"
    plan = build_plan(compose("eval=users.order_desk_chat", "report=[html]", store))
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    detail = " ".join(_dom(tmp_path / "out" / "report.html",
                           "#case=users.order_desk_chat/refund-7").text["detail"].split())
    assert "dialogue with a simulated user" in detail and "stopped: user_stop (by the user)" in detail
    assert "simulated user Hi, order 7" in detail and "agent Order 7 found" in detail
    assert 'lookup_order({"order_id":7})' in detail
