"""Issue 52, items 2–4: people's labels imported and kept by output, and ``calibrate``: each judge's
agreement with them and the pass rates it gave corrected for its errors; on real store files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalhydra.analysis.calibration import calibration, calibration_docs
from evalhydra.analysis.gates import Gates, failing_stats
from evalhydra.analysis.judges import Settings, judges_in_summary, judges_of
from evalhydra.analysis.runsummary import run_summary, summary_histograms
from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.targetstats import store_stats
from evalhydra.cli.store_commands import main as store_main
from evalhydra.core.errors import EvalHydraError
from evalhydra.matchers.factory import judge_settings
from evalhydra.reports.calibration import render_calibration
from evalhydra.reports.summary import corrected_rows, gate_text, run_gate
from evalhydra.reports.writer import write_run_reports
from evalhydra.store.db import Batch, immediate, open_store
from evalhydra.store.labels import import_labels, output_sha256
from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli
from tests.reports.support import result_row, write_run

RUN = "eval-judged-aaaaaaaa"
#: Judge verdicts: cases 0–6 passed, 7–9 failed; people: 0–4 and 7 pass. So TP 5, FP 2, FN 1, TN 2.
HUMAN_PASS = {0, 1, 2, 3, 4, 7}


def _store(path: Path):  # type: ignore[no-untyped-def]
    store = open_store(path)
    rows = [result_row(RUN, f"c{i}", passed=i < 7, output=f"answer {i}", judge_model="judge-m",
                       judge_service="mock") for i in range(10)]
    write_run(store, RUN, rows)
    with immediate(store.conn):
        import_labels(store.conn, [(f"line {i}", {"eval": "g.e", "case": f"c{i}",
                                                  "label": "PASS" if i in HUMAN_PASS else "fail"})
                                   for i in range(10)], "ana")
    return store


def test_a_judge_against_labels_and_its_corrected_rate(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    (doc,) = calibration(store.conn, [RUN])
    found = doc["agreement"]
    assert (found["true_pos"], found["false_pos"], found["false_neg"], found["true_neg"]) == (5, 2, 1, 2)
    assert found["sensitivity"] == pytest.approx(5 / 6) and found["specificity"] == pytest.approx(0.5)
    (target,) = doc["targets"]
    assert target["raw_pass_rate"] == pytest.approx(0.7)
    assert target["corrected_pass_rate"] == pytest.approx((0.7 + 0.5 - 1) / (5 / 6 + 0.5 - 1))  # 0.6
    assert "Rogan-Gladen" in render_calibration([doc])
    assert json.loads(render_calibration([doc], "json"))[0]["labels"] == 10
    store.close()


def test_a_label_follows_its_output_through_a_rerun(tmp_path: Path) -> None:
    """The judge's labelled outputs anywhere in the store calibrate it for a later run; an output
    judged again counts once, with its newest verdict; a new answer holds no label."""
    store = _store(tmp_path / "s.db")
    later = "eval-judged-bbbbbbbb"
    rows = [result_row(later, "c0", passed=False, output="answer 0", judge_model="judge-m",
                       judge_service="mock", evaluated_at="2026-02-01T00:00:00.000Z"),
            result_row(later, "c1", output="something else", judge_model="judge-m", judge_service="mock")]
    store.write(Batch(results=rows, members=[(later, r["cell_key"]) for r in rows]))
    store.start_run({"run_id": later, "kind": "chat", "started_at": "2026-01-02T00:00:00.000Z",
                     "status": "completed"})
    (doc,) = calibration(store.conn, [later])
    found = doc["agreement"]
    assert doc["labels"] == 10  # c0's two verdicts are one pair; c1's new output has no label
    assert (found["true_pos"], found["false_neg"]) == (4, 2)  # c0 (human PASS) now failed by the judge
    other = calibration(store.conn, [RUN])[0]["agreement"]
    assert other == found  # one calibration set per judge, whichever run is reported
    store.close()


def test_a_label_of_an_ambiguous_case_names_what_to_give(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    again = result_row("eval-judged-cccccccc", "c0", output="another answer")
    store.write(Batch(results=[again], members=[("eval-judged-cccccccc", again["cell_key"])]))
    with pytest.raises(EvalHydraError) as caught, immediate(store.conn):
        import_labels(store.conn, [("labels.jsonl:3", {"eval": "g.e", "case": "c0", "label": "PASS"})])
    assert caught.value.message.startswith("labels.jsonl:3: g.e/c0 has 2 different stored outputs")
    with pytest.raises(EvalHydraError, match="not PASS or FAIL"), immediate(store.conn):
        import_labels(store.conn, [("x:1", {"eval": "g.e", "case": "c1", "label": "maybe"})])
    store.close()


@pytest.mark.slow
def test_label_and_calibrate_from_the_command_line(tmp_path: Path) -> None:
    """A real run judged by the mock (model_grade), labels imported from CSV, calibrate in JSON."""
    lines = "".join(json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.",
                                "ideal": f"V{i}" if i < 7 else "NOPE"}) + "\n" for i in range(10))
    grade = smoke_eval(matcher={"kind": "model_grade", "judge_service": "mock", "rubric": "Right?"})
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": grade},
                              data={"data/g/e/test.jsonl": lines})
    store = tmp_path / "s.db"
    assert run_cli(f"registry={registry}", "eval=g.e", f"store.path={store}", "run.progress=false",
                   cwd=tmp_path).returncode == 0
    labels = tmp_path / "labels.csv"
    labels.write_text("eval,case,label\n" + "".join(
        f"g.e,c{i},{'PASS' if i in HUMAN_PASS else 'FAIL'}\n" for i in range(10)))
    done = run_cli("label", str(labels), "--labeller", "ana", "--store", str(store), cwd=tmp_path)
    assert done.returncode == 0 and "10 label(s) stored" in done.stdout, done.stderr
    shown = run_cli("calibrate", "--store", str(store), "--format", "json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    (doc,) = json.loads(shown.stdout)
    assert doc["judge_service"] == "mock" and doc["labels"] == 10
    assert doc["targets"][0]["corrected_pass_rate"] == pytest.approx(0.6)
    bad = run_cli("label", str(tmp_path / "none.csv"), "--store", str(store), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


def test_the_summary_stats_carry_the_corrected_rate_and_the_judge(tmp_path: Path) -> None:
    """``store_stats`` (what the summary, ``evaluate().stats`` and the gates read) adds the judge's
    fields to a judged target once the store holds labels; the method is named."""
    store = _store(tmp_path / "s.db")
    (found,) = store_stats(store, [RUN])
    stat = found.as_dict()
    assert stat["judge"] == "mock/judge-m" and stat["judge_labels"] == 10
    assert stat["pass_rate"] == pytest.approx(0.7)
    assert stat["corrected_pass_rate"] == pytest.approx(0.6)
    assert stat["corrected_ci_low"] < 0.6 < stat["corrected_ci_high"]
    assert stat["corrected_ci_method"].startswith("Rogan-Gladen") and stat["ci_method"] == "wilson"
    (row,) = corrected_rows([found])
    assert row["judge"] == "mock/judge-m" and row["corrected [95% CI]"].startswith("60.0% [")
    store.close()


def test_judge_gates_refuse_too_few_labels_or_too_little_agreement(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    stats = store_stats(store, [RUN])
    kappa = stats[0].as_dict()["judge_kappa"]
    failing = failing_stats(stats, Gates(require_judge_labels=50, min_judge_kappa=0.6))
    assert [f.metric for f in failing] == ["judge labels (mock/judge-m)", "judge kappa (mock/judge-m)"]
    assert gate_text(failing[0]) == "judge labels (mock/judge-m) 10 < 50"
    assert gate_text(failing[1]) == f"judge kappa (mock/judge-m) {kappa:.3f} < 0.600"
    assert failing_stats(stats, Gates(require_judge_labels=10, min_judge_kappa=kappa)) == []
    store.close()


def test_an_unlabelled_judge_fails_the_label_gate(tmp_path: Path) -> None:
    """Without any label in the store, a judged target has 0 labels and no κ: both gates fail it;
    a target no judge scored is not subject to them."""
    store = open_store(tmp_path / "s.db")
    write_run(store, RUN, [result_row(RUN, f"c{i}", judge_model="judge-m", judge_service="mock")
                           for i in range(3)]
              + [result_row(RUN, "c0", eval_id="g.plain", cell_key="plain")])
    assert all(s.judged is None for s in store_stats(store, [RUN]))  # nothing labelled: nothing added
    failing = run_gate(store, [RUN], Gates(require_judge_labels=1, min_judge_kappa=0.0))
    assert [(f.stat.eval, f.value) for f in failing] == [("g.e", None), ("g.e", 0)]
    store.close()


def test_a_run_summary_names_the_judges_a_pass_over_the_results_finds(tmp_path: Path) -> None:
    """The viewer reads a target's judges from the run's summary: the same as :func:`judges_of`
    over the results (two judges, an unjudged result and an infrastructure error left out), and the
    same Judges section; a summary saved before it kept judges falls back to the results."""
    store = _store(tmp_path / "s.db")
    more = [result_row(RUN, "c10", judge_model="other-m", judge_service="mock", output="answer 10"),
            result_row(RUN, "c11", output="answer 11"),
            result_row(RUN, "c12", judge_model="judge-m", judge_service="mock", status="ERROR",
                       error_kind="server_error", status_code=503, passed=False),
            result_row(RUN, "c0", eval_id="g.down", cell_key="down", status="ERROR",  # nothing scored
                       error_kind="server_error", status_code=503, passed=False)]
    store.write(Batch(results=more, members=[(RUN, r["cell_key"]) for r in more]))
    sel = select_runs(store.conn, [RUN])
    summary = run_summary(store.conn, [RUN])
    scanned = judges_of(store.conn, sel)
    assert judges_in_summary(summary, Settings(store.conn)) == scanned
    assert scanned[("g", "g.e", "svc", "m")] == {("g.e", "mock", "judge-m", ""): 10,
                                                 ("g.e", "mock", "other-m", ""): 1, None: 1}
    docs = calibration_docs(store.conn, sel, hists=summary_histograms(summary), summary=summary)
    assert docs == calibration_docs(store.conn, sel)
    assert [d["judge_model"] for d in docs] == ["judge-m", "other-m"]
    old = {**summary, "targets": [{k: v for k, v in t.items() if k != "judges"} for t in summary["targets"]]}
    assert judges_in_summary(old, Settings(store.conn)) is None
    assert calibration_docs(store.conn, sel, summary=old) == docs
    store.close()


def test_the_judge_views_count_what_calibrate_counts(tmp_path: Path) -> None:
    """``judge_agreement`` (plain SQL over ``judge_labels``) has calibrate's confusion counts; a label
    given by hash alone gets its output's text, so SQL can join it."""
    store = _store(tmp_path / "s.db")
    with immediate(store.conn):
        import_labels(store.conn, [("x:1", {"eval": "g.e", "case": "c9", "label": "PASS", "labeller": "bo",
                                            "output_sha256": output_sha256("answer 9")})])
    (doc,) = calibration(store.conn, [RUN])
    found = doc["agreement"]
    row = store.conn.execute("select labels, true_pos, false_neg, true_neg, false_pos, sensitivity"
                             " from judge_agreement").fetchone()
    counts = (found["true_pos"], found["false_neg"], found["true_neg"], found["false_pos"])
    assert tuple(row[:5]) == (10, *counts)
    assert row[5] == pytest.approx(found["sensitivity"], abs=1e-4)
    assert found["true_pos"] + found["false_neg"] == 7  # bo's later label of c9 wins
    store.close()


def test_self_consistency_comes_from_the_runs_rejudges(tmp_path: Path) -> None:
    """A rejudge by the same judge that changes 2 of 10 verdicts: the judge repeats itself on 8 of
    the 10 outputs; without a rejudge there is no figure."""
    store = _store(tmp_path / "s.db")
    assert calibration(store.conn, [RUN])[0]["self_consistency"] is None
    again = "eval-rejudge-g-bbbbbbbb"
    rows = [result_row(again, f"c{i}", passed=(i < 7) != (i in (0, 9)), output=f"answer {i}",
                       judge_model="judge-m", judge_service="mock") for i in range(10)]
    store.start_run({"run_id": again, "kind": "chat", "started_at": "2026-01-03T00:00:00.000Z",
                     "status": "completed", "parent_run_id": RUN})
    store.write(Batch(results=rows, members=[(again, r["cell_key"]) for r in rows]))
    for run in (RUN, again):
        (doc,) = calibration(store.conn, [run])
        assert (doc["repeated_outputs"], doc["self_consistency"]) == (10, pytest.approx(0.8))
    assert "0.800 (10 outputs)" in render_calibration(calibration(store.conn, [RUN]))
    store.close()


def test_report_md_and_html_carry_the_judges_section(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    write_run_reports(store, [RUN], tmp_path / "out", formats=["md", "html"])
    summary = (tmp_path / "out" / "summary.md").read_text()  # the CI's step summary
    assert "**Judge-corrected pass rates**" in summary and "70.0%              | 60.0% [" in summary
    markdown = (tmp_path / "out" / "report.md").read_text()
    section = markdown.split("## Judges", 1)[1].split("\n## ", 1)[0]
    assert "| g.e    | mock/judge-m |       10 | 0.83 [" in section
    judge_row = next(line for line in section.splitlines() if line.startswith("| g.e    | mock/judge-m"))
    assert judge_row.count("[") == 4  # sensitivity, specificity, κ and α, each with its interval
    assert "70.0%              | 60.0% [" in section  # judged, then corrected
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="judge-table"' in html and "60.0% [" in html.split('id="corrected-table"', 1)[1]
    unlabelled = open_store(tmp_path / "plain.db")
    write_run(unlabelled, RUN, [result_row(RUN, "c0", judge_model="judge-m", judge_service="mock")])
    write_run_reports(unlabelled, [RUN], tmp_path / "plain", formats=["md"])
    assert "## Judges" not in (tmp_path / "plain" / "report.md").read_text()  # nothing labelled
    assert "Judge-corrected" not in (tmp_path / "plain" / "summary.md").read_text()
    store.close()
    unlabelled.close()


def test_another_rubric_is_another_judge(tmp_path: Path) -> None:
    """Two runs of one eval, judge service and model under different matcher settings (runs.judges):
    each is its own judge; the labelled outputs of one do not calibrate the other."""
    store = _store(tmp_path / "s.db")
    store.conn.execute("update runs set judges = ? where run_id = ?", [json.dumps({"g.e": "aaaa"}), RUN])
    other = "eval-judged-dddddddd"
    rows = [result_row(other, f"c{i}", passed=True, output=f"answer {i}", judge_model="judge-m",
                       judge_service="mock") for i in range(10)]
    store.start_run({"run_id": other, "kind": "chat", "started_at": "2026-01-04T00:00:00.000Z",
                     "status": "completed", "judges": json.dumps({"g.e": "bbbb"})})
    store.write(Batch(results=rows, members=[(other, r["cell_key"]) for r in rows]))
    docs = calibration(store.conn, [RUN, other])
    assert [(d["judge_settings"], d["labels"]) for d in docs] == [("aaaa", 10), ("bbbb", 10)]
    assert docs[1]["agreement"]["false_pos"] == 4  # the lenient rubric passes c5, c6, c8 and c9
    (found,) = store_stats(store, [RUN, other])
    stat = found.as_dict()
    assert stat["corrected_pass_rate"] is None and "matcher settings" in stat["corrected_problem"]
    views = store.conn.execute("select judge_settings, labels from judge_agreement order by 1").fetchall()
    assert [tuple(v) for v in views] == [("aaaa", 10), ("bbbb", 10)]
    store.close()


def test_a_judges_settings_fingerprint_follows_its_matcher() -> None:
    grade = {"kind": "model_grade", "judge_service": "mock", "rubric": "Right?"}
    assert judge_settings(grade) == judge_settings(dict(grade)) and len(judge_settings(grade) or "") == 12
    assert judge_settings({**grade, "rubric": "Strictly right?"}) != judge_settings(grade)
    assert judge_settings({"kind": "all_of", "parts": [{"kind": "includes"}, grade]}) is not None
    assert judge_settings({"kind": "exact_match"}) is None


def test_a_finished_run_names_its_judges_from_the_summary_it_saves(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of a run computes the run's summary once, before its reports: report.md's Judges
    section, summary.md and the one-screen summary find the judges in it, with no pass over the
    results; and the summary saved is that one."""
    from evalhydra.analysis import judges
    from evalhydra.api import evaluate

    lines = "".join(json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.",
                                "ideal": f"V{i}" if i < 4 else "NOPE"}) + "\n" for i in range(8))
    grade = smoke_eval(matcher={"kind": "model_grade", "judge_service": "mock", "rubric": "Right?",
                                "pass_score": 1.0})
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": grade},
                              data={"data/g/e/test.jsonl": lines})
    args = [f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}", "run.progress=false"]
    first = evaluate(args)
    store = open_store(tmp_path / "s.db")
    with immediate(store.conn):
        import_labels(store.conn, [(f"row {i}", {"eval": "g.e", "case": f"c{i}", "label": "PASS" if i < 4
                                                 else "FAIL"}) for i in range(8)], "ana")
    scanned = judges_of(store.conn, select_runs(store.conn, [first.run_id]))
    store.close()

    def no_pass_over_the_results(*_: object) -> None:
        raise AssertionError("the judges were looked for in the results")

    monkeypatch.setattr(judges, "judges_of", no_pass_over_the_results)
    again = evaluate(args)  # a new run, every cell resumed from the first
    (stat,) = again.stats
    assert again.exit_code == 0 and stat["judge"] == "mock/mock-model" and stat["judge_labels"] == 8
    report = (tmp_path / "runs" / str(again.run_id) / "report.md").read_text()
    assert "## Judges" in report and "mock/mock-model" in report.split("## Judges", 1)[1]
    store = open_store(tmp_path / "s.db", read_only=True)
    (saved,) = store.conn.execute("select summary from run_summaries where run_id = ?",
                                  [again.run_id]).fetchone()
    assert judges_in_summary(json.loads(saved), Settings(store.conn)) == scanned
    store.close()


def test_the_reports_of_a_finished_run_name_its_judges_from_its_saved_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``evalhydra report`` and the gates of a finished run read its judges from the summary saved
    when it ended, with the same figures; a run with no summary that still holds (unsaved, or
    cells added since) is read from its results."""
    from evalhydra.analysis import judges

    store = _store(tmp_path / "s.db")
    write_run_reports(store, [RUN], tmp_path / "scanned", formats=["md"])
    scanned = store_stats(store, [RUN])
    store.save_run_summary(RUN, run_summary(store.conn, [RUN]))
    looked: list[object] = []

    def counted(*args: object, **kw: object) -> object:
        looked.append(args)
        return judges_of(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(judges, "judges_of", counted)

    write_run_reports(store, [RUN], tmp_path / "saved", formats=["md"])
    assert store_stats(store, [RUN]) == scanned
    assert looked == []
    assert (tmp_path / "saved" / "report.md").read_text() == (tmp_path / "scanned" / "report.md").read_text()

    more = [result_row(RUN, "c10", judge_model="judge-m", judge_service="mock", output="answer 10")]
    store.write(Batch(results=more, members=[(RUN, r["cell_key"]) for r in more]))  # the summary is stale
    (stat,) = store_stats(store, [RUN])
    assert len(looked) == 1 and stat.n == 11
    store.close()


def _label_cli(capsys: pytest.CaptureFixture[str], store: Path, lines: list[dict[str, str]],
               *extra: str) -> tuple[int, str, str]:
    path = store.parent / "labels.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    capsys.readouterr()
    code = store_main(["label", str(path), "--store", str(store), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def _label_count(store: Path) -> int:
    found = open_store(store)
    try:
        return int(found.conn.execute("select count(*) from labels").fetchone()[0])
    finally:
        found.close()


def test_labels_that_match_no_stored_output_are_refused_and_named(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown eval, an unknown case, an output never stored (a changed line ending), an
    unmatched hash: exit 2 naming each row's line, nothing stored; --allow-unmatched stores them."""
    _store(tmp_path / "s.db").close()
    before = _label_count(tmp_path / "s.db")
    bad = [{"eval": "g.nope", "case": "c1", "label": "PASS", "output": "x"},
           {"eval": "g.e", "case": "c99", "label": "PASS", "output": "x"},
           {"eval": "g.e", "case": "c1", "label": "PASS", "output": "answer 1\r\n"},
           {"eval": "g.e", "case": "c2", "label": "FAIL", "output_sha256": "0" * 64}]
    good = [{"eval": "g.e", "case": "c3", "label": "PASS"}]
    code, out, err = _label_cli(capsys, tmp_path / "s.db", good + bad)
    assert code == 2 and len(err.splitlines()) == 2 and not out, err  # the error, then the fix
    assert err.startswith("error: 4 label row(s) match no stored output, nothing stored:")
    assert "labels.jsonl:2: no eval 'g.nope' in the store" in err
    assert "labels.jsonl:3: eval 'g.e' has no case 'c99' in the store" in err
    assert "labels.jsonl:4: g.e/c1 has no stored output with this text or hash" in err
    assert "(and 1 more)" in err and "--allow-unmatched" in err
    assert _label_count(tmp_path / "s.db") == before
    code, out, _ = _label_cli(capsys, tmp_path / "s.db", good + bad, "--allow-unmatched")
    assert code == 0 and out.startswith("5 row(s) read, 5 label(s) stored")
    assert "4 matching no stored output (stored: --allow-unmatched)" in out


def test_two_rows_for_one_output_are_one_label_and_said_so(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path / "s.db").close()
    rows = [{"eval": "g.e", "case": "c1", "label": "PASS", "labeller": "bo"},
            {"eval": "g.e", "case": "c1", "label": "FAIL", "labeller": "bo"}]
    code, out, _ = _label_cli(capsys, tmp_path / "s.db", rows)
    assert code == 0 and out.startswith("2 row(s) read, 1 label(s) stored") and "1 duplicate(s) merged" in out
    store = open_store(tmp_path / "s.db")
    (label,) = store.conn.execute("select label from labels where labeller = 'bo'").fetchone()
    store.close()
    assert label == "FAIL"  # the later row is kept


@pytest.mark.parametrize(("content", "said"), [
    (b"\xff\xfe\x00bad\n", "byte 0"),
    (b'{"eval": ["x"], "case": "c1", "label": "PASS"}\n', "'eval' must be text, not list"),
    (b'{"eval": "g.e", "case": {"a": 1}, "label": "PASS"}\n', "'case' must be text, not dict"),
    (b'{"eval": "g.e", "case": "c1", "label": "PASS", "run": "' + RUN.encode() + b'", "trial": "x"}\n',
     "'trial' must be a whole number, not 'x'"),
    (b"[1, 2]\n", "each line is an object"),
])
def test_a_malformed_label_file_is_a_clear_error_and_stores_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, said: str) -> None:
    """Issue 59, D17: the campaign's malformed label files (JSONL)."""
    _store(tmp_path / "s.db").close()
    before = _label_count(tmp_path / "s.db")
    (tmp_path / "labels.jsonl").write_bytes(content)
    capsys.readouterr()
    code = store_main(["label", str(tmp_path / "labels.jsonl"), "--store", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and said in err.splitlines()[0], err
    assert _label_count(tmp_path / "s.db") == before


@pytest.mark.parametrize(("content", "said"), [
    (b"eval,case,label\n\xff\xfe,x,PASS\n", "is not UTF-8 text"),
    (b"a,b\n1,2\n", "'eval' is missing"),
])
def test_a_malformed_label_csv_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                content: bytes, said: str) -> None:
    _store(tmp_path / "s.db").close()
    (tmp_path / "labels.csv").write_bytes(content)
    capsys.readouterr()
    code = store_main(["label", str(tmp_path / "labels.csv"), "--store", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and said in err.splitlines()[0], err
