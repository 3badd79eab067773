"""The viewer's SQL on real store files: saved run summaries (and when they stop holding), the grid's
pages, filters, search and sort, regressions against a base run, and one case whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalhydra.analysis.runsummary import overall_interval, run_summary, target_rows
from evalhydra.store.db import Batch, Store, open_store
from evalhydra.viewer.grid import GRID_PAGE, case_view, grid_page, previous_run
from evalhydra.viewer.live import LiveSummaries
from evalhydra.viewer.queries import run_status, runs_page, selection_summary, summaries
from tests.conftest import smoke_eval, write_registry
from tests.helpers import numbered_registry, run_cli
from tests.reports.support import regression_store, result_row, write_run

BASE, CAND = "eval-base-aaaaaaaa", "eval-cand-bbbbbbbb"


def saved(store: Store, run_id: str) -> dict[str, object] | None:
    row = store.conn.execute("select summary from run_summaries where run_id = ?", [run_id]).fetchone()
    return json.loads(row[0]) if row else None


def test_a_finished_run_keeps_its_summary_and_the_viewer_reads_it(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 3)
    assert run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}", "trials=2",
                   "run.progress=false", cwd=tmp_path).returncode == 0
    store = open_store(tmp_path / "s.db")
    (run_id,) = [r["run_id"] for r in store.runs()]
    kept = saved(store, run_id)
    assert kept == run_summary(store.conn, [run_id])
    assert kept is not None and kept["cells"] == 6
    # what the viewer shows is the saved row: a doctored one shows through (nothing was recomputed)
    doctored = {**kept, "targets": [{**kept["targets"][0], "cost": 123.0}]}  # type: ignore[list-item, dict-item]
    store.save_run_summary(run_id, doctored)
    assert summaries(store.conn, [run_id])[run_id]["targets"][0]["cost"] == 123.0
    store.close()


def test_a_saved_summary_holds_when_a_later_run_sends_its_cells_again(tmp_path: Path) -> None:
    """Issue 48: a later run that re-sends a cell adds a version; the earlier run's rows, and so its
    saved summary, stay what they were."""
    store = regression_store(tmp_path / "s.db")
    store.save_run_summary(BASE, run_summary(store.conn, [BASE]))
    kept = saved(store, BASE)
    assert kept is not None
    later = "eval-later-cccccccc"
    again = {**result_row(BASE, "c00", 1, passed=False), "run_id": later}  # the same cell, sent again
    store.write(Batch(results=[again], members=[(later, again["cell_key"])]))
    assert saved(store, BASE) == kept == run_summary(store.conn, [BASE])  # what BASE measured
    assert run_summary(store.conn, [later])["targets"][0]["passed"] == 0  # the later run's own version
    store.close()


def test_a_summary_of_a_running_or_grown_run_is_computed_from_its_results(tmp_path: Path) -> None:
    store = regression_store(tmp_path / "s.db")
    store.save_run_summary(BASE, {"cells": 60, "targets": []})  # a stale one: it lists no target
    assert summaries(store.conn, [BASE])[BASE]["targets"] == []
    extra = result_row(BASE, "c99", 1)
    store.write(Batch(results=[extra], members=[(BASE, extra["cell_key"])]))  # a resumed run grew
    assert summaries(store.conn, [BASE])[BASE]["cells"] == 61
    store.save_run_summary(BASE, {"cells": 61, "targets": []})
    store.finish_run(BASE, status="running")
    assert summaries(store.conn, [BASE])[BASE]["cells"] == 61
    assert summaries(store.conn, [BASE])[BASE]["targets"] != []
    store.close()


def test_the_run_list_and_two_runs_together_match_the_results(tmp_path: Path) -> None:
    store = regression_store(tmp_path / "s.db", cases=20, broken=10)
    rows, more = runs_page(store.conn)
    assert [r["run_id"] for r in rows] == [CAND, BASE] and not more
    assert runs_page(store.conn, "cand")[0][0]["run_id"] == CAND and runs_page(store.conn, "nope")[0] == []
    store.finish_run(BASE, status="interrupted", exit_code=130)
    assert [r["run_id"] for r in runs_page(store.conn, status="interrupted")[0]] == [BASE]
    assert runs_page(store.conn, status="gate")[0] == []
    # issue 50: a search is literal text, % and _ no wildcards
    assert runs_page(store.conn, "%")[0] == [] and runs_page(store.conn, "eval_base")[0] == []
    assert [r["run_id"] for r in runs_page(store.conn, "eval-base")[0]] == [BASE]
    cand = rows[0]
    assert (cand["cells"], cand["errors"], cand["targets"], cand["evals"]) == (60, 0, ["svc/m"], ["g.e"])
    assert cand["rate"].estimate == 0.5 and cand["rate"].low < 0.5 < cand["rate"].high
    both = selection_summary(store.conn, [BASE, CAND])  # same target twice: computed together
    assert both == run_summary(store.conn, [BASE, CAND]) and both["cells"] == 120
    row = target_rows(both)[0]
    assert (row.n, row.passed, row.failed) == (120, 90, 30)
    assert overall_interval(both).n_cases == 20  # the two runs share their 20 cases
    status = run_status(store.conn, [CAND])
    assert status is not None
    assert (status["cells"], status["passed"], status["status"]) == (60, 30, "completed")
    assert run_status(store.conn, ["eval-nope"]) is None
    store.close()


def test_the_grid_pages_filters_searches_and_sorts_in_sql(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    rows = []
    for i in range(GRID_PAGE + 10):
        passed = [i % 3 != 0, i % 3 != 0 or i % 2 == 0]  # every third fails; half of those once
        rows += [result_row(CAND, f"c{i:03d}", t + 1, passed=ok, output=f"answer {i}" if ok else f"bad {i}")
                 for t, ok in enumerate(passed)]
    rows.append(result_row(CAND, "c999", 1, passed=False, error_kind="http_error", status="ERROR"))
    write_run(store, CAND, rows)
    first = grid_page(store.conn, [CAND])
    assert len(first.cases) == GRID_PAGE and first.more and first.cases[0]["case"] == "c000"
    assert first.targets == ["svc/m"]
    assert [t["output"] for t in first.cases[1]["targets"]["svc/m"]] == ["answer 1", "answer 1"]
    second = grid_page(store.conn, [CAND], page=1)
    assert [c["case"] for c in second.cases][-2:] == ["c059", "c999"] and not second.more
    failures = grid_page(store.conn, [CAND], filter="failures")
    assert {c["case"] for c in failures.cases} == {f"c{i:03d}" for i in range(0, GRID_PAGE + 10, 3)}
    flaky = grid_page(store.conn, [CAND], filter="flaky")
    assert {c["case"] for c in flaky.cases} == {f"c{i:03d}" for i in range(0, GRID_PAGE + 10, 6)}
    assert [c["case"] for c in grid_page(store.conn, [CAND], filter="errors").cases] == ["c999"]
    assert [c["case"] for c in grid_page(store.conn, [CAND], query="BAD 9").cases] == ["c009"]
    worst = grid_page(store.conn, [CAND], sort="worst").cases
    assert worst[0]["case"] == "c003" and worst[-1]["case"] not in {c["case"] for c in failures.cases}
    assert grid_page(store.conn, [CAND], filter="differ").cases == []  # one target: nothing differs
    assert grid_page(store.conn, [CAND], filter="nonsense").filter == "all"
    store.close()


def test_regressions_are_cases_that_pass_less_than_in_the_base_run(tmp_path: Path) -> None:
    store = regression_store(tmp_path / "s.db", cases=20, broken=5)
    assert previous_run(store.conn, [CAND]) == BASE and previous_run(store.conn, [BASE]) is None
    regressed = grid_page(store.conn, [CAND], filter="regressions", base=BASE)
    assert [c["case"] for c in regressed.cases] == ["c00", "c01", "c02", "c03", "c04"]
    assert grid_page(store.conn, [BASE], filter="regressions", base=CAND).cases == []
    assert grid_page(store.conn, [CAND], filter="regressions").cases == []  # no base: none claimed
    store.close()


def test_a_case_is_read_whole_with_its_attempts(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    long_output = "x" * 5000
    row = result_row(CAND, "c1", 1, passed=False, output=long_output, feedback="too long",
                     judge_model="judge-m", rubric_scores={"brevity": 0.1},
                     grader_scores={"short": {"score": 0.0, "passed": False}})
    write_run(store, CAND, [row, result_row(CAND, "c1", 2)])
    view = case_view(store.conn, [CAND], "g.e", "c1")
    assert view is not None and view.input == "say c1" and view.ideal == "c1"
    first, second = view.trials["svc/m"]
    assert first["output"] == long_output and first["feedback"] == "too long"
    assert first["rubric_scores"] == {"brevity": 0.1} and second["status"] == "PASS"
    assert first["grader_scores"] == {"short": {"score": 0.0, "passed": False}}
    assert case_view(store.conn, [CAND], "g.e", "nope") is None
    store.close()


def test_a_summary_keeps_each_graders_figures_and_a_sweep_merges_them(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    for run_id, service in ((BASE, "svc-a"), (CAND, "svc-b")):
        write_run(store, run_id, [result_row(run_id, f"c{i}", 1, service_name=service,
                                             grader_scores={"exact": {"score": float(i), "passed": i == 1}})
                                  for i in (0, 1)])
    one = run_summary(store.conn, [BASE])["graders"]
    assert [(g["grader"], g["n"], g["passed"], g["mean_score"]) for g in one] == [("exact", 2, 1, 0.5)]
    both = selection_summary(store.conn, [BASE, CAND])  # apart targets: merged from the two summaries
    assert [g["service"] for g in both["graders"]] == ["svc-a", "svc-b"]
    store.close()


def test_compare_links_every_case_even_with_a_slash_in_its_id(tmp_path: Path) -> None:
    """Issue 50, item 1: HumanEval-style ids (``HumanEval/0``) link to their case; past 20
    regressions the rest are counted; the heading names both sides."""
    import re

    from starlette.testclient import TestClient

    import evalhydra
    from evalhydra.viewer.app import create_app

    lines = "".join(json.dumps({"id": f"HumanEval/{i}", "input": f"Reply with exactly V{i}.",
                                "ideal": f"V{i}"}) + "\n" for i in range(25))
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval("g.e")},
                              data={"data/g/e/test.jsonl": lines})
    common = [f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}"]
    good = evalhydra.evaluate(common)
    bad = evalhydra.evaluate([*common, "service.mock.fixed_reply=WRONG"])
    with TestClient(create_app(tmp_path / "s.db", "t0k3n"), base_url="http://127.0.0.1") as client:
        client.get("/?token=t0k3n")
        page = client.get("/compare", params={"base": str(good.run_id), "candidate": str(bad.run_id)})
        assert page.status_code == 200
        assert f"<h1>{good.run_id} → {bad.run_id}</h1>" in page.text and "and 5 more" in page.text
        links = set(re.findall(r'href="(/runs/[^"]+/case\?[^"]+)"', page.text))
        assert len(links) >= 20
        for link in links:
            case = client.get(link.replace("&amp;", "&"))
            assert case.status_code == 200 and "HumanEval/" in case.text, link


def test_a_run_whose_process_is_gone_shows_interrupted_without_a_write(tmp_path: Path) -> None:
    """Issue 50, item 2: a run killed with -9 on this host reads as interrupted in the viewer
    (list and live status) while the store, opened read-only, is left as it is."""
    import socket
    import sqlite3
    import subprocess
    import sys

    from evalhydra.store.runinfo import GONE

    store = regression_store(tmp_path / "s.db")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.conn.execute("update runs set status = 'running', hostname = ?, pid = ? where run_id = ?",
                       [socket.gethostname(), dead.pid, BASE])
    store.conn.commit()
    store.close()
    reader = open_store(tmp_path / "s.db", read_only=True)
    listed = {r["run_id"]: r["status"] for r in runs_page(reader.conn)[0]}
    status = run_status(reader.conn, [BASE])
    reader.close()
    assert listed[BASE] == GONE and listed[CAND] != GONE
    assert status is not None and status["status"] == GONE
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute("select status from runs where run_id = ?", [BASE]).fetchone()[0] == "running"
    conn.close()


def test_an_error_cell_shows_its_kind_and_no_score_and_a_case_its_versions_attempts(tmp_path: Path) -> None:
    """Issue 50, item 3: an errored trial is its error kind in the grid, with no score; the case page
    of a run lists the attempts of that run's version only (issue 48)."""
    store = regression_store(tmp_path / "s.db")
    key = result_row(BASE, "c00", 1)["cell_key"]
    errored = {**result_row(CAND, "c00", 1, passed=False), "cell_key": key, "status": "ERROR",
               "error_kind": "timeout", "score": 0.0}
    attempts = [{"cell_key": key, "run_id": run, "call": "candidate", "attempt": 1, "status_code": code,
                 "latency_ms": 1.0} for run, code in ((BASE, 200), (CAND, 504))]
    store.write(Batch(results=[errored], members=[(CAND, key)], attempts=attempts))
    page = grid_page(store.conn, [CAND])
    trials = page.cases[0]["targets"]["svc/m"]
    assert [(t["error"], t["score"]) for t in trials if t["error"]] == [("timeout", None)]
    assert all(t["score"] is not None for t in trials if not t["error"])
    view = case_view(store.conn, [BASE], "g.e", "c00")
    assert view is not None
    assert [a[2] for t in view.trials["svc/m"] if t["run_index"] == 1 for a in t["attempts"]] == [200]
    store.close()


def test_back_from_a_case_keeps_the_grids_filter_sort_and_search(tmp_path: Path) -> None:
    """Issue 50, item 3: a case opened from a filtered, sorted, searched grid page leads back to it."""
    import html
    import re

    from starlette.testclient import TestClient

    from evalhydra.viewer.app import create_app

    regression_store(tmp_path / "s.db").close()
    with TestClient(create_app(tmp_path / "s.db", "t0k3n"), base_url="http://127.0.0.1") as client:
        client.get("/?token=t0k3n")
        grid = client.get(f"/runs/{CAND}", params={"filter": "failures", "sort": "worst", "q": "c0"})
        first = html.unescape(re.findall(r'class="case" href="([^"]+)"', grid.text)[0])
        case = client.get(first)
        found = re.search(r'id="back" href="([^"]+)"', case.text)
        assert found is not None
        back = html.unescape(found.group(1))
    assert back.startswith(f"/runs/{CAND}?")
    assert all(part in back for part in ("filter=failures", "sort=worst", "q=c0"))


def test_the_grid_pages_by_key_forwards_and_backwards_over_every_case(tmp_path: Path) -> None:
    """Issue 50, item 5: the whole grid in case order is read from a key, so its last page costs
    what its first does; walking forwards and backwards gives every case once, in order."""
    cases = 2 * GRID_PAGE + 7
    store = regression_store(tmp_path / "s.db", cases=cases, broken=0)
    every = sorted(("g.e", f"c{i:02d}") for i in range(cases))
    forward: list[tuple[str, str]] = []
    page = grid_page(store.conn, [CAND])
    while True:
        forward += [(c["eval"], c["case"]) for c in page.cases]
        if not page.more:
            break
        assert page.keyset and page.last is not None
        page = grid_page(store.conn, [CAND], after=page.last, page=page.page + 1)
    assert forward == every
    last = grid_page(store.conn, [CAND], last=True)
    assert [(c["eval"], c["case"]) for c in last.cases] == every[-GRID_PAGE:]
    assert not last.more and last.earlier
    backward = [(c["eval"], c["case"]) for c in last.cases]
    page = last
    while page.earlier:
        assert page.first is not None
        page = grid_page(store.conn, [CAND], before=page.first)
        backward = [(c["eval"], c["case"]) for c in page.cases] + backward
        assert page.more
    assert backward == every
    store.close()


def _without_graders(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary to compare: sums of floats rounded (they are added in another order)."""
    targets = [{**t, "cost": round(t["cost"], 9), "seconds": round(t["seconds"], 9)}
               for t in summary["targets"]]
    return {**summary, "graders": [], "targets": targets}


def test_a_running_runs_summary_grows_with_each_cell_stored_as_a_full_one_would(tmp_path: Path) -> None:
    """Issue 50, item 2: a running run's summary adds only the cells stored since the last look, and
    equals the one computed over all its results; a replaced membership starts it again."""
    store = open_store(tmp_path / "s.db")
    run = "eval-live-dddddddd"
    store.start_run({"run_id": run, "kind": "chat", "started_at": "2026-01-03T00:00:00.000Z",
                     "status": "running", "fingerprint": "f"})
    live = LiveSummaries()
    rows = [result_row(run, f"c{i % 7}", i // 7 + 1, passed=i % 3 > 0, service_name=f"svc-{i % 2}",
                       cost_usd=0.001 * i) for i in range(40)]
    for i, row in enumerate(rows):  # judges too: two of them, some results unjudged
        if i % 5:
            row.update(judge_service="mock", judge_model=f"judge-{i % 3 // 2}")
    for start in range(0, 40, 9):
        chunk = rows[start:start + 9]
        store.write(Batch(results=chunk, members=[(run, r["cell_key"]) for r in chunk]))
        got = summaries(store.conn, [run], live)[run]
        assert _without_graders(got) == _without_graders(run_summary(store.conn, [run]))
        assert any(t["judges"] for t in got["targets"])
    assert live.summary(store.conn, run)["cells"] == 40
    again = {**rows[0], "passed": False, "status": "FAIL"}  # the run writes a cell over
    store.write(Batch(results=[again], members=[(run, again["cell_key"])]))
    assert _without_graders(live.summary(store.conn, run)) == _without_graders(run_summary(store.conn, [run]))
    assert run_status(store.conn, [run], live)["cells"] == 40  # type: ignore[index]
    store.close()
