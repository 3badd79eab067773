"""Bad input is refused before any call, naming what is wrong and never printing a secret."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from evalhydra.core.errors import EvalHydraError
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells
from tests.conftest import smoke_eval, write_registry
from tests.helpers import chat_requests, mock_process

Compose = Callable[..., DictConfig]
SMART_QUOTE_KEY = "sk-test-1234\u201d"


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "localhost:8000/v1", "http:///v1"])
def test_a_base_url_must_be_http_with_a_host(compose: Compose, url: str) -> None:
    with pytest.raises(EvalHydraError, match=r"service 'mock': service.base_url=.* must be http:// or https://"):
        build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}"))


def test_a_key_that_cannot_be_sent_is_refused_without_printing_it(
        compose: Compose, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALHYDRA_TEST_KEY", SMART_QUOTE_KEY)
    plan = build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}",
                              "service.api_key_env=EVALHYDRA_TEST_KEY"))
    with pytest.raises(EvalHydraError) as exc:
        run_plan(plan, output_dir=tmp_path / "out")
    assert "$EVALHYDRA_TEST_KEY holds a character that cannot be sent in an HTTP header" in str(exc.value)
    assert SMART_QUOTE_KEY not in str(exc.value) and "sk-test" not in str(exc.value)
    assert chat_requests(url) == 0 and not (tmp_path / "store.db").exists()


def test_a_header_that_cannot_be_sent_is_refused(compose: Compose, url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALHYDRA_TEST_TOKEN", "line\nbreak")
    plan = build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}",
                              "+service.headers.X-Token=${env:EVALHYDRA_TEST_TOKEN}"))
    with pytest.raises(EvalHydraError, match=r"\$EVALHYDRA_TEST_TOKEN \(header X-Token\) holds a character"):
        run_plan(plan, output_dir=tmp_path / "out")
    assert chat_requests(url) == 0


def test_a_concurrency_above_the_services_limit_is_said_once(compose: Compose, url: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    plan = build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}",
                              "run.concurrency=500", "service.max_concurrency=8"))
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert err.count("note: run.concurrency=500, but service 'mock' sends at most 8 requests at once "
                     "(service.max_concurrency); raise it to send more.") == 1
    quiet = build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}",
                               "service.max_concurrency=8"))  # the default concurrency: nothing to say
    assert run_plan(quiet, output_dir=tmp_path / "quiet") == 0
    assert "note: run.concurrency" not in capsys.readouterr().err


def test_a_text_attachment_that_is_not_utf8_stops_the_run_before_any_call(compose: Compose,
                                                                           tmp_path: Path) -> None:
    registry = write_registry(
        tmp_path / "reg", evals={"g/e.json": smoke_eval()},
        data={"data/g/e/test.jsonl": json.dumps({"id": "c1", "input": "Summarise.", "attachments": [
            {"kind": "file", "path": "assets/notes.txt"}]}) + "\n"})
    (registry / "assets").mkdir()
    (registry / "assets" / "notes.txt").write_bytes(b"caf\xe9 latin-1")
    plan = build_plan(compose(f"registry={registry}", "eval=g"))
    expected = (r"test.jsonl:1: attachments\[0\]: InvalidAttachmentText: "
                r"file attachment 'assets/notes.txt' is not valid UTF-8 \(byte 3\)")
    with pytest.raises(EvalHydraError, match=expected):
        count_cells(plan)


def test_an_echoed_key_never_reaches_the_store_or_the_reports(compose: Compose, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-live-echoed-4242"
    monkeypatch.setenv("EVALHYDRA_TEST_KEY", key)
    with mock_process("--fixed-reply", f"I saw your key {key}") as url:
        plan = build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}",
                                  "service.api_key_env=EVALHYDRA_TEST_KEY", "report=[json,md,jsonl,html]"))
        run_plan(plan, output_dir=tmp_path / "out")
        assert chat_requests(url) == 2
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "store.db" for p in files) and any(p.name == "report.html" for p in files)
    leaked = [p for p in files if key.encode() in p.read_bytes()]
    assert leaked == []
    assert b"I saw your key ***" in (tmp_path / "out" / "runs.json").read_bytes()
