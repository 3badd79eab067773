"""The first hour: ``evalhydra init`` writes a project whose printed commands work as written,
``evalhydra check`` finds what would stop a run before it starts, and ``.env`` is read, never
over the environment and never stored."""

from __future__ import annotations

import shlex
import socket
import sqlite3
from pathlib import Path

import pytest

from evalhydra.cli.init import STARTER_FILES, next_steps
from tests.conftest import REPO
from tests.helpers import chat_requests, mock_process, run_cli

SECRET = "sk-from-dotenv-0123456789abcdef"


def _printed_command(step: str) -> list[str]:
    """A printed ``evalhydra …`` step as arguments, its comment dropped."""
    words = shlex.split(step, comments=True)
    assert words[0] == "evalhydra"
    return words[1:]


@pytest.mark.slow
def test_init_then_the_printed_run_succeeds_on_the_mock(tmp_path: Path) -> None:
    made = run_cli("init", "proj", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "proj"
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == sorted(
        STARTER_FILES
    )
    first_run = next(step for step in next_steps("proj") if "built-in mock" in step)
    res = run_cli(*_printed_command(first_run), "run.progress=false", cwd=project)
    assert res.returncode == 0, res.stderr
    assert "3 cells, 3 passed" in res.stdout
    again = run_cli("init", "proj", cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.startswith("error: proj/evals/capitals.yaml: exists")


@pytest.mark.slow
def test_check_and_run_against_an_endpoint_named_in_dotenv(tmp_path: Path) -> None:
    assert run_cli("init", cwd=tmp_path).returncode == 0
    check_step, run_step = [s for s in next_steps(".") if s.startswith("evalhydra") and "my_model" in s]
    with mock_process() as url:
        (tmp_path / ".env").write_text(
            f"OPENAI_BASE_URL={url}\nOPENAI_MODEL=mock-model\nOPENAI_API_KEY={SECRET}\n"
        )
        checked = run_cli(*_printed_command(check_step), cwd=tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        listed_by_get_models = "yes"
        assert f"{url}/chat/completions" in checked.stdout and listed_by_get_models in checked.stdout
        assert chat_requests(url) == 1
        assert not (tmp_path / "outputs").exists()  # a check stores nothing
        ran = run_cli(*_printed_command(run_step), "run.progress=false", cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert chat_requests(url) == 1 + 3 * 3
        other = run_cli(*_printed_command(check_step), cwd=tmp_path, env={"OPENAI_MODEL": "from-the-env"})
        assert "from-the-env" in other.stdout  # the environment wins over .env
    stored = b"".join(p.read_bytes() for p in (tmp_path / "outputs").rglob("*") if p.is_file())
    assert SECRET.encode() not in stored
    conn = sqlite3.connect(tmp_path / "outputs" / "evalhydra.db")
    assert conn.execute("select count(*) from results where service_name = 'my_model'").fetchone() == (9,)


@pytest.mark.slow
def test_check_names_a_dead_endpoint_and_a_refused_key(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    res = run_cli("check", "service.mock.enabled=false", f"service.base_url={dead}", cwd=tmp_path)
    assert res.returncode == 3
    assert "error: mock (" in res.stderr and "no reply: ConnectError" in res.stderr
    with mock_process("--fail-rate", "1", "--fail-status", "401") as url:
        refused = run_cli(
            "check",
            "service.mock.enabled=false",
            f"service.base_url={url}",
            "service.api_key_env=EVALHYDRA_TEST_UNSET_KEY",
            cwd=tmp_path,
        )
    assert refused.returncode == 3
    assert (
        "401: the endpoint refused the key: export EVALHYDRA_TEST_UNSET_KEY=… or add it to the project's .env"
        " (it is unset)" in refused.stderr
    )


def test_check_of_the_default_run_checks_the_mock(tmp_path: Path) -> None:
    res = run_cli("check", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "the built-in mock" in res.stdout and "ok" in res.stdout
    assert run_cli("check", "--help", cwd=tmp_path).stdout.startswith("usage: evalhydra check")


def test_the_minimal_eval_of_the_guide_runs_on_the_first_try(tmp_path: Path) -> None:
    """docs/first-eval.md's eval file and dataset line, written as the page shows them."""
    guide = (REPO / "docs" / "first-eval.md").read_text()
    eval_file = guide.split("## The eval file", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    case_line = guide.split("## The dataset", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "capitals.yaml").write_text(eval_file)
    (tmp_path / "evals" / "capitals.jsonl").write_text(case_line)
    res = run_cli("registry=.", "eval=capitals", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 cell, 1 passed" in res.stdout
