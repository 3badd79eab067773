"""Secrets stay out of every file, registry text stays text, odd store paths open (issue 33, item 6)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

import evalhydra
from evalhydra.cli.store_commands import main
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from tests.conftest import smoke_eval, write_registry
from tests.helpers import mock_process, run_cli

Compose = Callable[..., DictConfig]
SECRET = "hdr-secret-7f3a9c1e"


def _leaks(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize("header", [f"{SECRET}", "${oc.env:EVALHYDRA_HDR_SECRET}"])
def test_an_echoed_header_value_is_masked_whatever_its_origin(header: str, compose: Compose, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALHYDRA_HDR_SECRET", SECRET)
    with mock_process("--fixed-reply", f"your token is {SECRET}") as url:
        plan = build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}",
                                  f"+service.headers.X-Token={header}", "report=[json,md,jsonl,html]"))
        run_plan(plan, output_dir=tmp_path / "out")
    assert _leaks(tmp_path, SECRET) == []
    assert b"your token is ***" in (tmp_path / "out" / "runs.json").read_bytes()


@pytest.mark.slow
def test_a_literal_secret_override_is_kept_out_of_hydras_saved_files(tmp_path: Path) -> None:
    one = run_cli(f"+service.headers.X-Token={SECRET}", "run.progress=false", cwd=tmp_path)
    sweep = run_cli("-m", f"+service.headers.X-Token={SECRET}", "trials=1,2", "run.progress=false",
                    cwd=tmp_path)
    assert one.returncode == 0 and sweep.returncode == 0, one.stderr + sweep.stderr
    saved = list(tmp_path.rglob(".hydra/*.yaml"))
    assert len(saved) == 9 and list(tmp_path.rglob("multirun.yaml"))
    assert _leaks(tmp_path, SECRET) == [] and not any(SECRET in str(p) for p in tmp_path.rglob("*"))
    assert "X-Token=<redacted>" in next(p for p in saved if p.name == "overrides.yaml").read_text()


def test_registry_strings_are_taken_literally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALHYDRA_PROMPT_SECRET", SECRET)
    prompt = "Price is ${price}. Key ${oc.env:EVALHYDRA_PROMPT_SECRET}. Reply with exactly {{input}}."
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval(prompt=prompt)},
                              data={"data/g/e/test.jsonl": '{"id": "c1", "input": "OK", "ideal": "OK"}\n'})
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}"])
    assert result.exit_code == 0
    (row,) = list(result.rows())
    assert "Price is ${price}. Key ${oc.env:EVALHYDRA_PROMPT_SECRET}." in json.dumps(row["input"])
    assert _leaks(tmp_path, SECRET) == []


def test_store_paths_with_uri_characters_open_as_files(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a#b?c%d"
    folder.mkdir()
    db = folder / "s.db"
    assert evalhydra.evaluate([f"store.path='{db}'"]).exit_code == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["runs"], ["results", "latest"], ["report", "latest", "--out", str(tmp_path / "rep")]):
        assert main([args[0], "--store", str(db), *args[1:]]) == 0
    assert "smoke.reply_ok" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "rep"])  # no stray file made


def test_query_streams_every_row_in_csv_json_and_jsonl(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    sqlite3.connect(db).close()
    assert evalhydra.evaluate([f"store.path={db}"]).exit_code == 0
    capsys.readouterr()
    sql = "with recursive n(x) as (select 1 union all select x + 1 from n where x < 25000) select x from n"
    outputs = {}
    for fmt in ("csv", "json", "jsonl", "simple"):
        assert main(["query", "--store", str(db), sql, "--format", fmt]) == 0
        outputs[fmt] = capsys.readouterr()
    assert outputs["csv"].out.splitlines() == ["x", *map(str, range(1, 25001))]
    assert json.loads(outputs["json"].out) == [{"x": i} for i in range(1, 25001)]
    assert [json.loads(line)["x"] for line in outputs["jsonl"].out.splitlines()] == list(range(1, 25001))
    assert "stopped at 10,000 rows" in outputs["simple"].err


def test_rejudging_a_run_whose_outputs_are_bytes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = evalhydra.evaluate([f"store.path={db}"])
    conn = sqlite3.connect(db)
    conn.execute("update results set output = x'ff00fe'")
    conn.commit()
    conn.close()
    assert first.run_id
    again = evalhydra.rejudge(first.run_id, store=db, out=tmp_path / "again")
    assert again.exit_code == 0 and (tmp_path / "again" / "runs.json").is_file()
