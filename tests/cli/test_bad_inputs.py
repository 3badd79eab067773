"""The bad-input catalogue: every user-fixable mistake, run as a user would (a subprocess).

Each class must exit 2 with exactly one ``error:`` line that names where the
problem is (a file and line, or the config key) and the fix (on it or the lines after it),
print no traceback, and leave a store that already holds results byte for byte
unchanged.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

#: Builds a case's files under the given directory and returns the command's arguments.
Setup = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Bad:
    """One class of bad input: how to make it, where the error must point, what fix it must name."""

    setup: Setup
    where: str  # a substring of the error line: the file[:line] or the key
    fix: str  # a substring of the lines after it
    subcommand: bool = False  # the command is a store subcommand (it takes --store)
    own_store: bool = False  # the arguments set store.path themselves


def _registry(
    root: Path,
    *,
    evals: dict[str, object] | None = None,
    data: str | None = None,
    services: object = None,
    files: dict[str, str | bytes] | None = None,
) -> Path:
    reg = root / "reg"
    write_registry(
        reg,
        evals={"g/e.json": smoke_eval()},
        data={
            "data/g/e/test.jsonl": data
            if data is not None
            else '{"id": "c1", "input": "Say OK.", "ideal": "OK"}\n'
        },
    )
    if services is not None:
        (reg / "services.json").write_text(services if isinstance(services, str) else json.dumps(services))
    for rel, spec in (evals or {}).items():
        target = reg / "evals" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    for rel, content in (files or {}).items():
        target = reg / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return reg


def _reg_args(reg: Path, eval_name: str = "g") -> list[str]:
    return [f"registry={reg}", f"eval={eval_name}", "service=mock"]


def _dataset(text: str) -> Setup:
    return lambda root: _reg_args(_registry(root, data=text))


def _eval_spec(**changes: object) -> Setup:
    spec = {**smoke_eval(), **changes}
    return lambda root: _reg_args(_registry(root, evals={"g/e.json": spec}))


def _eval_text(text: str) -> Setup:
    return lambda root: _reg_args(_registry(root, evals={"g/e.json": text}))


def _case(**case: object) -> Setup:
    return _dataset(json.dumps({"id": "c1", "input": "Say OK.", "ideal": "OK", **case}) + "\n")


def _attachment(rel: str, files: dict[str, str | bytes] | None = None, **extra: object) -> Setup:
    case = {
        "id": "c1",
        "input": "Look.",
        "ideal": "OK",
        "attachments": [{"kind": "file", "path": rel, "mime_type": "text/plain", **extra}],
    }
    return lambda root: _reg_args(_registry(root, data=json.dumps(case) + "\n", files=files))


def _services(services: object) -> Setup:
    return lambda root: [*_reg_args(_registry(root, services=services))[:2], "service=svc"]


_SVC = {
    "name": "svc",
    "base_url": "http://127.0.0.1:9/v1/chat/completions",
    "default_model": "m",
    "timeout_ms": 1000,
}


def _conf(rel: str, text: str, *args: str) -> Setup:
    def setup(root: Path) -> list[str]:
        path = root / "conf" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return ["--config-dir", str(root / "conf"), *args]

    return setup


def _agent(files: dict[str, str], *args: str) -> Setup:
    def setup(root: Path) -> list[str]:
        reg = _registry(root, files={f"agent_cases/{rel}": text for rel, text in files.items()})
        return [f"registry={reg}", "eval=agent_cases", "service=fake_agent", *args]

    return setup


def _shard(*statements: str) -> Setup:
    """``merge`` of a store that ``statements`` spoiled."""

    def setup(root: Path) -> list[str]:
        from evalhydra.store.db import open_store

        path = root / "shard.db"
        store = open_store(path)
        for sql in statements:
            store.conn.execute(sql)
        store.conn.commit()
        store.close()
        return ["merge", str(path)]

    return setup


def _damaged_shard(root: Path) -> list[str]:
    """A shard whose ``results`` b-tree page has a garbled header (a torn write, a bad disk)."""
    import sqlite3

    args = _shard("insert into results (cell_key, run_id) values ('k', 'r')")(root)
    conn = sqlite3.connect(root / "shard.db")
    page_size = conn.execute("pragma page_size").fetchone()[0]
    root_page = conn.execute("select rootpage from sqlite_master where name = 'results'").fetchone()[0]
    conn.close()
    data = bytearray((root / "shard.db").read_bytes())
    start = (root_page - 1) * page_size
    data[start:start + 12] = b"\x07" * 12  # no valid page type, cell count or offsets
    (root / "shard.db").write_bytes(bytes(data))
    return args


_ENDLESS_VIEW = ("drop table results", "create view results as with recursive n(x) as (select 1 union all"
                 " select x + 1 from n) select x as cell_key from n")
_DEEP = "[" * 3000 + "]" * 3000
_BOMB = "".join(f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdef", "bcdefg", strict=True))


def _args(*args: str) -> Setup:
    return lambda root: list(args)


def _file_arg(name: str, content: str | bytes, *args: str) -> Setup:
    """``args`` with ``{file}`` replaced by a file written under root."""

    def setup(root: Path) -> list[str]:
        path = root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return [a.replace("{file}", str(path)) for a in args]

    return setup


_VALIDATOR = (
    "from evalhydra.agents import ValidationResult\n"
    "class V:\n    def validate(self, output_dir, log_content, trace=None):\n"
    "        return ValidationResult('PASS', 1.0)\nvalidator = V()\n"
)
_TOOL = {"name": "search", "description": "Search.", "parameters_json": '{"type": "object"}'}

CATALOGUE: dict[str, Bad] = {
    # -- the command line and Hydra -------------------------------------------------------
    "unknown service": Bad(_args("service=mok"), "service=mok", "Did you mean: mock?"),
    "unknown eval": Bad(_args("eval=smok"), "eval=smok", "Did you mean: smoke"),
    "unknown key": Bad(_args("trails=3"), "trails", "Did you mean: trials?"),
    "unknown nested key": Bad(_args("run.concurency=3"), "run.concurency", "Did you mean: concurrency?"),
    "unknown service key": Bad(_args("service.timeout=5"), "service.timeout", "Did you mean"),
    "wrong type": Bad(_args("trials=abc"), "trials=abc", "integer"),
    "wrong type nested": Bad(_args("run.concurrency=many"), "run.concurrency=many", "integer"),
    "unparsable override": Bad(_args("trials=[1"), "trials=[1", "override"),
    "unknown subcommand": Bad(_args("rnus", "eval=smoke"), "'rnus'", "Did you mean: runs?"),
    "unknown matcher group": Bad(_args("matcher=exact"), "matcher=exact", "Did you mean: exact_match"),
    "unknown report format": Bad(_args("report=[pdf]"), "report", "Use any of:"),
    "missing config dir": Bad(
        _args("--config-dir", "/nonexistent/conf"), "/nonexistent/conf", "--config-dir"
    ),
    "unknown config name": Bad(_args("--config-name", "nope"), "nope", "config"),
    "unknown launcher": Bad(_args("-m", "hydra/launcher=nope"), "hydra/launcher=nope", "Available"),
    "bad sweep value": Bad(_args("-m", "trials=1,x"), "trials", "integer"),
    "trials zero": Bad(_args("trials=0"), "trials", "1..10000"),
    "concurrency zero": Bad(_args("run.concurrency=0"), "run.concurrency", "at least 1"),
    "error rate out of range": Bad(_args("run.max_error_rate=2"), "run.max_error_rate", "0..1"),
    "fail_under out of range": Bad(_args("run.fail_under=1.5"), "run.fail_under", "0..1"),
    "negative timeout": Bad(_args("service.timeout_ms=-5"), "service.timeout_ms", ">= 1"),
    "bad retry attempts": Bad(_args("service.retry.max_attempts=0"), "service.retry.max_attempts", "1..10"),
    "bad retry status": Bad(_args("service.retry.retry_on_status=[700]"), "retry_on_status", "100..599"),
    "base_url without scheme": Bad(
        _args("service.mock.enabled=false", "service.base_url=localhost:8000/v1"), "base_url", "http://"
    ),
    "base_url ftp": Bad(
        _args("service.mock.enabled=false", "service.base_url=ftp://example.com/v1"), "base_url", "http://"
    ),
    "missing registry": Bad(_args("registry=/nonexistent/reg"), "registry=/nonexistent/reg", "services.json"),
    "store path is a directory": Bad(
        lambda root: [f"store.path={root}"], "store.path", "store.path=", own_store=True
    ),
    "unwritable store": Bad(
        _args("store.path=/proc/nope/s.db"), "store.path=/proc/nope/s.db", "store.path=", own_store=True
    ),
    "unknown judge service": Bad(_args("judge_service=nojudge"), "judge_service=nojudge", "Available"),
    "unknown transport": Bad(_args("service.transport=laen"), "service.transport=laen", "Did you mean: lean"),
    "missing CA bundle": Bad(_args("service.ca_bundle=/nonexistent/ca.pem"), "service.ca_bundle", "PEM file"),
    "CA bundle that is not one": Bad(_file_arg("ca.pem", "not a certificate\n", "service.ca_bundle={file}"),
                                     "service.ca_bundle", "not a CA bundle"),
    # -- files in --config-dir --------------------------------------------------------------
    "broken YAML in a conf file": Bad(
        _conf("service/mine.yaml", "name: mine\nkind: [openai\n", "service=mine"), "mine.yaml", "YAML"
    ),
    "unknown key in a conf file": Bad(
        _conf("service/mine.yaml", "name: mine\nkind: mock\nbase_urll: x\n", "service=mine"),
        "base_urll",
        "Did you mean: base_url",
    ),
    "wrong type in a conf file": Bad(
        _conf("service/mine.yaml", "name: mine\nkind: mock\nmax_concurrency: lots\n", "service=mine"),
        "max_concurrency",
        "integer",
    ),
    # -- registry definitions -----------------------------------------------------------------
    "broken JSON in an eval": Bad(_eval_text('{"id": "g.e",\n  "group": }'), "e.json:2", "JSON"),
    "broken YAML in an eval": Bad(
        lambda root: _reg_args(_registry(root, files={"evals/g/y.yaml": "id: g.y\ngroup: [g\n"})),
        "y.yaml",
        "YAML",
    ),
    "eval not an object": Bad(_eval_text("[1, 2]"), "e.json", "object"),
    "eval missing a field": Bad(_eval_spec(dataset_path=""), "dataset_path", "dataset_path"),
    "eval run count wrong": Bad(_eval_spec(default_run_count="x"), "default_run_count", "positive integer"),
    "eval max_attempts wrong": Bad(_eval_spec(max_attempts=50), "max_attempts", "1..10"),
    "eval matcher missing kind": Bad(_eval_spec(matcher={}), "matcher", "kind"),
    "eval unknown matcher": Bad(_eval_spec(matcher={"kind": "exact_mach"}), "exact_mach", "Did you mean"),
    "eval regex that does not compile": Bad(
        _eval_spec(matcher={"kind": "regex", "pattern": "(["}), "pattern", "regular expression"
    ),
    "duplicate eval ids": Bad(
        lambda root: _reg_args(_registry(root, evals={"g/f.json": smoke_eval()})), "g.e", "id"
    ),
    "repeated key in an eval": Bad(_eval_text('{"id": "g.e",\n "id": "g.f"}'), "e.json:2", "written twice"),
    "repeated key in services.json": Bad(_services('[{"name": "svc",\n "name": "x"}]'), "services.json:2",
                                         "written twice"),
    "tool without description": Bad(_eval_spec(tools=[{"name": "search", "parameters_json": "{}"}],
                                               matcher={"kind": "tool_call"}), "e.json:1", "description"),
    "numeric case id": Bad(_dataset('{"id": 5, "input": "a", "ideal": "b"}\n'), "test.jsonl:1", '"5"'),
    "dataset file missing": Bad(
        _eval_spec(dataset_path="data/nope.jsonl"), "data/nope.jsonl", "dataset_path"
    ),
    "dataset escapes registry": Bad(
        _eval_spec(dataset_path="../../etc/passwd"), "dataset_path", "inside the registry"
    ),
    "tool without parameters object": Bad(
        _eval_spec(tools=[{**_TOOL, "parameters_json": "[1]"}], matcher={"kind": "tool_call"}),
        "parameters_json",
        "object",
    ),
    "tool with broken JSON schema": Bad(
        _eval_spec(tools=[{**_TOOL, "parameters_json": "{bad"}], matcher={"kind": "tool_call"}),
        "parameters_json",
        "JSON",
    ),
    "services.json broken": Bad(_services('[{"name": "svc",'), "services.json:1", "JSON"),
    "services.json not an array": Bad(_services({"name": "svc"}), "services.json", "array"),
    "service missing base_url": Bad(_services([{**_SVC, "base_url": ""}]), "base_url", "base_url"),
    "service bad timeout": Bad(_services([{**_SVC, "timeout_ms": -1}]), "timeout_ms", "positive integer"),
    "service duplicate name": Bad(_services([_SVC, _SVC]), "svc", "name"),
    "service unknown key": Bad(_services([{**_SVC, "api_kee_env": "X"}]), "api_kee_env", "Did you mean"),
    "service bad retry": Bad(_services([{**_SVC, "retry": {"max_attempts": 99}}]), "max_attempts", "1..10"),
    # -- datasets ---------------------------------------------------------------------------------
    "broken JSONL line": Bad(
        _dataset('{"id": "c1", "input": "a", "ideal": "b"}\n{"id": "c2", \n'), "test.jsonl:2", "JSON"
    ),
    "dataset line not an object": Bad(_dataset("[1]\n"), "test.jsonl:1", "object"),
    "case without id": Bad(_dataset('{"input": "a", "ideal": "b"}\n'), "test.jsonl:1", "id"),
    "case without input": Bad(_dataset('{"id": "c1", "ideal": "b"}\n'), "test.jsonl:1", "input"),
    "ideal of the wrong type": Bad(_case(ideal=5), "test.jsonl:1", "ideal"),
    "duplicate case ids": Bad(
        _dataset('{"id": "c1", "input": "a", "ideal": "b"}\n{"id": "c1", "input": "a", "ideal": "b"}\n'),
        "test.jsonl:2",
        "id",
    ),
    "dataset not UTF-8": Bad(
        lambda root: _reg_args(
            _registry(
                root, data="", files={"data/g/e/test.jsonl": b'{"id": "c1", "input": "\xff", "ideal": "b"}\n'}
            )
        ),
        "test.jsonl",
        "UTF-8",
    ),
    "empty dataset": Bad(_dataset(""), "test.jsonl", "case"),
    "bad expected tool calls": Bad(_case(expected_tool_calls=[]), "test.jsonl:1", "expected_tool_calls"),
    "bad message list": Bad(_case(input=[{"role": "wizard", "content": "x"}]), "test.jsonl:1", "role"),
    # -- attachments ------------------------------------------------------------------------------
    "attachment escapes registry": Bad(_attachment("../../etc/passwd"), "test.jsonl:1", "inside"),
    "attachment absolute": Bad(_attachment("/etc/passwd"), "test.jsonl:1", "relative"),
    "attachment missing": Bad(_attachment("assets/nope.txt"), "test.jsonl:1", "assets/nope.txt"),
    "attachment not UTF-8": Bad(
        _attachment("assets/x.txt", {"assets/x.txt": b"ok \xff\xfe"}), "assets/x.txt", "UTF-8"
    ),
    "attachment oversized": Bad(
        _attachment("assets/big.txt", {"assets/big.txt": "x" * (9 << 20)}), "test.jsonl:1", "MiB"
    ),
    "attachment bad kind": Bad(
        _dataset(
            json.dumps(
                {"id": "c1", "input": "a", "ideal": "b", "attachments": [{"kind": "video", "path": "a.mp4"}]}
            )
            + "\n"
        ),
        "test.jsonl:1",
        "image",
    ),
    "attachment unsupported MIME": Bad(
        _attachment("assets/x.txt", {"assets/x.txt": "hi"}, mime_type="application/x-nope"),
        "test.jsonl:1",
        "use text/",
    ),
    # -- agent cases ------------------------------------------------------------------------------
    "agent case without validator": Bad(
        _agent({"a/instruction.txt": "do it\n"}), "validator.py", "validator"
    ),
    "agent validator that does not import": Bad(
        _agent({"a/instruction.txt": "do\n", "a/validator.py": "def (:\n"}), "validator.py", "validator"
    ),
    "agent validator without validator object": Bad(
        _agent({"a/instruction.txt": "do\n", "a/validator.py": "x = 1\n"}), "validator.py", "validator"
    ),
    "agent CLI not found": Bad(
        _agent(
            {"a/instruction.txt": "do\n", "a/validator.py": _VALIDATOR},
            "service.argv=[no-such-agent-cli,'{instruction}']",
        ),
        "no-such-agent-cli",
        "PATH",
    ),
    "agent empty model": Bad(
        _agent({"a/instruction.txt": "do\n", "a/validator.py": _VALIDATOR}, "service.default_model="),
        "model",
        "model",
    ),
    "agent cases folder missing": Bad(
        lambda root: [f"registry={_registry(root)}", "eval=agent_cases", "service=fake_agent"],
        "agent_cases",
        "instruction.txt",
    ),
    # -- the store and its subcommands ----------------------------------------------------------
    "query that writes": Bad(
        lambda root: ["query", "delete from results"], "delete", "select", subcommand=True
    ),
    "query syntax error": Bad(
        lambda root: ["query", "selec * from results"], "selec", "SQL", subcommand=True
    ),
    "query unknown table": Bad(
        lambda root: ["query", "select * from resluts"], "resluts", "table", subcommand=True
    ),
    "report unknown run": Bad(
        lambda root: ["report", "eval-nope"], "eval-nope", "evalhydra runs", subcommand=True
    ),
    "report unknown format": Bad(
        lambda root: ["report", "latest", "--format", "pdf"], "pdf", "Use any of", subcommand=True
    ),
    "results unknown status": Bad(
        lambda root: ["results", "latest", "--status", "BOGUS"], "BOGUS", "PASS", subcommand=True
    ),
    "compare unknown run": Bad(
        lambda root: ["compare", "latest", "eval-nope"], "eval-nope", "evalhydra runs", subcommand=True
    ),
    "view unknown run": Bad(
        lambda root: ["view", "eval-nope"], "eval-nope", "evalhydra runs", subcommand=True
    ),
    "merge missing shard": Bad(
        lambda root: ["merge", str(root / "nope.db")], "nope.db", "store files", subcommand=True
    ),
    "merge corrupt shard": Bad(
        _file_arg("bad.db", b"garbage" * 100, "merge", "{file}"), "bad.db", "SQLite", subcommand=True
    ),
    "merge shard whose results is an endless view": Bad(
        _shard(*_ENDLESS_VIEW), "results is a view", "leave this file out", subcommand=True
    ),
    "merge shard with text in a number column": Bad(
        _shard("insert into results (cell_key, run_id, score) values ('k', 'r', 'high')"),
        "results.score holds text", "leave this file out", subcommand=True
    ),
    "merge shard with bytes in a text column": Bad(
        _shard("insert into results (cell_key, run_id, output) values ('k', 'r', x'ff00')"),
        "results.output holds bytes", "leave this file out", subcommand=True
    ),
    "merge shard missing a column": Bad(
        _shard("alter table results drop column reply_model"), "lacks the column reply_model",
        "leave this file out", subcommand=True
    ),
    "merge damaged shard": Bad(_damaged_shard, "shard.db", "leave it out", subcommand=True),
    "query running too long": Bad(
        lambda root: ["query", "with recursive n(x) as (select 1 union all select x + 1 from n)"
                      " select count(*) from n", "--timeout", "0.5"], "longer than 0.5 s", "--timeout",
        subcommand=True
    ),
    "dataset nested too deep": Bad(
        _dataset('{"id": "c1", "input": "x", "ideal": "OK", "meta": ' + _DEEP + "}\n"), "test.jsonl:1",
        "JSON"
    ),
    "eval file nested too deep": Bad(_eval_text('{"id": "g.e", "x": ' + _DEEP + "}"), "e.json", "JSON"),
    "eval file with YAML aliases": Bad(
        lambda root: _reg_args(_registry(root, files={"evals/h/bomb.yaml": _BOMB}), "h.bomb"), "bomb.yaml",
        "alias"
    ),
    "attachment path with a NUL": Bad(_attachment("a\x00b.txt"), "NUL", "relative"),
    "empty agent model": Bad(_args("service=fake_agent", "eval=agent_cases", "service.model=''"),
                             "service.model", "Name one"),
    "unusable hydra.run.dir": Bad(_args("hydra.run.dir=/proc/evalhydra-nope"), "/proc/evalhydra-nope",
                                  "hydra.run.dir"),
    "cache expiry not a duration": Bad(_args("cache.enabled=true", "cache.expiry=soon"), "cache.expiry",
                                       "cache.expiry=7d"),
    "unusable cache path": Bad(_args("cache.enabled=true", "cache.path=/proc/evalhydra-nope/c.db"),
                               "cache.path", "cache.enabled=false"),
    "batch mode on an agent CLI": Bad(
        _args("service=fake_agent", "eval=agent_cases", "service.batch.enabled=true"),
        "service.batch.enabled", "service.batch.enabled=false"),
    "unknown batch fallback": Bad(_args("service.batch.enabled=true", "service.batch.fallback=later"),
                                  "service.batch.fallback", "batch or online"),
    "batch too large for a provider": Bad(
        _args("service.batch.enabled=true", "service.batch.max_requests=90000"), "service.batch.max_requests",
        "1..50000"),
    "cancel an unknown batch": Bad(lambda root: ["batches", "cancel", "batch_nope"], "batch_nope",
                                   "evalhydra batches", subcommand=True),
    "rejudge unknown run": Bad(
        lambda root: ["rejudge", "eval-nope"], "eval-nope", "evalhydra runs", subcommand=True
    ),
    "unknown subcommand option": Bad(lambda root: ["runs", "--bogus"], "--bogus", "usage", subcommand=True),
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one finished run, WAL checkpointed (the file is all of it)."""
    root = tmp_path_factory.mktemp("stored")
    res = run_cli(f"store.path={root / 'store.db'}", "run.progress=false", cwd=root)
    assert res.returncode == 0, res.stderr
    return root / "store.db"


def test_the_catalogue_covers_at_least_sixty_classes() -> None:
    assert len(CATALOGUE) >= 60


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_bad_input_is_one_error_line_and_changes_nothing(name: str, stored: Path, tmp_path: Path) -> None:
    bad = CATALOGUE[name]
    store = tmp_path / "store.db"
    shutil.copy(stored, store)
    before = store.read_bytes()
    args = bad.setup(tmp_path)
    placed = (
        [args[0], "--store", str(store), *args[1:]]
        if bad.subcommand
        else [*args, "run.progress=false", *([] if bad.own_store else [f"store.path={store}"])]
    )
    res = run_cli(*placed, cwd=tmp_path)
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error: "), res.stderr
    assert sum(line.startswith("error:") for line in lines) == 1, res.stderr
    assert bad.where in lines[0], res.stderr
    assert bad.fix.lower() in res.stderr.lower(), res.stderr
    assert "Traceback" not in res.stderr + res.stdout and "HYDRA_FULL_ERROR" not in res.stderr
    assert store.read_bytes() == before
