"""Agent-CLI evals (zrb-llm-evaluator style): cases, commands, trials, traces, usage.

A case is a directory (``instruction.txt``, ``validator.py``, optional
``workdir/``). Each trial runs an agent CLI (``kind: command`` service) as a
subprocess in its own directory, then the case's validator judges the result.

Building blocks: :func:`load_cases`, :func:`validate_command_service`,
:func:`build_argv`, :func:`run_trial`, :func:`trace_from_history`. The agent
cell (:mod:`evalhydra.execute.agent_cell`) turns a trial into a store row; zrb's
artifacts are rebuilt from the store by :mod:`evalhydra.reports.zrb`.
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
    STATUSES,
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
    "STATUSES",
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
