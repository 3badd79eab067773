"""A store's contents are data, never markup, commands or file paths to follow (issue 33, item 3).

A merged shard can hold anything: text in INTEGER columns, escape sequences,
``<!--<script>``, and an agent row naming ``/proc/self/environ`` as its log.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evalhydra.cli.store_commands import main
from evalhydra.reports.writer import write_run_reports
from evalhydra.store.db import open_store
from tests.reports.support import result_row, write_run

RUN = "eval-hostile-aaaaaaaa"
ESCAPES = "\x1b[2J\x1b]52;c;cHduZWQ=\x07"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _hostile_store(path: Path) -> Path:
    store = open_store(path)
    rows = [
        result_row(RUN, "c1", passed=False, output=f"<!--<script>{ESCAPES}", failure_reason=f"bad {ESCAPES}"),
        result_row(RUN, "c2", run_index='1<b id="pwned">x</b>', latency_ms="<b id=pwned2>",  # type: ignore[arg-type]
                   status_code="<i id=pwned3>", cell_key="k2"),
        result_row(RUN, "c3", kind="agent", status="PASS", stdout_log_path="/proc/self/environ",
                   cell_key="k3"),
    ]
    write_run(store, RUN, rows)
    store.conn.execute("insert into attempts (cell_key, call, attempt, status_code, error_kind) values"
                       " ('k2', 'candidate', '<u id=pwned4>', '<s id=pwned5>', 'x')")
    store.conn.commit()
    store.close()
    return path


def test_the_page_embeds_stored_text_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALHYDRA_REPORT_SECRET", "do-not-leak-me")
    store = open_store(_hostile_store(tmp_path / "s.db"), read_only=True)
    write_run_reports(store, [RUN], tmp_path / "out", formats=["html"], cumulative=False)
    store.close()
    page = (tmp_path / "out" / "report.html").read_text()
    script = page.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in script and ">" not in script  # no markup can close or open anything
    data = json.loads(script)
    trials = {c["c"]: c["t"]["0"][0] for c in data["cases"]}
    assert trials["c2"]["k"] is None and trials["c2"]["ms"] is None and "hs" not in trials["c2"]
    assert "do-not-leak-me" not in page and "not in the store's folder" in trials["c3"]["log"]


@pytest.mark.slow
def test_no_injected_element_reaches_the_dom_in_chromium(tmp_path: Path) -> None:
    assert CHROMIUM, "chromium is needed (apt-get install chromium; .ci/run installs it)"
    store = open_store(_hostile_store(tmp_path / "s.db"), read_only=True)
    write_run_reports(store, [RUN], tmp_path / "out", formats=["html"], cumulative=False)
    store.close()
    for case in ("c1", "c2"):
        uri = (tmp_path / "out" / "report.html").resolve().as_uri() + f"#case=g.e/{case}"
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                "--dump-dom", uri]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert "<tbody>" in res.stdout, res.stderr[-2000:]
        assert not re.search(r"id=\"?pwned", res.stdout)
        assert 'id="detail"' in res.stdout and "g.e / " + case in res.stdout  # the case pane was drawn


def test_terminal_and_markdown_show_escape_sequences_spelled_out(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    db = _hostile_store(tmp_path / "s.db")
    outputs = []
    for args in (["results", RUN], ["query", "select output, failure_reason from results"],
                 ["query", "select output from results", "--format", "csv"]):
        assert main([args[0], "--store", str(db), *args[1:]]) == 0
        outputs.append(capsys.readouterr().out)
    store = open_store(db, read_only=True)
    write_run_reports(store, [RUN], tmp_path / "out", formats=["md"], cumulative=False)
    store.close()
    outputs += [(tmp_path / "out" / name).read_text() for name in ("report.md", "summary.md")]
    for text in outputs:
        assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J" in outputs[1] and "\\x1b[2J" in outputs[3]
