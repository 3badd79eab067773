"""A provider's batch objects and files are untrusted (issue 47, items 1, 2 and 8).

Each test runs batch mode against :mod:`tests.services.hostile_batches` on loopback: a
malformed object or a poisoned line costs the cells it names (an infrastructure error) or
ends the run with exit 3, never with a traceback, and what the ledger keeps is checked
before it is kept, so a rerun cannot replay a poisoned line.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalhydra
from tests.helpers import numbered_registry, query_rows, run_cli
from tests.services.hostile_batches import HostileBatches, hostile_batches

# each test drives a real batch run over HTTP (about a second each): with the slow tests
pytestmark = pytest.mark.slow

KEY = "sk-hostile-batch-key-123456"


@pytest.fixture
def server() -> Iterator[HostileBatches]:
    with hostile_batches() as found:
        yield found


def overrides(server: HostileBatches, tmp_path: Path, n: int = 3) -> list[str]:
    return [f"registry={numbered_registry(tmp_path / 'reg', n)}", "eval=g.e", "service=mock",
            "service.mock.enabled=false", f"service.base_url={server.url}", f"store.path={tmp_path / 's.db'}",
            "service.batch.enabled=true", "service.batch.poll_interval_s=0.05",
            "service.batch.poll_timeout_s=1", "run.progress=false"]


def stored(db: Path, sql: str = "select * from results order by case_id") -> list[dict[str, Any]]:
    return query_rows(db, sql)


def by_case(db: Path) -> dict[str, dict[str, Any]]:
    return {row["case_id"]: row for row in stored(db)}


def test_a_deeply_nested_line_costs_its_cell_and_never_reaches_the_ledger(
        server: HostileBatches, tmp_path: Path) -> None:
    server.poison = "deep"
    result = evalhydra.evaluate(overrides(server, tmp_path))
    rows = by_case(tmp_path / "s.db")
    assert rows["c0"]["error_kind"] == "batch_line_failed" and "unreadable" in rows["c0"]["failure_reason"]
    assert rows["c1"]["passed"] == 1 and rows["c2"]["passed"] == 1
    assert result.exit_code == 0  # one error in three is within run.max_error_rate
    # what the ledger kept is only what was checked: no line a rerun would choke on
    assert not any("[[[" in (b["output"] or "") for b in stored(tmp_path / "s.db", "select * from batches"))


def test_a_poisoned_line_already_in_a_ledger_is_read_safely_on_rerun(server: HostileBatches,
                                                                      tmp_path: Path) -> None:
    evalhydra.evaluate(overrides(server, tmp_path))
    db = tmp_path / "s.db"
    batch = stored(db, "select * from batches")[0]
    deep = json.dumps({"custom_id": json.loads(batch["custom_ids"])[0]})[:-1] + ', "x": ' + "[" * 50_000 \
        + "]" * 50_000 + "}"
    conn = sqlite3.connect(db)  # a store written before lines were checked: the line kept raw
    with conn:
        conn.execute("update batches set status = 'completed', output = ?, collected_at = 1"
                     " where batch_key = ?", [deep, batch["batch_key"]])
        conn.execute("delete from results")
    conn.close()
    result = evalhydra.evaluate(overrides(server, tmp_path))
    assert result.exit_code == 3
    assert all(r["error_kind"] == "batch_line_failed" for r in stored(db))


@pytest.mark.parametrize("poison", ["status_list", "counts_text", "counts_list", "deep_batch"])
def test_a_batch_object_of_the_wrong_shape_ends_the_run_with_exit_3(poison: str, server: HostileBatches,
                                                                   tmp_path: Path) -> None:
    """R4 too: counts as a list are dropped at once (no wait), a batch nested 100,000 deep is
    refused (no RecursionError); the run takes seconds either way."""
    server.poison = poison
    started = time.perf_counter()
    result = evalhydra.evaluate(overrides(server, tmp_path))
    assert time.perf_counter() - started < 20
    if poison in ("counts_text", "counts_list"):  # counts are only shown: a batch that completes is read
        assert result.exit_code == 0 and all(r["passed"] for r in stored(tmp_path / "s.db"))
        return
    assert result.exit_code == 3 and stored(tmp_path / "s.db") == []


def test_a_created_batch_without_an_id_fails_its_cells(server: HostileBatches, tmp_path: Path) -> None:
    server.poison = "no_id"
    result = evalhydra.evaluate(overrides(server, tmp_path))
    rows = stored(tmp_path / "s.db")
    assert result.exit_code == 3 and len(rows) == 3
    assert all(r["error_kind"] == "batch_failed" and "no id" in r["failure_reason"] for r in rows)


def test_a_line_for_a_request_never_sent_is_ignored(server: HostileBatches, tmp_path: Path) -> None:
    server.poison = "stranger"
    result = evalhydra.evaluate(overrides(server, tmp_path))
    assert result.exit_code == 0 and [r["passed"] for r in stored(tmp_path / "s.db")] == [1, 1, 1]
    assert "never-asked" not in stored(tmp_path / "s.db", "select * from batches")[0]["output"]


def test_a_request_answered_twice_is_ambiguous_not_the_later_line(server: HostileBatches,
                                                                  tmp_path: Path) -> None:
    server.poison = "duplicate"
    evalhydra.evaluate(overrides(server, tmp_path))
    rows = by_case(tmp_path / "s.db")
    assert rows["c0"]["error_kind"] == "batch_line_failed" and "2 lines" in rows["c0"]["failure_reason"]
    assert rows["c0"]["output"] != "WRONG" and rows["c1"]["passed"] == 1


def test_a_missing_line_is_an_infrastructure_error(server: HostileBatches, tmp_path: Path) -> None:
    server.poison = "missing"
    result = evalhydra.evaluate(overrides(server, tmp_path))
    rows = by_case(tmp_path / "s.db")
    assert result.exit_code == 0 and rows["c1"]["error_kind"] == "batch_line_failed"
    assert rows["c0"]["passed"] == 1 and rows["c2"]["passed"] == 1


def test_a_line_longer_than_any_reply_costs_its_cell(server: HostileBatches, tmp_path: Path) -> None:
    server.poison = "long_lines"
    evalhydra.evaluate(overrides(server, tmp_path))
    rows = by_case(tmp_path / "s.db")
    assert rows["c0"]["error_kind"] == "batch_line_failed" and "longer than" in rows["c0"]["failure_reason"]
    assert rows["c1"]["passed"] == 1


MEASURED = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "evalhydra", *sys.argv[1:]], capture_output=True, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stderr.write(done.stderr)
"""


def test_a_compressed_download_is_read_within_the_reply_caps(server: HostileBatches, tmp_path: Path) -> None:
    server.poison = "bomb"
    done = subprocess.run([sys.executable, "-c", MEASURED, *overrides(server, tmp_path)], capture_output=True,
                          text=True, timeout=120)
    code, peak_kib = (int(x) for x in done.stdout.split())
    assert code == 3 and "Traceback" not in done.stderr, done.stderr
    assert peak_kib < 300 * 1024  # the bomb inflates to 400 MiB; the run never holds it
    rows = stored(tmp_path / "s.db")
    assert len(rows) == 3 and all("output file" in r["failure_reason"] for r in rows)


def test_the_ledger_keeps_no_secret_a_provider_echoes(server: HostileBatches, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    server.poison = server.key = "secret"
    server.key = KEY
    monkeypatch.setenv("HOSTILE_KEY", KEY)
    evalhydra.evaluate([*overrides(server, tmp_path), "service.api_key_env=HOSTILE_KEY"])
    kept = stored(tmp_path / "s.db", "select * from batches")
    assert kept and KEY not in json.dumps(kept) and "***" in (kept[0]["errors"] or "")
    assert KEY not in json.dumps(stored(tmp_path / "s.db"))


def test_batches_cancel_sends_a_key_only_where_a_configured_service_sends_it(server: HostileBatches,
                                                                             tmp_path: Path) -> None:
    evalhydra.evaluate(overrides(server, tmp_path))
    conn = sqlite3.connect(tmp_path / "s.db")  # a store that names a URL and a key variable
    with conn:
        conn.execute("update batches set status = 'in_progress', api_key_env = 'HOSTILE_KEY', endpoint = ?",
                     [server.url])
    conn.close()
    env = {**os.environ, "HOSTILE_KEY": KEY}
    server.authorizations.clear()
    refused = run_cli("batches", "cancel", "--store", str(tmp_path / "s.db"), cwd=tmp_path, env=env)
    assert refused.returncode == 3 and "no configured service sends HOSTILE_KEY" in refused.stdout
    assert server.authorizations == []  # nothing was sent, least of all the key
    conf = tmp_path / "conf" / "service"
    conf.mkdir(parents=True)
    (conf / "hostile.yaml").write_text(f"name: hostile\nbase_url: {server.url}\napi_key_env: HOSTILE_KEY\n")
    done = run_cli("batches", "cancel", "--store", str(tmp_path / "s.db"), "--config-dir",
                   str(tmp_path / "conf"), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert server.authorizations == [f"Bearer {KEY}"] and "cancelling" in done.stdout
