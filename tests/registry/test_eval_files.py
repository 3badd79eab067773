"""Eval files a person writes: the minimal own format, every problem at once, paths where they
were written, custom matchers from the registry root, and a broken file that is not selected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.registry.definitions import load_registry
from tests.helpers import run_cli

CASE = '{"id": "a", "input": "Reply with exactly Vienna.", "ideal": "Vienna"}\n'


def _own_registry(root: Path, evals: dict[str, str], data: dict[str, str]) -> Path:
    """A registry without services.json (evalhydra's own format), files written as given."""
    for rel, text in {**{f"evals/{k}": v for k, v in evals.items()}, **data}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_minimal_yaml_eval_is_dataset_and_matcher(tmp_path: Path) -> None:
    root = _own_registry(
        tmp_path,
        {"geo/capitals.yaml": "dataset_path: capitals.jsonl\nmatcher: {kind: includes}\n"},
        {"evals/geo/capitals.jsonl": CASE},
    )
    spec = load_registry(root).evals["geo.capitals"]
    assert (spec["group"], spec["description"], spec["split"], spec["default_run_count"]) == (
        "geo",
        "",
        "test",
        1,
    )


def test_every_problem_of_a_file_is_reported_in_one_error(tmp_path: Path) -> None:
    root = _own_registry(
        tmp_path, {"e.yaml": "datset_path: x.jsonl\nmatcher: includes\ndefault_run_count: 0\n"}, {}
    )
    registry = load_registry(root)
    with pytest.raises(EvalHydraError) as caught:
        registry.eval("e")
    message = caught.value.message
    assert message.startswith(f"{root / 'evals' / 'e.yaml'}: ")
    for part in (
        "unknown field 'datset_path' (Did you mean: dataset_path?)",
        "required field 'dataset_path' is missing",
        "default_run_count must be a positive integer",
        "matcher must be an object with a 'kind'",
    ):
        assert part in message, part


def test_zig_eval_layout_keeps_zig_evals_refusals(tmp_path: Path) -> None:
    (tmp_path / "services.json").write_text("[]")
    _own_registry(
        tmp_path,
        {"g/e.json": json.dumps({"dataset_path": "data/x.jsonl", "matcher": {"kind": "includes"}})},
        {"data/x.jsonl": CASE},
    )
    with pytest.raises(
        EvalHydraError, match="required field 'id' is missing or empty .*as zig_eval requires"
    ):
        load_registry(tmp_path).eval("g.e")


def test_a_dataset_resolves_against_the_eval_file_then_the_root(tmp_path: Path) -> None:
    root = _own_registry(
        tmp_path,
        {
            "beside.yaml": "dataset_path: beside.jsonl\nmatcher: {kind: includes}\n",
            "rooted.yaml": "dataset_path: data/r.jsonl\nmatcher: {kind: includes}\n",
            "absolute.yaml": f"dataset_path: {tmp_path / 'elsewhere' / 'a.jsonl'}\n"
            "matcher: {kind: includes}\n",
            "escape.yaml": "dataset_path: ../../outside.jsonl\nmatcher: {kind: includes}\n",
        },
        {"evals/beside.jsonl": CASE, "data/r.jsonl": CASE, "elsewhere/a.jsonl": CASE},
    )
    (tmp_path.parent / "outside.jsonl").write_text(CASE)
    registry = load_registry(root)
    assert {"beside", "rooted", "absolute"} <= set(registry.evals)
    with pytest.raises(EvalHydraError, match="escapes the registry root"):
        registry.eval("escape")


@pytest.mark.slow
def test_an_attachment_resolves_beside_its_dataset(tmp_path: Path) -> None:
    line = {
        "id": "a",
        "input": "Reply with exactly notes.",
        "ideal": "notes",
        "attachments": [{"kind": "file", "path": "notes.txt"}],
    }
    root = _own_registry(
        tmp_path / "reg",
        {"e.yaml": "dataset_path: ../data/e/cases.jsonl\nmatcher: {kind: includes}\n"},
        {"data/e/cases.jsonl": json.dumps(line) + "\n", "data/e/notes.txt": "release notes\n"},
    )
    res = run_cli(f"registry={root}", "eval=e", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 passed" in res.stdout


def test_a_config_dir_eval_runs_without_registry(tmp_path: Path) -> None:
    conf = tmp_path / "my_conf"
    (conf / "eval").mkdir(parents=True)
    (conf / "eval" / "capitals.yaml").write_text("dataset_path: capitals.jsonl\nmatcher:\n  kind: includes\n")
    (conf / "eval" / "capitals.jsonl").write_text(CASE)
    res = run_cli("--config-dir", str(conf), "eval=capitals", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "capitals" in res.stdout and "1 passed" in res.stdout


def test_a_custom_matcher_imports_from_the_registry_root(tmp_path: Path) -> None:
    root = _own_registry(
        tmp_path / "reg",
        {
            "e.yaml": "dataset_path: ../cases.jsonl\n"
            "matcher: {kind: custom, _target_: my_scoring.says_vienna}\n"
        },
        {"cases.jsonl": CASE, "my_scoring.py": "def says_vienna(ctx):\n    return 'Vienna' in ctx.output\n"},
    )
    res = run_cli(f"registry={root}", "eval=e", "run.progress=false", cwd=tmp_path)  # cwd is not the registry
    assert res.returncode == 0, res.stderr
    assert "1 passed" in res.stdout


@pytest.mark.slow
def test_a_broken_unselected_eval_is_a_warning_and_a_selected_one_an_error(tmp_path: Path) -> None:
    root = _own_registry(
        tmp_path / "reg",
        {
            "good.yaml": "dataset_path: ../c.jsonl\nmatcher: {kind: includes}\n",
            "bad.yaml": "dataset_path: [unclosed\n",
        },
        {"c.jsonl": CASE},
    )
    res = run_cli(f"registry={root}", "eval=good", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(root / "evals" / "bad.yaml") in warnings[0]
    bad = run_cli(f"registry={root}", "eval=bad", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"error: {root / 'evals' / 'bad.yaml'}:"), bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
def test_evals_here_are_pointed_at_and_a_sweep_without_m_says_add_m(tmp_path: Path) -> None:
    _own_registry(
        tmp_path, {"mine.yaml": "dataset_path: c.jsonl\nmatcher: {kind: includes}\n"}, {"evals/c.jsonl": CASE}
    )
    res = run_cli("eval=mine", cwd=tmp_path)
    assert res.returncode == 2 and "found evals/ here: add registry=." in res.stderr
    sweep = run_cli("service=mock,mock_slow", cwd=tmp_path)
    assert sweep.returncode == 2
    assert (
        sweep.stderr.splitlines()[0] == "error: service=mock,mock_slow: comma-separated values sweep: add -m."
    )


SCHEMA = '{"type": "object", "required": ["answer"]}'
JSON_CASE = '{"id": "a", "input": "Reply in JSON with an answer field set to OK."}\n'


@pytest.mark.slow
def test_a_schema_file_beside_a_registry_eval_or_a_config_dir_eval(tmp_path: Path) -> None:
    root = _own_registry(
        tmp_path / "reg",
        {"j.yaml": "dataset_path: j.jsonl\nmatcher: {kind: json_schema, schema: answer.schema.json}\n"},
        {"evals/j.jsonl": JSON_CASE, "evals/answer.schema.json": SCHEMA},
    )
    res = run_cli(f"registry={root}", "eval=j", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 passed" in res.stdout
    conf = tmp_path / "conf"
    (conf / "eval").mkdir(parents=True)
    (conf / "eval" / "j.yaml").write_text(
        "dataset_path: j.jsonl\nmatcher:\n  kind: json_schema\n  schema: answer.schema.json\n"
    )
    (conf / "eval" / "j.jsonl").write_text(JSON_CASE)
    (conf / "eval" / "answer.schema.json").write_text(SCHEMA)
    res = run_cli("--config-dir", str(conf), "eval=j", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 passed" in res.stdout


def test_zig_eval_files_refuse_absolute_matcher_paths(tmp_path: Path) -> None:
    (tmp_path / "services.json").write_text("[]")
    spec = {
        "id": "g.e",
        "group": "g",
        "description": "d",
        "dataset_path": "data/x.jsonl",
        "split": "test",
        "default_run_count": 1,
        "matcher": {"kind": "json_schema", "schema": str(tmp_path / "s.json")},
    }
    _own_registry(tmp_path, {"g/e.json": json.dumps(spec)}, {"data/x.jsonl": JSON_CASE, "s.json": SCHEMA})
    with pytest.raises(
        EvalHydraError, match="matcher schema '.*s.json' is absolute: zig_eval paths are relative"
    ):
        load_registry(tmp_path).eval("g.e")
