"""Issue 50, item 3: reading answers. A case's two targets side by side with a word diff, outputs
rendered as markdown, pretty JSON or a chat transcript (raw text a key away), previous/next case
within the grid's filter, error cells with their kind and no score, and the whole walk done with
the keyboard alone, in headless Chromium over a real store and the viewer in its own process."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from evalhydra.store.db import open_store
from tests.reports.support import result_row, write_run
from tests.viewer.test_viewer import base_of, browser, start_viewer, stop, wait_until

__all__ = ["browser"]  # the fixture, shared

RUN = "eval-read-aaaaaaaa"
EVIL = '<img src=x id="pwned1" onerror="window.pwned=1">'
CHAT = json.dumps([
    {"role": "system", "content": "You look up orders."},
    {"role": "user", "content": "Where is order 7?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "lookup_order", "arguments": "{\"id\": 7}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "shipped " + EVIL},
    {"role": "assistant", "content": "Order 7 has **shipped**."},
])
#: Per case: (svc-a's output, svc-b's output, whether svc-b passes).
OUTPUTS = {
    "c0": ("# Plan\n\nThe **quick** brown fox", "# Plan\n\nThe *slow* brown fox", False),
    "c1": ('{"answer": 42, "steps": [1, 2]}', '{"answer": 41}', False),
    "c2": (CHAT, CHAT, True),
    "c3": ("fine", "", False),  # svc-b: an infrastructure error
    "c4": (EVIL, "text " + EVIL, False),
}


def _rows() -> list[dict[str, Any]]:
    rows = []
    for case, (a, b, b_passes) in OUTPUTS.items():
        rows.append(result_row(RUN, case, output=a, service_name="svc-a", cell_key=f"a-{case}"))
        row = result_row(RUN, case, passed=b_passes, output=b, service_name="svc-b", cell_key=f"b-{case}",
                         failure_reason=None if b_passes else f"mismatch {EVIL}")
        if case == "c3":
            row.update(status="ERROR", error_kind="timeout", status_code=None, score=0.0, passed=False)
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("reading")
    store = open_store(root / "s.db")
    write_run(store, RUN, _rows())
    store.close()
    proc, url = start_viewer(root / "s.db")
    yield url
    stop(proc)


def _case(url: str, case: str, **extra: str) -> str:
    return base_of(url) + f"/runs/{RUN}/case?" + urlencode({"eval": "g.e", "case": case, **extra})


@pytest.mark.slow
def test_two_answers_side_by_side_rendered_with_a_diff(viewer_url: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(viewer_url)
    page.goto(_case(viewer_url, "c0"))
    columns = page.locator("#side-by-side .column")
    assert columns.count() == 2
    assert [columns.nth(i).get_attribute("data-column") for i in range(2)] == ["svc-a/m", "svc-b/m"]
    assert page.locator("#side-by-side .kind-markdown h1").count() == 2  # "# Plan" is a heading
    assert page.locator("#side-by-side .kind-markdown strong").inner_text() == "quick"
    removed, added = ("".join(page.locator(f"#diff {tag}").all_inner_texts()) for tag in ("del", "ins"))
    assert "quick" in removed and "slow" in added and "brown" not in removed + added
    assert page.locator("#diff").inner_text().endswith("brown fox")
    assert page.locator("#side-by-side .raw").first.is_hidden()
    page.click("#raw-toggle")  # raw text instead
    assert page.locator("#side-by-side .raw").first.is_visible()
    assert page.locator("#side-by-side .rendered").first.is_hidden()
    page.goto(_case(viewer_url, "c1"))
    assert '"steps": [\n    1,' in page.locator("#side-by-side .kind-json").first.inner_text()  # pretty
    page.goto(_case(viewer_url, "c2"))
    turns = page.locator("#side-by-side .column").first.locator(".transcript .turn")
    assert turns.count() == 5
    assert [turns.nth(i).locator(".role").inner_text().split(" ")[0].lower() for i in range(5)] == [
        "system", "user", "assistant", "tool", "assistant"]
    assert "lookup_order" in turns.nth(2).locator(".tool-call").inner_text()
    page.goto(_case(viewer_url, "c3"))
    right = page.locator("#side-by-side .column").nth(1)
    assert "timeout" in right.inner_text() and "score" not in right.inner_text()  # an error has no score
    for case in OUTPUTS:
        page.goto(_case(viewer_url, case))
        assert page.evaluate("document.querySelector('[id^=pwned]') === null && !window.pwned"), case
    assert EVIL in page.locator("#side-by-side").inner_text()  # c4: the text it is, nothing run
    grid = page.goto(base_of(viewer_url) + f"/runs/{RUN}")
    assert grid is not None and grid.ok
    assert page.locator('#grid tr[data-key="g.e/c3"] .error-kind').inner_text() == "timeout"
    assert dialogs == []


@pytest.mark.slow
def test_the_keyboard_alone_walks_failures_cases_and_back(viewer_url: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(viewer_url)
    page.goto(base_of(viewer_url) + f"/runs/{RUN}")
    page.keyboard.press("f")
    page.wait_for_url("**filter=failures**")
    keys = [row.get_attribute("data-key") for row in page.locator("#grid tbody tr").all()]
    assert keys == ["g.e/c0", "g.e/c1", "g.e/c4"]  # c2 passed on both; c3 is an error, not a failure
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.evaluate("document.body.dataset.selected") == "1"
    page.keyboard.press("Enter")
    page.wait_for_selector("#case")
    assert page.locator("#case-title").inner_text() == "g.e / c1"
    page.keyboard.press("j")  # the next failure: c4, not c2 or c3
    page.wait_for_url("**case=c4**")
    page.keyboard.press("k")
    page.wait_for_url("**case=c1**")
    page.keyboard.press("r")
    assert page.evaluate("document.body.classList.contains('show-raw')")
    page.keyboard.press("b")
    page.wait_for_url("**filter=failures**")
    assert "/case" not in page.url
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    page.keyboard.press("Escape")
    assert page.locator("#help").is_hidden()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "search"
    page.keyboard.type("c4")
    page.keyboard.press("Enter")
    page.wait_for_url("**q=c4**")
    assert [row.get_attribute("data-key") for row in page.locator("#grid tbody tr").all()] == ["g.e/c4"]
    wait_until(page, "document.activeElement !== null")
