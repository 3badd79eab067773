"""Issue 52, item 2 in the viewer: labelling judged outputs behind the viewer's token, a label
queue stratified by the judge's verdict, and 100 outputs labelled by keyboard alone in headless
Chromium; over a real store and the viewer in its own process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from evalhydra.analysis.calibration import calibration
from evalhydra.store.db import open_store
from evalhydra.store.labels import output_sha256
from tests.reports.support import result_row, write_run
from tests.viewer.test_viewer import base_of, browser, start_viewer, stop

__all__ = ["browser"]  # the fixture, shared

RUN = "eval-judged-aaaaaaaa"
CASES = 120
#: The judge passes cases 0–59; the truth is a pass for even cases (so it errs on half of each side
#: but for the ones it gets right: 30 true passes, 30 false passes, 30 false fails, 30 true fails).


def _truth(i: int) -> bool:
    return i % 2 == 0


def _store(path: Path) -> Path:
    store = open_store(path)
    rows = [result_row(RUN, f"c{i:03d}", passed=i < 60, output=f"answer {i}", judge_model="judge-m",
                       judge_service="mock") for i in range(CASES)]
    rows.append(result_row(RUN, "plain", eval_id="g.plain", cell_key="plain"))  # no judge: never queued
    write_run(store, RUN, rows)
    store.close()
    return path


@pytest.fixture
def viewer(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    path = _store(tmp_path / "s.db")
    proc, url = start_viewer(path, "--labeller", "ana")
    yield url, path
    stop(proc)


def _labels(path: Path) -> list[tuple[Any, ...]]:
    store = open_store(path, read_only=True)
    rows = store.conn.execute("select case_id, label, labeller, output from labels"
                              " order by case_id").fetchall()
    store.close()
    return rows


def test_a_label_is_taken_only_from_a_page_the_token_opened(viewer: tuple[str, Path]) -> None:
    url, path = viewer
    base = base_of(url)
    body = {"eval": "g.e", "case": "c000", "output_sha256": output_sha256("answer 0"), "label": "PASS"}
    assert httpx.post(base + "/api/labels", json=body).status_code == 403  # no cookie, no key
    cookies = httpx.get(url).cookies
    with httpx.Client(base_url=base, cookies=cookies) as client:
        queued = client.get(f"/runs/{RUN}/label")
        assert queued.status_code == 303 and "/case?" in queued.headers["location"]
        page = client.get(queued.headers["location"])
        key = page.text.split('data-key="', 1)[1].split('"', 1)[0]
        assert client.post("/api/labels", json=body).status_code == 403  # the cookie alone
        guess = {"x-evalhydra-label": "guess"}
        assert client.post("/api/labels", json=body, headers=guess).status_code == 403
        send = {"x-evalhydra-label": key}
        assert client.post("/api/labels", json=body, headers=send).json() == {"stored": "PASS"}
        for bad in ({"label": "maybe"}, {"output_sha256": "0" * 64}, {"note": {"x": 1}}, {"case": 7}):
            assert client.post("/api/labels", json={**body, **bad}, headers=send).status_code == 400, bad
        assert client.post("/api/labels", content=b"[1]", headers=send).status_code == 400
        assert client.post("/api/labels", content=b"x" * 20_000, headers=send).status_code == 413
        assert client.put("/api/labels", json=body, headers=send).status_code == 405
        assert client.post("/", headers=send).status_code == 405  # the one write is the label's
    assert httpx.post(base + "/api/labels", json=body, headers={"x-evalhydra-label": key}).status_code == 403
    assert _labels(path) == [("c000", "PASS", "ana", "answer 0")]


def test_the_queue_is_in_proportion_to_the_judges_verdicts_and_moves_on(viewer: tuple[str, Path]) -> None:
    """Any prefix of the queue holds the judge's passes and failures in their share (half each
    here); a labelled output leaves it; ``after`` walks past a skipped one."""
    url, path = viewer
    with httpx.Client(base_url=base_of(url), cookies=httpx.get(url).cookies) as client:
        seen, after = [], -1
        for _ in range(20):
            location = client.get(f"/runs/{RUN}/label", params={"after": after}).headers["location"]
            params = dict(httpx.URL(location).params)
            seen.append(int(params["case"][1:]))
            after = int(params["pos"])
        assert len(set(seen)) == 20 and all(i < CASES for i in seen)
        judged_pass = sum(1 for i in seen if i < 60)
        assert 9 <= judged_pass <= 11  # in proportion: 10 of 20
        first = client.get(f"/runs/{RUN}/label").headers["location"]
        page = client.get(first)
        key = page.text.split('data-key="', 1)[1].split('"', 1)[0]
        params = dict(httpx.URL(first).params)
        sent = {"eval": "g.e", "case": params["case"], "output_sha256": params["label"], "label": "FAIL"}
        client.post("/api/labels", headers={"x-evalhydra-label": key}, json=sent)
        assert client.get(f"/runs/{RUN}/label").headers["location"] != first
        done = client.get(f"/runs/{RUN}/label", params={"after": CASES})
        assert done.status_code == 200 and "1 of 120 judged outputs labelled" in done.text
        huge = "9" * 5000  # past Python's digit limit for int(): read as the last position, never a 500
        assert "1 of 120" in client.get(f"/runs/{RUN}/label", params={"after": huge}).text
        assert client.get(f"/runs/{RUN}", params={"page": huge}).status_code == 200
        case = {"eval": "g.e", "case": "c000", "pos": huge}
        assert client.get(f"/runs/{RUN}/case", params=case).status_code == 200


@pytest.mark.slow
def test_a_hundred_outputs_labelled_by_keyboard_alone(viewer: tuple[str, Path], browser: object) -> None:
    """From the run's page: l opens the queue; p or f labels the output shown and opens the next;
    100 times, no mouse. The labels are stored as pressed, and calibrate measures the judge."""
    url, path = viewer
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(url)
    page.goto(base_of(url) + f"/runs/{RUN}")
    page.keyboard.press("l")
    pressed: dict[str, str] = {}
    for n in range(100):
        page.wait_for_selector("#labelling")
        case = page.locator("#labelling").get_attribute("data-case") or ""
        assert case not in pressed
        label = "PASS" if _truth(int(case[1:])) else "FAIL"
        pressed[case] = label
        page.wait_for_url(f"**case={case}**")
        with page.expect_navigation():
            page.keyboard.press("p" if label == "PASS" else "f")
        assert n == 99 or "/case?" in page.url
    stored = {case: label for case, label, labeller, _ in _labels(path) if labeller == "ana"}
    assert stored == pressed
    reader = open_store(path, read_only=True)
    (doc,) = calibration(reader.conn, [RUN], resamples=0)
    reader.close()
    found = doc["agreement"]
    judged_pass = sum(1 for c in pressed if int(c[1:]) < 60)
    assert found["n"] == 100 and found["true_pos"] + found["false_pos"] == judged_pass
    assert found["sensitivity"] == pytest.approx(
        sum(1 for c, lab in pressed.items() if lab == "PASS" and int(c[1:]) < 60)
        / sum(1 for lab in pressed.values() if lab == "PASS"))


@pytest.mark.slow
def test_the_label_queue_is_blind_until_the_person_has_labelled(viewer: tuple[str, Path],
                                                                browser: object) -> None:
    """Opened from the queue, a case page shows the output but no verdict, reason or score of the
    judge; once labelled, the case page shows them."""
    url, path = viewer
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(url)
    page.goto(base_of(url) + f"/runs/{RUN}/label")
    page.wait_for_selector("#labelling")
    case = page.locator("#labelling").get_attribute("data-case") or ""
    bar = page.locator("#labelling").inner_text()
    assert "the judge said" not in bar and page.locator("#blind").count() == 1
    assert f"answer {int(case[1:])}" in bar  # the output itself is shown
    body = page.locator("main").inner_text()
    assert page.locator(".trial").count() == 0 and "score" not in body and "judge" not in body
    with page.expect_navigation():
        page.keyboard.press("f")
    page.goto(base_of(url) + f"/runs/{RUN}/case?eval=g.e&case={case}")  # afterwards, the case page
    trial = page.locator(".trial").inner_text()
    assert "labelled FAIL" in trial and ("PASS" in trial or "FAIL" in trial) and "judge" in trial
    assert page.locator("#blind").count() == 0


@pytest.mark.slow
def test_show_judge_opts_out_of_blind_labelling(tmp_path: Path, browser: object) -> None:
    proc, url = start_viewer(_store(tmp_path / "s.db"), "--show-judge")
    try:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(url)
        page.goto(base_of(url) + f"/runs/{RUN}/label")
        page.wait_for_selector("#labelling")
        assert "the judge said" in page.locator("#labelling").inner_text()
        assert page.locator("#blind").count() == 0 and page.locator(".trial").count() == 1
    finally:
        stop(proc)
