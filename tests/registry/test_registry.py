"""Registry loading: zig_eval layout, validation, streaming datasets."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.matchers.text import exact_match
from evalhydra.registry.datasets import iter_cases
from evalhydra.registry.definitions import load_registry
from tests.conftest import ZIG_FIXTURE, smoke_eval, write_registry


def test_zig_fixture_loads_unchanged() -> None:
    registry = load_registry(ZIG_FIXTURE)
    assert list(registry.services) == ["local-product", "product-staging", "judge"]
    assert set(registry.evals) == {
        "quality.helpful_summary",
        "multimodal.image_object",
        "multimodal.release_notes",
        "structured_output.required_answer_json",
        "smoke.reply_ok",
        "tools.search_web",
    }
    assert registry.services["local-product"]["retry"]["max_attempts"] == 3
    assert registry.evals["smoke.reply_ok"]["service_allowlist"] == ["local-product", "product-staging"]
    cases = list(iter_cases(ZIG_FIXTURE, "data/multimodal/image_object/test.jsonl"))
    assert cases[0].attachments[0].mime_type == "image/png"
    assert cases[0].attachments[0].label == "reference image"


def _registry(tmp_path: Path, lines: str, **extra: object) -> Path:
    return write_registry(
        tmp_path / "reg", evals={"g/e.json": smoke_eval(**extra)}, data={"data/g/e/test.jsonl": lines}
    )


def test_blank_lines_skipped_and_strings_trimmed(tmp_path: Path) -> None:
    root = _registry(tmp_path, '\n{"id":" a ","input":" hi ","ideal":" "}\n\n  \n{"id":"b","input":"x"}\n')
    cases = list(iter_cases(root, "data/g/e/test.jsonl"))
    assert [(c.id, c.input, c.ideal, c.line) for c in cases] == [("a", "hi", None, 2), ("b", "x", None, 5)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"test\.jsonl:2: invalid JSON"),
        ('["a"]', r"test\.jsonl:2: each line must be a JSON object"),
        ('{"input":"x"}', r"test\.jsonl:2: 'id' is required"),
        ('{"id":"b"}', r"test\.jsonl:2: 'input' is required"),
        ('{"id":"a","input":"dup"}', r"test\.jsonl:2: duplicate case id 'a'"),
        (
            '{"id":"b","input":"x","expected_tool_calls":[]}',
            r"test\.jsonl:2: 'expected_tool_calls' must be a non-empty",
        ),
        (
            '{"id":"b","input":"x","attachments":[{"kind":"file","path":"../x.txt"}]}',
            r"test\.jsonl:2: attachments\[0\]",
        ),
    ],
)
def test_bad_line_names_path_and_line(tmp_path: Path, line: str, message: str) -> None:
    root = _registry(tmp_path, '{"id":"a","input":"ok"}\n' + line + "\n")
    with pytest.raises(EvalHydraError, match=message):
        list(iter_cases(root, "data/g/e/test.jsonl"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"default_run_count": 0}, "default_run_count must be a positive integer"),
        ({"description": "  "}, "required field 'description' is missing or empty"),
        ({"dataset_path": "data/missing.jsonl"}, "dataset file not found"),
        ({"tools": [{"name": "t", "description": "d", "parameters_json": "[1]"}]},
         r"parameters_json must be a JSON object"),
        # zig_eval refuses a tool without a description; the error names the file and the tool's line
        ({"tools": [{"name": "t", "parameters_json": "{}"}]},
         r"e\.json:1: tools\[0\]: required field 'description' is missing or empty"),
    ],
)
def test_eval_validation(tmp_path: Path, change: dict[str, object], message: str) -> None:
    root = write_registry(
        tmp_path / "reg",
        evals={"g/e.json": {**smoke_eval(), **change}},
        data={"data/g/e/test.jsonl": '{"id":"a","input":"x"}\n'},
    )
    registry = load_registry(root)  # a broken eval stops only the run that selects it
    with pytest.raises(EvalHydraError, match=message):
        registry.eval("g.e")


def test_a_numeric_case_id_is_refused_as_in_zig_eval(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval()},
                          data={"data/g/e/test.jsonl": '{"id":"a","input":"x"}\n{"id":7,"input":"x"}\n'})
    with pytest.raises(EvalHydraError, match=r"test\.jsonl:2: 'id' must be a string, not the number 7"):
        list(iter_cases(root, "data/g/e/test.jsonl"))


def test_duplicate_eval_id_and_service_name(tmp_path: Path) -> None:
    data = {"data/g/e/test.jsonl": '{"id":"a","input":"x"}\n'}
    root = write_registry(
        tmp_path / "r1", evals={"g/a.json": smoke_eval(), "g/b.json": smoke_eval()}, data=data
    )
    with pytest.raises(EvalHydraError, match="duplicate eval id 'g.e'"):
        load_registry(root).eval("g.e")  # neither file wins
    svc = {"name": "s", "base_url": "http://x", "default_model": "m", "timeout_ms": 1}
    root = write_registry(tmp_path / "r2", evals={}, data={}, services=[svc, svc])
    with pytest.raises(EvalHydraError, match="duplicate service name 's'"):
        load_registry(root)


@pytest.mark.parametrize(
    ("retry", "message"),
    [
        ({"max_attempts": 11}, r"max_attempts=11: must be an integer in 1\.\.10"),
        ({"backoff_ms": 60001}, r"backoff_ms=60001: must be an integer in 0\.\.60000"),
        ({"retry_on_status": [99]}, r"99 is not a status in 100\.\.599"),
    ],
)
def test_service_retry_ranges(tmp_path: Path, retry: dict[str, object], message: str) -> None:
    svc = {"name": "s", "base_url": "http://x", "default_model": "m", "timeout_ms": 1, "retry": retry}
    root = write_registry(tmp_path / "r", evals={}, data={}, services=[svc])
    with pytest.raises(EvalHydraError, match=message):
        load_registry(root)


def test_invalid_json_definition_names_line(tmp_path: Path) -> None:
    root = write_registry(tmp_path / "r", evals={}, data={})
    (root / "evals" / "bad.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "evals" / "bad.json").write_text('{\n  "id": "x",\n  oops\n}')
    with pytest.raises(EvalHydraError, match=r"bad\.json:3: invalid JSON"):
        load_registry(root).eval("bad")


def test_datasets_stream_without_loading_the_file(tmp_path: Path) -> None:
    line = json.dumps({"id": "{}", "input": "x" * 2000})
    body = "\n".join(line.replace("{}", str(i)) for i in range(3000)) + "\n"
    root = _registry(tmp_path, body)
    tracemalloc.start()
    count = sum(1 for _ in iter_cases(root, "data/g/e/test.jsonl"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 3000
    size = (root / "data/g/e/test.jsonl").stat().st_size
    assert peak < size / 10, f"peak {peak} bytes for a {size}-byte dataset"


def test_a_dataset_over_8_mib_loads_a_line_at_a_time(tmp_path: Path) -> None:
    """A file's size is the disk's business: 10 MB of cases load, and memory follows a line."""
    line = json.dumps({"id": "{}", "input": "x" * 4000})
    body = "\n".join(line.replace("{}", str(i)) for i in range(2600)) + "\n"
    root = _registry(tmp_path, body)
    assert (root / "data/g/e/test.jsonl").stat().st_size > 9 << 20
    tracemalloc.start()
    last = None
    for case in iter_cases(root, "data/g/e/test.jsonl"):
        last = case
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert last is not None and last.id == "2599"
    assert peak < 2 << 20, f"peak {peak} bytes"


def test_a_case_line_over_8_mib_is_refused_by_its_line(tmp_path: Path) -> None:
    small = json.dumps({"id": "a", "input": "hi"})
    huge = json.dumps({"id": "b", "input": "x" * (8 << 20)})
    root = _registry(tmp_path, f"{small}\n{huge}\n")
    with pytest.raises(EvalHydraError, match=r"test\.jsonl:2: a case line longer than 8 MiB") as caught:
        list(iter_cases(root, "data/g/e/test.jsonl"))
    assert "attach" in (caught.value.hint or "")


def test_loading_trims_only_space_tab_cr_and_lf(tmp_path: Path) -> None:
    """As zig_eval: a NO-BREAK SPACE or form feed is part of the text, so "OK\u00a0" is not "OK"."""
    line = {"id": " c1\t", "input": "\u000cReply with exactly OK.\r\n", "ideal": "OK\u00a0"}
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval()},
                              data={"data/g/e/test.jsonl": json.dumps(line) + "\n"})
    (case,) = iter_cases(registry, "data/g/e/test.jsonl")
    assert (case.id, case.input, case.ideal) == ("c1", "\u000cReply with exactly OK.", "OK\u00a0")
    assert not exact_match("OK", case.ideal).passed
