"""Runs against a rate-limited provider: does every cell get scored, how
close to the limit does the run go, and how often is the provider refused?

The provider is the built-in mock in its own process: a token bucket of 150 requests per
second with a burst of 20 in front of a 50 ms chat server, refusing with ``429`` and the headers
of one provider's dialect (``--rate-limit-dialect``: ``openai``, OpenAI's ``x-ratelimit-*`` with
the time to a full budget and ``Retry-After: 1``; ``bucket``, the same names with the time to the
next request and ``Retry-After`` in whole seconds; ``anthropic``, ``anthropic-ratelimit-*`` with
RFC 3339 resets; ``azure``, ``retry-after-ms``; ``bare``, no header). evalhydra runs as a user
would, from the command line, with ``run.concurrency=256 service.max_concurrency=256`` and a retry
policy of 3 attempts, 429 retried. Scenarios:

1. ``steady-DIALECT``: 3,000 cells at 150 requests/s (the limit's own time: 20 s), per dialect;
2. ``drop``: 1,500 cells, the limit dropping from 150 to 50 requests/s after 5 s (750 at 150/s
   then 750 at 50/s: 20 s), OpenAI's dialect.

Each prints the wall time of the run (its ``runs`` row, so without the interpreter's start-up),
its ratio to the limit's time, cells scored, and the refusals as a share of admitted requests,
with ``service.adaptive=true`` (the default) and, for contrast, ``false``.

Usage::

    python bench/rate_limits.py [--scenario NAME ...] [--no-contrast]

Targets: steady: all scored, wall ≤ 1.25 × 20 s, 429s ≤ 15 % of admitted; drop: all scored,
wall ≤ 1.3 × 20 s (its 429s are reported: the requests in flight when the rate drops are refused).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import mock_process, numbered_registry  # noqa: E402

DIALECTS = ("openai", "bucket", "anthropic", "azure", "bare")
SCENARIOS = {
    # name: (cells, mock flags, the limit's own time in seconds, wall target ratio, 429 share target
    # or None)
    **{f"steady-{dialect}": (3000, ["--rate-limit-rps", "150", "--rate-limit-dialect", dialect], 3000 / 150,
                             1.25, 0.15) for dialect in DIALECTS},
    "drop": (1500, ["--rate-limit-rps", "150", "--rate-limit-later-rps", "50",
                    "--rate-limit-later-after-s", "5"], 5 + (1500 - 5 * 150) / 50, 1.3, None),
}


def _stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/_mock/stats") as reply:
        return dict(json.load(reply))


def _wall_s(db: Path) -> float:
    conn = sqlite3.connect(db)
    started, finished = conn.execute("select started_at, finished_at from runs").fetchone()
    scored = conn.execute("select count(*) from results where error_kind is null").fetchone()[0]
    conn.close()
    parse = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    return (parse(finished) - parse(started)).total_seconds(), scored


def run(name: str, adaptive: bool, work: Path) -> dict[str, Any]:
    cells, flags, ideal_s, wall_target, refusal_target = SCENARIOS[name]
    registry = numbered_registry(work / f"reg-{cells}", cells)
    db = work / f"{name}-{adaptive}.db"
    with mock_process("--latency-ms", "50", "--rate-limit-burst", "20", *flags) as url:
        subprocess.run(
            [sys.executable, "-m", "evalhydra", f"registry={registry}", "eval=g.e", "service=mock",
             "service.mock.enabled=false", f"service.base_url={url}", f"store.path={db}",
             f"hydra.run.dir={work / 'out' / name}", "run.concurrency=256", "service.max_concurrency=256",
             "service.retry.max_attempts=3", "service.retry.backoff_ms=500",
             f"service.adaptive={str(adaptive).lower()}", "run.progress=false", "run.max_error_rate=1.0"],
            check=False, capture_output=True, timeout=600, cwd=work)
        stats = _stats(url)
    wall, scored = _wall_s(db)
    admitted, refused = stats["chat_requests"], stats["rate_limited"]
    share = refused / admitted if admitted else float("inf")
    within = refusal_target is None or share <= refusal_target
    ok = scored == cells and wall <= wall_target * ideal_s and within
    return {"scenario": name, "adaptive": adaptive, "cells": cells, "scored": scored,
            "wall_s": round(wall, 1), "wall_ratio": round(wall / ideal_s, 3), "admitted": admitted,
            "refused": refused,
            "refused_share": round(share, 3), "meets_target": ok if adaptive else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=list(SCENARIOS), nargs="*", default=list(SCENARIOS))
    parser.add_argument("--no-contrast", action="store_true",
                        help="skip the runs with service.adaptive=false")
    args = parser.parse_args()
    names = args.scenario
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for adaptive in ([True] if args.no_contrast else [True, False]):
                print(json.dumps(run(name, adaptive, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
