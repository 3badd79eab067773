"""Issue 63, item 3: the tau2 matcher scores a conversation as τ²-bench does: the database after the
expected actions equals the agent's, each expected action was called (partial credit), what the agent
had to say it said, its environment assertions hold, a judge finds its natural-language assertions
met; the reward is the product of what ``reward_basis`` names; a limit scores 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, ErrorKind
from evalhydra.matchers.base import MatchContext
from evalhydra.matchers.custom import importable_from, locate
from evalhydra.matchers.tau2 import build_tau2, fresh_environment
from evalhydra.testing.judges import ScriptedJudge, judge_error

REGISTRY = Path(__file__).resolve().parents[2] / "registry"
DOMAIN = "order_desk_domain:OrderDeskDomain"
REFUND = {"order_id": "O1001", "reason": "damaged"}


def _criteria(**extra: Any) -> dict[str, Any]:
    return {"actions": [{"action_id": "a0", "name": "get_order", "arguments": {"order_id": "O1001"}},
                        {"action_id": "a1", "name": "refund_order", "arguments": REFUND,
                         "compare_args": ["order_id"]}],
            "communicate_info": ["refunded"], "reward_basis": ["DB", "COMMUNICATE"], **extra}


def _trajectory(calls: list[tuple[str, dict[str, Any]]], said: str = "Order O1001 is refunded.",
                stop: str = "user_stop", initial: Any = None) -> dict[str, Any]:
    """What a conversation stores after the agent made ``calls`` (run on a real domain) and said ``said``."""
    desk = fresh_environment(_domain(), initial)
    rows = []
    for name, args in calls:
        try:
            getattr(desk, name)(**args)
            kind = None
        except Exception:  # noqa: BLE001 (a tool's own error, as the toolbox records it)
            kind = "tool_exception"
        rows.append({"name": name, "parsed": args, "error_kind": kind, "side": "agent"})
    transcript = [{"role": "user", "content": "Refund O1001."}, {"role": "assistant", "content": said}]
    return {"stop_reason": stop, "tool_calls": rows, "transcript": transcript,
            "state": json.loads(json.dumps(desk.state()))}


def _domain() -> Any:
    importable_from(REGISTRY)
    return locate(DOMAIN.replace(":", "."))


def _score(criteria: dict[str, Any] | None, trajectory: dict[str, Any], judges: Any = None,
           initial: Any = None, **spec: Any):
    matcher = build_tau2({"tool_class": DOMAIN, **spec}, REGISTRY, judges)
    task = {"evaluation_criteria": criteria, "initial_state": initial}
    case = Case(id="t", input="", expected={"tau2": task})
    return trio.run(matcher, MatchContext(case=case, output="", trajectory=trajectory))


GOOD = [("get_order", {"order_id": "O1001"}), ("refund_order", REFUND)]


def test_the_right_conversation_earns_the_whole_reward() -> None:
    result = _score(_criteria(), _trajectory(GOOD))
    assert result.passed and result.score == 1.0
    assert result.details["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    assert result.details["db"]["expected_sha256"] == result.details["db"]["actual_sha256"]


def test_a_wrong_write_fails_the_database_check() -> None:
    wrong = [GOOD[0], ("refund_order", {"order_id": "O1006", "reason": "damaged"})]
    result = _score(_criteria(), _trajectory(wrong))
    assert not result.passed and result.details["reward_breakdown"]["DB"] == 0.0
    assert "DB 0" in (result.reason or "")


def test_saying_without_doing_fails_the_database_check_not_communication() -> None:
    result = _score(_criteria(), _trajectory(GOOD[:1]))
    assert result.details["reward_breakdown"] == {"DB": 0.0, "COMMUNICATE": 1.0}


def test_actions_earn_partial_credit_on_their_compare_args() -> None:
    other_reason = [GOOD[0], ("refund_order", {"order_id": "O1001", "reason": "x"})]
    full = _score(_criteria(reward_basis=["ACTION"]), _trajectory(other_reason))
    assert full.passed  # compare_args: only order_id
    half = _score(_criteria(reward_basis=["ACTION"]), _trajectory(GOOD[:1]))
    assert not half.passed and half.score == 0.5
    assert [a["matched"] for a in half.details["actions"]] == [True, False]


def test_communicated_information_ignores_case_and_commas() -> None:
    criteria = _criteria(communicate_info=["1000 dollars"], reward_basis=["COMMUNICATE"])
    assert _score(criteria, _trajectory(GOOD, said="You get 1,000 Dollars back.")).passed
    assert not _score(criteria, _trajectory(GOOD, said="You get a refund.")).passed


def test_environment_assertions_run_on_the_agents_replayed_environment() -> None:
    criteria = _criteria(reward_basis=["ENV_ASSERTION"], env_assertions=[
        {"env_type": "assistant", "func_name": "assert_refunded", "arguments": {"order_id": "O1001"},
         "assert_value": True}])
    assert _score(criteria, _trajectory(GOOD)).passed
    failed = _score(criteria, _trajectory(GOOD[:1]))
    assert not failed.passed and failed.details["env_assertions"] == [{"func_name": "assert_refunded",
                                                                        "met": False}]


def test_the_initial_state_sets_both_environments() -> None:
    order = {"customer_id": "C1", "status": "delivered", "days_since_delivery": 1, "total": 5.0,
             "address": "x"}
    initial = {"initialization_data": {"agent_data": {"orders": {"O9": order}}}}
    refund = {"order_id": "O9", "reason": "r"}
    criteria = {"actions": [{"action_id": "a", "name": "refund_order", "arguments": refund}],
                "reward_basis": ["DB"]}
    trajectory = _trajectory([("refund_order", refund)], initial=initial)
    assert _score(criteria, trajectory, initial=initial).passed
    assert not _score(criteria, trajectory).passed  # without it the gold replay cannot refund O9


@pytest.mark.parametrize("stop", ["turn_limit", "user_turn_limit", "time_limit", None])
def test_a_conversation_a_limit_ended_scores_zero(stop: str | None) -> None:
    result = _score(_criteria(), _trajectory(GOOD, stop=stop))  # type: ignore[arg-type]
    assert not result.passed and result.score == 0.0 and "τ²-bench scores it 0" in (result.reason or "")


def test_a_task_without_criteria_passes() -> None:
    assert _score(None, _trajectory([])).passed


def test_natural_language_assertions_go_to_the_judge() -> None:
    criteria = _criteria(reward_basis=["NL_ASSERTION"], nl_assertions=["The agent refunds O1001."])
    met = ScriptedJudge([json.dumps({"results": [{"expectedOutcome": "x", "reasoning": "y",
                                                   "metExpectation": True}]})])
    result = _score(criteria, _trajectory(GOOD), met, judge_service="judge")
    assert result.passed and result.judge is not None
    service, request = met.calls[0]
    assert service == "judge" and "The agent refunds O1001." in request.messages[-1]["content"]
    assert "assistant: Order O1001 is refunded." in request.messages[-1]["content"]
    unmet = ScriptedJudge([json.dumps({"results": [{"expectedOutcome": "x", "metExpectation": False}]})])
    assert not _score(criteria, _trajectory(GOOD), unmet, judge_service="judge").passed


def test_a_judge_that_fails_is_an_infrastructure_error_not_a_failure() -> None:
    criteria = _criteria(reward_basis=["NL_ASSERTION"], nl_assertions=["x"])
    down = _score(criteria, _trajectory(GOOD), ScriptedJudge([judge_error()]), judge_service="judge")
    assert down.error_kind is not None
    garbled = _score(criteria, _trajectory(GOOD), ScriptedJudge(["not json"]), judge_service="judge")
    assert garbled.error_kind == ErrorKind.INVALID_RESPONSE


def test_natural_language_assertions_without_a_judge_say_what_to_set() -> None:
    criteria = _criteria(reward_basis=["NL_ASSERTION"], nl_assertions=["x"])
    result = _score(criteria, _trajectory(GOOD))
    assert not result.passed and "set the tau2 matcher's judge_service" in (result.reason or "")


def test_a_tool_class_that_cannot_be_imported_is_refused() -> None:
    with pytest.raises(EvalHydraError, match="tool_class 'nowhere:Nothing' cannot be imported"):
        build_tau2({"tool_class": "nowhere:Nothing"}, REGISTRY, None)
