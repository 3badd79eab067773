"""Throughput of evalhydra against the strongest floors, in one run against one mock server.

Every side sends the same N chat requests at concurrency C to the built-in mock
(one process for the whole run, fixed latency L) and checks each reply's
content; each side runs in its own subprocess, so its CPU time and peak RSS are
its own. The sides:

* ``raw trio``: C trio workers, each on one raw ``SocketStream``, writing a
  pre-encoded request and reading the reply by its ``Content-Length`` (the
  floor under trio: no HTTP library at all);
* ``aiohttp``: C asyncio workers over one ``aiohttp.ClientSession`` with C
  connections (what a user would write instead; ``pip install -e '.[bench]'``);
* ``bare lean``: C trio workers sending ``httpx.Request``s straight to one
  :class:`~evalhydra.http.lean.LeanTransport` (evalhydra's wire, nothing else);
* ``evalhydra lean`` / ``evalhydra httpx``: a registry eval with exact_match,
  run by evalhydra's runner into a real store, with ``service.transport`` set,
  with start-up's objects frozen as the command line freezes them;
* ``evalhydra fixed``: evalhydra lean with ``service.adaptive=false`` (a fixed concurrency), so
  the run shows what adaptive concurrency costs against an endpoint that has no limit;
* ``evalhydra cache`` / ``evalhydra key``: evalhydra lean with the response cache on (a fresh
  one: a lookup and a write per cell), or with an API key sent (read and masked per cell): each
  feature's CPU per cell is the side's minus evalhydra lean's in the same run.

Figures that matter are ratios within the run, so they survive a noisy machine:
evalhydra (lean) wall ÷ raw trio wall (target ≤ 1.3), evalhydra (lean) wall ÷
aiohttp wall (target ≤ 1), efficiency = ideal ÷ wall with ideal = N·L/C, and
evalhydra's own CPU per cell: (evalhydra lean CPU − bare lean CPU) ÷ N, the
runner, matcher, row building, store writer and progress on top of the wire
(target ≤ 60 µs). CPU is counted from the first request to the last result
(evalhydra: ``execute``; the store's writer thread included), not start-up.
The store floor, measured after the evalhydra-lean run: SQLite's CPU to insert
that run's rows again (prebuilt tuples, the writer's statements and batches,
the same schema) per cell, the part of the 60 µs the store's design takes.

With ``--baseline DIR`` (a checkout of another commit, e.g. ``git worktree add /tmp/main main``)
the side ``baseline-lean`` runs evalhydra lean from that tree (``PYTHONPATH=DIR``), interleaved
with this tree's each round, and the run prints this tree's own CPU per cell and store floor
as ratios to the baseline's: a change's cost, measured in one run.

Usage:
    python bench/throughput.py --n 20000 --c 200 --latency-ms 50
    python bench/throughput.py --n 20000 --c 200 --latency-ms 0 --rounds 5 \
        --sides bare-lean,evalhydra-lean,baseline-lean --baseline /tmp/main
    python bench/throughput.py --n 10000 --c 500 --latency-ms 1000 --sides raw,evalhydra-lean
    python bench/throughput.py --n 200000 --c 200 --latency-ms 0 --sides evalhydra-lean
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

CASES_MAX = 2000  # the dataset repeats over trials beyond this many cases
SIDES = ("raw", "aiohttp", "bare-lean", "evalhydra-lean", "evalhydra-httpx", "evalhydra-fixed",
         "evalhydra-cache", "evalhydra-key", "baseline-lean")
#: A per-cell feature each side turns on over evalhydra-lean's defaults, so its cost is the side's
#: CPU per cell minus evalhydra-lean's in the same run (``fixed`` turns adaptive limits off).
FEATURES = {
    "fixed": ["service.adaptive=false"],
    "cache": ["cache.enabled=true"],  # a fresh cache (beside the store): a lookup and a write a cell
    "key": ["service.api_key_env=EVALHYDRA_BENCH_KEY"],  # a key sent: headers read and masked a cell
}
#: The key the ``key`` side sends (the mock ignores it); long enough to be masked.
BENCH_KEY = "sk-bench-0123456789abcdef"
_LENGTH = re.compile(rb"content-length:[ \t]*(\d+)", re.I)


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _payload(i: int) -> bytes:
    message = {"role": "user", "content": f"Reply with exactly V{i}."}
    return json.dumps({"model": "mock-model", "messages": [message], "stream": False},
                      separators=(",", ":")).encode()


def _right(body: bytes, i: int) -> bool:
    return bool(json.loads(body)["choices"][0]["message"]["content"] == f"V{i}")


# ---------------------------------------------------------------- trio sides


async def _trio_workers(n: int, c: int, call: Callable[[int, int], Awaitable[bool]]) -> int:
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


async def _raw(url: str, n: int, c: int) -> int:
    """Raw trio sockets: one connection per worker, the request pre-encoded, the reply read by length."""
    import trio

    host_port = url.split("://", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    path = "/" + url.split("://", 1)[1].split("/", 1)[1] + "/chat/completions"
    head = (f"POST {path} HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n").encode()
    requests = [head % len(body) + body for body in map(_payload, range(min(n, CASES_MAX)))]
    streams = [await trio.open_tcp_stream(host, int(port)) for _ in range(c)]

    async def call(k: int, i: int) -> bool:
        stream = streams[k]
        await stream.send_all(requests[i])
        data = b""
        while (end := data.find(b"\r\n\r\n")) < 0:
            data += await stream.receive_some(65536)
        match = _LENGTH.search(data, 0, end)
        assert match is not None
        total = end + 4 + int(match.group(1))
        while len(data) < total:
            data += await stream.receive_some(65536)
        return _right(data[end + 4:total], i)

    try:
        return await _trio_workers(n, c, call)
    finally:
        for stream in streams:
            await stream.aclose()


async def _bare_lean(url: str, n: int, c: int) -> int:
    """httpx.Request straight to evalhydra's LeanTransport, headers and URL built once."""
    import httpx

    from evalhydra.http.lean import LeanTransport

    transport = LeanTransport(c)
    target = httpx.URL(f"{url}/chat/completions")
    headers = [(b"host", target.netloc), (b"content-type", b"application/json"),
               (b"accept", b"application/json")]
    timeout = {"timeout": httpx.Timeout(60.0).as_dict()}
    bodies = [_payload(i) for i in range(min(n, CASES_MAX))]

    async def call(k: int, i: int) -> bool:
        body = bodies[i]
        request = httpx.Request("POST", target, headers=[*headers, (b"content-length", b"%d" % len(body))],
                                stream=httpx.ByteStream(body), extensions=timeout)
        response = await transport.handle_async_request(request)
        try:
            raw = await response.aread()
        finally:
            await response.aclose()
        return _right(raw, i)

    try:
        return await _trio_workers(n, c, call)
    finally:
        await transport.aclose()


# ---------------------------------------------------------------- aiohttp


def _aiohttp(url: str, n: int, c: int) -> tuple[int, float, float]:
    """asyncio + aiohttp: C workers over one session of C connections. Returns (ok, wall, cpu)."""
    import asyncio

    import aiohttp

    bodies = [_payload(i) for i in range(min(n, CASES_MAX))]
    target = f"{url}/chat/completions"
    headers = {"content-type": "application/json"}

    async def run() -> tuple[int, float, float]:
        queue: asyncio.Queue[int] = asyncio.Queue(c)
        ok = [0]
        connector = aiohttp.TCPConnector(limit=c)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def work() -> None:
                while (i := await queue.get()) >= 0:
                    async with session.post(target, data=bodies[i], headers=headers) as response:
                        ok[0] += _right(await response.read(), i)

            start, cpu = time.perf_counter(), _cpu_s()
            workers = [asyncio.create_task(work()) for _ in range(c)]
            for i in range(n):
                await queue.put(i % CASES_MAX)
            for _ in range(c):
                await queue.put(-1)
            await asyncio.gather(*workers)
            return ok[0], time.perf_counter() - start, _cpu_s() - cpu

    return asyncio.run(run())


# ---------------------------------------------------------------- evalhydra


def _registry(root: Path, n: int) -> tuple[Path, int]:
    cases = min(n, CASES_MAX)
    trials = math.ceil(n / cases)
    data = root / "data" / "b" / "e"
    data.mkdir(parents=True)
    with (data / "test.jsonl").open("w") as out:
        for i in range(cases):
            case = {"id": f"c{i}", "input": f"Reply with exactly V{i}.", "ideal": f"V{i}"}
            out.write(json.dumps(case) + "\n")
    (root / "evals").mkdir()
    (root / "evals" / "e.json").write_text(json.dumps({
        "id": "bench.e", "group": "bench", "description": "throughput", "dataset_path": "data/b/e/test.jsonl",
        "split": "test", "matcher": {"kind": "exact_match"}, "default_run_count": trials}))
    (root / "services.json").write_text("[]")
    return root, cases * trials


def _evalhydra(url: str, n: int, c: int, workdir: Path, transport: str) -> dict[str, Any]:
    import trio

    # a feature side (FEATURES): the lean transport with that feature on, or adaptive limits off
    features = FEATURES.get(transport, [])
    if transport in FEATURES:
        transport = "lean"

    from evalhydra.compose.compose import compose_config
    from evalhydra.execute.runner import execute
    from evalhydra.plan.build import build_plan
    from evalhydra.plan.cells import count_cells
    from evalhydra.reports.writer import write_run_reports
    from evalhydra.store.db import open_store

    registry, cells = _registry(workdir / "reg", n)
    cfg = compose_config([
        f"registry={registry}", "service=mock", "service.mock.enabled=false", f"service.base_url={url}",
        f"service.max_concurrency={c}", f"service.transport={transport}", f"run.concurrency={c}",
        f"store.path={workdir / 'bench.db'}", "run.progress=false", "eval=bench.e",
        f"cache.path={workdir / 'cache.db'}", *features,
    ])
    # As `python -m evalhydra` does once Hydra has composed the config (evalhydra.cli.startup.resume_gc):
    # what start-up made stays out of the run's collections. Left in, the collection at the run's
    # end (evalhydra.execute.gcpace) walked every object of this process: 36-85 ms of the run's wall.
    gc.freeze()
    plan = build_plan(cfg)
    store = open_store(plan.store_path)
    _mock_post(url, "reset")  # the server's counters, this side's alone
    start, cpu = time.perf_counter(), _cpu_s()
    outcome = trio.run(lambda: execute(plan, store, total=count_cells(plan)))
    wall, cpu = time.perf_counter() - start, _cpu_s() - cpu
    most_in_flight = int(_mock_get(url, "stats")["max_in_flight"])
    passed = store.conn.execute("select sum(passed) from results").fetchone()[0]
    stored = store.conn.execute("select count(*) from results").fetchone()[0]
    start = time.perf_counter()
    write_run_reports(store, [outcome.run_id], workdir / "report", formats=("json", "md"))
    report_s = time.perf_counter() - start
    peak_rss_mb = _peak_rss_mb()  # the run's and its reports' peak, before the store floor
    return {"wall_s": wall, "cpu_s": cpu, "ok": passed, "stored": stored, "cells": cells,
            "report_s": report_s, "peak_rss_mb": peak_rss_mb, "most_in_flight": most_in_flight,
            "store_floor_us": _store_floor_us(store, workdir / "floor.db")}


def _mock_get(url: str, what: str) -> dict[str, Any]:
    """``GET <url>/_mock/<what>`` of the mock the sides send to."""
    with urllib.request.urlopen(f"{url}/_mock/{what}", timeout=10) as reply:
        return dict(json.load(reply))


def _mock_post(url: str, what: str) -> None:
    """``POST <url>/_mock/<what>`` (``reset``: zero the server's counters)."""
    request = urllib.request.Request(f"{url}/_mock/{what}", data=b"{}", method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10):
        pass


def _store_floor_us(store: Any, path: Path) -> float:
    """SQLite's own CPU per cell: this run's rows re-inserted into a fresh store.

    The rows (result, run-cell link, attempts) are read back as tuples and written
    with :meth:`~evalhydra.store.db.Store.write_values`, what the writer's
    ``Store.write`` does once it has built them (multi-row INSERTs, the same schema
    and indexes), 1,000 cells per transaction: the part of evalhydra's own CPU per
    cell that the store's design fixes.
    """
    from evalhydra.store.db import open_store
    from evalhydra.store.rows import ATTEMPT_FIELDS, RESULT_FIELDS

    columns = ", ".join(f'"{name}"' for name in RESULT_FIELDS)
    cursors = [store.conn.execute(f"select {columns} from results order by rowid"),
               store.conn.execute("select run_id, cell_key from run_cells order by rowid"),
               store.conn.execute(f"select {', '.join(ATTEMPT_FIELDS)} from attempts order by rowid")]
    fresh = open_store(path)
    cpu, cells = 0.0, 0
    while True:  # 1,000 cells' rows per transaction, read outside the timed part (memory stays flat)
        results, members, attempts = (cursor.fetchmany(1000) for cursor in cursors)
        if not (results or members or attempts):
            break
        cells += len(results)
        start = time.thread_time()
        fresh.write_values(results, members, attempts)
        cpu += time.thread_time() - start
    fresh.close()
    return cpu / max(cells, 1) * 1e6


def worker(side: str, url: str, n: int, c: int) -> dict[str, Any]:
    """Run one side in this process and return its figures (imports are not counted)."""
    import httpx  # noqa: F401
    import trio

    import evalhydra.http.lean  # noqa: F401

    if side == "aiohttp":
        ok, wall, cpu = _aiohttp(url, n, c)
        return {"wall_s": wall, "cpu_s": cpu, "ok": ok}
    if side.startswith(("evalhydra-", "baseline-")):  # baseline-lean: another tree's evalhydra, lean
        with tempfile.TemporaryDirectory() as tmp:
            return _evalhydra(url, n, c, Path(tmp), side.split("-", 1)[1])
    loop = {"raw": _raw, "bare-lean": _bare_lean}[side]
    start, cpu = time.perf_counter(), _cpu_s()
    ok = trio.run(loop, url, n, c)
    return {"wall_s": time.perf_counter() - start, "cpu_s": _cpu_s() - cpu, "ok": ok}


def _run_side(side: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, EVALHYDRA_BENCH_KEY=BENCH_KEY)
    if side == "baseline-lean":  # the baseline tree's evalhydra comes first on the path
        env["PYTHONPATH"] = os.pathsep.join([args.baseline, *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run(
        [sys.executable, __file__, "--worker", side, "--url", url, "--n", str(args.n), "--c", str(args.c)],
        capture_output=True, text=True, check=False, env=env,
    )
    if out.returncode != 0:
        raise SystemExit(f"side {side} failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _start_mock(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalhydra.services.mock", "--port", "0", "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip().rsplit(" ", 1)[-1]


def main() -> None:
    """Parse arguments, run every side against one mock, print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--c", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--sides", default=",".join(s for s in SIDES if s != "baseline-lean"),
                        help=f"comma-separated, of {', '.join(SIDES)}")
    parser.add_argument("--rounds", type=int, default=1, help="run every side this many times, interleaved")
    parser.add_argument("--baseline", metavar="DIR", help="a source tree the side baseline-lean runs")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = worker(args.worker, args.url, args.n, args.c)
        print(json.dumps({"peak_rss_mb": _peak_rss_mb(), **result}))
        return
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        parser.error(f"unknown side(s) {', '.join(unknown)}; choose from {', '.join(SIDES)}")
    if "baseline-lean" in sides and not args.baseline:
        parser.error("the side baseline-lean needs --baseline DIR (a checkout to compare with)")
    mock, url = _start_mock(args.latency_ms)
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    try:
        for _ in range(args.rounds):
            for side in sides:
                results[side].append(_run_side(side, url, args))
    finally:
        mock.terminate()
        mock.wait(10)
    _print_table(results, args)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _print_table(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    ideal = args.n * args.latency_ms / 1000 / args.c
    print(f"N={args.n} C={args.c} L={args.latency_ms:g} ms  ideal={ideal:.2f} s  rounds={args.rounds}")
    wall = {side: _median([r["wall_s"] for r in rs]) for side, rs in results.items()}
    floor = wall.get("raw")
    print(f"{'side':16s} {'wall s':>8s} {'÷ raw':>6s} {'effic.':>6s} {'CPU µs/req':>10s} {'peak MB':>8s}  ok")
    for side, rs in results.items():
        r = min(rs, key=lambda x: abs(x["wall_s"] - wall[side]))
        ratio = f"{wall[side] / floor:6.3f}" if floor else "     -"
        eff = ideal / wall[side] if wall[side] else 0.0
        extra = (f"  stored={r['stored']} report={r['report_s']:.2f} s most in flight={r['most_in_flight']}"
                 if "stored" in r else "")
        print(f"{side:16s} {wall[side]:8.2f} {ratio} {eff:6.3f} {r['cpu_s'] / args.n * 1e6:10.1f} "
              f"{r['peak_rss_mb']:8.1f}  {r['ok']}{extra}")
    if "evalhydra-lean" in wall:
        for base in ("raw", "aiohttp"):
            if base in wall:
                runs = [e["wall_s"] / b["wall_s"] for e, b in zip(results["evalhydra-lean"], results[base],
                                                                  strict=True)]
                print(f"evalhydra-lean wall / {base} wall = " + ", ".join(f"{x:.3f}" for x in runs)
                      + f"  (median {_median(runs):.3f})")
        if "bare-lean" in wall:
            own = [(e["cpu_s"] - b["cpu_s"]) / args.n * 1e6
                   for e, b in zip(results["evalhydra-lean"], results["bare-lean"], strict=True)]
            print("evalhydra own CPU per cell (evalhydra-lean − bare-lean) = "
                  + ", ".join(f"{x:.1f}" for x in own) + f" µs  (median {_median(own):.1f})")
        floors = [r["store_floor_us"] for r in results["evalhydra-lean"]]
        print("store floor per cell (SQLite alone: this run's rows re-inserted into a fresh store) = "
              + ", ".join(f"{x:.1f}" for x in floors) + f" µs  (median {_median(floors):.1f})")
    if "baseline-lean" in wall and "evalhydra-lean" in wall:
        _print_against_baseline(results, args.n)
    if "evalhydra-lean" in wall:
        _print_feature_costs(results, args.n)


def _print_feature_costs(results: dict[str, list[dict[str, Any]]], n: int) -> None:
    """Each feature side's CPU per cell minus evalhydra-lean's, round by round: what it costs."""
    for feature in FEATURES:
        side = f"evalhydra-{feature}"
        if side in results:
            cost = [(f["cpu_s"] - e["cpu_s"]) / n * 1e6
                    for f, e in zip(results[side], results["evalhydra-lean"], strict=True)]
            print(f"{side} CPU per cell − evalhydra-lean's = " + ", ".join(f"{x:.1f}" for x in cost)
                  + f" µs  (median {_median(cost):.1f})")


def _print_against_baseline(results: dict[str, list[dict[str, Any]]], n: int) -> None:
    """This tree's costs per cell as ratios to the baseline tree's, round by round."""
    pairs = list(zip(results["evalhydra-lean"], results["baseline-lean"], strict=True))
    floor = [e["store_floor_us"] / b["store_floor_us"] for e, b in pairs]
    print("store floor ÷ baseline's = " + ", ".join(f"{x:.3f}" for x in floor)
          + f"  (median {_median(floor):.3f})")
    cpu = [e["cpu_s"] / b["cpu_s"] for e, b in pairs]
    print("evalhydra-lean CPU ÷ baseline's = " + ", ".join(f"{x:.3f}" for x in cpu)
          + f"  (median {_median(cpu):.3f})")
    if "bare-lean" in results:
        own = [(e["cpu_s"] - w["cpu_s"]) / (b["cpu_s"] - w["cpu_s"])
               for (e, b), w in zip(pairs, results["bare-lean"], strict=True)]
        print("own CPU per cell ÷ baseline's (each − bare-lean) = " + ", ".join(f"{x:.3f}" for x in own)
              + f"  (median {_median(own):.3f}, {n} cells)")


if __name__ == "__main__":
    main()
