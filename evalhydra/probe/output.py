"""A probe's report as the terminal shows it, as JSON, and as JUnit XML (a check a test case)."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

from tabulate import tabulate

from evalhydra.probe.attribution import Attribution
from evalhydra.probe.run import ProbeReport

__all__ = ["as_json", "as_junit", "as_text", "attribution_json", "attribution_text"]

#: Most characters of evidence the terminal shows per failed check (the store and JSON keep more).
_SHOWN = 240


def as_text(report: ProbeReport) -> str:
    """The terminal's report: a row per check, then each failure's evidence."""
    head = f"probe tools: {report.service} · {report.model} · {report.endpoint} ({report.api})"
    if report.unreachable:
        return f"{head}\nunreachable: {report.unreachable}"
    rows = [(c.id, v.status.upper() if v.status == "fail" else v.status, c.asks, v.detail)
            for c, v in report.verdicts]
    table = tabulate(rows, headers=("check", "result", "asks", "found"), tablefmt="simple")
    counts = report.counts()
    lines = [head, table, "",
             f"{counts['pass']} passed, {counts['fail']} failed, {counts['n/a']} not applicable; "
             f"{len(report.exchanges)} requests in {report.seconds:.1f} s"]
    for check, verdict in report.failed:
        shown = json.dumps(verdict.evidence, ensure_ascii=False, default=str)
        lines.append(f"  {check.id}: {shown[:_SHOWN]}{'…' if len(shown) > _SHOWN else ''}")
    return "\n".join(lines)


def as_json(report: ProbeReport) -> dict[str, Any]:
    """The report as JSON: the target, the counts and every check with its evidence."""
    return {"service": report.service, "model": report.model, "endpoint": report.endpoint, "api": report.api,
            "unreachable": report.unreachable or None, "seconds": round(report.seconds, 3),
            "requests": len(report.exchanges), "counts": report.counts(),
            "checks": [{"check": c.id, "asks": c.asks, "status": v.status, "detail": v.detail,
                        "evidence": v.evidence} for c, v in report.verdicts]}


def as_junit(report: ProbeReport) -> str:
    """The report as JUnit XML: a test suite, a test case per check (n/a: skipped)."""
    counts = report.counts()
    suite = ElementTree.Element("testsuite", name=f"probe tools {report.service}",
                                tests=str(len(report.verdicts)), failures=str(counts["fail"]),
                                skipped=str(counts["n/a"]), errors="1" if report.unreachable else "0",
                                time=f"{report.seconds:.3f}")
    if report.unreachable:
        case = ElementTree.SubElement(suite, "testcase", classname="probe", name="reachable")
        ElementTree.SubElement(case, "error", message=report.unreachable)
    for check, verdict in report.verdicts:
        case = ElementTree.SubElement(suite, "testcase", classname=f"probe.{report.api}", name=check.id)
        if verdict.status == "fail":
            failure = ElementTree.SubElement(case, "failure", message=verdict.detail)
            failure.text = json.dumps(verdict.evidence, ensure_ascii=False, default=str)
        elif verdict.status == "n/a":
            ElementTree.SubElement(case, "skipped", message=verdict.detail)
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)


def attribution_json(found: Attribution) -> dict[str, Any]:
    """``compare --attribute-server`` as JSON."""
    points = found.points
    return {"run_a": found.run_a, "run_b": found.run_b, "cells": found.cells, "recorded": found.recorded,
            "wire_faults_b": found.wire_b, "wire_faults_a": found.wire_a, "model_differences": found.model,
            "points_lost_to_server": None if points is None else {
                "estimate": points.difference, "ci_low": points.ci_low, "ci_high": points.ci_high,
                "method": points.method},
            "examples": found.examples}


def attribution_text(found: Attribution) -> str:
    """``compare --attribute-server`` as the terminal shows it."""
    lines = [f"server attribution: {found.run_a} (A) vs {found.run_b} (B), {found.cells} paired cells"
             f" ({found.recorded} with B's replies recorded)",
             f"  B lost to its server (wire faults): {found.wire_b} cells; A lost to its server: "
             f"{found.wire_a}; model differences: {found.model}"]
    points = found.points
    if points is not None:
        lines.append(f"  points lost to B's server: {100 * points.difference:+.1f} "
                     f"[{100 * points.ci_low:+.1f}, {100 * points.ci_high:+.1f}] (95% CI, {points.method},"
                     " paired by case and trial)")
    if found.cells and not found.recorded:
        lines.append("  note: B's replies were not recorded (service.record_wire=true keeps them): every "
                     "discordant cell counts as a model difference.")
    for example in found.examples:
        where = f"{example['eval']}/{example['case']} trial {example['trial']} turn {example['turn']}"
        lines.append(f"  {where}: read {example['read']}, recovered {example['recovered']}")
    return "\n".join(lines)
