"""Validators written for zrb-llm-evaluator run unchanged, with the package installed and without it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import run_cli

#: A validator as zrb's docs write one: zrb's imports, zrb's models, the trace as zrb's TrialTrace.
ZRB_VALIDATOR = """
from pathlib import Path

from zrb_llm_evaluator.models import TrialTrace, ValidationCheck, ValidationResult
from zrb_llm_evaluator.protocols import ValidatorProtocol


class HelloValidator:
    def validate(
        self, output_dir: Path, log_content: str, trace: TrialTrace | None = None
    ) -> ValidationResult:
        assert isinstance(trace, TrialTrace), type(trace)
        dumped = trace.model_dump()
        assert set(dumped) == {"tool_calls", "tool_names", "assistant_text", "turn_count"}, dumped
        target = output_dir / "hello.txt"
        content = target.read_text().strip() if target.exists() else ""
        ok = content == "hello, world"
        names = dumped["tool_names"]
        checks = [ValidationCheck(name="content", passed=ok, message=repr(content)),
                  ValidationCheck(name="names", passed=bool(names), message=str(names))]
        return ValidationResult(status="PASS" if ok else "FAIL", score=1.0, details=checks)


validator = HelloValidator()
assert isinstance(validator, ValidatorProtocol)
"""

#: Makes ``import zrb_llm_evaluator`` fail in the child, as on a machine without the package.
BLOCK_ZRB = """
import sys

class _NoZrb:
    def find_spec(self, name, path=None, target=None):
        if name == "zrb_llm_evaluator" or name.startswith("zrb_llm_evaluator."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, _NoZrb())
"""


def _registry(root: Path) -> Path:
    case = root / "reg" / "agent_cases" / "hello"
    case.mkdir(parents=True)
    (case / "instruction.txt").write_text("Create hello.txt.\n\nWRITE hello.txt hello, world\n")
    (case / "validator.py").write_text(ZRB_VALIDATOR)
    (root / "reg" / "services.json").write_text("[]")
    return root / "reg"


@pytest.mark.slow
@pytest.mark.parametrize("zrb", ["installed", "absent"])
def test_a_zrb_validator_runs_unchanged(zrb: str, tmp_path: Path) -> None:
    env = {}
    if zrb == "installed":
        pytest.importorskip("zrb_llm_evaluator")  # a test extra: present in CI
    else:
        (tmp_path / "block").mkdir()
        (tmp_path / "block" / "sitecustomize.py").write_text(BLOCK_ZRB)
        env["PYTHONPATH"] = str(tmp_path / "block")
    registry = _registry(tmp_path)
    db = tmp_path / "s.db"
    res = run_cli(
        f"registry={registry}",
        "eval=agent_cases",
        "service=fake_agent",
        "run.progress=false",
        f"store.path={db}",
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    conn = sqlite3.connect(db)
    status, details = conn.execute("select status, details from results").fetchone()
    conn.close()
    assert status == "PASS", details
    assert json.loads(details)["verification_result"]["details"] == [  # zrb's models, read back
        {"name": "content", "passed": True, "message": "'hello, world'"},
        {"name": "names", "passed": True, "message": "['write_file']"},
    ]
