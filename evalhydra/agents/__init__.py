"""Agent-CLI evals (zrb-llm-evaluator style): cases, commands, trials, traces, usage.

A case is a directory (``instruction.txt``, ``validator.py``, optional
``workdir/``). Each trial runs an agent CLI (``kind: command`` service) as a
subprocess in its own directory, then the case's validator judges the result.

Building blocks: :func:`load_cases`, :func:`validate_command_service`,
:func:`build_argv`, :func:`run_trial`, :func:`trace_from_history`. The agent
cell (:mod:`evalhydra.execute.agent_cell`) turns a trial into a store row; zrb's
artifacts are rebuilt from the store by :mod:`evalhydra.reports.zrb`.

* :mod:`~evalhydra.agents.executor`: run one agent trial as an isolated subprocess and judge it.
* :mod:`~evalhydra.agents.fake_agent`: a scriptable stand-in for an agent CLI, for tests and demos
  (stdlib only).
* :mod:`~evalhydra.agents.loader`: load agent test cases: directories with instruction.txt,
  validator.py, workdir/.
* :mod:`~evalhydra.agents.models`: value objects of agent-CLI evals: validation results, traces,
  trial results.
* :mod:`~evalhydra.agents.process`: one agent process, bounded: its output capped on disk and in
  memory, its descendants ended.
* :mod:`~evalhydra.agents.trace`: build a :class:`TrialTrace` from an agent's session history JSON.
* :mod:`~evalhydra.agents.zrb_compat`: validators written for zrb-llm-evaluator run unchanged.
"""

from evalhydra.agents.command import (
    TEMPLATES,
    build_argv,
    build_env,
    safe_model_name,
    session_name,
    template_name,
    validate_command_service,
)
from evalhydra.agents.executor import TrialPaths, run_trial, trial_paths, verification_marker
from evalhydra.agents.loader import AgentCase, load_cases, load_validator
from evalhydra.agents.models import (
    TERMINAL_STATUSES,
    ToolCallRecord,
    TrialResult,
    TrialTrace,
    ValidationCheck,
    ValidationResult,
    ValidatorProtocol,
)
from evalhydra.agents.trace import trace_from_history
from evalhydra.agents.usage import TokenUsage, cost_usd, parse_usage

__all__ = [
    "TEMPLATES",
    "TERMINAL_STATUSES",
    "AgentCase",
    "TokenUsage",
    "ToolCallRecord",
    "TrialPaths",
    "TrialResult",
    "TrialTrace",
    "ValidationCheck",
    "ValidationResult",
    "ValidatorProtocol",
    "build_argv",
    "build_env",
    "cost_usd",
    "load_cases",
    "load_validator",
    "parse_usage",
    "run_trial",
    "safe_model_name",
    "session_name",
    "template_name",
    "trace_from_history",
    "trial_paths",
    "validate_command_service",
    "verification_marker",
]
