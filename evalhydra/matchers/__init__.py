"""Matchers: score an output against a case.

The runner needs only :func:`validate_matcher` (at load time),
:func:`judge_services_of` (to check judges before any call) and
:func:`build_matcher` (per eval, inside the run).
"""

from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher, sync_matcher
from evalhydra.matchers.factory import (
    build_matcher,
    judge_services_of,
    validate_matcher,
    with_judge_service,
)
from evalhydra.matchers.model_grade import model_grade_prompt
from evalhydra.matchers.options import MATCHER_KINDS
from evalhydra.matchers.rubric import refinement_input

__all__ = [
    "MATCHER_KINDS",
    "JudgeClient",
    "MatchContext",
    "Matcher",
    "build_matcher",
    "judge_services_of",
    "model_grade_prompt",
    "refinement_input",
    "sync_matcher",
    "validate_matcher",
    "with_judge_service",
]
