"""An agent run's report.md is zrb-llm-evaluator 0.1.13's document: zrb itself renders the same bytes
from evalhydra's experiment.json (``zrb-llm-evaluator report --dir``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry
from tests.helpers import installed_script, run_cli

VALIDATOR = """
from pathlib import Path
from evalhydra.agents import ValidationCheck, ValidationResult

class V:
    def validate(self, output_dir, log_content, trace=None):
        text = (output_dir / "out.txt").read_text().strip() if (output_dir / "out.txt").exists() else ""
        check = ValidationCheck("content", text in ("ok", "great"), repr(text))
        if text == "great":
            return ValidationResult("EXCELLENT", 1.0, [check])
        if text == "ok":
            return ValidationResult("PASS", 0.9, [check])
        return ValidationResult("FAIL", 0.25, [check])

validator = V()
"""
CASES = {
    "passes": "WRITE out.txt great\nTOKENS 120 30 5\n",
    "ok": "WRITE out.txt ok\n",
    "fails": "WRITE out.txt nope\n",
    "errors": "SAY giving up\nEXIT 3\n",
    "marked": "WRITE out.txt nope\nMARKER PASS\n",  # zrb 0.1.13 honours the marker by default
}


def _registry(root: Path) -> Path:
    for name, instruction in CASES.items():
        case = root / "reg" / "agent_cases" / name
        case.mkdir(parents=True)
        (case / "instruction.txt").write_text(instruction)
        (case / "validator.py").write_text(VALIDATOR)
    (root / "reg" / "services.json").write_text("[]")
    return root / "reg"


@pytest.mark.slow
def test_report_md_is_the_document_zrb_renders_from_our_experiment_json(tmp_path: Path) -> None:
    zrb_cli = installed_script("zrb-llm-evaluator") or pytest.fail("zrb-llm-evaluator is a test extra")
    res = run_cli(
        f"registry={_registry(tmp_path)}",
        "eval=agent_cases",
        "service=fake_agent",
        "trials=2",
        "run.progress=false",
        f"store.path={tmp_path / 's.db'}",
        "hydra.run.dir=out",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    out = tmp_path / "out"
    experiment = json.loads((out / "experiment.json").read_text())
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", experiment["id"]
    )
    assert all(re.fullmatch(r"[0-9a-f-]{36}", t["id"]) for t in experiment["results"])
    assert experiment["config"]["cli_version"] == "fake_agent 0.1.0"
    (tmp_path / "zrb").mkdir()
    shutil.copy(out / "experiment.json", tmp_path / "zrb")
    done = subprocess.run([zrb_cli, "report", "--dir", str(tmp_path / "zrb")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ours = (out / "report.md").read_text(encoding="utf-8")
    assert ours == (tmp_path / "zrb" / "report.md").read_text(encoding="utf-8")
    assert ours.startswith("# Experiment Report\n- **Experiment ID**: ")
    assert "- **Zrb Version**: fake_agent 0.1.0\n" in ours and "## Leaderboard" in ours
    statuses = {t["test_case"]: t["status"] for t in experiment["results"]}
    assert statuses == {
        "passes": "EXCELLENT",
        "ok": "PASS",
        "fails": "FAIL",
        "errors": "ERROR",
        "marked": "PASS",
    }
    results = json.loads((out / "results.json").read_text())
    passes = next(t for t in results if t["test_case"] == "passes")
    assert f"| {passes['total_tokens']} | 120 | 30 | 5 |" in ours.replace("**", "")  # Total Tokens as parsed
    own = (out / "evalhydra_report.md").read_text()  # evalhydra's own report, beside it
    assert own.startswith("#") and _failing_table(own) == _failing_table(ours) != []


def _failing_table(report: str) -> list[str]:
    """The lines of the Failing / Timeout Trials table."""
    section = report.split("## Failing / Timeout Trials\n\n", 1)[1]
    return [line for line in section.split("\n\n", 1)[0].splitlines() if line.startswith("|")]


@pytest.mark.slow
def test_several_models_share_one_run_and_one_pool(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    common = ("eval=agent_cases", "service=fake_agent", "run.progress=false", f"store.path={db}")
    res = run_cli(
        *common,
        "service.models=[fake:model-a,fake:lazy-b]",
        "run.concurrency=2",
        "hydra.run.dir=out",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "run eval-agents-" in res.stdout and ": 6 cells," in res.stdout  # 2 models × 3 cases, one run
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    by_model = report.split("## By Model")[1].split("## By Test Case")[0]
    assert "| fake:model-a | 3 |" in by_model and "| fake:lazy-b | 3 |" in by_model
    again = run_cli(*common, "service.model=fake:model-a", cwd=tmp_path)  # the same cells, one model
    assert again.returncode == 0 and "(0 run now, 3 resumed from the store)" in again.stdout, again.stdout


@pytest.mark.slow
def test_the_sweep_report_keeps_models_with_slashes_and_absolute_path_overrides(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    res = run_cli(
        "-m",
        "service=fake_agent",
        "eval=agent_cases",
        "service.model=openrouter:org/model-a,fake:model-b",
        f"run.agent_trials_dir={tmp_path / 'trials'}",
        "run.progress=false",
        f"store.path={db}",
        "hydra.sweep.dir=sweep",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "sweep report (2 jobs)" in res.stdout, res.stdout
    report = (tmp_path / "sweep" / "report" / "report.md").read_text(encoding="utf-8")
    assert "| openrouter:org/model-a | 3 |" in report and "| fake:model-b | 3 |" in report
    again = run_cli("report", "--sweep", "sweep", "--store", str(db), "--out", "again", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    for name in ("report.md", "experiment.json", "evals.json"):
        assert (tmp_path / "again" / name).read_bytes() == (
            tmp_path / "sweep" / "report" / name
        ).read_bytes(), name


def test_the_failing_table_names_every_failing_test_case_as_zrb_does(tmp_path: Path) -> None:
    """zrb lists every failing trial; report.md lists the first 200 and the first failing trial
    of every other failing case, so no failing test case is missing from the table."""
    case = '{{"id": "c{:02d}", "input": "Reply with exactly A.", "ideal": "B"}}\n'
    lines = "".join(case.format(i) for i in range(30))
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval()},
                              data={"data/g/e/test.jsonl": lines})
    res = run_cli(f"registry={registry}", "eval=g.e", "trials=10", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    report = next((tmp_path / "outputs" / "runs").rglob("report.md")).read_text()
    section = report.split("## Failing / Timeout Trials", 1)[1].split("\n## ", 1)[0].split("### Why", 1)[0]
    listed = set(re.findall(r"^\| mock/mock-model \| (g\.e/c\d\d) \|", section, flags=re.M))
    assert listed == {f"g.e/c{i:02d}" for i in range(30)}  # 300 failing trials over 30 cases
