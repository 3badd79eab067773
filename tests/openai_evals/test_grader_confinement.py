"""A ``python`` grader is confined (issue 47, item 7; issue 59, R5): no variable of the run reaches
it, it works and writes only in a scratch folder, it has no network and starts no process, it is
killed at its timeout, rlimits bound its memory and files, its prints are capped; and a secret in
any matcher's reason is masked.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

import evalhydra
from evalhydra.matchers.python_grader import LIMITS, PythonGraderError, run_python_grader
from tests.conftest import smoke_eval, write_registry

SECRET = "sk-grader-confinement-0123456789"


async def test_no_variable_of_the_run_reaches_a_grader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    source = ("import os\n"
              "def grade(sample, item):\n"
              "    return float(len(os.environ) * 1000 + ('OPENAI_API_KEY' in os.environ))\n")
    score = await run_python_grader(source, {}, {})
    assert score % 1000 == 0 and score / 1000 <= 6  # PATH, HOME, TMPDIR, LANG, LC_ALL (and no key)


async def test_a_grader_works_in_a_scratch_folder_removed_after(tmp_path: Path) -> None:
    source = ("import os\n"
              "def grade(sample, item):\n"
              "    open('left-behind.txt', 'w').write('x')\n"
              "    raise RuntimeError('in ' + os.getcwd())\n")
    with pytest.raises(PythonGraderError, match="RuntimeError: in ") as caught:
        await run_python_grader(source, {}, {})
    scratch = str(caught.value).rsplit("in ", 1)[1]
    assert scratch != os.getcwd() and Path(scratch).name.startswith("evalhydra-grader-")
    assert not os.path.exists(scratch)  # noqa: ASYNC240 (a test's one look)


async def test_a_grader_writes_only_in_its_own_folder(tmp_path: Path) -> None:
    """Issue 59, R5: a write, a rename or a delete outside the scratch folder is refused."""
    outside = tmp_path / "escaped.txt"
    keep = tmp_path / "keep.txt"
    keep.write_text("mine")
    for attempt in (f"open({str(outside)!r}, 'w').write('x')", f"open({str(outside)!r}, 'a')",
                    f"os.remove({str(keep)!r})", f"os.rename({str(keep)!r}, 'moved.txt')",
                    "os.symlink('/etc/passwd', 'inside-link'); open('inside-link', 'w')"):
        source = f"import os\ndef grade(sample, item):\n    {attempt}\n    return 1.0\n"
        with pytest.raises(PythonGraderError, match="PermissionError: a grader"):
            await run_python_grader(source, {}, {})
    assert not outside.exists() and keep.read_text() == "mine"


async def test_a_grader_has_no_network_and_starts_no_process(tmp_path: Path) -> None:
    """Issue 59, R5: a socket to a listener on 127.0.0.1, a subprocess, os.system and native code
    are each a PermissionError in grade(); the listener sees no connection."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        for attempt in (f"import socket; socket.create_connection(('127.0.0.1', {port}))",
                        "import subprocess; subprocess.run(['true'])", "import os; os.system('true')",
                        "import ctypes; ctypes.CDLL(None)"):
            source = f"def grade(sample, item):\n    {attempt}\n    return 1.0\n"
            with pytest.raises(PythonGraderError, match="PermissionError: a grader has no network"):
                await run_python_grader(source, {}, {})
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


@pytest.mark.slow
async def test_a_grader_past_its_timeout_is_killed() -> None:
    source = ("import time\n"
              "def grade(sample, item):\n"
              "    time.sleep(60)\n")
    started = time.monotonic()
    with pytest.raises(PythonGraderError, match="timeout"):
        await run_python_grader(source, {}, {}, timeout_s=1.5)
    assert time.monotonic() - started < 10


async def test_a_grader_cannot_take_more_memory_than_its_limit() -> None:
    size = LIMITS["RLIMIT_AS"] + (1 << 30)
    source = f"def grade(sample, item):\n    return float(len(bytearray({size})))\n"
    with pytest.raises(PythonGraderError, match="MemoryError"):
        await run_python_grader(source, {}, {})


async def test_a_flooding_grader_is_capped_and_never_held_in_memory() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    source = ("import sys\n"
              "def grade(sample, item):\n"
              "    line = 'x' * (1 << 20)\n"
              "    for _ in range(400):\n"
              "        print(line)\n"
              "    return 1.0\n")
    with pytest.raises(PythonGraderError, match="printed more than 64 MiB"):
        await run_python_grader(source, {}, {})
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_a_secret_in_a_matchers_reason_is_masked_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           url: str) -> None:
    monkeypatch.setenv("CONFINED_KEY", SECRET)
    (tmp_path / "leaky.py").write_text(
        "import os\n"
        "def leak(ctx, **kwargs):\n"
        "    return {'passed': False, 'reason': 'key ' + os.environ['CONFINED_KEY']}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    matcher = {"kind": "custom", "_target_": "leaky.leak"}
    registry = write_registry(
        tmp_path / "reg", evals={"g/e.json": smoke_eval("g.e", matcher=matcher)},
        data={"data/g/e/test.jsonl": json.dumps({"id": "c1", "input": "Say OK.", "ideal": "OK"}) + "\n"})
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                                 "service.mock.enabled=false", f"service.base_url={url}",
                                 "service.api_key_env=CONFINED_KEY",
                                 f"store.path={tmp_path / 's.db'}", "report=[json,jsonl,md,html]",
                                 f"hydra.run.dir={tmp_path / 'out'}"])
    (row,) = result.rows()
    assert row["failure_reason"] == "key ***"
    for path in [tmp_path / "s.db", *(p for p in (tmp_path / "out").rglob("*") if p.is_file())]:
        assert SECRET.encode() not in path.read_bytes(), path
    assert os.environ["CONFINED_KEY"] == SECRET
