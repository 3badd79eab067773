"""Per-case statistics computed in SQL, and the two ways a selection is read.

``collect_cases`` lets SQLite summarise the per-(case, target) rows; these
tests recompute every summary from the stored rows in plain Python and
require the same answer. Reports must not depend on whether a selection is
read through the ``run_id`` index or by a table scan.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalhydra.analysis import aggregate, selection
from evalhydra.analysis.evalstats import evals_and_targets
from evalhydra.analysis.runsummary import run_summary
from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.targetstats import store_stats
from evalhydra.reports import writer
from evalhydra.reports.writer import ALL_FORMATS, write_run_reports
from evalhydra.store.db import open_store
from evalhydra.store.fractions import fractions_valid
from tests.reference.stats import flakiness
from tests.reports.support import MockStore, mock_store, random_rows, write_run

__all__ = ["mock_store"]  # the session fixture, imported so pytest finds it

RUN = "eval-rand-cccccccc"


def _python_cases(rows: list[dict[str, Any]]) -> dict[tuple[str, ...], list[int]]:
    """(group, eval, service, model, case) → [trials, passed, scored] from the rows.

    A case is keyed by eval id (which names its group in a registry); the
    group shown is the largest seen, as in the SQL.
    """
    cells: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0, 0, 0])
    groups: dict[tuple[str, ...], str] = {}
    for r in rows:
        key = (r["eval_id"], r["service_name"], r["model"] or "", r["case_id"])
        groups[key] = max(groups.get(key, ""), r["group"])
        error = r.get("error_kind") is not None or r.get("status") in ("ERROR", "TIMEOUT")
        cells[key][0] += 1
        cells[key][1] += bool(r["passed"])
        cells[key][2] += not error
    return {(groups[key], *key): counts for key, counts in cells.items()}


def _verdict(ok: int, scored: int) -> str:
    if not scored:
        return "NO RESULT"
    return "STABLE" if ok == scored else "BROKEN" if ok == 0 else "FLAKY"


@pytest.mark.parametrize("saved", [False, True], ids=["from-results", "from-saved-fractions"])
@pytest.mark.parametrize("seed", [0, 3])
def test_case_statistics_equal_a_python_recount(tmp_path: Path, seed: int, saved: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregate, "CAP_CASES", 7)  # the caps must cut, not just sort
    monkeypatch.setattr(aggregate, "CAP_FLAKY", 3)
    monkeypatch.setattr(aggregate, "CAP_FLAKY_JSON", 2)
    rows = random_rows(seed, 900)
    store = open_store(tmp_path / "s.db")
    write_run(store, RUN, rows)
    if saved:  # a finished run's per-case fractions, saved with its summary, stand for its results
        store.save_run_summary(RUN, run_summary(store.conn, [RUN]))
    assert fractions_valid(store.conn, RUN) is saved
    sel = select_runs(store.conn, [RUN])
    _, targets = evals_and_targets(store.conn, sel)
    data = aggregate.collect_cases(store.conn, sel, targets)
    store.close()

    cells = _python_cases(rows)
    hist: dict[tuple[str, ...], Counter[tuple[int, int]]] = defaultdict(Counter)
    verdicts: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    flaky = []
    for (g, e, s, m, c), (_, ok, scored) in cells.items():
        verdicts[(g, e, s, m)][_verdict(ok, scored)] += 1
        if scored:
            hist[(g, e, s, m)][(scored, ok)] += 1
        if 0 < ok < scored:
            flaky.append((flakiness(ok, scored), s, m, e, c, ok, scored, g))
    for key, target in data.targets.items():
        assert target.hist == hist[key] and target.verdicts == verdicts[key], key
        assert target.cases == sum(verdicts[key].values())
    case_keys = sorted({(e, c) for (_, e, _, _, c) in cells})
    assert data.cases_total == len(case_keys) and data.first_keys == case_keys[:7]
    stability = sorted((s, m, e, c, ok, n) for (_, e, s, m, c), (n, ok, _) in cells.items())
    assert data.stability == stability[:7] and data.stability_total == len(cells)
    assert data.max_trials == max(n for n, _, _ in cells.values())
    flaky.sort(key=lambda f: (-f[0], *f[1:5]))
    assert data.flaky == [f[:7] for f in flaky[:3]] and len(flaky) > 3
    for key, top in data.flaky_by_target.items():
        mine = sorted(((f[0], f[4], f[5], f[6]) for f in flaky if (f[7], f[3], f[1], f[2]) == key),
                      key=lambda f: (-f[0], f[1]))
        assert top == mine[:2], key


def test_a_run_that_is_most_of_the_store_is_read_by_a_table_scan(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    write_run(store, RUN, random_rows(0, 500))
    tiny_rows = random_rows(1, 20, run_id="eval-tiny-dddddddd")
    for row in tiny_rows:
        row["cell_key"] = "tiny-" + row["cell_key"]
    write_run(store, "eval-tiny-dddddddd", tiny_rows)
    big, tiny = select_runs(store.conn, [RUN]), select_runs(store.conn, ["eval-tiny-dddddddd"])
    assert big.table == "results not indexed" and tiny.table == "results"
    plan = " ".join(str(r) for r in store.conn.execute(
        "explain query plan " + tiny.source("count(*)"), tiny.params))
    assert "run_seed_order" in plan  # the small run is found through its index
    store.close()


def test_reports_are_identical_read_by_index_or_by_scan(mock_store: MockStore, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [mock_store.runs[n] for n in ("base", "flaky", "judge")]
    store = open_store(mock_store.path, read_only=True)
    for name, fraction in (("scan", 0.0), ("index", 2.0)):
        monkeypatch.setattr(selection, "DENSE_FRACTION", fraction)
        expected = "results not indexed" if name == "scan" else "results"
        assert select_runs(store.conn, ids).table == expected
        write_run_reports(store, ids, tmp_path / name, formats=ALL_FORMATS, cumulative=False)
    store.close()
    files = sorted(p.name for p in (tmp_path / "scan").iterdir())
    assert "runs.json" in files and "junit.xml" in files
    for name in files:
        assert (tmp_path / "scan" / name).read_bytes() == (tmp_path / "index" / name).read_bytes(), name


def test_reports_are_identical_whether_the_per_case_statement_has_a_core_of_its_own(
        mock_store: MockStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [mock_store.runs[n] for n in ("base", "flaky", "judge")]
    store = open_store(mock_store.path, read_only=True)
    threads: dict[str, set[str]] = {}
    for name, cores in (("apart", 8), ("after", 2)):
        monkeypatch.setattr(writer, "_usable_cores", lambda cores=cores: cores)
        recording = _recording(threads.setdefault(name, set()))
        monkeypatch.setattr(writer, "case_rows", recording)  # on a worker
        monkeypatch.setattr(aggregate, "case_rows", recording)  # on the main thread
        write_run_reports(store, ids, tmp_path / name, formats=("json", "md", "text"), cumulative=False)
    store.close()
    # 8 cores: on a worker beside runs.json's (either of the pool's two); 2: on the main thread
    assert threads["after"] == {"MainThread"}
    assert len(threads["apart"]) == 1 and threads["apart"].pop().startswith("evalhydra-report_")
    files = sorted(p.name for p in (tmp_path / "apart").iterdir())
    assert "runs.json" in files and "report.md" in files
    for name in files:
        assert (tmp_path / "apart" / name).read_bytes() == (tmp_path / "after" / name).read_bytes(), name


def _recording(seen: set[str]) -> Callable[..., list[tuple[Any, ...]]]:
    """:func:`case_rows` that notes the thread it ran on."""
    def record(*args: Any) -> list[tuple[Any, ...]]:
        seen.add(threading.current_thread().name)
        return _CASE_ROWS(*args)
    return record


_CASE_ROWS = aggregate.case_rows


@pytest.mark.parametrize("saved", [False, True], ids=["from-results", "from-saved-fractions"])
def test_a_runs_case_histogram_equals_a_python_recount(tmp_path: Path, saved: bool) -> None:
    rows = random_rows(5, 700)
    store = open_store(tmp_path / "s.db")
    write_run(store, RUN, rows)
    other = random_rows(6, 50, run_id="eval-other-eeeeeeee")
    for row in other:
        row["cell_key"] = "other-" + row["cell_key"]
    write_run(store, "eval-other-eeeeeeee", other)
    if saved:
        store.save_run_summary(RUN, run_summary(store.conn, [RUN]))
    assert fractions_valid(store.conn, RUN) is saved
    got = aggregate.run_histograms(store.conn, [RUN, "eval-other-eeeeeeee"])
    store.close()
    for run_id, run_rows in ((RUN, rows), ("eval-other-eeeeeeee", other)):
        expected = Counter((scored, ok) for _, ok, scored in _python_cases(run_rows).values() if scored)
        assert got[run_id] == expected, run_id


def test_the_summary_reads_the_totals_the_reports_computed(mock_store: MockStore, tmp_path: Path) -> None:
    ids = [mock_store.runs[n] for n in ("base", "flaky", "judge")]
    store = open_store(mock_store.path, read_only=True)
    handed: list[Any] = []
    write_run_reports(store, ids, tmp_path / "r", formats=("json", "md"), cumulative=False,
                      on_totals=handed.append)
    assert len(handed) == 1
    assert store_stats(store, ids, totals=handed[0]) == store_stats(store, ids)
    handed.clear()
    write_run_reports(store, ids, tmp_path / "l", formats=("jsonl",), cumulative=False,
                      on_totals=handed.append)
    assert handed == []  # aiwg's records alone compute no totals: the summary computes its own
    store.close()
