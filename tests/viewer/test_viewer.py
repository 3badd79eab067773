"""``evalhydra view`` (issue 36): the server in its own process, its token gate, and its pages in
headless Chromium (Debian's, driven by Playwright): the run list, a run's grid and a case, two runs
compared, a live run's counts rising, hostile stored text staying text.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from evalhydra.store.db import immediate, open_store
from evalhydra.store.labels import import_labels
from evalhydra.viewer.gate import COOKIE
from tests.helpers import numbered_registry, run_cli, start_cli, wait_for
from tests.reports.support import result_row, write_run

#: The live banner's data attributes, as the page's script sees them.
LIVE = "document.getElementById('live').dataset"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: As the machine's notes have it: without the background-networking flags Chromium keeps calling out.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store with two runs of 4 cases × 2 trials; the second answers case c1 wrongly."""
    root = tmp_path_factory.mktemp("runs")
    registry = numbered_registry(root / "reg", 4)
    base = [f"registry={registry}", "eval=g.e", f"store.path={root / 's.db'}", "trials=2",
            "run.progress=false"]
    assert run_cli(*base, cwd=root).returncode == 0
    lines = (registry / "data/g/e/test.jsonl").read_text().replace('"ideal": "V1"', '"ideal": "NOPE"')
    (registry / "data/g/e/test.jsonl").write_text(lines)
    assert run_cli(*base, cwd=root).returncode == 0
    store = open_store(root / "s.db", read_only=True)
    ids = [r["run_id"] for r in store.query("select run_id from runs order by started_at")]
    store.close()
    return root / "s.db", ids


def start_viewer(store: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "evalhydra", "view", "--store", str(store), "--no-browser", *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CI": "true"})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("evalhydra view: http://127.0.0.1:"):
        raise AssertionError(line + stop(proc)[1])
    return proc, line.split(": ", 1)[1].strip()


@pytest.fixture
def viewer(two_runs: tuple[Path, list[str]]) -> Iterator[str]:
    proc, url = start_viewer(two_runs[0])
    yield url
    stop(proc)


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C the server; its exit code and what it wrote to stderr (its pipes closed)."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def wait_until(page: Any, expression: str, timeout_s: float = 30.0) -> None:
    """Poll a page's ``expression`` from here until it is true: the viewer's policy forbids the
    string evaluation Playwright's ``wait_for_function`` runs inside the page."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout_s:g} s: {expression}"
        page.wait_for_timeout(100)


def base_of(url: str) -> str:
    return url.split("/?", 1)[0]


def test_only_the_printed_url_gets_in_and_nothing_writes(viewer: str,
                                                          two_runs: tuple[Path, list[str]]) -> None:
    base = base_of(viewer)
    assert httpx.get(base + "/").status_code == 403
    assert httpx.get(base + "/?token=guess").status_code == 403
    first = httpx.get(viewer)
    cookie = f"{COOKIE}_{base.rsplit(':', 1)[1]}"  # one per port: two viewers keep their own
    assert first.status_code == 303 and first.headers["location"] == "/" and cookie in first.cookies
    with httpx.Client(base_url=base, cookies=first.cookies) as client:
        page = client.get("/")
        assert page.status_code == 200 and all(run_id in page.text for run_id in two_runs[1])
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert client.request(method, "/").status_code == 405
        status = client.get(f"/api/runs/{two_runs[1][0]}").json()
        counts = (status["status"], status["cells"], status["passed"], status["errors"])
        assert counts == ("completed", 8, 8, 0)
        assert client.get("/runs/eval-nope").status_code == 404
        assert client.get("/compare?base=eval-nope&candidate=x").status_code == 400
        assert 'id="live"' in client.get(f"/runs/{two_runs[1][1]}").text


def test_hostile_requests_are_refused_never_a_500_and_every_answer_is_hardened(
        viewer: str, two_runs: tuple[Path, list[str]]) -> None:
    """Issue 50, item 5: another Host is 421 (DNS rebinding); non-ASCII tokens and cookies, huge
    page numbers are refused or read safely; every answer carries the security headers."""
    base = base_of(viewer)
    port = base.rsplit(":", 1)[1]
    assert httpx.get(viewer, headers={"host": f"evil.example:{port}"}).status_code == 421
    assert httpx.get(base + "/?token=%C3%A9t%C3%A9").status_code == 403
    odd = httpx.get(base + "/", headers={"cookie": f"{COOKIE}_{port}=\u00e9t\u00e9".encode()})
    assert odd.status_code == 403
    first = httpx.get(viewer)
    with httpx.Client(base_url=base, cookies=first.cookies) as client:
        page = client.get(f"/runs/{two_runs[1][0]}", params={"page": "1" + "0" * 20})
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        nonce = policy.split("'nonce-", 1)[1].split("'", 1)[0]
        assert f'<script nonce="{nonce}">' in page.text and "frame-ancestors 'none'" in policy
        assert (page.headers["referrer-policy"], page.headers["x-content-type-options"],
                page.headers["cache-control"]) == ("no-referrer", "nosniff", "no-store")
        assert client.get("/?q=%25").status_code == 200
        run = two_runs[1][0]
        odd_params = [  # each new page's parameters, malformed: a page or a 4xx, never a 500
            (f"/runs/{run}?after_eval=%ED%B3%BF&after_case={'x' * 5000}&from_end=-1", {}),  # not UTF-8
            (f"/runs/{run}", {"before_eval": "g.e", "before_case": "\x00", "last": ""}),
            (f"/runs/{run}", {"filter": "regressions", "base": "%_*"}),
            (f"/runs/{run}/case", {"eval": "g.e", "case": "c1", "a": "nope", "b": "", "trial": "99" * 30}),
            (f"/runs/{run}/case", {"eval": "g.e", "case": "c1", "back": "filter=nope&sort=%00&after_eval=x"}),
            (f"/runs/{run}/changes", {"list": "regressed", "row": "1" + "0" * 30}),
            (f"/runs/{run}/changes", {"list": "__class__", "row": "0"}),
            ("/compare", {"base": run, "candidate": run, "list": "regressed", "row": "-1"}),
            ("/compare", {"base": run, "candidate": run, "list": "regressed", "row": "0", "page": "9" * 40}),
            (f"/runs/{run}/export.csv", {"filter": "nope", "sort": "'; drop table results; --"}),
            (f"/runs/{run}/export.exe", {}),
            (f"/runs/{run},nope/export.jsonl", {}),
        ]
        for path, params in odd_params:
            answer = client.get(path, params=params)
            assert answer.status_code in (200, 400, 404), (path, params, answer.status_code)


def test_an_unreadable_store_answers_503_naming_it(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from evalhydra.viewer.app import create_app

    store = tmp_path / "s.db"
    store.write_bytes(b"not a store at all" * 100)
    with TestClient(create_app(store, "t0k3n"), base_url="http://127.0.0.1") as client:
        answer = client.get("/?token=t0k3n")
    assert answer.status_code == 503 and "the store cannot be read" in answer.text


def test_a_page_whose_queries_run_too_long_answers_503_saying_so(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 61, item 4: the viewer's queries run under a time limit (here none is left)."""
    from starlette.testclient import TestClient

    from evalhydra.store import timelimit
    from evalhydra.store.db import open_store
    from evalhydra.viewer import app
    from tests.reports.support import result_row, write_run

    path = tmp_path / "s.db"
    store = open_store(path)
    write_run(store, "eval-many-aaaaaaaa", [result_row("eval-many-aaaaaaaa", f"c{i}", cell_key=f"k{i}")
                                           for i in range(400)])
    store.close()
    with TestClient(app.create_app(path, "t0k3n"), base_url="http://127.0.0.1") as client:
        assert client.get("/?token=t0k3n").status_code == 200
        monkeypatch.setattr(app, "PAGE_QUERY_S", 0.0)
        monkeypatch.setattr(timelimit, "_STEPS", 1000)  # looks at the clock inside these small queries
        answer = client.get("/runs/eval-many-aaaaaaaa")
    assert answer.status_code == 503 and "queries ran longer than 0 s and were stopped" in answer.text


@pytest.mark.slow
def test_ctrl_c_stops_the_server_cleanly(two_runs: tuple[Path, list[str]]) -> None:
    proc, url = start_viewer(two_runs[0], "--port", "0")
    assert httpx.get(url).status_code == 303
    code, err = stop(proc)
    assert code == 0 and "Traceback" not in err


@pytest.mark.slow
def test_a_wider_host_is_warned_about(two_runs: tuple[Path, list[str]]) -> None:
    argv = [sys.executable, "-m", "evalhydra", "view", "--store", str(two_runs[0]), "--no-browser",
            "--host", "0.0.0.0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("evalhydra view: http://0.0.0.0:")
    assert "warning: --host 0.0.0.0" in stop(proc)[1]


# -- in a real browser ------------------------------------------------------------------------------


@pytest.fixture
def browser() -> Iterator[object]:
    assert CHROMIUM, "chromium is needed (apt-get install chromium; .ci/run installs it)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def shots() -> Path | None:
    """Where the walkthrough saves screenshots (docs/images when asked), or None."""
    folder = os.environ.get("EVALHYDRA_SCREENSHOTS")
    return Path(folder) if folder else None


@pytest.mark.slow
def test_a_user_walks_from_the_run_list_to_a_case_and_compares_two_runs(
        viewer: str, two_runs: tuple[Path, list[str]], browser: object) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    refused: list[str] = []  # what the page's security policy blocked (nothing of the viewer's own)
    page.on("console", lambda note: refused.append(note.text) if "Security Policy" in note.text else None)
    page.goto(viewer)
    assert page.locator("#runs tbody tr").count() == 2
    listed = page.locator("#runs").inner_text()
    assert listed.count("no gate") == 2 and "gate failed" not in listed  # both measured, none gated
    if shots():
        page.screenshot(path=str(shots() / "viewer-runs.png"))  # type: ignore[operator]
    first, second = two_runs[1]
    page.click(f'a[href="/runs/{second}"]')
    page.wait_for_selector("#grid tbody tr")
    wait_until(page, f"{LIVE}.status === 'completed'")
    assert "8 of 8 cells stored" in page.locator("#live-status").inner_text()
    assert page.locator("#grid tbody tr").count() == 4
    assert page.locator('#grid tr[data-key="g.e/c2"] .out').all_inner_texts() == ["V2", "V2"]  # both trials
    page.click('[data-filter="failures"]')
    page.wait_for_url("**filter=failures**")
    assert [page.locator("#grid tbody tr").nth(0).get_attribute("data-key")] == ["g.e/c1"]
    assert page.locator("#grid tbody tr").count() == 1
    if shots():
        page.screenshot(path=str(shots() / "viewer-run.png"), full_page=False)  # type: ignore[operator]
    page.click('#grid tr[data-key="g.e/c1"] td.input')  # anywhere on the row opens the case
    page.wait_for_selector("#case")
    case = page.locator("#case").inner_text()
    assert page.locator("#case-title").inner_text() == "g.e / c1"
    assert "NOPE" in case and "output did not exactly match ideal" in case
    assert page.locator(".trial").count() == 2
    if shots():
        page.screenshot(path=str(shots() / "viewer-case.png"), full_page=False)  # type: ignore[operator]
    page.go_back()
    page.fill("#search", "V3")
    page.press("#search", "Enter")
    page.wait_for_url("**q=V3**")
    assert page.locator("#grid tbody tr[data-key]").count() == 0  # the failures filter holds: c3 passed
    page.click('[data-filter="all"]')
    page.wait_for_url(lambda url: "filter=" not in url and "q=V3" in url)
    assert [page.locator("#grid tbody tr").nth(0).get_attribute("data-key")] == ["g.e/c3"]
    page.click('a[href="/"]')
    page.check(f'input.pick[value="{second}"]')  # ticked top-down: the newer run first
    page.check(f'input.pick[value="{first}"]')
    assert page.locator("#compare-sides").inner_text() == f"baseline {first} (older) → candidate {second}"
    page.click("#swap")
    assert page.locator("#compare-sides").inner_text() == f"baseline {second} (newer) → candidate {first}"
    page.click("#swap")
    page.click("#compare")
    page.wait_for_selector("#comparisons")
    assert f"base={first}" in page.url and f"candidate={second}" in page.url  # older → newer
    assert page.locator("#baseline-side .targets").inner_text() == "mock/mock-model"
    assert page.locator("#candidate-side .targets").inner_text() == "mock/mock-model"
    assert "c1" in page.locator("#comparisons").inner_text()  # the regressed case is named
    page.click("#comparisons a:text('c1')")
    page.wait_for_selector("#case")
    assert page.locator(".target").count() == 2 and page.locator(".trial").count() == 4  # a column per run
    assert page.locator("#side-by-side .column").count() == 2  # the two runs' answers side by side
    # the same answer V1, judged against another ideal: nothing in the diff is removed or added
    assert page.locator("#diff").inner_text() == "V1" and page.locator("#diff del, #diff ins").count() == 0
    page.go_back()
    page.click("#regressions")
    page.wait_for_url("**filter=regressions**")
    assert [tr.get_attribute("data-key") for tr in page.locator("#grid tbody tr").all()] == ["g.e/c1"]
    assert refused == []


@pytest.mark.slow
def test_a_live_run_page_counts_up_while_the_run_writes(tmp_path: Path, browser: object) -> None:
    registry = numbered_registry(tmp_path / "reg", 12)
    store = tmp_path / "s.db"
    run = start_cli(f"registry={registry}", "eval=g.e", f"store.path={store}", "run.concurrency=1",
                    "service.mock.latency_ms=400", "run.progress=false", cwd=tmp_path)
    wait_for(lambda: store.exists() and _run_id(store) is not None, timeout=60)
    proc, url = start_viewer(store)
    try:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(url.replace("/?", f"/runs/{_run_id(store)}?"))
        wait_until(page, f"{LIVE}.status === 'running'")
        page.evaluate("window.stillThisPage = true")  # gone if the page reloads
        seen = int(page.locator("#live").get_attribute("data-cells") or 0)
        wait_until(page, f"Number({LIVE}.cells) > {seen}", 30)
        wait_until(page, f"{LIVE}.status === 'completed'", 60)
        assert page.locator("#live").get_attribute("data-cells") == "12"
        wait_until(page, "document.querySelectorAll('#grid tbody tr').length === 12")
        assert page.evaluate("window.stillThisPage === true")  # the rows came in without a reload
    finally:
        stop(proc)
        run.communicate(timeout=60)
    assert run.returncode == 0


def _run_id(store: Path) -> str | None:
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            found = conn.execute("select run_id from runs limit 1").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return found[0] if found else None


HOSTILE = "eval-hostile-aaaaaaaa"



@pytest.mark.slow
def test_hostile_stored_text_stays_text_in_every_page(tmp_path: Path, browser: object) -> None:
    store = open_store(tmp_path / "s.db")
    evil = '<img src=x id="pwned1" onerror="window.pwned=1">'
    write_run(store, HOSTILE, [
        result_row(HOSTILE, "c1", passed=False, output=evil, failure_reason='<b id="pwned2">x</b>',
                   eval_id=evil, service_name='<i id="pwned3">s</i>', judge_model=evil,
                   judge_service='<u id="pwned5">j</u>'),
        result_row(HOSTILE, '<svg id="pwned4" onload="window.pwned=1">', cell_key="k2"),
    ])
    with immediate(store.conn):  # a label: the Judges section and the judge-corrected compare show
        import_labels(store.conn, [("x:1", {"eval": evil, "case": "c1", "label": "FAIL", "note": evil})])
    store.close()
    proc, url = start_viewer(tmp_path / "s.db")
    try:
        page = browser.new_page()  # type: ignore[attr-defined]
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)  # the token, then the cookie
        case_page = f"/runs/{HOSTILE}/case?" + urlencode({"eval": evil, "case": "c1"})
        for path in ("/", f"/runs/{HOSTILE}", f"/runs/{HOSTILE}?filter=failures&q=%3Cimg",
                     f"/compare?base={HOSTILE}&candidate={HOSTILE}",
                     f"/compare?base={HOSTILE}&candidate={HOSTILE}&list=regressed&row=0",
                     f"/compare?base={HOSTILE}&candidate={HOSTILE}&judge_corrected=1",
                     f"/runs/{HOSTILE}/label",
                     f"/runs/{HOSTILE}?" + urlencode({"filter": "regressions", "base": evil}), case_page):
            page.goto(base_of(url) + path)
            page.wait_for_load_state("load")
            assert page.evaluate("document.querySelector('[id^=pwned]') === null && !window.pwned"), path
            assert "evalhydra" in page.title()
        assert evil in page.locator("#case").inner_text()  # shown as the text it is
        page.goto(base_of(url) + f"/runs/{HOSTILE}?filter=failures&q=%3Cimg")
        assert evil in page.locator("#grid").inner_text()
        page.goto(base_of(url) + f"/runs/{HOSTILE}")
        assert evil in page.locator("#judges").inner_text()  # the judge's name, as text
        page.goto(base_of(url) + f"/compare?base={HOSTILE}&candidate={HOSTILE}&judge_corrected=1")
        assert evil in page.locator("#judge-corrected").inner_text()
        assert dialogs == []
    finally:
        stop(proc)


def test_a_sweep_has_one_page_with_its_targets_compared(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    jobs = {"eval-sweep-aaaaaaaa": "svc-a", "eval-sweep-bbbbbbbb": "svc-b"}
    for n, (run_id, service) in enumerate(jobs.items()):
        rows = [result_row(run_id, f"c{i}", t, passed=service == "svc-a" or i >= 3, service_name=service)
                for i in range(8) for t in (1, 2)]
        write_run(store, run_id, rows, started=f"2026-01-0{n + 1}T00:00:00.000Z")
    store.conn.execute("update runs set sweep_dir = '/sweeps/s1'")
    store.conn.commit()
    store.close()
    proc, url = start_viewer(tmp_path / "s.db", "--sweep", "/sweeps/s1")
    try:
        path, token = url.split("?")
        assert path.endswith("/runs/eval-sweep-aaaaaaaa,eval-sweep-bbbbbbbb")  # the URL opens the sweep
        with httpx.Client(base_url=path.split("/runs/")[0], follow_redirects=True) as client:
            listing = client.get(f"/?{token}").text
            assert 'href="/runs/eval-sweep-aaaaaaaa%2Ceval-sweep-bbbbbbbb">sweep of 2 runs' in listing
            page = client.get("/runs/eval-sweep-aaaaaaaa,eval-sweep-bbbbbbbb").text
            assert "sweep of 2 runs" in page and 'id="comparisons"' in page
            assert "svc-a/m" in page and "svc-b/m" in page  # both targets, side by side in the grid
            link = "/runs/eval-sweep-aaaaaaaa,eval-sweep-bbbbbbbb/case?eval=g.e&amp;case=c0"
            assert link in page  # a regressed case, linked from the comparisons
            case = client.get(link.replace("&amp;", "&")).text
            assert case.count('class="trial"') == 4 and case.count('class="target"') == 2
    finally:
        stop(proc)


@pytest.mark.slow
def test_the_viewer_follows_a_dark_colour_scheme(viewer: str, browser: object) -> None:
    """Issue 50, item 4: ``prefers-color-scheme: dark`` gives a dark page, its text light."""
    shades = {}
    for scheme in ("light", "dark"):
        page = browser.new_page(color_scheme=scheme)  # type: ignore[attr-defined]
        page.goto(viewer)
        shades[scheme] = page.evaluate(
            "[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]")
        page.close()

    def brightness(rgb: str) -> float:
        red, green, blue = (int(x) for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
        return (red + green + blue) / 3

    assert brightness(shades["light"][0]) > 200 and brightness(shades["light"][1]) < 60
    assert brightness(shades["dark"][0]) < 60 and brightness(shades["dark"][1]) > 200


@pytest.mark.slow
def test_live_pages_keep_ticks_typing_and_focus_and_a_killed_run_shows_gone(tmp_path: Path,
                                                                            browser: object) -> None:
    """Issue 50, item 2: while a run writes, the run list updates in place (two ticked runs stay
    ticked and compare) and the run's page swaps only counters and rows (the search box keeps what
    was typed, and focus); a run killed with -9 shows "interrupted (process gone)"."""
    registry = numbered_registry(tmp_path / "reg", 120)  # the second run outlasts the checks
    store = tmp_path / "s.db"
    common = [f"registry={registry}", "eval=g.e", f"store.path={store}", "run.progress=false"]
    assert run_cli(*common, "trials=1", cwd=tmp_path).returncode == 0
    (done,) = [r for r in [_run_id(store)] if r]
    run = start_cli(*common, "trials=2", "run.concurrency=1", "service.mock.latency_ms=300", cwd=tmp_path)
    try:
        wait_for(lambda: len(_run_ids(store)) == 2, timeout=60)
        (going,) = set(_run_ids(store)) - {done}
        proc, url = start_viewer(store)
        try:
            page = browser.new_page()  # type: ignore[attr-defined]
            page.goto(url)
            page.check(f'input.pick[value="{done}"]')
            page.check(f'input.pick[value="{going}"]')
            page.fill("#q", "typed, not sent")
            wait_until(page, "Number(document.body.dataset.refreshes || 0) >= 2")
            assert page.is_checked(f'input.pick[value="{done}"]')
            assert page.is_checked(f'input.pick[value="{going}"]')
            assert page.input_value("#q") == "typed, not sent" and page.is_enabled("#compare")
            page.click("#compare")
            page.wait_for_selector("#comparisons")
            assert f"base={done}" in page.url
            page.goto(base_of(url) + f"/runs/{going}")
            wait_until(page, f"{LIVE}.status === 'running'")
            page.fill("#search", "V1")  # typed, not submitted
            page.focus("#search")
            seen = int(page.locator("#live").get_attribute("data-cells") or 0)
            wait_until(page, f"Number({LIVE}.cells) > {seen} + 2", 30)
            page.wait_for_timeout(500)  # the swap that follows the count
            assert page.input_value("#search") == "V1"
            assert page.evaluate("document.activeElement.id") == "search"
            run.send_signal(signal.SIGKILL)
            run.communicate(timeout=30)
            page.goto(url)
            row = page.locator(f'#runs tr[data-run="{going}"]')
            assert row.get_attribute("data-status") == "interrupted (process gone)"
        finally:
            stop(proc)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()


def _run_ids(store: Path) -> list[str]:
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            return [row[0] for row in conn.execute("select run_id from runs")]
        finally:
            conn.close()
    except sqlite3.Error:
        return []
