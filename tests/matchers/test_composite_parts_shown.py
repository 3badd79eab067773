"""Issue 58, item 9: a composite matcher's every part, in the store, the viewer and report.html.

One case, ``all_of`` three parts of which two fail: ``failure_reason`` names both, ``details``
keeps each part's verdict and score, and the viewer's case page and report.html's case details
(in headless Chromium) show a row per part.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from evalhydra.store.db import open_store
from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli
from tests.reports.test_reports_html import _dom
from tests.viewer.test_viewer import start_viewer, stop

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

PARTS = [{"kind": "includes"}, {"kind": "regex", "pattern": "^Z"}, {"kind": "regex", "pattern": "^Q"}]


def test_every_part_of_an_all_of_is_stored_and_shown(tmp_path: Path) -> None:
    line = json.dumps({"id": "c1", "input": "Reply with exactly V1.", "ideal": "V1"}) + "\n"
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval(matcher={"kind": "all_of",
                                                                                         "parts": PARTS})},
                              data={"data/g/e/test.jsonl": line})
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}", "report=[html]",
                   f"hydra.run.dir={tmp_path / 'out'}", "run.progress=false", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = open_store(tmp_path / "s.db", read_only=True)
    reason, details, run_id = store.conn.execute(
        "select failure_reason, details, run_id from results").fetchone()
    store.close()
    assert reason == ("part 2 (regex): output did not match pattern; part 3 (regex): output did not match"
                      " pattern")
    parts = json.loads(details)["parts"]
    assert [(p["kind"], p["passed"], p["score"]) for p in parts] == [
        ("includes", True, 1.0), ("regex", False, 0.0), ("regex", False, 0.0)]
    proc, url = start_viewer(tmp_path / "s.db")
    try:
        path, token = url.split("?")
        with httpx.Client(base_url=path.split("/runs/")[0].rstrip("/"), follow_redirects=True) as client:
            client.get(f"/?{token}")
            page = client.get(f"/runs/{run_id}/case", params={"eval": "g.e", "case": "c1"}).text
    finally:
        stop(proc)
    assert page.count('<tr class="part pass">') == 1 and page.count('<tr class="part fail">') == 2
    (report,) = (tmp_path / "out").rglob("report.html")
    detail = _dom(report, "#case=g.e/c1").text["detail"]
    assert "part matcher verdict score weight reason" in " ".join(detail.split())
    assert detail.count("✗ fail") == 2 and detail.count("✓ pass") == 1
