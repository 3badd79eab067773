"""Issue 59, R2: budget headers on successful replies never stall a run past the header cap.

A server on 127.0.0.1 answers every request (200) while saying a budget is spent with a reset
thousands of years away, with and without the limit header; 12 cells finish in seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import numbered_registry, run_cli
from tests.loopback import Answer, loopback_http

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

SPENT = {
    "tokens": [("x-ratelimit-remaining-tokens", "10"), ("x-ratelimit-reset-tokens", "99999999h")],
    "tokens with limit": [("x-ratelimit-remaining-tokens", "10"), ("x-ratelimit-reset-tokens", "99999999h"),
                          ("x-ratelimit-limit-tokens", "100000")],
    "requests": [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "173448000000s")],
    "requests with limit": [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-limit-requests", "100"),
                            ("x-ratelimit-reset-requests", "173448000000s")],
}


def _answer(headers: list[tuple[str, str]]) -> Answer:
    def answer(method: str, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        text = json.loads(body)["messages"][-1]["content"].split("exactly ")[1].rstrip(".")
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        reply = {"id": "x", "object": "chat.completion", "model": "m", "choices": [choice]}
        return 200, [("content-type", "application/json"), *headers], json.dumps(reply).encode()
    return answer


@pytest.fixture(params=sorted(SPENT))
def spent_budget(request: pytest.FixtureRequest) -> Iterator[str]:
    with loopback_http(_answer(SPENT[request.param])) as url:
        yield url + "/v1"


def test_a_spent_budget_on_successful_replies_does_not_stall_the_run(spent_budget: str,
                                                                     tmp_path: Path) -> None:
    started = time.perf_counter()
    done = run_cli(f"registry={numbered_registry(tmp_path / 'reg', 12)}", "eval=g.e",
                   "service.mock.enabled=false", f"service.base_url={spent_budget}",
                   f"store.path={tmp_path / 's.db'}", "run.progress=false", cwd=tmp_path, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "12 cells, 12 passed" in done.stdout
    assert time.perf_counter() - started < 20
