"""The ``tau2`` matcher: a conversation scored as τ²-bench scores a task.

A case loaded from a τ²-bench task file (:mod:`evalhydra.registry.tau2`) carries the task's
``evaluation_criteria`` and ``initial_state``. The reward is the product of the components its
``reward_basis`` names, each 0 or 1 but ``ACTION``, whose partial credit is the share of expected
actions matched. The cell passes when the reward is 1:

* ``DB``: a fresh ``tool_class`` set to the initial state, with the expected actions replayed on
  it, ends in the same state as the agent's (the SHA-256 of ``state()``'s JSON, keys sorted); with
  ``user_tool_class`` (the user's own device, τ²-bench's dual control), the user's end state too,
  after the expected actions whose ``requestor`` is ``user``;
* ``ENV_ASSERTION``: each assertion (``func_name`` with ``arguments``) called on the agent's
  environment (a fresh ``tool_class`` with the agent's calls replayed; ``env_type: user``: the
  user's, with the user's calls) returns ``assert_value``;
* ``ACTION``: each expected action has a call of its ``name`` whose arguments equal it on
  ``compare_args`` (by default the call's own arguments);
* ``COMMUNICATE``: each ``communicate_info`` text is in some message of the agent (case-insensitive,
  commas taken out of the message);
* ``NL_ASSERTION``: the matcher's ``judge_service`` finds every ``nl_assertions`` text met
  (:mod:`evalhydra.matchers.tau2_nl`).

A conversation that a limit ended (τ²-bench's ``max_steps``, or an error) scores 0.

The tool class is made with no arguments; when it has ``set_state(initial_state)`` that is called
with the task's ``initial_state`` first (the toolbox does the same for the agent's cell).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.usercode import USER_THREADS, passes_through
from evalhydra.core.values import Completion, MatchResult
from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher
from evalhydra.matchers.common import fail
from evalhydra.matchers.custom import importable_from, locate
from evalhydra.matchers.judging import require_judge
from evalhydra.matchers.tau2_nl import grade_assertions

__all__ = ["ENDED_BY_USER", "build_tau2", "fresh_environment"]

#: Stop reasons τ²-bench scores (the user stopped, or the agent submitted); any other scores 0.
ENDED_BY_USER = ("user_stop", "user_transfer", "user_out_of_scope", "submit")
#: Calls of the agent replayed on its environment: those that ran (a tool's own error included).
_RAN = (None, "tool_exception", "timeout")


def build_tau2(spec: Mapping[str, Any], root: Path, judges: JudgeClient | None) -> Matcher:
    """The ``tau2`` matcher over the eval's tool class (``tool_class``, ``module:Class``), its
    natural-language assertions graded by ``judge_service`` (``judge_model``)."""
    service, model = spec.get("judge_service"), spec.get("judge_model")
    if service:
        judges = require_judge(judges, str(service), "tau2")
    cls = _class(spec, "tool_class", root)
    user_cls = _class(spec, "user_tool_class", root) if spec.get("user_tool_class") else None

    async def match(ctx: MatchContext) -> MatchResult:
        task = ctx.case.expected.get("tau2") if isinstance(ctx.case.expected, dict) else None
        if not isinstance(task, dict):
            return fail("the case is not a τ²-bench task (no evaluation_criteria to score)")
        scored = await USER_THREADS.run_sync(partial(_score, (cls, user_cls), task, ctx.trajectory or {}))
        if isinstance(scored, MatchResult):
            return scored
        parts, checks = scored
        judge = None
        if "NL_ASSERTION" in (task.get("evaluation_criteria") or {}).get("reward_basis", ()):
            if not service or judges is None:
                return fail("reward_basis names NL_ASSERTION: set the tau2 matcher's judge_service",
                            details={"reward": None})
            assertions = [str(a) for a in task["evaluation_criteria"].get("nl_assertions") or []]
            if assertions:
                value, checks["nl_assertions"], judge = await grade_assertions(
                    judges, str(service), model, assertions, (ctx.trajectory or {}).get("transcript") or [],
                    ctx.call)
                if value is None:
                    return judge  # type: ignore[return-value]  # the judge failed: its result
                parts["NL_ASSERTION"] = value
            else:
                parts["NL_ASSERTION"] = 1.0
        return _verdict(parts, checks, task, judge if isinstance(judge, Completion) else None)

    return match


def _class(spec: Mapping[str, Any], key: str, root: Path) -> Any:
    path = str(spec.get(key) or "")
    importable_from(root)
    try:
        return locate(path.replace(":", "."))
    except (ImportError, AttributeError, ValueError) as exc:
        raise EvalHydraError(f"matcher tau2: {key} {path!r} cannot be imported: {exc}.",
                             "Set the eval's tool_class (and user.tool_class) to module:Class, importable"
                             " from the registry root.") from None


def fresh_environment(cls: Any, initial_state: Any) -> Any:
    """A new ``cls`` set to ``initial_state`` (``set_state``, when it has one and a state is given)."""
    environment = cls()
    if initial_state is not None and callable(getattr(environment, "set_state", None)):
        environment.set_state(initial_state)
    return environment


def _score(classes: tuple[Any, Any], task: dict[str, Any],
           trajectory: dict[str, Any]) -> MatchResult | tuple[dict[str, float], dict[str, Any]]:
    """The components computed without a judge, and their checks; or the result, when the
    conversation scores without them (a limit ended it, or the task has no criteria)."""
    stop = trajectory.get("stop_reason")
    if stop not in ENDED_BY_USER:
        return fail(f"the conversation ended by {stop}: τ²-bench scores it 0", details={"reward": 0.0})
    criteria = task.get("evaluation_criteria")
    if not criteria:
        return MatchResult(passed=True, score=1.0, details={"reward": 1.0, "note": "no evaluation criteria"})
    basis = list(criteria.get("reward_basis") or [])
    parts: dict[str, float] = {}
    checks: dict[str, Any] = {}
    if "DB" in basis:
        parts["DB"], checks["db"] = _db(classes, task, trajectory)
    if "ENV_ASSERTION" in basis:
        parts["ENV_ASSERTION"], checks["env_assertions"] = _env_assertions(classes, task, trajectory)
    if "ACTION" in basis:
        parts["ACTION"], checks["actions"] = _actions(criteria.get("actions") or [], trajectory)
    if "COMMUNICATE" in basis:
        parts["COMMUNICATE"], checks["communicate"] = _communicate(criteria.get("communicate_info") or [],
                                                                   trajectory)
    return parts, checks


def _verdict(parts: dict[str, float], checks: dict[str, Any], task: dict[str, Any],
             judge: Completion | None) -> MatchResult:
    """The reward (the components' product) as a result: passed at 1."""
    reward = 1.0
    for value in parts.values():
        reward *= value
    basis = (task.get("evaluation_criteria") or {}).get("reward_basis")
    details = {"reward": reward, "reward_basis": basis, "reward_breakdown": parts, **checks}
    if reward >= 1 - 1e-6:
        return MatchResult(passed=True, score=1.0, details=details, judge=judge)
    missed = ", ".join(f"{k} {v:g}" for k, v in parts.items() if v < 1 - 1e-6)
    return MatchResult(passed=False, score=reward, reason=f"τ²-bench reward {reward:g} ({missed})",
                       details=details, judge=judge)


def _db(classes: tuple[Any, Any], task: dict[str, Any],
        trajectory: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """The agent's database (and the user's, with a user tool class) against the gold replay's."""
    check: dict[str, Any] = {}
    sides = [("agent", classes[0], trajectory.get("state"))]
    if classes[1] is not None:
        sides.append(("user", classes[1], (trajectory.get("user") or {}).get("state")))
    actions = (task.get("evaluation_criteria") or {}).get("actions") or []
    for side, cls, state in sides:
        gold = fresh_environment(cls, task.get("initial_state"))
        failed = _replay(gold, [(a["name"], a.get("arguments") or {}) for a in actions
                                if (a.get("requestor") == "user") == (side == "user")])
        expected, actual = _digest(_state(gold)), _digest(state)
        check[side] = {"match": expected == actual, "expected_sha256": expected, "actual_sha256": actual,
                       "gold_replay_failed": failed}
    matched = all(c["match"] for c in check.values())
    shown = {**check["agent"], "agent_match": check["agent"]["match"], "match": matched}
    return (1.0 if matched else 0.0), {**shown, **({"user": check["user"]} if "user" in check else {})}


def _env_assertions(classes: tuple[Any, Any], task: dict[str, Any],
                    trajectory: dict[str, Any]) -> tuple[float, list[Any]]:
    environments = {}
    for side, cls in (("agent", classes[0]), ("user", classes[1])):
        if cls is None:
            continue
        environments[side] = fresh_environment(cls, task.get("initial_state"))
        _replay(environments[side], [(c.get("name"), c.get("parsed") or {})
                                     for c in trajectory.get("tool_calls") or []
                                     if c.get("side", "agent") == side and c.get("error_kind") in _RAN])
    results = []
    for assertion in (task.get("evaluation_criteria") or {}).get("env_assertions") or []:
        environment = environments.get("user" if assertion.get("env_type") == "user" else "agent")
        function = getattr(environment, str(assertion.get("func_name")), None)
        try:
            value = bool(function(**(assertion.get("arguments") or {}))) if callable(function) else None
        except BaseException as exc:
            if passes_through(exc):
                raise
            value = None
        results.append({"func_name": assertion.get("func_name"),
                        "met": value is not None and value == bool(assertion.get("assert_value", True))})
    return (1.0 if all(r["met"] for r in results) else 0.0), results


def _actions(actions: list[dict[str, Any]], trajectory: dict[str, Any]) -> tuple[float, list[Any]]:
    calls = [(c.get("name"), c.get("parsed")) for c in trajectory.get("tool_calls") or []]
    checks = []
    for action in actions:
        matched = any(_same_action(action, name, args) for name, args in calls if isinstance(args, dict))
        checks.append({"action_id": action.get("action_id"), "name": action["name"], "matched": matched})
    return (sum(c["matched"] for c in checks) / len(checks) if checks else 1.0), checks


def _same_action(action: dict[str, Any], name: Any, arguments: dict[str, Any]) -> bool:
    if name != action["name"]:
        return False
    keys = action.get("compare_args")
    keys = list(arguments) if keys is None else keys
    expected = action.get("arguments") or {}
    return {k: arguments.get(k) for k in keys if k in arguments} == {k: expected.get(k) for k in keys
                                                                      if k in expected}


def _communicate(infos: list[str], trajectory: dict[str, Any]) -> tuple[float, list[Any]]:
    said = [str(m.get("content")).lower().replace(",", "") for m in trajectory.get("transcript") or []
            if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"]]
    checks = [{"info": info, "met": any(str(info).lower() in text for text in said)} for info in infos]
    return (1.0 if all(c["met"] for c in checks) else 0.0), checks


def _replay(environment: Any, calls: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    """Call each ``(name, arguments)`` on ``environment``; the names of those that raised."""
    failed = []
    for name, arguments in calls:
        method = getattr(environment, str(name), None) if not str(name).startswith("_") else None
        try:
            if not callable(method):
                raise AttributeError(name)
            method(**arguments)
        except BaseException as exc:
            if passes_through(exc):
                raise
            failed.append(str(name))
    return failed


def _state(environment: Any) -> Any:
    read = getattr(environment, "state", None)
    return json.loads(json.dumps(read(), default=str)) if callable(read) else None


def _digest(state: Any) -> str:
    text = json.dumps(state, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
