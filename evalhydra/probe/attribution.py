"""Points lost to the server: of two runs of the same suite and seeds through two serving stacks,
which discordant cells a wire fault explains, and the net points the second stack's server cost.

A cell that passed through A and failed through B is the server's when B's recorded reply, read
by the recovering reader (:mod:`~evalhydra.probe.recover`), holds the very calls A's reply made
at the first turn where the two runs' calls part; otherwise the model answered differently. The
same rule, sides swapped, counts a cell B passed and A failed to A's server. The figure is the
mean over cells of (B's losses to its server − A's), paired by case and trial and clustered by
case: :func:`~evalhydra.stats.clustered.paired_difference` (a t-interval over cases, Newcombe's
paired interval with one trial a case). Cells without recorded replies (``service.record_wire``
off, a cached answer) count as model differences: the figure is then a lower bound.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from evalhydra.probe.recover import recovered_calls, same_calls
from evalhydra.stats.clustered import CaseDiffs, PairedDifference, paired_difference
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["Attribution", "attribute_server"]

_CELLS = f"""
    select r.eval_id, r.case_id, r.run_index, r.passed, r.details, r.tool_calls
    from run_cells rc join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id
    where rc.run_id = ? and not ({INFRA_ERROR_SQL})"""


@dataclass
class Attribution:
    """What :func:`attribute_server` found.

    Attributes:
        run_a: The first run (e.g. the server directly).
        run_b: The second (e.g. the same server behind a proxy).
        cells: Cells both runs scored, paired by eval, case and trial.
        wire_b: Cells A passed and B failed, B's wire fault explaining it.
        wire_a: Cells B passed and A failed, A's wire fault explaining it.
        model: Discordant cells no wire fault explains.
        recorded: Paired cells with B's replies recorded (``service.record_wire``).
        points: B's net loss to its server (a share of cells), with its interval; None without cells.
        examples: A few cells B's server cost, each with the calls recovered from its wire.
    """

    run_a: str
    run_b: str
    cells: int = 0
    wire_b: int = 0
    wire_a: int = 0
    model: int = 0
    recorded: int = 0
    points: PairedDifference | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)


def attribute_server(conn: sqlite3.Connection, run_a: str, run_b: str) -> Attribution:
    """Attribute the discordant cells of two runs to wire faults or to the model (see the module)."""
    side_a = {_key(row): row for row in conn.execute(_CELLS, [run_a])}
    side_b = {_key(row): row for row in conn.execute(_CELLS, [run_b])}
    found = Attribution(run_a, run_b)
    by_case: dict[tuple[str, str], list[int]] = defaultdict(list)
    for key in sorted(side_a.keys() & side_b.keys()):
        a, b = _Cell(side_a[key]), _Cell(side_b[key])
        found.cells += 1
        found.recorded += b.recorded
        by_case[key[:2]].append(_move(found, key, a, b))
    found.points = paired_difference(_case_diffs(by_case))
    return found


def _key(row: tuple[Any, ...]) -> tuple[str, str, int]:
    return row[0], row[1], int(row[2])


class _Cell:
    """One stored cell as attribution reads it: its verdict, and per turn its calls as read and
    its recorded wire."""

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.passed = bool(row[3])
        details = _json(row[4]) or {}
        trajectory = details.get("trajectory") if isinstance(details.get("trajectory"), dict) else None
        self.calls: dict[int, list[tuple[str, Any]]] = defaultdict(list)
        self.wires: dict[int, Any] = {}
        if trajectory is None:  # one request: its calls and wire are the cell's
            for call in _json(row[5]) or []:
                self.calls[1].append((str(call.get("name")), _parsed(call.get("arguments"))))
            if "wire" in details:
                self.wires[1] = details["wire"]
            return
        for call in trajectory.get("tool_calls") or []:
            if isinstance(call, dict) and (call.get("side") or "agent") == "agent":
                parsed = call.get("parsed")
                parsed = parsed if parsed is not None else _parsed(call.get("arguments"))
                self.calls[int(call.get("turn") or 0)].append((str(call.get("name")), parsed))
        for turn in trajectory.get("turns") or []:
            if isinstance(turn, dict) and (turn.get("side") or "agent") == "agent" and "wire" in turn:
                self.wires[int(turn.get("turn") or 0)] = turn["wire"]

    @property
    def recorded(self) -> bool:
        return bool(self.wires)

    def parting_turn(self, other: _Cell) -> int | None:
        """The first turn where this cell's calls and ``other``'s differ (None: they never do)."""
        for turn in sorted(self.calls.keys() | other.calls.keys() | self.wires.keys()):
            if not same_calls(self.calls.get(turn, []), other.calls.get(turn, [])):
                return turn
        return None

    def wire_explains(self, other: _Cell) -> bool:
        """Whether this cell's recorded reply, recovered, holds ``other``'s calls where they part."""
        turn = self.parting_turn(other)
        if turn is None or turn not in self.wires:
            return False
        recovered = recovered_calls(self.wires[turn])
        return bool(recovered) and same_calls(recovered, other.calls.get(turn, []))


def _move(found: Attribution, key: tuple[str, str, int], a: _Cell, b: _Cell) -> int:
    """The cell's part in B's net loss to its server: +1, −1 or 0 (and the tallies)."""
    if a.passed == b.passed:
        return 0
    if a.passed and b.wire_explains(a):
        found.wire_b += 1
        if len(found.examples) < 5:
            turn = b.parting_turn(a) or 0
            found.examples.append({"eval": key[0], "case": key[1], "trial": key[2], "turn": turn,
                                   "read": b.calls.get(turn, []),
                                   "recovered": recovered_calls(b.wires[turn])})
        return 1
    if b.passed and a.wire_explains(b):
        found.wire_a += 1
        return -1
    found.model += 1
    return 0


def _case_diffs(by_case: dict[tuple[str, str], list[int]]) -> CaseDiffs:
    """Each case's mean move, as the paired interval's sufficient statistics."""
    diffs = CaseDiffs()
    for moves in by_case.values():
        d = Fraction(sum(moves), len(moves))
        diffs.n_cases += 1
        diffs.sum_d += float(d)
        diffs.sum_d2 += float(d) ** 2
        diffs.trials_max = max(diffs.trials_max, len(moves))
        diffs.trials_min = len(moves) if diffs.n_cases == 1 else min(diffs.trials_min, len(moves))
        if d:
            diffs.moves[d] = diffs.moves.get(d, 0) + 1
        # The one-trial table: a cell's move is +1 (only B lost to its server), −1 (only A did)
        # or 0 (neither did; both cannot, a cell is one side's pass and the other's failure).
        if d > 0:
            diffs.improved += 1
        elif d < 0:
            diffs.regressed += 1
        else:
            diffs.neither += 1
    return diffs


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def _parsed(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments if arguments is not None else {}
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments
