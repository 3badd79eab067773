"""τ²-bench task files as datasets, unchanged: one case per task.

A τ²-bench domain keeps its tasks in one JSON file, an array of objects (``tasks.json``), each with
an ``id``, a ``user_scenario`` (``persona``; ``instructions``: text, or ``domain``,
``reason_for_call``, ``known_info``, ``unknown_info``, ``task_instructions``), an optional
``initial_state`` and ``evaluation_criteria`` (``actions``, ``env_assertions``,
``communicate_info``, ``nl_assertions``, ``reward_basis``). Each task becomes a case whose
``user`` holds the scenario's fields (what the eval's ``user.instructions`` are filled from), and
whose ``expected.tau2`` holds the task's criteria and initial state for the ``tau2`` matcher
(:mod:`evalhydra.matchers.tau2`). The user speaks first, as in τ²-bench. A task may carry
``mock_script``, the built-in mock user's script (a key τ²-bench ignores).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError

__all__ = ["MAX_TASK_FILE_BYTES", "is_task_file", "task_records"]

#: The largest task file read (a task file is read whole; τ²-bench's are well under a megabyte).
MAX_TASK_FILE_BYTES = 64 << 20
#: The reward bases τ²-bench defines.
REWARD_BASES = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE", "NL_ASSERTION")
_SCENARIO_FIELDS = ("domain", "reason_for_call", "known_info", "unknown_info", "task_instructions")


def is_task_file(path: Path) -> bool:
    """Whether ``path`` is a τ²-bench task file: a ``.json`` file holding a JSON array."""
    if path.suffix.lower() != ".json":
        return False
    with path.open("rb") as handle:
        head = handle.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")
    return head.startswith(b"[")


def task_records(path: Path) -> Iterator[tuple[int, dict[str, Any], str, bool]]:
    """Each task of the file as a dataset record: (its number, the record, a hash of the task,
    False: its id is its own).

    Raises:
        EvalHydraError: ``path: task N: what is wrong`` for a task τ²-bench would refuse.
    """
    tasks = _read(path)
    for number, task in enumerate(tasks, start=1):
        where = f"{path}: task {number}"
        if not isinstance(task, dict):
            raise EvalHydraError(f"{where}: each task must be a JSON object.")
        text = json.dumps(task, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        yield number, _record(task, where), hashlib.sha256(text.encode()).hexdigest()[:16], False


def _read(path: Path) -> list[Any]:
    size = path.stat().st_size
    if size > MAX_TASK_FILE_BYTES:
        raise EvalHydraError(f"{path}: a task file of {size:,} bytes, over {MAX_TASK_FILE_BYTES >> 20} MiB.",
                             "Split the tasks into several files, one eval each.")
    try:
        tasks = strictjson.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise EvalHydraError(f"{path}: not UTF-8 text (byte {exc.start}).",
                             "Save the file as UTF-8.") from None
    except ValueError as exc:
        raise EvalHydraError(f"{path}: invalid JSON: {exc}.") from None
    if not isinstance(tasks, list):
        raise EvalHydraError(f"{path}: a task file is a JSON array of tasks.")
    return tasks


def _record(task: dict[str, Any], where: str) -> dict[str, Any]:
    task_id = task.get("id")
    if not isinstance(task_id, str | int) or isinstance(task_id, bool) or not str(task_id).strip():
        raise EvalHydraError(f"{where}: 'id' is required (a string).")
    where = f"{where} ({task_id})"
    user = _user(task.get("user_scenario"), where)
    if isinstance(task.get("mock_script"), dict):
        user["script"] = task["mock_script"]
    criteria = _criteria(task.get("evaluation_criteria"), where)
    tau2 = {"evaluation_criteria": criteria, "initial_state": task.get("initial_state")}
    return {"id": str(task_id), "user": user, "expected": {"tau2": tau2}}


def _user(scenario: Any, where: str) -> dict[str, Any]:
    if not isinstance(scenario, dict) or "instructions" not in scenario:
        raise EvalHydraError(f"{where}: 'user_scenario' needs 'instructions' (text, or reason_for_call,"
                             " known_info, unknown_info, task_instructions).")
    instructions = scenario["instructions"]
    user: dict[str, Any] = {"persona": scenario.get("persona") or ""}
    if isinstance(instructions, str):
        user["instructions"] = instructions
    elif isinstance(instructions, dict):
        user.update({k: instructions.get(k) or "" for k in _SCENARIO_FIELDS})
        if not user["task_instructions"]:
            raise EvalHydraError(f"{where}: user_scenario.instructions.task_instructions is required.")
    else:
        raise EvalHydraError(f"{where}: user_scenario.instructions must be text or an object.")
    return user


def _criteria(criteria: Any, where: str) -> dict[str, Any] | None:
    if criteria is None:
        return None
    if not isinstance(criteria, dict):
        raise EvalHydraError(f"{where}: evaluation_criteria must be an object.")
    basis = criteria.get("reward_basis", ["DB", "COMMUNICATE"])
    unknown = [b for b in basis if b not in REWARD_BASES] if isinstance(basis, list) else [basis]
    if unknown:
        raise EvalHydraError(f"{where}: reward_basis {unknown[0]!r} is not one of {', '.join(REWARD_BASES)}.")
    for i, action in enumerate(criteria.get("actions") or []):
        if not isinstance(action, dict) or not isinstance(action.get("name"), str) \
                or not isinstance(action.get("arguments", {}), dict):
            raise EvalHydraError(f"{where}: evaluation_criteria.actions[{i}] needs a name and arguments"
                                 " (an object).")
    return {**criteria, "reward_basis": basis}
