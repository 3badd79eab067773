"""``compare --judge-corrected`` on a suite of judged evals, in every format and with every option.

Three evals graded by the mock as a judge; the candidate's answers are wrong on half the cases
the baseline gets right. Every output is labelled, so each eval and the pooled row are corrected.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from evalhydra.api import evaluate
from evalhydra.cli.store_commands import main
from evalhydra.store.db import immediate, open_store
from evalhydra.store.labels import import_labels
from tests.conftest import smoke_eval, write_registry

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

EVALS = ("g.a", "g.b", "g.c")
CASES = 12


def _registry(root: Path, worse: bool) -> Path:
    """Cases 0–8 should pass; on the candidate (``worse``) every even one of them answers wrong."""
    def line(i: int) -> str:
        said = "WRONG" if worse and i < 9 and i % 2 == 0 else f"V{i}"
        return json.dumps({"id": f"c{i:02d}", "input": f"Reply with exactly {said}.",
                           "ideal": f"V{i}" if i < 9 else "NOPE"}) + "\n"
    grade = {"kind": "model_grade", "judge_service": "mock", "rubric": "Right?", "pass_score": 1.0}
    evals = {f"g/{e[2:]}.json": smoke_eval(e, f"data/g/{e[2:]}/test.jsonl", matcher=grade) for e in EVALS}
    data = {f"data/g/{e[2:]}/test.jsonl": "".join(line(i) for i in range(CASES)) for e in EVALS}
    return write_registry(root, evals=evals, data=data)


def _label_every_output(store_path: Path) -> None:
    store = open_store(store_path)
    rows = store.conn.execute("select eval_id, case_id, output from results").fetchall()
    labels = [(f"row {i}", {"eval": e, "case": c, "output": o,
                            "label": "PASS" if o == f"V{int(c[1:])}" and int(c[1:]) < 9 else "FAIL"})
              for i, (e, c, o) in enumerate(rows)]
    with immediate(store.conn):
        account = import_labels(store.conn, labels, "ana")
    assert account.stored == account.read == len(rows) and not account.unmatched
    store.close()


@pytest.fixture(scope="module")
def judged_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("suite")
    ids = []
    for name, worse in (("base", False), ("cand", True)):
        result = evaluate([f"registry={_registry(root / name, worse)}", "eval=g", "report=[json]",
                           f"store.path={root / 's.db'}", "run.concurrency=4"])
        assert result.exit_code in (0, 1) and result.run_id, result
        ids.append(result.run_id)
    _label_every_output(root / "s.db")
    return root / "s.db", ids[0], ids[1]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("fmt", ["text", "md", "json"])
@pytest.mark.parametrize("gate", [False, True])
def test_judge_corrected_compare_of_three_judged_evals(judged_store: tuple[Path, str, str],
                                                       capsys: pytest.CaptureFixture[str],
                                                       fmt: str, gate: bool) -> None:
    store, base, cand = judged_store
    args = ["compare", "--store", str(store), base, cand, "--judge-corrected", "--format", fmt]
    code, out, err = _cli(capsys, *args, *(["--fail-on-regression"] if gate else []))
    assert code == (1 if gate else 0), (out, err)
    assert "Traceback" not in out + err and not err.startswith("error")
    if fmt == "json":
        doc = json.loads(out)
        assert [r["eval_id"] for r in doc["comparisons"]] == list(EVALS)
        pooled = doc["overall"]["judge_corrected"]
        assert pooled["difference"] == pytest.approx(-15 / 36)  # 5 of 12 cases lost, on each eval
        assert pooled["baseline_judge"] == pooled["candidate_judge"]
        assert pooled["baseline_labels"] == pooled["candidate_labels"] == (CASES + 5) * len(EVALS)
        assert pooled["verdict"] == "regression"
    else:
        assert "all evals:" in out and "verdict: REGRESSION after judge correction" in out


_OPTIONS = {"--fail-on-regression": [], "--judge-corrected": [], "--eval": ["g.b"], "--limit": ["1"],
            "--min-detectable": ["0.5"]}


@pytest.mark.parametrize("fmt", ["text", "md", "json"])
def test_every_combination_of_compares_options_answers_without_a_traceback(
        judged_store: tuple[Path, str, str], capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    store, base, cand = judged_store
    for count in range(len(_OPTIONS) + 1):
        for chosen in itertools.combinations(_OPTIONS, count):
            extra = [item for name in chosen for item in (name, *_OPTIONS[name])]
            code, out, err = _cli(capsys, "compare", "--store", str(store), base, cand, "--format", fmt,
                                  *extra)
            assert code == (1 if "--fail-on-regression" in chosen else 0), (chosen, out, err)
            assert "Traceback" not in out + err and out.strip(), chosen
            if fmt == "json":
                json.loads(out)
