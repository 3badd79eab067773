"""Issue 52, item 4 in the viewer: the compare page offers the judge-corrected comparison when the
store holds labels, and shows what ``compare --judge-corrected`` computes. Two runs judge the same
40 outputs: a lenient judge passes 28, a strict one 16; people pass 20. Raw, the candidate
regressed on 12 cases; corrected, both pass 50 %. The viewer runs in its own process over a real
store; pages are fetched over HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evalhydra.analysis import judgecompare
from evalhydra.analysis.comparison import Target, compare
from evalhydra.analysis.runsummary import run_summary
from evalhydra.store.db import immediate, open_store
from evalhydra.store.fractions import fractions_valid
from evalhydra.store.labels import import_labels
from tests.reports.support import result_row, write_run
from tests.viewer.test_viewer import base_of, start_viewer, stop

BASE, CAND = "eval-lenient-aaaaaaaa", "eval-strict-bbbbbbbb"
CASES, PEOPLE_PASS = 40, 20


def _judged(run_id: str, judge: str, passes: int) -> list[dict[str, object]]:
    return [result_row(run_id, f"c{i}", passed=i < passes, output=f"answer {i}", judge_service="mock",
                       judge_model=judge, cell_key=f"k{i}") for i in range(CASES)]


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("judgecompare") / "s.db"
    store = open_store(path)
    plain = [result_row(BASE, "x0", eval_id="g.plain", cell_key="p0")]  # an eval no judge scored
    write_run(store, BASE, _judged(BASE, "lenient", 28) + plain)
    write_run(store, CAND, _judged(CAND, "strict", 16) + [{**plain[0], "run_id": CAND}],
              started="2026-01-02T00:00:00.000Z")
    with immediate(store.conn):
        import_labels(store.conn, [(f"line {i}", {"eval": "g.e", "case": f"c{i}",
                                                  "label": "PASS" if i < PEOPLE_PASS else "FAIL"})
                                   for i in range(CASES)], "ana")
    store.close()
    return path


@pytest.fixture(scope="module")
def client(store_path: Path) -> Iterator[httpx.Client]:
    proc, url = start_viewer(store_path)
    with httpx.Client(base_url=base_of(url), follow_redirects=True, timeout=30) as http:
        http.get(url)  # the token, then the cookie
        yield http
    stop(proc)


def _toggle(page: str) -> str:
    (href,) = re.findall(r'<a id="judge-toggle" href="([^"]*)"', page)
    return href.replace("&amp;", "&")


def test_the_compare_page_turns_the_judge_correction_on_and_off(client: httpx.Client,
                                                                 store_path: Path) -> None:
    raw = client.get("/compare", params={"base": BASE, "candidate": CAND}).text
    assert "<b>regression</b>" in raw and 'id="judge-corrected"' not in raw  # raw: the judge's change
    page = client.get(_toggle(raw))
    assert page.status_code == 200
    section = page.text.split('id="judge-corrected"', 1)[1]
    store = open_store(store_path)
    expected = compare(store.conn, Target(BASE, (BASE,), None, None), Target(CAND, (CAND,), None, None),
                       judge_corrected=True)
    store.close()
    block = next(r["judge_corrected"] for r in expected.rows if r["eval_id"] == "g.e")
    assert block["difference"] == pytest.approx(0.0, abs=1e-9)  # 50 % on both sides, corrected
    shown = f"{block['difference']:+z.3f} [{block['ci_low']:+z.3f}, {block['ci_high']:+z.3f}]"
    assert f'<td class="num corrected-delta">{shown}</td>' in section
    assert "<td>mock/lenient</td>" in section and "<td>mock/strict</td>" in section
    assert "the raw regression is not significant after judge correction" in section
    assert "not corrected: the baseline" in section  # the eval no judge scored keeps its raw verdict
    assert "judge_corrected" not in _toggle(page.text)  # and back to the raw verdicts


@pytest.mark.slow
def test_without_labels_the_page_offers_no_correction(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    write_run(store, BASE, _judged(BASE, "lenient", 28))
    write_run(store, CAND, _judged(CAND, "strict", 16), started="2026-01-02T00:00:00.000Z")
    store.close()
    proc, url = start_viewer(tmp_path / "s.db")
    try:
        with httpx.Client(base_url=base_of(url), follow_redirects=True, timeout=30) as http:
            http.get(url)
            page = http.get("/compare", params={"base": BASE, "candidate": CAND}).text
            assert 'id="judge-toggle"' not in page
            asked = http.get("/compare", params={"base": BASE, "candidate": CAND, "judge_corrected": "1"})
            assert asked.status_code == 200
            assert "not corrected: " in asked.text.split('id="judge-corrected"', 1)[1]  # no labels
    finally:
        stop(proc)


def test_saved_summaries_and_fractions_give_the_same_correction(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Finished runs with saved summaries and per-case fractions are compared from them (their
    judges named by the summary, no pass over the results): the same blocks as from the results."""
    store = open_store(tmp_path / "s.db")
    write_run(store, BASE, _judged(BASE, "lenient", 28) + [
        result_row(BASE, "x0", eval_id="g.plain", cell_key="p0")])  # an eval no judge scored
    write_run(store, CAND, _judged(CAND, "strict", 16) + [
        result_row(CAND, "x0", eval_id="g.plain", cell_key="p0", passed=False)],
        started="2026-01-02T00:00:00.000Z")
    with immediate(store.conn):
        import_labels(store.conn, [(f"line {i}", {"eval": "g.e", "case": f"c{i}",
                                                  "label": "PASS" if i < PEOPLE_PASS else "FAIL"})
                                   for i in range(CASES)], "ana")
    sides = Target(BASE, (BASE,), None, None), Target(CAND, (CAND,), "svc", None)
    scanned = compare(store.conn, *sides, judge_corrected=True).to_json()
    for run_id in (BASE, CAND):
        store.save_run_summary(run_id, run_summary(store.conn, [run_id]))
    assert all(fractions_valid(store.conn, run_id) for run_id in (BASE, CAND))

    def no_pass(*args: object) -> None:
        raise AssertionError("the judges were read from the results")

    monkeypatch.setattr(judgecompare, "judges_of", no_pass)
    saved = compare(store.conn, *sides, judge_corrected=True).to_json()
    assert saved == scanned
    blocks = {r["eval_id"]: r["judge_corrected"] for r in saved["comparisons"]}
    assert blocks["g.plain"]["problem"] == "the baseline's results were not all scored by a judge"
    assert blocks["g.e"]["candidate_judge"] == "mock/strict"
    store.close()
