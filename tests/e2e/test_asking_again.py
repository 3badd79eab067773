"""Issue 58, item 1: after the model behind the same URL is fixed, the user can ask again.

The project's mock runs in its own process; "broken" is the mock answering every request with
``NO``, "fixed" its default (it follows the case's "Reply with exactly V1." script). The URL, the
model name and the eval stay the same throughout, as they do for a redeploy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import evalhydra
from evalhydra.services.mock import MockSettings
from evalhydra.store.db import open_store
from tests.helpers import mock_call, numbered_registry, run_cli

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

CASES = 3


def _run(tmp_path: Path, url: str, *extra: str) -> evalhydra.EvalResult:
    registry = numbered_registry(tmp_path / "reg", CASES)
    return evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                               "service.mock.enabled=false", f"service.base_url={url}",
                               f"store.path={tmp_path / 's.db'}", "report=[json]", "run.progress=false",
                               *extra])


def _versions(tmp_path: Path) -> list[int]:
    store = open_store(tmp_path / "s.db", read_only=True)
    try:
        return sorted((n for (n,) in store.conn.execute("select count(*) from results group by cell_key")),
                      reverse=True)
    finally:
        store.close()


def _broken(url: str) -> None:
    mock_call(url, "config", {**MockSettings().to_dict(), "fixed_reply": "NO"})


def _fixed(url: str) -> None:
    mock_call(url, "config", MockSettings().to_dict())


def test_rerun_failed_asks_again_and_the_summary_says_what_it_reused(
        tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _broken(url)
    first = _run(tmp_path, url)
    assert first.exit_code == 0 and first.stats[0]["passed"] == 0 and first.run_id
    _fixed(url)
    capsys.readouterr()
    again = _run(tmp_path, url)  # the same command: the stored FAILs come back, and it says so
    out = capsys.readouterr().out
    assert again.stats[0]["passed"] == 0
    assert f"3 stored results reused, not asked again: 3 from {first.run_id}" in out, out
    assert "ask again with run.fresh=true" in out
    rerun = _run(tmp_path, url, "run.rerun=failed")  # the failed cases are sent again
    assert rerun.stats[0]["passed"] == CASES, rerun.stats
    assert "reused, not asked again" not in capsys.readouterr().out
    assert _versions(tmp_path) == [2] * CASES  # a new version of each cell; history keeps the old


def test_fresh_resends_every_selected_cell_and_a_revision_is_other_cells(
        tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]) -> None:
    first = _run(tmp_path, url)
    assert first.stats[0]["passed"] == CASES
    _broken(url)  # a regression deployed behind the same URL and model name
    fresh = _run(tmp_path, url, "run.fresh=true")
    assert fresh.stats[0]["passed"] == 0 and _versions(tmp_path) == [2] * CASES
    _fixed(url)
    revised = _run(tmp_path, url, "service.revision=v2")  # named: its cells are new cells
    assert revised.stats[0]["passed"] == CASES and _versions(tmp_path) == [2] * CASES + [1] * CASES
    assert "reused, not asked again" not in capsys.readouterr().out


def test_rerun_failed_without_an_earlier_run_is_a_clear_error(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", CASES)
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 'new.db'}",
                   "run.rerun=failed", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: run.rerun=failed: no store at"), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "new.db").exists()
