"""Issue 60, items 6 and 8: the viewer shows what applies. Judge links only on judged runs, a
grid's pass fraction per target, partial runs marked (list, run page, ``evalhydra runs``), wall
time apart from the cells' summed time, and one status for a dead run in every listing. Headless
Chromium over a real store and the viewer in its own process; ``evalhydra runs`` as a subprocess.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalhydra.store.db import open_store
from evalhydra.store.runinfo import GONE
from tests.helpers import run_cli
from tests.reports.support import result_row, write_run
from tests.viewer.test_viewer import base_of, browser, start_viewer, stop

__all__ = ["browser"]  # the fixture, shared

pytestmark = pytest.mark.slow  # a viewer process and a browser

WHOLE, PARTIAL, JUDGED, DEAD = ("eval-whole-aaaaaaaa", "eval-part-bbbbbbbb", "eval-judged-cccccccc",
                               "eval-dead-dddddddd")


def _two_targets(run_id: str) -> list[dict[str, Any]]:
    """c0 passes on svc-a and fails on svc-b: pooled it would read 50 %."""
    return [result_row(run_id, case, passed=service == "svc-a" or case == "c1", service_name=service,
                       cell_key=f"{run_id}-{service}-{case}")
            for service in ("svc-a", "svc-b") for case in ("c0", "c1")]


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("context") / "s.db"
    store = open_store(path)
    write_run(store, WHOLE, _two_targets(WHOLE))
    write_run(store, PARTIAL, [result_row(PARTIAL, "c0", cell_key="p-c0")],
              started="2026-01-02T00:00:00.000Z")
    write_run(store, JUDGED, [result_row(JUDGED, "c0", cell_key="j-c0", judge_model="judge-m")],
              started="2026-01-03T00:00:00.000Z")
    write_run(store, DEAD, [result_row(DEAD, "c0", cell_key="d-c0")], started="2026-01-04T00:00:00.000Z")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    config = {"run": {"limit": 1, "cases": [], "tags": ["fast"], "shard_count": 1, "rerun": None}}
    store.conn.execute("update runs set config = ? where run_id = ?", [json.dumps(config), PARTIAL])
    store.conn.execute("update runs set status = 'running', finished_at = null, hostname = ?, pid = ?"
                       " where run_id = ?", [socket.gethostname(), gone.pid, DEAD])
    store.conn.commit()
    store.close()
    return path


@pytest.fixture(scope="module")
def viewer_url(store_path: Path) -> Iterator[str]:
    proc, url = start_viewer(store_path)
    yield url
    stop(proc)


def test_judge_links_only_on_judged_runs(viewer_url: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(viewer_url)
    page.goto(base_of(viewer_url) + f"/runs/{WHOLE}")
    assert page.locator("#label-queue").count() == 0
    page.goto(base_of(viewer_url) + f"/runs/{JUDGED}")
    assert page.locator("#label-queue").count() == 1


def test_a_grid_of_two_targets_has_a_pass_column_each(viewer_url: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(viewer_url)
    page.goto(base_of(viewer_url) + f"/runs/{WHOLE}")
    headers = page.locator("#grid thead th.pass").all_inner_texts()
    assert [" ".join(h.split()) for h in headers] == ["pass svc-a/m", "pass svc-b/m"]
    row = page.locator('#grid tbody tr[data-key="g.e/c0"] td.pass').all_inner_texts()
    assert row == ["100%", "0%"]


def test_partial_runs_are_marked_and_wall_time_is_apart(viewer_url: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(viewer_url)
    partial = page.locator(f'#runs tr[data-run="{PARTIAL}"] .partial')
    assert partial.inner_text() == "partial: run.limit=1 run.tags=[fast]"
    assert page.locator(f'#runs tr[data-run="{WHOLE}"] .partial').count() == 0
    page.goto(base_of(viewer_url) + f"/runs/{PARTIAL}")
    assert "run.limit=1 run.tags=[fast]" in page.locator("#partial").inner_text()
    assert page.locator("#wall-time").inner_text() == "wall time 600.0 s"  # 00:00 to 00:10
    assert "summed over cells" in page.locator("#cells-time").inner_text()
    page.goto(base_of(viewer_url) + f"/runs/{WHOLE}")
    assert page.locator("#partial").count() == 0


def test_a_dead_run_reads_the_same_in_every_listing(viewer_url: str, store_path: Path, browser: object,
                                                    tmp_path: Path) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(viewer_url)
    assert page.locator(f'#runs tr[data-run="{DEAD}"]').get_attribute("data-status") == GONE
    assert page.locator("#live").count() == 0  # no "a run is going", no polling
    page.goto(base_of(viewer_url) + f"/runs/{DEAD}")
    listed = run_cli("runs", "--store", str(store_path), "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = {r["run_id"]: r for r in json.loads(listed.stdout)}
    assert rows[DEAD]["status"] == GONE
    assert rows[PARTIAL]["partial"] == "run.limit=1 run.tags=[fast]" and rows[WHOLE]["partial"] == ""
