"""run_trial through real subprocesses of the fake agent (conftest's ``fake_agent_cli``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import trio

from evalhydra.agents import AgentCase, TrialResult, load_cases, run_trial, validate_command_service
from evalhydra.agents.process import LOG_HEAD_BYTES, LOG_TAIL_BYTES
from evalhydra.config.schema import PricingConfig, ServiceConfig

FAKE_AGENT = Path()  # set by _fake_agent: the launcher conftest writes for this interpreter
REGISTRY = Path(__file__).resolve().parents[2] / "registry"
MODEL = "fake:model-1"

# Status from result.txt in the workdir; "RAISE" makes the validator fail.
VALIDATOR = """
from pathlib import Path
from evalhydra.agents import ValidationCheck, ValidationResult

class FileStatus:
    def validate(self, output_dir, log_content, trace=None):
        path = Path(output_dir) / "result.txt"
        status = path.read_text().strip() if path.exists() else "FAIL"
        if status == "RAISE":
            raise RuntimeError("boom")
        checks = [ValidationCheck("saw_result", path.exists(), status)]
        return ValidationResult(status, 1.0 if status != "FAIL" else 0.0, checks)

validator = FileStatus()
"""


@pytest.fixture(autouse=True)
def _fake_agent(fake_agent_cli: Path) -> None:
    global FAKE_AGENT
    FAKE_AGENT = fake_agent_cli


def make_case(root: Path, name: str, instruction: str, workdir: dict[str, str] | None = None) -> AgentCase:
    case_dir = root / "cases" / name
    case_dir.mkdir(parents=True)
    (case_dir / "instruction.txt").write_text(instruction, encoding="utf-8")
    (case_dir / "validator.py").write_text(VALIDATOR, encoding="utf-8")
    for rel, text in (workdir or {}).items():
        (case_dir / "workdir" / rel).parent.mkdir(parents=True, exist_ok=True)
        (case_dir / "workdir" / rel).write_text(text, encoding="utf-8")
    return load_cases(str(case_dir), root)[0]


def service(**overrides: object) -> ServiceConfig:
    cfg = ServiceConfig(name="fake", kind="command", cli_name=str(FAKE_AGENT))
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


async def run(
    case: AgentCase,
    out: Path,
    cfg: ServiceConfig | None = None,
    *,
    model: str = MODEL,
    trial: int = 1,
    timeout_s: float = 10.0,
) -> TrialResult:
    cfg = cfg or service()
    validate_command_service(cfg, model)
    return await run_trial(case, cfg, model, trial, out, timeout_s=timeout_s)


def read(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8")


def is_file(path: str | Path) -> bool:
    return Path(path).is_file()


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("status", ["EXCELLENT", "PASS", "FAIL"])
async def test_validator_status(tmp_path: Path, status: str) -> None:
    case = make_case(tmp_path, "c", f"WRITE result.txt {status}\n")
    result = await run(case, tmp_path / "out")
    assert (result.status, result.exit_code) == (status, 0)
    assert result.verification_result is not None
    assert result.verification_result["status"] == status
    assert result.tool_calls == ["write_file"] and result.tool_call_count == 1


async def test_trial_layout_env_and_isolation(tmp_path: Path) -> None:
    instruction = (
        "STDERR warning on stderr\nNOTE remember this\nWRITE data/new.txt x\nWRITE result.txt PASS\n"
    )
    case = make_case(tmp_path, "iso", instruction, {"seed.txt": "original"})
    result = await run(case, tmp_path / "out", trial=2)
    trial = tmp_path / "out" / "fake_model-1" / "iso" / "trial-2"
    session = "fake_model-1-iso-trial-2"
    assert result.trial_dir == str(trial)
    assert sorted(p.name for p in trial.iterdir()) == ["history", "notes", "stdout.log", "workdir"]
    assert sorted(p.name for p in (trial / "workdir").iterdir()) == ["data", "result.txt", "seed.txt"]
    assert result.log_path == str(trial / "history" / f"{session}.json")
    assert is_file(result.log_path)
    assert result.stdout_log_path == str(trial / "stdout.log")
    log = (trial / "stdout.log").read_text(encoding="utf-8")
    assert "warning on stderr" in log and "💸" in log
    assert "remember this" in (trial / "notes" / f"{session}.md").read_text(encoding="utf-8")
    assert not (case.path / "workdir" / "result.txt").exists()  # the case itself is untouched


async def test_relative_output_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    case = make_case(tmp_path, "c", "NOTE relative\nWRITE result.txt PASS\n")
    result = await run(case, Path("rel-out"))
    assert result.status == "PASS" and result.tool_calls == ["write_file"]
    assert result.trial_dir == str(tmp_path / "rel-out" / "fake_model-1" / "c" / "trial-1")
    assert is_file(Path(result.trial_dir) / "notes" / "fake_model-1-c-trial-1.md")


async def test_rerun_wipes_the_cell(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "WRITE result.txt PASS\n")
    first = await run(case, tmp_path / "out")
    stale = Path(first.trial_dir) / "workdir" / "stale.txt"
    stale.write_text("left over")
    second = await run(case, tmp_path / "out")
    assert second.status == "PASS" and not stale.exists()
    assert second.id != first.id


async def test_non_zero_exit_is_error_and_skips_validator(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "WRITE result.txt PASS\nEXIT 3\n")
    result = await run(case, tmp_path / "out")
    assert (result.status, result.exit_code, result.verification_result) == ("ERROR", 3, None)
    assert result.total_tokens == 150  # usage is still parsed


@pytest.mark.parametrize("honor", [True, False])
async def test_verification_marker(tmp_path: Path, honor: bool) -> None:
    case = make_case(tmp_path, "c", "WRITE result.txt FAIL\nMARKER pass\n")
    result = await run(case, tmp_path / "out", service(honor_verification_marker=honor))
    assert result.status == ("PASS" if honor else "FAIL")
    assert result.verification_result is not None
    assert result.verification_result["status"] == "FAIL"  # the validator's own verdict is kept


async def test_marker_beats_non_zero_exit(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "MARKER EXCELLENT\nEXIT 2\n")
    result = await run(case, tmp_path / "out", service(honor_verification_marker=True))
    assert (result.status, result.exit_code) == ("EXCELLENT", 2)


async def test_validator_exception_is_error(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "WRITE result.txt RAISE\n")
    result = await run(case, tmp_path / "out")
    assert result.status == "ERROR" and result.exit_code == 0
    assert result.verification_result == {
        "status": "FAIL",
        "score": 0.0,
        "details": [{"name": "validator_error", "passed": False, "message": "boom"}],
    }


async def test_missing_binary_is_error(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "SAY hi\n")
    result = await run(case, tmp_path / "out", service(cli_name=str(tmp_path / "no-such-agent")))
    assert (result.status, result.exit_code, result.total_tokens) == ("ERROR", -1, 0)
    log = read(result.stdout_log_path)
    assert log.startswith("[ERROR: ") and "no-such-agent" in log


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "WRITE result.txt PASS\nHANG\n")
    result = await run(case, tmp_path / "out", timeout_s=1.0)  # HANG never ends: the timeout must
    assert (result.status, result.exit_code, result.total_tokens, result.input_tokens) == (
        "TIMEOUT",
        -1,
        0,
        0,
    )
    assert result.verification_result is None
    assert result.tool_calls == ["write_file"]  # from the partial history
    log = read(result.stdout_log_path)
    assert log.endswith("\n[TIMEOUT after 1s]\n") and "CHILD_PID" in log
    await assert_child_gone(Path(result.trial_dir))


async def assert_child_gone(trial_dir: Path) -> None:
    child = int(read(trial_dir / "workdir" / "child.pid"))
    deadline = time.monotonic() + 3
    while _alive(child) and time.monotonic() < deadline:
        await trio.sleep(0.05)
    assert not _alive(child), f"orphan process {child} survived its trial"


async def test_helpers_left_behind_by_a_finished_agent_are_killed(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "SPAWN\nWRITE result.txt PASS\n")
    result = await run(case, tmp_path / "out")
    assert result.status == "PASS"
    await assert_child_gone(Path(result.trial_dir))


async def test_a_helper_that_started_its_own_session_is_killed_too(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "SPAWN_SESSION\nWRITE result.txt PASS\n")
    result = await run(case, tmp_path / "out")
    assert result.status == "PASS"
    await assert_child_gone(Path(result.trial_dir))


async def test_a_timed_out_agents_own_session_helper_is_killed(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "SPAWN_SESSION\nSLEEP 30\n")
    result = await run(case, tmp_path / "out", timeout_s=1.0)
    assert result.status == "TIMEOUT"
    await assert_child_gone(Path(result.trial_dir))


async def test_endless_output_is_capped_keeping_its_head_and_tail(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "FLOOD 40\nWRITE result.txt PASS\nMARKER PASS\n")
    result = await run(case, tmp_path / "out", timeout_s=60.0)
    assert result.status == "PASS"  # the marker at the very end is still read
    text = read(result.stdout_log_path)
    assert len(text.encode()) <= LOG_HEAD_BYTES + LOG_TAIL_BYTES + 200
    assert text.startswith("0 flood") and "bytes of output left out here]" in text
    assert "VERIFICATION_RESULT: PASS" in text.split("left out here]", 1)[1]  # the tail is kept


async def test_outside_cancellation_kills_the_agent(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "HANG\n")
    with trio.move_on_after(1.0) as scope:
        await run(case, tmp_path / "out")
    assert scope.cancelled_caught
    await assert_child_gone(tmp_path / "out" / "fake_model-1" / "c" / "trial-1")


async def test_history_shapes_give_the_same_trace(tmp_path: Path) -> None:
    body = "SAY looking\nREAD seed.txt\nWRITE result.txt PASS\n"
    traces = []
    for shape in ("pydantic", "legacy"):
        case = make_case(tmp_path / shape, "c", f"HISTORY {shape}\n{body}", {"seed.txt": "s"})
        result = await run(case, tmp_path / shape / "out")
        assert result.status == "PASS"
        traces.append(result.trace)
    pyd, legacy = traces
    assert pyd.tool_names == legacy.tool_names == ["read_file", "write_file"]
    assert [c.args for c in pyd.tool_calls] == [
        {"path": "seed.txt"},
        {"path": "result.txt", "content": "PASS"},
    ]
    assert pyd.tool_calls == legacy.tool_calls
    assert pyd.assistant_text == legacy.assistant_text == "looking\nDone."
    assert (pyd.turn_count, legacy.turn_count) == (4, 2)


@pytest.mark.parametrize("shape", ["bad", "none"])
async def test_bad_or_missing_history_gives_empty_trace(tmp_path: Path, shape: str) -> None:
    case = make_case(tmp_path, "c", f"HISTORY {shape}\nWRITE result.txt PASS\n")
    result = await run(case, tmp_path / "out")
    assert result.status == "PASS"
    assert (result.tool_calls, result.trace.turn_count, result.trace.assistant_text) == ([], 0, "")


async def test_zrb_tokens_and_cost(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "TOKENS 1000 500 200\nWRITE result.txt PASS\n")
    pricing = PricingConfig(input_per_mtok=1.0, output_per_mtok=4.0, cached_input_per_mtok=0.5)
    result = await run(case, tmp_path / "out", service(pricing=pricing))
    tokens = (result.total_tokens, result.input_tokens, result.output_tokens, result.cache_read_tokens)
    assert tokens == (1500, 1000, 500, 200)  # the last 💸 line; Audio fields ignored
    assert result.cost_usd == pytest.approx((800 * 1.0 + 200 * 0.5 + 500 * 4.0) / 1e6)


async def test_claude_code_template(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "TOKENS 10 20 30\nWRITE result.txt PASS\n")
    result = await run(case, tmp_path / "out", service(template="claude-code"), model="sonnet")
    assert result.status == "PASS"
    tokens = (result.total_tokens, result.input_tokens, result.output_tokens, result.cache_read_tokens)
    assert tokens == (60, 10, 20, 30)
    assert json.loads(read(result.log_path))["usage"]["input_tokens"] == 10


async def test_opencode_template(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "TOKENS 1234 567 89\nWRITE result.txt PASS\n")
    result = await run(case, tmp_path / "out", service(template="opencode"), model="anthropic/claude")
    assert result.status == "PASS"
    tokens = (result.total_tokens, result.input_tokens, result.output_tokens, result.cache_read_tokens)
    assert tokens == (1890, 1234, 567, 89)


async def test_custom_argv_and_env_prefix(tmp_path: Path) -> None:
    argv = ["{python}", str(FAKE_AGENT), "chat", "--model", "{model}", "--message", "{instruction}"]
    argv += ["--session", "{session}"]
    cfg = service(argv=argv, cli_name=None, env_prefix="ACME")
    case = make_case(tmp_path, "c", "WRITE result.txt EXCELLENT\n")
    env_before = dict(os.environ)
    result = await run(case, tmp_path / "out", cfg, model="no-colon-needed")
    assert result.status == "EXCELLENT" and result.tool_calls == ["write_file"]
    assert is_file(result.log_path)  # found through ACME_LLM_HISTORY_DIR
    assert dict(os.environ) == env_before


async def test_limiter_bounds_concurrency(tmp_path: Path) -> None:
    case = make_case(tmp_path, "c", "SLEEP 0.2\nWRITE result.txt PASS\n")
    limiter = trio.CapacityLimiter(2)
    cfg = service()
    results: list[TrialResult] = []
    peak = 0

    async def one(index: int) -> None:
        results.append(
            await run_trial(case, cfg, MODEL, index, tmp_path / "out", timeout_s=10, limiter=limiter)
        )

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, limiter.borrowed_tokens)
            await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        async with trio.open_nursery() as trials:
            for index in (1, 2, 3):
                trials.start_soon(one, index)
        nursery.cancel_scope.cancel()
    assert sorted(r.trial_index for r in results) == [1, 2, 3]
    assert all(r.status == "PASS" for r in results) and peak == 2


async def test_example_cases_pass_with_the_fake_agent(tmp_path: Path) -> None:
    cases = load_cases("agent_cases", REGISTRY)
    assert [c.name for c in cases] == ["count-todos", "fix-bug", "hello-file"]
    for case in cases:
        result = await run(case, tmp_path / "out")
        assert result.status == "EXCELLENT", (case.name, result.verification_result)


async def test_example_cases_fail_with_a_lazy_model(tmp_path: Path) -> None:
    (case,) = load_cases(["agent_cases/hello-file"], REGISTRY)
    result = await run(case, tmp_path / "out", model="fake:lazy")
    assert result.status == "FAIL"


async def test_fake_agent_runs_as_a_module(tmp_path: Path) -> None:
    argv = ["{python}", "-m", "evalhydra.agents.fake_agent", "chat", "--interactive", "false"]
    argv += ["--yolo", "true", "--model", "{model}", "--message", "{instruction}", "--session", "{session}"]
    (case,) = load_cases(["agent_cases/hello-file"], REGISTRY)
    result = await run(case, tmp_path / "out", service(argv=argv, cli_name=None))
    assert result.status == "EXCELLENT", read(result.stdout_log_path)


async def test_an_agent_cli_gets_its_cells_traceparent(tmp_path: Path) -> None:
    """Issue 64, item 2: with telemetry on, the trial's CLI finds the cell's W3C trace context in
    TRACEPARENT and its run, case and trial in BAGGAGE (an instrumented agent joins the cell's
    trace); without it, nothing is set."""
    case = make_case(tmp_path, "env", "ENV TRACEPARENT\nENV BAGGAGE\nMARKER PASS")
    cfg = service()
    validate_command_service(cfg, MODEL)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    carried = "evalhydra.case_id=env"
    traced = await run_trial(case, cfg, MODEL, 1, tmp_path / "out", timeout_s=10.0, trace=(parent, carried))
    assert f"TRACEPARENT={parent}" in read(traced.stdout_log_path)
    assert f"BAGGAGE={carried}" in read(traced.stdout_log_path)
    plain = await run(case, tmp_path / "plain")
    assert "TRACEPARENT=\n" in read(plain.stdout_log_path) and "BAGGAGE=\n" in read(plain.stdout_log_path)
