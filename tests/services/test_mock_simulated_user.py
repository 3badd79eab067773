"""The mock as a simulated user: scripted turns, the stop signal after them or on ``stop_when``,
and each deliberate error on the turn that finishes the task, drawn per cell at its rate."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalhydra.services.mock.replies import reply_for
from evalhydra.services.mock.simulated_user import DECLINE, DRIFT, script_block, user_reply

TURNS = ["Refund order 7.", "Yes, go ahead."]


def _request(said: list[str], heard: str = "How can I help?", **script: Any) -> dict[str, Any]:
    """A user's request after it said ``said`` (each answered), the agent's last words ``heard``."""
    system = "You are Sam." + script_block({"turns": TURNS, "stop": "###STOP###", **script})
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for text in said:
        messages += [{"role": "user", "content": "…"}, {"role": "assistant", "content": text}]
    return {"model": "m", "messages": [*messages, {"role": "user", "content": heard}]}


def _errs(kind: str) -> dict[str, Any]:
    return {"errors": {"rate": 1.0, "kinds": [kind], "seed": 0}, "cell": "k"}


def test_the_script_is_said_turn_by_turn_then_the_stop_signal() -> None:
    assert [user_reply(_request(TURNS[:i])) for i in range(3)] == [*TURNS, "###STOP###"]


def test_stop_when_stops_once_the_agent_says_it() -> None:
    assert user_reply(_request(TURNS[:1], heard="Done: refunded.", stop_when="REFUNDED")) == "###STOP###"
    # not before the user has spoken
    assert user_reply(_request([], heard="Refunded?", stop_when="refunded")) == TURNS[0]


@pytest.mark.parametrize(("kind", "said"), [("premature_stop", "###STOP###"), ("goal_drift", DRIFT),
                                             ("contradicted_instructions", DECLINE)])
def test_each_error_replaces_the_turn_that_finishes_the_task(kind: str, said: str) -> None:
    assert user_reply(_request([], **_errs(kind))) == TURNS[0]
    assert user_reply(_request(TURNS[:1], **_errs(kind))) == said


def test_a_leaked_answer_says_what_it_should_not() -> None:
    reply = user_reply(_request(TURNS[:1], leak="the code is 1234", **_errs("leaked_answer")))
    assert reply is not None and reply.startswith(TURNS[1]) and "the code is 1234" in reply


def test_errors_are_drawn_per_cell_at_their_rate_and_alike_on_a_rerun() -> None:
    def errs(cell: int) -> bool:
        script = {"errors": {"rate": 0.25, "kinds": ["premature_stop"], "seed": 3}, "cell": f"c{cell}"}
        return user_reply(_request(TURNS[:1], **script)) == "###STOP###"

    drawn = [errs(i) for i in range(2000)]
    assert 0.22 < sum(drawn) / len(drawn) < 0.28
    assert drawn == [errs(i) for i in range(2000)]


def test_the_mock_answers_a_users_request_through_its_chat_rule() -> None:
    assert reply_for(_request([])) == {"role": "assistant", "content": TURNS[0]}
    agent = {"model": "m", "messages": [{"role": "user", "content": "Reply with exactly hi."}]}
    assert reply_for(agent)["content"] == "hi"  # no script: the agent's rules as before


def test_a_broken_script_is_no_script() -> None:
    request = {"messages": [{"role": "system", "content": "<mock-user-script>{oops</mock-user-script>"},
                            {"role": "user", "content": "Reply with exactly hi."}]}
    assert user_reply(request) is None and json.dumps(reply_for(request))


def test_the_mock_judges_tau2_assertions_by_their_quoted_phrases() -> None:
    from evalhydra.matchers.tau2_nl import NL_PROMPT_MARK, NL_SYSTEM_PROMPT

    prompt = ("conversation:\nuser: refund O1\nassistant: It cannot be refunded.\n\nexpectedOutcomes:\n"
              + json.dumps(["The agent says it 'cannot be refunded'.", "The agent says 'sorry'.", "Polite."]))
    reply = reply_for({"messages": [{"role": "system", "content": NL_SYSTEM_PROMPT},
                                    {"role": "user", "content": prompt}]})
    results = json.loads(reply["content"])["results"]
    assert [r["metExpectation"] for r in results] == [True, False, True]
    assert NL_PROMPT_MARK in NL_SYSTEM_PROMPT
