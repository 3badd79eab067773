"""OpenAI's graders one by one: templates, the text metrics against their reference libraries and
values worked out by hand, the Python grader's subprocess, multi formulas, and what is refused."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from nltk.translate.gleu_score import sentence_gleu
from nltk.translate.meteor_score import meteor_score
from rapidfuzz import fuzz
from rouge_score import rouge_scorer

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.openai_templates import TemplateError, check_template, render
from evalhydra.core.values import Case, ToolCall
from evalhydra.matchers import MatchContext, build_matcher
from evalhydra.matchers.python_grader import PythonGraderError, run_python_grader
from evalhydra.matchers.similarity import (
    MAX_LCS_WORDS,
    MAX_METRIC_CHARS,
    METRICS,
    _wordnet,
    cosine,
    similarity,
)
from evalhydra.services.mock.responses import embedding

ITEM = {"question": "Why?", "facts": {"list": [3, {"deep": "yes"}]}, "n": 4}
HYP, REF = "the cat sat on the mat", "the cat is on the mat"
HALF, LOW = "def grade(sample, item):\n    return 0.5\n", "def grade(sample, item):\n    return 0.2\n"


def test_templates_render_nested_paths_and_values_as_json() -> None:
    ns = {"item": ITEM, "sample": {"output_text": "ok"}}
    text = ("{{ item.question }} {{item.facts.list[1].deep}} {{item.n}} {{item.facts.list}}"
            " {{sample.output_text}}")
    assert render(text, ns) == 'Why? yes 4 [3, {"deep": "yes"}] ok'
    for bad, why in [("{{item.nope}}", "'nope' is not in the item"), ("{{other.x}}", "must name a variable"),
                     ("{{item.facts.list[9]}}", "9 is not in the item"),
                     ("{{ item }}", "must name a variable")]:
        with pytest.raises(TemplateError, match=why):
            render(bad, ns)


@pytest.mark.slow
def test_each_metric_is_its_reference_librarys_value() -> None:
    assert similarity("fuzzy_match", HYP, REF) == fuzz.ratio(HYP, REF) / 100
    assert similarity("bleu", HYP, REF) == sacrebleu.sentence_bleu(HYP, [REF]).score / 100
    assert similarity("gleu", HYP, REF) == sentence_gleu([REF.split()], HYP.split())
    assert similarity("meteor", HYP, REF) == meteor_score([REF.split()], HYP.split(), wordnet=_wordnet())
    for n in range(1, 6):
        scorer = rouge_scorer.RougeScorer([f"rouge{n}"])
        assert similarity(f"rouge_{n}", HYP, REF) == scorer.score(REF, HYP)[f"rouge{n}"].fmeasure
    longest = rouge_scorer.RougeScorer(["rougeL"]).score(REF, HYP)["rougeL"].fmeasure
    assert similarity("rouge_l", HYP, REF) == longest
    assert set(METRICS) == {"fuzzy_match", "bleu", "gleu", "meteor", "cosine", "rouge_l",
                            *(f"rouge_{n}" for n in range(1, 6))}


def test_metrics_match_values_worked_out_by_hand() -> None:
    # indel ratio: LCS("hello world", "hello wrld") = 10 of 21 characters: 1 − 1/21
    assert similarity("fuzzy_match", "hello world", "hello wrld") == pytest.approx(20 / 21)
    # unigrams: precision 2/3, recall 2/2, F = 0.8
    assert similarity("rouge_1", "the cat sat", "the cat") == pytest.approx(0.8)
    # GLEU: 3 n-grams shared (the, cat, the cat) of 6 in the input and 3 in the reference: min(1/2, 1)
    assert similarity("gleu", "the cat sat", "the cat") == pytest.approx(0.5)
    assert similarity("bleu", "a b c d", "a b c d") == pytest.approx(1.0)
    # the mock's embeddings count letters: "ab" = (1, 1, 0…), "b" = (0, 1, 0…): cos = 1/√2
    assert cosine(embedding("ab"), embedding("b")) == pytest.approx(2 ** -0.5)
    assert cosine(embedding("Paris"), embedding("Lyon")) == 0.0
    assert cosine(embedding("12"), embedding("ab")) == 0.0  # no letters: the zero vector


def test_meteor_reads_wordnet_for_synonyms() -> None:
    synonym = similarity("meteor", "the hound barked", "the dog barked")
    unrelated = similarity("meteor", "the cat barked", "the dog barked")
    assert synonym > 0.9 > 0.6 > unrelated  # hound and dog share a WordNet synset; cat and dog do not


def graders_spec(*criteria: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "openai_graders", "testing_criteria": list(criteria)}


def case(item: dict[str, Any]) -> Case:
    return Case(id="c1", input="q", item=item)


async def grade(criteria: list[dict[str, Any]], output: str, item: dict[str, Any],
                tools: tuple[ToolCall, ...] = (), **options: Any) -> Any:
    matcher = build_matcher({"kind": "openai_graders", "testing_criteria": criteria, **options},
                            registry_root=Path("."), judges=None)
    return await matcher(MatchContext(case=case(item), output=output, tool_calls=tools))


@pytest.mark.parametrize(("operation", "output", "passed"), [
    ("eq", "Paris", True), ("eq", "paris", False), ("ne", "paris", True), ("ne", "Paris", False),
    ("like", "It is Paris.", True), ("like", "It is paris.", False), ("ilike", "It is PARIS.", True),
    ("ilike", "Lyon", False)])
async def test_string_check_operations(operation: str, output: str, passed: bool) -> None:
    check = {"type": "string_check", "name": "s", "operation": operation, "input": "{{sample.output_text}}",
             "reference": "{{item.city}}"}
    result = await grade([check], output, {"city": "Paris"})
    assert result.passed == passed
    assert result.grader_scores == {"s": {"score": float(passed), "passed": passed, "type": "string_check",
                                          "scaled": float(passed)}}


async def test_the_sample_namespace_has_json_and_tools() -> None:
    source = ("def grade(sample, item):\n"
              "    ok = sample['output_json']['answer'] == item['answer']\n"
              "    call = sample['output_tools'][0]['function']['name']\n"
              "    again = sample['choices'][0]['message']['tool_calls'][0]['function']['name']\n"
              "    return 0.75 if ok and call == again else 0.0\n")
    result = await grade([{"type": "python", "name": "p", "source": source, "pass_threshold": 0.7}],
                         '{"answer": 4}', {"answer": 4}, tools=(ToolCall("search", "{}"),), output_json=True)
    assert result.grader_scores == {"p": {"score": 0.75, "passed": True, "type": "python", "scaled": 0.75}}
    assert result.score == 0.75
    # without a structured-output run OpenAI leaves output_json empty (issue 49)
    empty = "def grade(sample, item):\n    return 1.0 if sample['output_json'] is None else 0.0\n"
    assert (await grade([{"type": "python", "name": "p", "source": empty}], '{"answer": 4}', {})).passed


async def test_thresholds_default_to_the_middle_of_the_range_and_multi_formulas_combine() -> None:
    criteria = [
        {"type": "python", "name": "half", "source": HALF},
        {"type": "python", "name": "low", "source": LOW},
        {"type": "multi", "name": "m", "calculate_output": "max(half, low) ^ 2 + floor(1.9) - sqrt(0.25)",
         "graders": {"half": {"type": "python", "name": "half", "source": HALF},
                     "low": {"type": "python", "name": "low", "source": LOW}},
         "pass_threshold": 0.75},
    ]
    result = await grade(criteria, "x", {})
    assert result.grader_scores == {"half": {"score": 0.5, "passed": True, "type": "python", "scaled": 0.5},
                                    "low": {"score": 0.2, "passed": False, "type": "python", "scaled": 0.2},
                                    "m": {"score": 0.75, "passed": True, "type": "multi",
                                          "scaled": 0.75}}  # 0.25 + 1 − 0.5
    assert not result.passed and result.reason == "low: score 0.2 < pass_threshold 0.5"
    assert result.score == pytest.approx((0.5 + 0.2 + 0.75) / 3)


async def test_a_python_grader_that_raises_or_returns_no_number_fails_with_why() -> None:
    with pytest.raises(PythonGraderError, match="ZeroDivisionError: division by zero"):
        await run_python_grader("def grade(s, i):\n    return 1 / 0\n", {}, {})
    with pytest.raises(PythonGraderError, match=r"grade\(\) returned None, not a number"):
        await run_python_grader("def grade(s, i):\n    print('chatty')\n", {}, {})


async def test_a_python_grader_that_outlives_its_timeout_is_stopped(autojump_clock: object) -> None:
    with pytest.raises(PythonGraderError, match="ran past its 30 s timeout"):
        await run_python_grader("import time\ndef grade(s, i):\n    time.sleep(600)\n", {}, {}, timeout_s=30)


@pytest.mark.parametrize(("grader", "message"), [
    ({"type": "string_check", "name": "s", "input": "x", "reference": "y"}, "needs 'operation'"),
    ({"type": "text_similarity", "name": "t", "input": "x", "reference": "y",
      "evaluation_metric": "bertscore"},
     "'bertscore' is not a metric"),
    ({"type": "score_model", "name": "m", "model": "o3", "input": [{"role": "user", "content": "hi"}],
      "range": [5, 1]}, "range: must be two numbers [low, high]"),
    ({"type": "label_model", "name": "l", "model": "o3", "input": [{"role": "user", "content": "hi"}],
      "labels": ["a"], "passing_labels": ["b"]}, "passing_labels: must be a list of some of the labels"),
    ({"type": "score_model", "name": "m", "model": "o3",
      "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "'input_image' content does not run here"),
    ({"type": "multi", "name": "m", "calculate_output": "a + __import__('os')",
      "graders": {"a": {"type": "python", "name": "a", "source": "def grade(s, i):\n    return 1\n"}}},
     "calculate_output"),
    ({"type": "string_check", "name": "s", "input": "{{sample.output}}x{{ itm.y }}", "reference": "y",
      "operation": "eq"}, "must name a variable of item or sample"),
])
def test_a_grader_evalhydra_cannot_run_as_written_is_refused_when_the_eval_loads(grader: dict[str, Any],
                                                                                message: str) -> None:
    with pytest.raises(EvalHydraError, match=None) as caught:
        build_matcher({"kind": "openai_graders", "testing_criteria": [grader]}, registry_root=Path("."),
                      judges=None, where="eval.json: $")
    assert message in str(caught.value) and "testing_criteria[0]" in str(caught.value)


def test_a_model_grader_without_a_judge_service_is_refused() -> None:
    grader = {"type": "label_model", "name": "l", "model": "o3", "input": [{"role": "user", "content": "hi"}],
              "labels": ["a"], "passing_labels": ["a"]}
    with pytest.raises(EvalHydraError, match="needs a judge_service"):
        build_matcher(graders_spec(grader), registry_root=Path("."), judges=None)


def test_a_missing_metric_library_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rapidfuzz", None)  # as if the graders extra were not installed
    grader = {"type": "text_similarity", "name": "t", "input": "x", "reference": "y",
              "evaluation_metric": "fuzzy_match", "pass_threshold": 0.5}
    with pytest.raises(EvalHydraError, match=r"needs rapidfuzz: pip install 'evalhydra\[graders\]'"):
        build_matcher(graders_spec(grader), registry_root=Path("."), judges=None)


@pytest.mark.slow
def test_rouge_l_reads_a_bounded_number_of_words() -> None:
    """Issue 47, item 9: ROUGE-L's cost grows with the product of the lengths, so a hostile
    reply is read to its first MAX_LCS_WORDS words (what follows cannot change the score)."""
    words = [f"w{i % 97}" for i in range(MAX_LCS_WORDS)]
    reference = " ".join(reversed(words))
    text = " ".join(words)
    whole = similarity("rouge_l", text, reference)
    assert similarity("rouge_l", text + " tail" * 100_000, reference) == whole
    assert similarity("bleu", "x" * (MAX_METRIC_CHARS + 10), "x" * MAX_METRIC_CHARS) == pytest.approx(1.0)


@pytest.mark.parametrize("template", ["{{" + " " * 200_000, "{{" * 100_000, "{{ item.a }" + " " * 100_000])
def test_the_template_scanner_is_linear_in_the_text(template: str) -> None:
    """An unclosed ``{{`` before many spaces made the old regular expression backtrack for minutes;
    the scanner reads each character a bounded number of times (checked here by a size the old one
    could not finish in hours, run on a thread with a generous deadline)."""
    done = threading.Event()

    def scan() -> None:
        check_template(template)
        assert render(template, {"item": {}}) == template
        done.set()

    threading.Thread(target=scan, daemon=True).start()
    assert done.wait(10)


def test_templates_keep_their_meaning() -> None:
    ns = {"item": {"a": {"b": [1, "two"]}}, "sample": {"output_text": "out"}}
    assert render("x {{ item.a.b[1] }} {{sample.output_text}}{{item.a.b[0]}}", ns) == "x two out1"
    assert render("{{ not closed\n{{item.a.b[0]}}", ns) == "{{ not closed\n1"


def test_a_json_string_on_a_template_path_is_read_into() -> None:
    """The tools cookbook's ``{{sample.output_tools[0].function.arguments.symbols}}``: ``arguments``
    is a JSON string, read as the object it holds (issue 49)."""
    sample = {"output_tools": [{"function": {"name": "quote", "arguments": '{"symbols": ["AAPL", "MSFT"]}'}}]}
    assert render("{{sample.output_tools[0].function.arguments.symbols}}", {"sample": sample}) == \
        '["AAPL", "MSFT"]'
    assert render("{{sample.output_tools[0].function.arguments}}", {"sample": sample}) == \
        '{"symbols": ["AAPL", "MSFT"]}'  # the string itself where the path ends
