"""JUnit XML for CI systems, streamed from the store.

One ``<testsuite>`` per eval × service × model and one ``<testcase>`` per
case (and trial, named ``case [trial N]`` when a case ran more than once).
A failing result carries ``<failure message=reason type=FAIL>`` with the
output; an infrastructure error (HTTP failure, timeout, agent ERROR or
TIMEOUT) carries ``<error type=error_kind>``. Suite counts come from the
aggregates, so the file is written in one ordered pass.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any, TextIO
from xml.sax.saxutils import escape, quoteattr

from evalhydra.analysis.aggregate import TargetAgg
from evalhydra.analysis.data import ReportData
from evalhydra.analysis.selection import DURATION_SQL, PASSED_SQL, STATUS_SQL, Selection
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["write_junit"]

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_BODY_LIMIT = 2000
_COLUMNS = f""""group", eval_id, service_name, coalesce(model, ''), case_id, run_index,
  {STATUS_SQL}, {PASSED_SQL}, {INFRA_ERROR_SQL},
  {DURATION_SQL}, failure_reason, error_kind, output"""
_ORDER = '"group", eval_id, service_name, model, case_id, run_index'


def _clean(value: Any, limit: int | None = None) -> str:
    text = _INVALID_XML.sub("\ufffd", "" if value is None else str(value))
    return text[:limit] if limit else text


def _attr(value: Any) -> str:
    return quoteattr(_clean(value, 500))


def _suite_open(t: TargetAgg) -> str:
    name = f"{t.key[1]} [{t.key[2]}/{t.key[3]}]" if t.key[3] else f"{t.key[1]} [{t.key[2]}]"
    failures = t.n - t.passed - t.errors
    return (f"  <testsuite name={_attr(name)} tests=\"{t.n}\" failures=\"{failures}\""
            f" errors=\"{t.errors}\" skipped=\"0\" time=\"{t.duration:.3f}\">\n")


def _testcase(row: tuple[Any, ...], multi: bool) -> str:
    _g, e, s, m, case, trial, status, passed, error, duration, reason, kind, output = row
    name = f"{case} [trial {trial}]" if multi else str(case)
    classname = ".".join(p for p in (e, s, m) if p)
    head = f"    <testcase classname={_attr(classname)} name={_attr(name)} time=\"{duration:.3f}\""
    if passed:
        return head + "/>\n"
    body = escape(_clean(output, _BODY_LIMIT))
    if error:
        tag, kind_text = "error", kind or status
    else:
        tag, kind_text = "failure", status
    message = _attr(reason or kind_text)
    return (f"{head}>\n      <{tag} message={message} type={_attr(kind_text)}>{body}</{tag}>\n"
            "    </testcase>\n")


def write_junit(conn: sqlite3.Connection, sel: Selection, data: ReportData, out: TextIO) -> None:
    """Write ``junit.xml`` for the selection.

    Args:
        conn: A connection to the store.
        sel: The results covered.
        data: Their aggregates (suite counts).
        out: Where the XML goes.
    """
    targets = data.cases.targets
    total = data.cases.total
    errors = sum(t.errors for t in targets.values())
    failures = total - sum(t.passed for t in targets.values()) - errors
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n'
              f'<testsuites name="evalhydra" tests="{total}" failures="{failures}"'
              f' errors="{errors}">\n')
    current: tuple[str, str, str, str] | None = None
    multi = False
    cursor = conn.execute(f"select {_COLUMNS} from {sel.table} where {sel.where} order by {_ORDER}",
                          sel.params)
    for rows in iter(lambda: cursor.fetchmany(2000), []):
        for row in rows:
            key = (row[0], row[1], row[2], row[3])
            if key != current:
                if current is not None:
                    out.write("  </testsuite>\n")
                current = key
                multi = max((n for n, _ in targets[key].hist), default=1) > 1
                out.write(_suite_open(targets[key]))
            out.write(_testcase(row, multi))
    if current is not None:
        out.write("  </testsuite>\n")
    out.write("</testsuites>\n")
