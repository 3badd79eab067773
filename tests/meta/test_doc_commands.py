"""Every command the README and docs/ show runs as written (placeholders aside).

Each page's ``bash`` blocks run in order in a sandbox of their own, which holds a store with a
sweep of the default eval (the README's), the repository's ``tests/`` (for the documented fixture
registry), the ``my_conf`` service a command names, and an OpenAI Evals export (``eval.json``,
``evalrun_1.json``, as the SDK's types dump them) for the import the OpenAI page shows. The mock
serves on port 9000 as the configuration page starts it, and ``OPENAI_BASE_URL`` points at a mock
(the endpoint a user puts in ``.env``). Placeholders are replaced by real values (run ids, a
sweep folder). A command that needs what this machine does not have (a hosted model, a GPU
server, a cluster, the network, a browser left open) is not run; ``NOT_RUN`` lists each with
why, and the test checks every command falls in exactly one of the two sets.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import mock_process
from tests.openai_evals.test_openai_import import ITEMS, eval_object, run_object

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: Commands not run here, by a pattern of the command, and why.
NOT_RUN: list[tuple[str, str]] = [
    (r"service=(openai|vllm|zrb)\b(?!.*dry_run=true)", "calls a hosted model or a GPU server"),
    (r"^vllm serve", "starts a GPU server"),
    (r"@openai:", "compares stored runs of a hosted model"),
    (r"^pip install|python -m pytest", "installs the project or runs this suite (the README test covers it)"),
    (r"^export ", "sets a key for the commands after it"),
    (r"^python bench/", "a benchmark (minutes; docs/performance.md gives their figures)"),
    (r"^ruff |^mypy", "lint (tests/meta/test_lint.py runs it)"),
    (r"submitit_slurm|ray\.init\.address=auto", "needs a SLURM or Ray cluster"),
    (r"hydra/launcher=ray", "starts Ray (tests/e2e/test_scale_out.py runs it on loopback)"),
    (r"^evalhydra view(?!.*--static)", "serves until stopped (tests/viewer drive it in Chromium)"),
    (r"services\.mock --port 9000", "the module's server: started by the test, as written"),
    (r"/scratch/", "a cluster's scratch folder"),
    (r"registry=path/to/registry", "a placeholder registry"),
    (r"eval=notes\.remember", "the project the page writes (tests/tools/test_guide_mcp_example.py runs it)"),
    (r"telemetry\.endpoint=", "sends spans to an observability server (tests/telemetry/test_phoenix.py)"),
    (r"^evalhydra ingest otlp", "reads an agent's traces, or waits for them (tests/telemetry)"),
    (r"eval=my\.recorded_eval", "the eval a user writes over ingested traces (tests/telemetry)"),
    (r"--attribute-server", "needs the two runs the lines before made (tests/probe/test_attribution.py)"),
]

#: Placeholders in commands, and what stands for them in the sandbox (filled in per page).
RUN_PLACEHOLDERS = (
    "eval-smoke-1a2b3c4d",
    "eval-smoke-5e6f7a8b",
    "eval-quality-1a2b3c4d",
    "eval-quality-5e6f7a8b",
    "RUN_A",
    "RUN_B",
    '"$BASELINE_RUN"',
)
SWEEP_PLACEHOLDER = "outputs/multirun/2026-11-29/22-40-52"


def commands(text: str) -> list[str]:
    """The command lines of a page's ``bash`` blocks, continuations joined, comments kept."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        out += [
            line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
        ]
    return out


def reason_not_run(command: str) -> str | None:
    """Why a command is not run here, or None."""
    return next((why for pattern, why in NOT_RUN if re.search(pattern, command)), None)


def _free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A sandbox with a sweep in its store, and the environment the commands run in."""
    root = tmp_path_factory.mktemp("docs")
    (root / "tests").symlink_to(REPO / "tests")
    (root / "my_conf" / "service").mkdir(parents=True)
    (root / "my_conf" / "service" / "my_service.yaml").write_text(
        "name: my_service\nmock:\n  enabled: true\n"
    )
    (root / "eval.json").write_text(json.dumps(eval_object()))
    source = {"type": "file_content", "content": [{"item": item} for item in ITEMS]}
    (root / "evalrun_1.json").write_text(json.dumps(run_object(source)))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "BROWSER": "true",
        "XDG_CACHE_HOME": str(root / ".cache"),
        "HOME": str(root),
    }
    env.pop("OPENAI_API_KEY", None)
    swept = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalhydra",
            "-m",
            "service=mock,mock_slow",
            "eval=smoke",
            "trials=5",
            "run.progress=false",
            "hydra.sweep.dir=outputs/multirun/sweep",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert swept.returncode == 0, swept.stderr
    if not _free(9000):
        pytest.skip("port 9000 is taken: the documented mock cannot start")
    server = subprocess.Popen(
        shlex.split(
            "python -m evalhydra.services.mock --port 9000 --latency-ms 200 "
            "--fail-rate 0.1 --fail-status 429 --retry-after-s 1"
        ),
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with mock_process() as url:
            yield root, {**env, "OPENAI_BASE_URL": url, "OPENAI_MODEL": "mock-model"}
    finally:
        server.terminate()
        server.wait(10)


def _filled(command: str, root: Path) -> str:
    """The command with its placeholders replaced by the sandbox's runs and sweep."""
    runs = [
        row[0]
        for row in sqlite3.connect(root / "outputs" / "evalhydra.db").execute(
            "select run_id from runs order by started_at"
        )
    ]
    for placeholder, run_id in zip(
        RUN_PLACEHOLDERS, [runs[0], runs[1], runs[0], runs[1], runs[0], runs[1], runs[0]], strict=True
    ):
        command = command.replace(placeholder, run_id)
    return command.replace(SWEEP_PLACEHOLDER, str(root / "outputs" / "multirun" / "sweep"))  # as stored


def test_every_command_is_run_or_named_as_not_run() -> None:
    every = [c for page in PAGES for c in commands(page.read_text())]
    run_here = [c for c in every if reason_not_run(c) is None]
    assert len(run_here) >= 60, len(run_here)
    used = {pattern for pattern, _ in NOT_RUN if any(re.search(pattern, c) for c in every)}
    assert used == {pattern for pattern, _ in NOT_RUN}, "a NOT_RUN entry matches no command: remove it"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_the_commands_of_a_page_run_as_written(
    base: tuple[Path, dict[str, str]], page: Path, tmp_path: Path
) -> None:
    root, env = base
    sandbox = tmp_path / "sandbox"
    shutil.copytree(root, sandbox, symlinks=True)
    cwd = sandbox
    for command in commands(page.read_text()):
        if reason_not_run(command) is not None:
            continue
        if command.startswith("cd "):
            cwd = cwd / command.split(maxsplit=1)[1]
            continue
        done = subprocess.run(
            ["bash", "-c", _filled(command, root)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode in (0, 1), (
            f"{page.name}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
        assert "Traceback" not in done.stderr, f"{page.name}: {command}\n{done.stderr[-2000:]}"
