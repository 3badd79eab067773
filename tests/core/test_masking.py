"""Masking secrets: found at any depth, and nothing rebuilt when none is there."""

from __future__ import annotations

from evalhydra.core.masking import MASK, holds_secret, mask_value
from evalhydra.execute.masked import masked_rows
from tests.helpers import result_row

KEY = "sk-test-0123456789abcdef"


def test_a_secret_is_found_at_any_depth_and_only_there() -> None:
    assert holds_secret({"a": [1, ("x", {"k": f"Bearer {KEY}"})]}, [KEY])
    assert holds_secret({f"{KEY}": 1}, [KEY])  # a key of a dict too
    assert not holds_secret({"a": [1, ("x", {"k": "Bearer sk-other"})], "n": None}, [KEY])
    assert mask_value({"a": [f"x{KEY}y"]}, [KEY]) == {"a": [f"x{MASK}y"]}


def test_rows_without_a_secret_pass_through_and_rows_with_one_are_masked() -> None:
    from evalhydra.store.rows import ResultRow

    row = ResultRow(**result_row("k1", "run-1", output="clean output", details={"k": ["fine"]}))
    attempts = [{"cell_key": "k1", "error_message": "timeout"}]
    same_row, same_attempts = masked_rows(row, attempts, [KEY])
    assert same_row is row and same_attempts is attempts  # nothing to mask: nothing rebuilt
    leaky = ResultRow(**result_row("k2", "run-1", output=f"the key is {KEY}", details={"k": [KEY]}))
    masked, masked_attempts = masked_rows(leaky, [{"error_message": f"401 for {KEY}"}], [KEY])
    assert KEY not in masked.output and masked.details == {"k": [MASK]}
    assert masked_attempts == [{"error_message": f"401 for {MASK}"}]
