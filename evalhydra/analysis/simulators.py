"""Which simulated user played each side of a comparison, and what differs between them.

A conversation's score measures the agent and its simulated user together: a changed simulator
(its instructions, model, sampling, signals or errors) moves the score with no change in the agent
(τ²-bench's #182 and PR #345). ``compare`` therefore refuses two sides whose simulators differ
unless told (``--allow-simulator-change``), naming what differs. Each cell keeps its simulator's
identity in ``details.trajectory.user`` (:mod:`evalhydra.execute.conversation`).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from evalhydra.analysis.compare import Side

__all__ = ["simulator_changes", "simulators_of"]


def simulators_of(conn: sqlite3.Connection, side: Side) -> dict[str, dict[str, dict[str, Any]]]:
    """Per eval of ``side``, its simulators' identities by digest (evals without one left out)."""
    sql = ("select eval_id, json_extract(details, '$.trajectory.user.simulator_digest'),"
           " json_extract(details, '$.trajectory.user.simulator') from results"
           f" where ({side.where}) and details like '%\"simulator_digest\"%'"
           " group by eval_id, json_extract(details, '$.trajectory.user.simulator_digest')")
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for eval_id, digest, identity in conn.execute(sql, side.params):
        if digest:
            found.setdefault(eval_id, {})[digest] = json.loads(identity or "{}")
    return found


def simulator_changes(conn: sqlite3.Connection, base: Side, cand: Side) -> list[str]:
    """For each eval both sides ran, what differs between their simulators (empty: nothing)."""
    before, after = simulators_of(conn, base), simulators_of(conn, cand)
    changes = []
    for eval_id in sorted(set(before) | set(after)):
        old, new = before.get(eval_id, {}), after.get(eval_id, {})
        if set(old) == set(new):
            continue
        if not old or not new:
            changes.append(f"{eval_id}: only the {'candidate' if new else 'baseline'} has a simulated user")
            continue
        changes.append(f"{eval_id}: {_difference(_merged(old), _merged(new))}")
    return changes


def _merged(identities: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One identity's fields, each the set of values the side's simulators gave it."""
    keys = sorted({k for identity in identities.values() for k in identity})
    return {k: sorted({json.dumps(identity.get(k), sort_keys=True) for identity in identities.values()})
            for k in keys}


def _difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    parts = [f"{key} {' | '.join(old.get(key, ['—']))} → {' | '.join(new.get(key, ['—']))}"
             for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    return "; ".join(parts) or "the simulators differ"
