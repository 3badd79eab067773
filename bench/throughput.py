"""Throughput of evalhydra against the ideal and against a bare trio + httpx loop.

Both sides send the same N chat requests at concurrency C to the built-in mock
(its own process, fixed latency L); each side runs in its own subprocess so CPU
time and peak RSS are its own. The figures that matter are ratios measured in
the same run, so they survive a noisy machine:

* ``evalhydra wall / bare wall`` (target ≤ 1.15 at N=20000, C=200, L=50 ms)
* ``efficiency = ideal / wall`` with ideal = N·L/C (target ≥ 0.95 at N=10000, C=500, L=1000 ms)
* ``peak RSS`` (target < 300 MB at N=200000)

The bare loop is the issue's floor: ``httpx.AsyncClient.post`` over several
clients of 16 connections. evalhydra itself sends through ``httpx`` transports
directly (``evalhydra/http/pool.py``), which skips the client's
per-request work; ``--floor transport`` makes the bare loop do the same, so
the ratio then shows evalhydra's own overhead alone.

Usage:
    python bench/throughput.py --n 20000 --c 200 --latency-ms 50
    python bench/throughput.py --n 20000 --c 200 --latency-ms 50 --floor transport
    python bench/throughput.py --n 10000 --c 500 --latency-ms 1000
    python bench/throughput.py --n 200000 --c 200 --latency-ms 0 --skip-bare
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_MAX = 2000  # the dataset repeats over trials beyond this many cases


def _usage() -> dict[str, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024}


def _payload(i: int) -> dict[str, Any]:
    return {
        "model": "mock-model",
        "messages": [{"role": "user", "content": f"Reply with exactly V{i}."}],
        "stream": False,
    }


async def _bare(url: str, n: int, c: int, floor: str = "client") -> int:
    """A well-built bare loop: C long-lived workers over ceil(C/16) clients of 16 connections
    (``floor="transport"``: over ceil(C/16) ``httpx.AsyncHTTPTransport`` of 16 connections,
    with the URL and headers built once, as evalhydra sends)."""
    import httpx

    limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
    shards = math.ceil(c / 16)
    if floor == "transport":
        pool: list[Any] = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(shards)]
        target = httpx.URL(f"{url}/chat/completions")
        headers = httpx.Headers({"content-type": "application/json", "accept": "application/json"})
        timeout = {"timeout": httpx.Timeout(60.0).as_dict()}

        async def call(k: int, i: int) -> bool:
            body = json.dumps(_payload(i)).encode()
            request = httpx.Request("POST", target, content=body, headers=headers, extensions=timeout)
            response = await pool[k % shards].handle_async_request(request)
            try:
                raw = await response.aread()
            finally:
                await response.aclose()
            return bool(json.loads(raw)["choices"][0]["message"]["content"] == f"V{i}")
    else:
        pool = [httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(60.0)) for _ in range(shards)]

        async def call(k: int, i: int) -> bool:
            resp = await pool[k % shards].post(f"{url}/chat/completions", json=_payload(i))
            return bool(resp.json()["choices"][0]["message"]["content"] == f"V{i}")

    try:
        return await _workers(n, c, call)
    finally:
        for item in pool:
            await item.aclose()


async def _workers(n: int, c: int, call: Callable[[int, int], Awaitable[bool]]) -> int:
    """C long-lived workers make N calls ``call(worker, i)``; returns how many were right."""
    import trio

    send, receive = trio.open_memory_channel[int](c)
    ok = [0]

    async def produce() -> None:
        async with send:
            for i in range(n):
                await send.send(i % CASES_MAX)

    async def work(k: int, rx: trio.MemoryReceiveChannel[int]) -> None:
        async with rx:
            async for i in rx:
                right = await call(k, i)  # not `ok[0] += await …`: that reads ok[0] before awaiting
                ok[0] += right

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        async with receive:
            for k in range(c):
                nursery.start_soon(work, k, receive.clone())
    return ok[0]


def _registry(root: Path, n: int) -> tuple[Path, int]:
    cases = min(n, CASES_MAX)
    trials = math.ceil(n / cases)
    data = root / "data" / "b" / "e"
    data.mkdir(parents=True)
    with (data / "test.jsonl").open("w") as out:
        for i in range(cases):
            out.write(
                json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.", "ideal": f"V{i}"}) + "\n"
            )
    (root / "evals").mkdir()
    (root / "evals" / "e.json").write_text(
        json.dumps(
            {
                "id": "bench.e",
                "group": "bench",
                "description": "throughput",
                "dataset_path": "data/b/e/test.jsonl",
                "split": "test",
                "matcher": {"kind": "exact_match"},
                "default_run_count": trials,
            }
        )
    )
    (root / "services.json").write_text("[]")
    return root, cases * trials


def _evalhydra(url: str, n: int, c: int, workdir: Path) -> dict[str, Any]:
    import trio

    from evalhydra.config.compose import compose_config
    from evalhydra.execute.runner import execute
    from evalhydra.plan.build import build_plan
    from evalhydra.plan.cells import count_cells
    from evalhydra.store.db import open_store

    registry, cells = _registry(workdir / "reg", n)
    cfg = compose_config(
        [
            f"registry={registry}",
            "service=mock",
            "service.mock.enabled=false",
            f"service.base_url={url}",
            f"service.max_concurrency={c}",
            f"run.concurrency={c}",
            f"store.path={workdir / 'bench.db'}",
            "run.progress=false",
            "eval=bench.e",
        ]
    )
    plan = build_plan(cfg)
    store = open_store(plan.store_path)
    start = time.perf_counter()
    outcome = trio.run(lambda: execute(plan, store, total=count_cells(plan)))
    wall = time.perf_counter() - start
    passed = store.conn.execute("select sum(passed) from results").fetchone()[0]
    stored = store.conn.execute("select count(*) from results").fetchone()[0]
    start = time.perf_counter()
    from evalhydra.reports.writer import write_run_reports

    write_run_reports(store, [outcome.run_id], workdir / "report", formats=("json", "md"))
    report_s = time.perf_counter() - start
    return {"wall_s": wall, "ok": passed, "stored": stored, "cells": cells, "report_s": report_s}


def worker(kind: str, url: str, n: int, c: int, floor: str = "client") -> None:
    """Run one side and print its figures as JSON (called in a subprocess)."""
    import trio

    with tempfile.TemporaryDirectory() as tmp:
        if kind == "bare":
            start = time.perf_counter()
            ok = trio.run(_bare, url, n, c, floor)
            result: dict[str, Any] = {"wall_s": time.perf_counter() - start, "ok": ok}
        else:
            result = _evalhydra(url, n, c, Path(tmp))
    print(json.dumps({**result, **_usage()}))


def _run_side(kind: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--url", url, "--n", str(args.n), "--c", str(args.c),
         "--floor", args.floor],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _start_mock(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalhydra.testing.mock", "--port", "0", "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip().rsplit(" ", 1)[-1]


def main() -> None:
    """Parse arguments, run both sides, print the comparison."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--c", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--skip-bare", action="store_true")
    parser.add_argument("--floor", choices=["client", "transport"], default="client",
                        help="the bare loop: AsyncClient.post (the issue's floor) or httpx transports")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate the two sides this many times; report the median ratio")
    parser.add_argument("--worker", choices=["bare", "evalhydra"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.url, args.n, args.c, args.floor)
        return
    mock, url = _start_mock(args.latency_ms)
    rounds: list[dict[str, dict[str, Any]]] = []
    try:
        for _ in range(args.rounds):
            sides = {} if args.skip_bare else {"bare trio+httpx": _run_side("bare", url, args)}
            sides["evalhydra"] = _run_side("evalhydra", url, args)
            rounds.append(sides)
    finally:
        mock.terminate()
        mock.wait(10)
    ideal = args.n * args.latency_ms / 1000 / args.c
    print(f"N={args.n} C={args.c} L={args.latency_ms:g} ms  ideal={ideal:.2f} s  rounds={args.rounds}"
          f"  floor={args.floor}")
    for sides in rounds:
        for name, r in sides.items():
            _print_side(name, r, ideal, args.n)
    if not args.skip_bare:
        ratios = sorted(s["evalhydra"]["wall_s"] / s["bare trio+httpx"]["wall_s"] for s in rounds)
        print("evalhydra wall / bare wall = " + ", ".join(f"{r:.3f}" for r in ratios)
              + f"  (median {ratios[len(ratios) // 2]:.3f})")


def _print_side(name: str, r: dict[str, Any], ideal: float, n: int) -> None:
    eff = ideal / r["wall_s"] if r["wall_s"] else 0.0
    extra = f"  stored={r['stored']} report={r['report_s']:.2f} s" if "stored" in r else ""
    print(f"{name:16s} wall={r['wall_s']:7.2f} s  efficiency={eff:5.3f}  req/s={n / r['wall_s']:8.1f}  "
          f"cpu={r['cpu_s']:6.2f} s  peak_rss={r['peak_rss_mb']:6.1f} MB  ok={r['ok']}{extra}")

if __name__ == "__main__":
    main()
