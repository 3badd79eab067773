"""evalhydra beside its peers: the same eval, the same mock, each tool's own command line.

Every side runs one exact-match eval of N "Reply with exactly V<i>." cases (one trial each) at
concurrency C against one built-in mock process (fixed latency L), from its own command line,
start-up included, the way a user runs it:

* ``evalhydra``: ``python -m evalhydra`` on a registry eval, into a fresh SQLite store;
* ``inspect``: ``inspect eval`` of a ``Task`` (``json_dataset``, ``generate()``, ``exact()``) with
  ``--model openai/...``, ``--max-connections C --max-samples C``, ``--display none`` and
  ``--no-log-realtime`` (its fastest documented settings);
* ``promptfoo``: ``promptfoo eval`` of a config (the ``openai:chat`` provider, tests from JSONL,
  an ``equals`` assertion per test) with ``-j C --no-cache``, written to its SQLite and to JSON;
* ``lm-eval``: ``lm-eval run`` of a ``generate_until`` task (a local JSON dataset, ``exact_match``)
  with ``local-chat-completions``, ``num_concurrent=C``, no tokenizer.

The peers are installed by this script, each in its own environment under ``--peers-dir`` (a
virtualenv per Python tool, an npm prefix for promptfoo), at the pinned versions below; nothing
of theirs enters evalhydra's environment. Each run checks that the mock answered N chat requests
(Inspect adds one of its own at start) and that the tool reports every case passed (evalhydra and
promptfoo by exit status, lm-eval by its ``exact_match``, Inspect by its log's status); a run that
fails a check is reported as failed, not timed.

Sides are interleaved within each round and the figure is each peer's median wall time ÷
evalhydra's in the same run. The wire's floor, N·L/C, is printed beside them.

Usage:
    python bench/peers.py --n 2000,20000 --c 200 --latency-ms 50 --rounds 3
    python bench/peers.py --n 2000 --sides evalhydra,promptfoo --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import mock_process, numbered_registry  # noqa: E402

#: The versions measured; ``--latest`` installs the newest instead.
PINS = {"inspect": "inspect-ai==0.3.285 openai==3.63.0", "lm-eval": "lm_eval[api]==0.4.13",
        "promptfoo": "promptfoo@0.121.20"}
SIDES = ("evalhydra", "inspect", "promptfoo", "lm-eval")
EVAL_ID = "g.e"
PEERS_DIR = Path.home() / ".cache" / "evalhydra-bench" / "peers"
MODEL = "mock-model"


@dataclass
class Command:
    """One side's command line for one run: what to run, where, and how to tell it passed."""

    argv: list[str]
    env: dict[str, str]
    passed: Callable[[subprocess.CompletedProcess[str]], bool]


def _install(side: str, home: Path, latest: bool) -> None:
    """Install ``side`` under ``home`` unless it is there already."""
    spec = PINS[side].split()
    if latest:
        spec = [re.split("==|@", part)[0] for part in spec]
    if side == "promptfoo":
        if not (home / "node_modules" / ".bin" / "promptfoo").exists():
            home.mkdir(parents=True, exist_ok=True)
            (home / "package.json").write_text('{"private": true}\n')
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", *spec], cwd=home, check=True,
                           stdout=subprocess.DEVNULL)
        return
    if not (home / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
        subprocess.run([str(home / "bin" / "pip"), "install", "-q", *spec], check=True)


def _version(side: str, home: Path) -> str:
    """The installed version of ``side``'s package."""
    if side == "evalhydra":
        from importlib.metadata import version
        return version("evalhydra")
    if side == "promptfoo":
        meta = json.loads((home / "node_modules" / "promptfoo" / "package.json").read_text())
        return str(meta["version"])
    name = {"inspect": "inspect_ai", "lm-eval": "lm_eval"}[side]
    code = f"from importlib.metadata import version; print(version({name!r}))"
    return subprocess.run([str(home / "bin" / "python"), "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def _cases(n: int) -> list[tuple[str, str, str]]:
    """The eval's cases: (id, input, ideal), the same for every side."""
    return [(f"c{i}", f"Reply with exactly V{i}.", f"V{i}") for i in range(n)]


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` to ``path`` as JSON lines."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def evalhydra_command(work: Path, url: str, n: int, c: int) -> Command:
    """``python -m evalhydra`` on a registry eval of ``n`` cases into a fresh store."""
    registry = numbered_registry(work / "registry", n, eval_id=EVAL_ID)
    argv = [sys.executable, "-m", "evalhydra", f"registry={registry}", f"eval={EVAL_ID}",
            "service=mock", "service.mock.enabled=false", f"service.base_url={url}",
            f"store.path={work / 'evalhydra.db'}", f"run.concurrency={c}",
            f"service.max_concurrency={c}", "run.progress=false", f"hydra.run.dir={work / 'out'}"]
    return Command(argv, {}, lambda done: done.returncode == 0)


_INSPECT_TASK = '''\
from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.scorer import exact
from inspect_ai.solver import generate


@task
def peer():
    dataset = json_dataset("data.jsonl", FieldSpec(input="input", target="ideal", id="id"))
    return Task(dataset=dataset, solver=generate(), scorer=exact())
'''


def inspect_command(work: Path, url: str, n: int, c: int, home: Path) -> Command:
    """``inspect eval`` of a ``Task`` over ``n`` samples."""
    _write_lines(work / "data.jsonl", [{"id": i, "input": x, "ideal": y} for i, x, y in _cases(n)])
    (work / "task.py").write_text(_INSPECT_TASK)
    logs = work / "logs"
    argv = [str(home / "bin" / "inspect"), "eval", "task.py", "--model", f"openai/{MODEL}",
            "--model-base-url", url, "--max-connections", str(c), "--max-samples", str(c),
            "--log-dir", str(logs), "--display", "none", "--no-log-realtime"]

    def passed(done: subprocess.CompletedProcess[str]) -> bool:
        if done.returncode != 0:
            return False
        check = ("import sys; from inspect_ai.log import list_eval_logs, read_eval_log; "
                 "log = read_eval_log(list_eval_logs(sys.argv[1])[0], header_only=True); "
                 "print(log.status, log.results.scores[0].metrics['mean'].value)")
        out = subprocess.run([str(home / "bin" / "python"), "-c", check, str(logs)], capture_output=True,
                             text=True)
        return out.stdout.split() == ["success", "1.0"]

    return Command(argv, {"OPENAI_API_KEY": "unused"}, passed)


def promptfoo_command(work: Path, url: str, n: int, c: int, home: Path) -> Command:
    """``promptfoo eval`` of a config with ``n`` tests, each with an ``equals`` assertion."""
    _write_lines(work / "tests.jsonl", [{"vars": {"input": x}, "assert": [{"type": "equals", "value": y}]}
                                        for _, x, y in _cases(n)])
    provider = {"id": f"openai:chat:{MODEL}", "config": {"apiBaseUrl": url, "apiKey": "unused"}}
    config = {"prompts": ["{{input}}"], "tests": "file://tests.jsonl", "providers": [provider]}
    (work / "promptfooconfig.yaml").write_text(json.dumps(config))  # YAML is a superset of JSON
    argv = [str(home / "node_modules" / ".bin" / "promptfoo"), "eval", "-c", "promptfooconfig.yaml",
            "-j", str(c), "--no-cache", "--no-progress-bar", "--no-table", "-o", str(work / "out.json")]
    env = {"PROMPTFOO_CONFIG_DIR": str(work / "promptfoo"), "PROMPTFOO_DISABLE_TELEMETRY": "1",
           "PROMPTFOO_DISABLE_UPDATE": "1"}
    return Command(argv, env, lambda done: done.returncode == 0)


_LM_TASK = """\
task: peer_bench
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{input}}}}"
doc_to_target: "{{{{ideal}}}}"
generation_kwargs:
  until: []
  max_gen_toks: 16
metric_list:
  - metric: exact_match
"""


def lm_eval_command(work: Path, url: str, n: int, c: int, home: Path) -> Command:
    """``lm-eval run`` of a ``generate_until`` task over ``n`` documents."""
    data = _write_lines(work / "data.jsonl", [{"input": x, "ideal": y} for _, x, y in _cases(n)])
    tasks = work / "tasks"
    tasks.mkdir()
    (tasks / "peer.yaml").write_text(_LM_TASK.format(data=data))
    out = work / "out"
    args = (f"model={MODEL},base_url={url}/chat/completions,num_concurrent={c},max_retries=3,"
            "tokenized_requests=False,tokenizer_backend=None")
    argv = [str(home / "bin" / "lm-eval"), "run", "--model", "local-chat-completions", "--model_args", args,
            "--apply_chat_template", "--tasks", "peer_bench", "--include_path", str(tasks),
            "--output_path", str(out)]

    def passed(done: subprocess.CompletedProcess[str]) -> bool:
        found = list(out.rglob("results_*.json"))
        if done.returncode != 0 or not found:
            return False
        scores = json.loads(found[0].read_text())["results"]["peer_bench"]
        return bool(scores.get("exact_match,none") == 1.0)

    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OPENAI_API_KEY": "unused",
           "HF_DATASETS_CACHE": str(work / "hf")}
    return Command(argv, env, passed)


PEER_COMMANDS: dict[str, Callable[[Path, str, int, int, Path], Command]] = {
    "inspect": inspect_command, "promptfoo": promptfoo_command, "lm-eval": lm_eval_command}


def _mock(url: str, what: str) -> dict[str, Any]:
    """GET ``/_mock/stats`` or POST ``/_mock/reset`` on the mock at ``url``."""
    post = what == "reset"
    request = urllib.request.Request(f"{url}/_mock/{what}", data=b"{}" if post else None,
                                     method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=5) as response:
        return dict(json.loads(response.read()))


def run_side(side: str, url: str, n: int, c: int, peers: Path, timeout: float) -> dict[str, Any]:
    """Run one side once in a fresh directory; its wall time, CPU and checks."""
    work = Path(tempfile.mkdtemp(prefix=f"peers-{side}-"))
    try:
        if side == "evalhydra":
            command = evalhydra_command(work, url, n, c)
        else:
            command = PEER_COMMANDS[side](work, url, n, c, peers / side)
        _mock(url, "reset")
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(command.argv, cwd=work, env={**os.environ, **command.env}, capture_output=True,
                              text=True, timeout=timeout)
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats = _mock(url, "stats")
        sent = int(stats["chat_requests"])
        ok = command.passed(done) and n <= sent <= n + 1
        if not ok:
            print(f"{side}: exit {done.returncode}, {sent} sent\n{done.stderr[-2000:]}", file=sys.stderr)
        return {"side": side, "n": n, "wall_s": round(wall, 2), "sent": sent, "passed": ok,
                "most_in_flight": stats["max_in_flight"],
                "cpu_s": round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 2)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(rows: list[dict[str, Any]], n: int, floor_s: float) -> list[dict[str, Any]]:
    """Per side at ``n``: median wall and CPU over rounds, and the ratio to evalhydra's median."""
    medians = {}
    for side in dict.fromkeys(row["side"] for row in rows):
        mine = [row for row in rows if row["side"] == side]
        medians[side] = {"side": side, "n": n, "passed": all(row["passed"] for row in mine),
                         "wall_s": statistics.median(row["wall_s"] for row in mine),
                         "cpu_s": statistics.median(row["cpu_s"] for row in mine),
                         "most_in_flight": max(row["most_in_flight"] for row in mine)}
    base = medians.get("evalhydra", {}).get("wall_s")
    for figures in medians.values():
        figures["ratio_to_evalhydra"] = round(figures["wall_s"] / base, 2) if base else None
        figures["ratio_to_wire"] = round(figures["wall_s"] / floor_s, 2) if floor_s else None
    return list(medians.values())


def main() -> int:
    """Install the peers, run every side at every N, print JSON lines; exit 0 if every run passed."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", default="2000,20000", help="comma-separated case counts")
    parser.add_argument("--c", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--peers-dir", type=Path, default=PEERS_DIR, help="where the peers are installed")
    parser.add_argument("--latest", action="store_true", help="install the newest releases, not the pins")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds for one side's run")
    args = parser.parse_args()
    sides = [side.strip() for side in args.sides.split(",")]
    unknown = set(sides) - set(SIDES)
    if unknown:
        parser.error(f"unknown sides {sorted(unknown)}; choose from {', '.join(SIDES)}")
    for side in sides:
        if side != "evalhydra":
            _install(side, args.peers_dir / side, args.latest)
    print(json.dumps({"versions": {side: _version(side, args.peers_dir / side) for side in sides},
                      "c": args.c, "latency_ms": args.latency_ms, "rounds": args.rounds}), flush=True)
    all_passed = True
    with mock_process("--latency-ms", str(args.latency_ms)) as url:
        for n in (int(part) for part in args.n.split(",")):
            rows = []
            for _ in range(args.rounds):
                for side in sides:
                    rows.append(run_side(side, url, n, args.c, args.peers_dir, args.timeout))
                    print(json.dumps(rows[-1]), flush=True)
            floor = n * args.latency_ms / 1000 / args.c
            for figures in summarize(rows, n, floor):
                all_passed &= figures["passed"]
                print(json.dumps({"median": figures, "wire_floor_s": round(floor, 2)}), flush=True)
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
