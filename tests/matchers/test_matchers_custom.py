"""custom: dotted-path callables and classes, zrb validator.py, and the exception guard."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, MatchResult
from evalhydra.matchers import MatchContext, build_matcher, validate_matcher
from evalhydra.matchers.custom import coerce_result, validation_to_result

MODULE = textwrap.dedent(
    """
    from evalhydra.core.values import MatchResult

    def says_ok(ctx, word="OK"):
        return word in ctx.output

    def scored(ctx):
        return {"score": 0.75, "reason": "partial", "details": {"n": 1}}

    def as_number(ctx):
        return 0.6

    def broken(ctx):
        raise RuntimeError("boom")

    def bad_return(ctx):
        return "yes"

    async def async_match(ctx):
        return MatchResult(True, 1.0)

    def on_a_thread(ctx):
        import threading
        return threading.current_thread() is not threading.main_thread()

    async def on_the_loop(ctx):
        import threading
        return threading.current_thread() is threading.main_thread()

    class LengthAtMost:
        def __init__(self, limit):
            self.limit = limit

        def __call__(self, ctx):
            return MatchResult(len(ctx.output) <= self.limit, 1.0, None)

    NOT_CALLABLE = 3
    """
)

VALIDATOR = textwrap.dedent(
    """
    from dataclasses import dataclass, field

    @dataclass
    class Check:
        name: str
        passed: bool
        message: str = ""

    @dataclass
    class Result:
        status: str
        score: float
        details: list = field(default_factory=list)

    class HelloValidator:
        def validate(self, output_dir, log_content, trace=None):
            text = (output_dir / "output.txt").read_text() if (output_dir / "output.txt").exists() else ""
            ok = "hello, world" in log_content.lower() and text == log_content
            return Result(
                status="PASS" if ok else "FAIL",
                score=1.0 if ok else 0.0,
                details=[Check("contains_greeting", ok, "" if ok else "Missing expected greeting")],
            )

    validator = HelloValidator()
    """
)


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "my_matchers_mod.py").write_text(MODULE)
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "validator.py").write_text(VALIDATOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def ctx(output: str) -> MatchContext:
    return MatchContext(case=Case(id="c", input="q"), output=output)


def target(name: str, **extra: object) -> dict:
    return {"kind": "custom", "_target_": f"my_matchers_mod.{name}", **extra}


@pytest.mark.parametrize(
    ("spec", "output", "expected"),
    [
        (target("says_ok"), "OK!", (True, 1.0, None)),
        (target("says_ok"), "no", (False, 0.0, "custom matcher returned False")),
        (target("says_ok", kwargs={"word": "yes"}), "yes", (True, 1.0, None)),
        (target("scored"), "", (False, 0.75, "partial")),
        (target("scored", pass_score=0.7), "", (True, 0.75, None)),
        (target("as_number"), "", (False, 0.6, "score 0.600 below 1.000")),
        (target("as_number", pass_score=0.5), "", (True, 0.6, None)),
        (target("async_match"), "", (True, 1.0, None)),
        (target("LengthAtMost", kwargs={"limit": 3}), "abc", (True, 1.0, None)),
        (target("LengthAtMost", kwargs={"limit": 3}), "abcd", (False, 1.0, None)),
    ],
)
async def test_target_matchers(registry: Path, spec: dict, output: str, expected: tuple) -> None:
    result = await build_matcher(spec, registry_root=registry, judges=None)(ctx(output))
    assert (result.passed, result.score, result.reason) == expected
    assert result.error_kind is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("broken", "the matcher raised RuntimeError: boom"),
        ("bad_return", "the matcher raised TypeError: custom matcher returned str, not a result"),
    ],
)
async def test_a_raising_matcher_fails_the_output_it_raised_on(registry: Path, name: str,
                                                                reason: str) -> None:
    """Scored, not an infrastructure error: the output counts against the pass rate."""
    result = await build_matcher(target(name), registry_root=registry, judges=None)(ctx("x"))
    assert (result.passed, result.score, result.reason) == (False, 0.0, reason)
    assert result.error_kind is None and result.details is not None and result.details["matcher_error"]


async def test_a_raising_part_does_not_sink_its_siblings(registry: Path) -> None:
    spec = {"kind": "any_of", "parts": [target("broken"), {"kind": "includes", "ideal": "x"}]}
    result = await build_matcher(spec, registry_root=registry, judges=None)(ctx("x"))
    assert result.passed and result.error_kind is None
    assert result.details is not None
    assert result.details["parts"][0]["reason"] == "the matcher raised RuntimeError: boom"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (target("nope"), r"^m: cannot import custom matcher 'my_matchers_mod\.nope'"),
        ({"kind": "custom", "_target_": "no_such_pkg.fn"}, r"cannot import custom matcher"),
        (target("NOT_CALLABLE"), r"is not callable"),
        (target("LengthAtMost"), r"kwargs do not fit custom matcher"),
        (target("says_ok", kwargs={"colour": 1}), r"kwargs do not fit custom matcher"),
        ({"kind": "custom"}, r"needs exactly one of _target_ or validator"),
        ({**target("says_ok"), "validator": "cases/validator.py"}, r"needs exactly one of"),
        (
            {"kind": "custom", "validator": "cases/missing.py"},
            r"validator file 'cases/missing\.py' not found",
        ),
        ({"kind": "custom", "validator": "my_matchers_mod.py"}, r"must define a module-level 'validator'"),
    ],
)
def test_custom_validation_errors(registry: Path, spec: dict, message: str) -> None:
    with pytest.raises(EvalHydraError, match=message):
        validate_matcher(spec, "m", registry_root=registry)


async def test_validator_protocol_for_text_output(registry: Path) -> None:
    spec = {"kind": "custom", "validator": "cases/validator.py"}
    matcher = build_matcher(spec, registry_root=registry, judges=None)
    assert (await matcher(ctx("Hello, World"))).passed
    result = await matcher(ctx("bye"))
    assert (result.passed, result.score) == (False, 0.0)
    assert result.reason == "validator status FAIL; contains_greeting: Missing expected greeting"
    assert result.details == {
        "status": "FAIL",
        "checks": [{"name": "contains_greeting", "passed": False, "message": "Missing expected greeting"}],
    }


async def test_validator_protocol_for_agent_trial(registry: Path, tmp_path: Path) -> None:
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "output.txt").write_text("hello, world")
    spec = {"kind": "custom", "validator": "cases/validator.py"}
    matcher = build_matcher(spec, registry_root=registry, judges=None)
    context = MatchContext(
        case=Case(id="c", input="q"), output="", output_dir=trial, log_content="hello, world"
    )
    assert (await matcher(context)).passed


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"status": "EXCELLENT", "score": 1, "details": []}, (True, 1.0)),
        ({"status": "pass", "score": 0.8}, (True, 0.8)),
        ({"status": "FAIL", "score": 0.1, "details": [{"name": "x", "passed": False}]}, (False, 0.1)),
    ],
)
def test_validation_to_result(value: dict, expected: tuple) -> None:
    result = validation_to_result(value)
    assert (result.passed, result.score) == expected


def test_validation_to_result_rejects_unknown_status() -> None:
    with pytest.raises(ValueError, match="unknown status 'MAYBE'"):
        validation_to_result({"status": "MAYBE", "score": 1})


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (1.5, ValueError),
        ({"score": -1}, ValueError),
        ({"passed": "yes"}, TypeError),
        ({}, ValueError),
        (MatchResult(True, 2.0), ValueError),
        (None, TypeError),
    ],
)
def test_coerce_result_rejects(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        coerce_result(value)


def test_validator_import_failure_is_a_load_error(registry: Path) -> None:
    (registry / "cases" / "broken.py").write_text("import no_such_module_for_evalhydra\n")
    with pytest.raises(
        EvalHydraError, match=r"^cases/broken\.py: validator\.py failed to import: ModuleNotFound"
    ):
        validate_matcher({"kind": "custom", "validator": "cases/broken.py"}, "m", registry_root=registry)


async def test_validator_with_postponed_annotations(registry: Path) -> None:
    (registry / "cases" / "future.py").write_text("from __future__ import annotations\n" + VALIDATOR)
    spec = {"kind": "custom", "validator": "cases/future.py"}
    matcher = build_matcher(spec, registry_root=registry, judges=None)
    assert (await matcher(ctx("hello, world"))).passed


async def test_a_blocking_custom_matcher_runs_off_the_event_loop(registry: Path) -> None:
    """Issue 59: user code never blocks the loop; a sync matcher gets a user-code thread, an async
    one is awaited on the loop."""
    for name in ("on_a_thread", "on_the_loop"):
        result = await build_matcher(target(name), registry_root=registry, judges=None)(ctx("x"))
        assert result.passed, name
