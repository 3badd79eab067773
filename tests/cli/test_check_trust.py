"""Issue 60, items 4 and 5: ``evalhydra check`` you can trust, and ``.env`` read from the project.

``check`` starts each MCP server an eval names and lists its tools, names the fix of a
``/v1/responses`` 404 and of a model the server does not serve (listing those it does), and
prints nothing but its report on stdout. ``.env`` is read from the current folder and then from
the project the command names, the current folder winning, and a fix line says where the URL
came from. Real subprocesses, a real server on 127.0.0.1, the guide's own MCP server.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.loopback import loopback_http
from tests.tools.test_guide_mcp_example import _blocks

pytestmark = pytest.mark.slow  # each runs evalhydra in a process of its own

SERVED = ["served-a", "served-b"]


def _answer(method: str, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    json_type = [("content-type", "application/json")]
    if method == "GET" and path.endswith("/models"):
        listed = {"data": [{"id": m, "object": "model"} for m in SERVED]}
        return 200, json_type, json.dumps(listed).encode()
    if path.endswith("/responses"):
        return 404, json_type, b'{"detail": "Not Found"}'
    model = json.loads(body)["model"]
    if model not in SERVED:
        missing = {"error": {"message": f"The model `{model}` does not exist."}}
        return 404, json_type, json.dumps(missing).encode()
    message = {"role": "assistant", "content": "OK"}
    reply = {"id": "x", "object": "chat.completion", "model": model,
             "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return 200, json_type, json.dumps(reply).encode()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with loopback_http(_answer) as url:
        yield url + "/v1"


def _check(tmp_path: Path, *overrides: str) -> tuple[int, str, str]:
    done = run_cli("check", *overrides, cwd=tmp_path)
    return done.returncode, done.stdout, done.stderr


def test_a_wrong_model_lists_the_served_ones(server: str, tmp_path: Path) -> None:
    code, out, err = _check(tmp_path, "service.mock.enabled=false", f"service.base_url={server}",
                            "service.model=gpt-4o")
    assert code == 3
    assert "404: model 'gpt-4o' is not served here; it serves served-a, served-b: set service.model=NAME" \
        in err
    assert out.startswith("service ") and "[HYDRA]" not in out  # the report alone on stdout


def test_a_responses_404_names_service_api_chat(server: str, tmp_path: Path) -> None:
    code, _, err = _check(tmp_path, "service.mock.enabled=false", f"service.base_url={server}",
                          "service.model=served-a", "service.api=responses")
    assert code == 3
    assert "404: the server has no /v1/responses" in err and "set service.api=chat" in err
    code, out, _ = _check(tmp_path, "service.mock.enabled=false", f"service.base_url={server}",
                          "service.model=served-a")
    assert code == 0 and "ok" in out


def _guide_project(root: Path, server_file: str = "notes_server.py") -> Path:
    for name, body in _blocks().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        text = body.replace("notes_server.py", server_file) if name.endswith(".yaml") else body
        (root / name).write_text(text)
    return root


def test_check_starts_each_mcp_server_and_lists_its_tools(tmp_path: Path) -> None:
    project = _guide_project(tmp_path / "p")
    code, out, err = _check(tmp_path, f"registry={project}", "eval=notes.remember")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith("notes ")]
    assert "notes.remember" in row and "add_note" in row and row.rstrip().endswith("ok")
    broken = _guide_project(tmp_path / "q", "no_such_server.py")
    code, out, err = _check(tmp_path, f"registry={broken}", "eval=notes.remember")
    assert code == 3
    assert "error: MCP server 'notes' did not start" in err and "no_such_server.py" in err
    assert "FAILED" in out


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_dotenv_is_read_from_the_project_and_the_fix_says_where_the_url_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert run_cli("init", "proj", cwd=tmp_path).returncode == 0
    project, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["check", "--config-dir", str(project / "conf"), f"registry={project}", "service=my_model",
            "eval=capitals"]
    unset = run_cli(*args, cwd=elsewhere)  # the service file's default: 127.0.0.1:8000
    assert unset.returncode == 3
    assert ("the service file's default for service.base_url ($OPENAI_BASE_URL is unset; no .env sets it"
            in unset.stderr)
    project_url = _dead_url()
    (project / ".env").write_text(f"OPENAI_BASE_URL={project_url}\n")
    from_project = run_cli(*args, cwd=elsewhere)
    assert from_project.returncode == 3
    assert f"{project_url}/chat/completions" in from_project.stdout
    assert f"$OPENAI_BASE_URL from {project / '.env'}" in from_project.stderr
    ran = run_cli(*args[1:], "service.retry.max_attempts=1", "run.progress=false",
                  f"store.path={tmp_path / 's.db'}", cwd=elsewhere)  # a run's fix line says it too
    assert ran.returncode == 3
    origin = f"(the URL is $OPENAI_BASE_URL from {project / '.env'})"
    assert f"nothing answered at {project_url} {origin}" in ran.stdout
    here_url = _dead_url().replace("127.0.0.1", "localhost")
    (elsewhere / ".env").write_text(f"OPENAI_BASE_URL={here_url}\n")
    from_here = run_cli(*args, cwd=elsewhere)  # the current folder wins over the project
    assert f"{here_url}/chat/completions" in from_here.stdout
    assert f"$OPENAI_BASE_URL from {elsewhere / '.env'}" in from_here.stderr
