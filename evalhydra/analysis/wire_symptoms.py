"""Signs in a run's stored tool loops that the server, not the model, broke a tool call: the
faults ``evalhydra probe tools`` checks for, as a run's own replies show them."""

from __future__ import annotations

import sqlite3

__all__ = ["SYMPTOMS", "wire_symptoms"]

_AGENT = "coalesce(side, 'agent') = 'agent'"
#: Chat-template markup of a call in an answer: the server's parser missed it.
_MARKUP = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<function=")

#: Each symptom: what it means, and the SQL counting the run's cells that show it.
SYMPTOMS: dict[str, tuple[str, str]] = {
    "finish_reason": (
        "a reply with tool calls that did not end with finish_reason tool_calls",
        f"""select count(distinct cell_key) from turns where run_id = ? and {_AGENT} and calls > 0
              and finish_reason is not null and finish_reason != 'tool_calls'"""),
    "call_ids_missing": (
        "tool calls without an id",
        f"""select count(distinct cell_key) from tool_calls where run_id = ? and {_AGENT}
              and coalesce(provider_id, '') = ''"""),
    "call_ids_reused": (
        "a call id the server gave twice in one conversation",
        f"""select count(*) from (select cell_key from tool_calls where run_id = ? and {_AGENT}
              and coalesce(provider_id, '') != '' group by cell_key
              having count(*) > count(distinct provider_id))"""),
    "markup_in_content": (
        "tool-call markup in the answer's text",
        """select count(*) from run_cells rc join results r on r.cell_key = rc.cell_key
             and r.run_id = rc.result_run_id where rc.run_id = ? and json_valid(r.details)
             and json_extract(r.details, '$.trajectory') is not null and ("""
        + " or ".join(f"instr(r.output, '{m}') > 0" for m in _MARKUP) + ")"),
}


def wire_symptoms(conn: sqlite3.Connection, run_id: str) -> dict[str, int]:
    """How many of the run's tool-loop cells show each symptom (those with none left out)."""
    found = {}
    for name, (_, sql) in SYMPTOMS.items():
        (cells,) = conn.execute(sql, [run_id]).fetchone()
        if cells:
            found[name] = int(cells)
    return found
