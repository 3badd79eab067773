"""Numbers written as zig_eval writes them (Zig's ``std.fmt`` and ``std.json``).

* A fixed number of decimals rounds **half up on the shortest decimal text** of
  the value: 0.03125 × 100 is ``3.125``, so two decimals give ``3.13`` (Python's
  ``f"{x:.2f}"`` rounds the binary value, ``3.12``); 0.8125 gives ``0.813``.
* In JSON, an integral float is written without a fraction: ``1``, not ``1.0``.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

__all__ = ["fixed", "integral_numbers", "json_number"]


def fixed(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, half up on its shortest decimal text."""
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def json_number(value: float) -> str:
    """A float as zig_eval's JSON writes it: integral values without a fraction (a NaN or an
    infinity, which JSON cannot hold, as ``null``)."""
    if not math.isfinite(value):
        return "null"
    return str(int(value)) if value.is_integer() else repr(value)


def integral_numbers(doc: Any) -> Any:
    """``doc`` with every integral float made an int, so ``json.dumps`` writes ``1`` (not ``1.0``)."""
    if isinstance(doc, float):
        return int(doc) if doc.is_integer() else doc
    if isinstance(doc, dict):
        return {key: integral_numbers(value) for key, value in doc.items()}
    if isinstance(doc, list | tuple):
        return [integral_numbers(value) for value in doc]
    return doc
