"""Matchers: score an output against a case.

The runner needs only :func:`validate_matcher` (at load time),
:func:`judge_services_of` (to check judges before any call) and
:func:`build_matcher` (per eval, inside the run).

* :mod:`~evalhydra.matchers.base`: the matcher seam.
* :mod:`~evalhydra.matchers.bfcl`: the ``bfcl_ast`` matcher: the answer's function calls against a
  BFCL ground truth.
* :mod:`~evalhydra.matchers.common`: small helpers shared by the matchers: results, text and JSON
  utilities.
* :mod:`~evalhydra.matchers.composite`: composite matchers: ``all_of``, ``any_of`` and ``weighted``.
* :mod:`~evalhydra.matchers.custom`: the ``custom`` matcher: your own Python, or a zrb
  ``validator.py``.
* :mod:`~evalhydra.matchers.factory`: validate matcher specs when an eval loads, and build matchers
  for a run.
* :mod:`~evalhydra.matchers.grader_checks`: checks of an OpenAI Evals eval's ``testing_criteria``
  when the eval loads, and the helpers loading and grading share.
* :mod:`~evalhydra.matchers.jsonmatch`: JSON matchers: ``json_fields`` (zig_eval) and
  ``json_schema``.
* :mod:`~evalhydra.matchers.judging`: what model-judged matchers share: judge failures and merged
  judge calls.
* :mod:`~evalhydra.matchers.model_grade`: the ``model_grade`` matcher (zig_eval): an LLM judge with
  a rubric.
* :mod:`~evalhydra.matchers.openai_graders`: the ``openai_graders`` matcher: an OpenAI Evals eval's
  ``testing_criteria``, graded as OpenAI does.
* :mod:`~evalhydra.matchers.options`: which options each matcher kind takes, their types, defaults
  and required keys.
* :mod:`~evalhydra.matchers.paths`: paths of matcher files (rubric prompts, schemas, validators).
* :mod:`~evalhydra.matchers.prompts`: aiwg prompt files: front matter, ``## System`` / ``## User``
  sections, ``{{var}}``.
* :mod:`~evalhydra.matchers.python_grader`: openAI's ``python`` grader: the grader's ``grade(sample,
  item)`` run in a confined subprocess.
* :mod:`~evalhydra.matchers.rubric`: the ``rubric`` matcher: aiwg's isolated evaluator.
* :mod:`~evalhydra.matchers.similarity`: text similarity metrics of OpenAI's ``text_similarity``
  grader, from the libraries that define them.
* :mod:`~evalhydra.matchers.text`: text matchers: ``exact_match``, ``includes`` (zig_eval) and
  ``regex``.
* :mod:`~evalhydra.matchers.toolcall`: the ``tool_call`` matcher (zig_eval).
* :mod:`~evalhydra.matchers.tau2`: the ``tau2`` matcher: a conversation scored as τ²-bench scores a
  task; :mod:`~evalhydra.matchers.tau2_nl`: its natural-language assertions, graded by a judge.
* :mod:`~evalhydra.matchers.trajectory`: matchers of a tool-using answer's path and end state, in
  promptfoo's vocabulary.
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
