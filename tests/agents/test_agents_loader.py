"""load_cases: directory selection, validator protocol checks, aggregated errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalhydra.agents import ValidatorProtocol, load_cases, load_validator
from evalhydra.core.errors import EvalHydraError

GOOD = """
from evalhydra.agents import ValidationResult

class V:
    def validate(self, output_dir, log_content, trace=None):
        return ValidationResult("PASS", 1.0)

validator = V()
"""


def write_case(
    root: Path, name: str, validator: str | None = GOOD, instruction: str | None = "do it\n"
) -> Path:
    case = root / name
    case.mkdir(parents=True)
    if instruction is not None:
        (case / "instruction.txt").write_text(instruction, encoding="utf-8")
    if validator is not None:
        (case / "validator.py").write_text(validator, encoding="utf-8")
    return case


def test_collection_directory_selects_subdirectories_with_an_instruction(tmp_path: Path) -> None:
    write_case(tmp_path / "suite", "b")
    write_case(tmp_path / "suite", "a")
    (tmp_path / "suite" / "not-a-case").mkdir()
    (tmp_path / "suite" / "a" / "workdir").mkdir()
    cases = load_cases("suite", tmp_path)
    assert [c.name for c in cases] == ["a", "b"]
    assert cases[0].workdir == tmp_path / "suite" / "a" / "workdir"
    assert cases[1].workdir is None
    assert cases[0].instruction == "do it\n"
    assert isinstance(cases[0].validator, ValidatorProtocol)


def test_list_of_case_directories_relative_and_absolute(tmp_path: Path) -> None:
    first = write_case(tmp_path / "x", "one")
    write_case(tmp_path / "y", "two")
    cases = load_cases([str(first), "y/two"], tmp_path)
    assert [c.name for c in cases] == ["one", "two"]
    assert cases[1].path == tmp_path / "y" / "two"


def test_instruction_is_verbatim(tmp_path: Path) -> None:
    text = "  Leading spaces\n\n{braces} and trailing blank lines\n\n"
    write_case(tmp_path, "c", instruction=text)
    assert load_cases("c", tmp_path)[0].instruction == text


def test_all_errors_are_reported_together(tmp_path: Path) -> None:
    write_case(tmp_path / "s", "ok")
    write_case(tmp_path / "s", "no-validator", validator=None)
    write_case(tmp_path / "s", "no-object", validator="x = 1\n")
    write_case(tmp_path / "s", "wrong-type", validator="validator = 42\n")
    write_case(
        tmp_path / "s",
        "a-class",
        validator="class V:\n    def validate(self, a, b, trace=None): ...\nvalidator = V\n",
    )
    write_case(tmp_path / "s", "broken", validator="import nope_not_a_module\n")
    with pytest.raises(EvalHydraError) as info:
        load_cases(["s", "missing"], tmp_path)
    message = str(info.value)
    assert message.startswith("Test case loading failed: ")  # zrb's words, then the first problem
    lines = message.splitlines()[1:-1]  # the other problems, then the expected layout
    assert all(line.startswith("  ") for line in lines)
    assert len(lines) == 5
    assert message.splitlines()[-1].startswith("A case is a directory with instruction.txt")
    for needle in (
        "'no-validator' is missing validator.py",
        "'no-object'",
        "must define a module-level 'validator'",
        "'wrong-type'",
        "does not implement ValidatorProtocol (got int)",
        "is the class V, not an instance",
        "'broken'",
        "ModuleNotFoundError",
        f"does not exist: {tmp_path / 'missing'}",
    ):
        assert needle in message


def test_empty_collection_and_empty_list(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvalHydraError, match=r"No test cases in .*empty"):
        load_cases("empty", tmp_path)
    with pytest.raises(EvalHydraError, match="eval.cases is empty"):
        load_cases([], tmp_path)


def test_duplicate_case_names_are_rejected(tmp_path: Path) -> None:
    write_case(tmp_path / "x", "same")
    write_case(tmp_path / "y", "same")
    with pytest.raises(EvalHydraError, match="'same' is used twice"):
        load_cases(["x/same", "y/same"], tmp_path)


def test_same_directory_twice_loads_once(tmp_path: Path) -> None:
    write_case(tmp_path, "c")
    assert len(load_cases(["c", str(tmp_path / "c")], tmp_path)) == 1


def test_validator_modules_do_not_collide(tmp_path: Path) -> None:
    a = write_case(
        tmp_path / "x", "c", validator=GOOD.replace('"PASS"', '"FAIL", 0.0) or ValidationResult("PASS"')
    )
    b = write_case(tmp_path / "y", "c")
    va, vb = load_validator(a / "validator.py"), load_validator(b / "validator.py")
    assert type(va).__module__ != type(vb).__module__


def test_content_hash_tracks_every_case_file(tmp_path: Path) -> None:
    case = write_case(tmp_path, "c")
    (case / "workdir" / "sub").mkdir(parents=True)
    (case / "workdir" / "sub" / "f.txt").write_text("1")
    first = load_cases("c", tmp_path)[0]
    assert first.id == "c" and len(first.content_hash) == 64
    assert load_cases("c", tmp_path)[0].content_hash == first.content_hash
    hashes = {first.content_hash}
    for path, text in [
        ("workdir/sub/f.txt", "2"),
        ("instruction.txt", "other"),
        ("validator.py", GOOD + "#"),
    ]:
        (case / path).write_text(text)
        hashes.add(load_cases("c", tmp_path)[0].content_hash)
    assert len(hashes) == 4


def test_a_case_directory_without_an_instruction_says_so(tmp_path: Path) -> None:
    write_case(tmp_path / "suite", "good")
    write_case(tmp_path / "suite", "half", instruction=None)  # a validator, but no instruction.txt
    (tmp_path / "suite" / "notes").mkdir()  # not meant as a case: ignored
    with pytest.raises(EvalHydraError) as info:
        load_cases("suite", tmp_path)
    assert info.value.message == (
        f"Test case loading failed: Test case directory {tmp_path / 'suite' / 'half'} has no instruction.txt")
    with pytest.raises(EvalHydraError, match=r"Test case directory .*half has no instruction\.txt"):
        load_cases("suite/half", tmp_path)


@pytest.mark.parametrize(("target", "what"), [("missing.txt", "points to nothing"), ("loop", "loops")])
def test_a_broken_symlink_in_a_workdir_is_a_load_error_naming_the_case(tmp_path: Path, target: str,
                                                                       what: str) -> None:
    case = tmp_path / "cases" / "linked"
    (case / "workdir").mkdir(parents=True)
    (case / "instruction.txt").write_text("do it")
    (case / "validator.py").write_text(
        "class V:\n    def validate(self, output_dir, log_content, trace=None):\n        return None\n"
        "validator = V()\n")
    if target == "loop":
        (case / "workdir" / "loop").symlink_to("loop")
    else:
        (case / "workdir" / "link").symlink_to(target)
    with pytest.raises(EvalHydraError, match=f"'linked': workdir/(link|loop) is a symbolic link that {what}"):
        load_cases(str(case), tmp_path)
