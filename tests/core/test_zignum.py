"""Numbers as zig_eval writes them: half up on the shortest decimal text, integral JSON floats bare."""

from __future__ import annotations

import json

import pytest

from evalhydra.core.zig_numbers import fixed, integral_numbers, json_number
from evalhydra.matchers import model_grade_prompt
from evalhydra.reports.zig import format_text_report


@pytest.mark.parametrize(
    ("value", "places", "text"),
    [
        (1 / 32 * 100, 2, "3.13"),  # Python's f"{:.2f}" gives 3.12
        (8.625, 2, "8.63"),
        (0.8125, 3, "0.813"),
        (2.675, 2, "2.68"),  # the binary value is 2.67499…; its shortest text is 2.675
        (0.8, 3, "0.800"),
        (100.0, 2, "100.00"),
        (0.0, 2, "0.00"),
        (1 / 3 * 100, 2, "33.33"),
    ],
)
def test_fixed_rounds_half_up_on_the_shortest_text(value: float, places: int, text: str) -> None:
    assert fixed(value, places) == text


def test_the_judge_prompt_says_the_passing_score_as_zig_eval_does() -> None:
    assert "Passing score:\n0.813\n" in model_grade_prompt("R", 0.8125, "in", "out", "ideal")


def test_the_text_summary_rounds_like_zig_eval() -> None:
    stats = {
        "counts": {"total_runs": 32, "passed": 1, "failed": 31},
        "pass_rate": 1 / 32,
        "pass_rate_ci_low": 0.005538,
        "pass_rate_ci_high": 0.157475,
        "latency": {"mean_ms": 8.625, "p50_ms": 8, "p95_ms": 9},
        "retries": {"retried_runs": 0, "total_attempts": 32},
    }
    doc = {"evals": [{"eval_id": "g.e", "group": "g", "stats": stats, "services": []}]}
    text = format_text_report(doc)
    assert "pass_rate=3.13%" in text and "mean_ms=8.63" in text and "ci95=[0.55%, 15.75%]" in text


def test_integral_floats_are_written_without_a_fraction() -> None:
    assert json.dumps(integral_numbers({"a": 1.0, "b": [0.0, 0.5, True, 3]})) == (
        '{"a": 1, "b": [0, 0.5, true, 3]}'
    )
    assert json_number(1.0) == "1" and json_number(0.25) == "0.25"
