"""Reference implementations (tests only): per-case verdicts and flakiness in Python.

The shipped reports compute them in SQL (the ``case_flakiness`` view and
:mod:`evalhydra.analysis.aggregate`); tests check both agree.
"""

from __future__ import annotations

from evalhydra.stats.rates import BROKEN, FLAKY, STABLE, _check_counts

__all__ = ["flakiness", "stability_verdict"]


def stability_verdict(passed: int, total: int) -> str:
    """zrb-llm-evaluator's verdict for one (model, case) cell.

    Args:
        passed: Passing trials.
        total: Trials (>= 1).

    Returns:
        ``"🟢 STABLE"`` if all passed, ``"🔴 BROKEN"`` if none did, else ``"🟡 FLAKY"``.
    """
    _check_counts(passed, total)
    if total == 0:
        raise ValueError("a stability verdict needs at least one trial")
    if passed == total:
        return STABLE
    if passed == 0:
        return BROKEN
    return FLAKY


def flakiness(passed: int, total: int) -> float:
    """How flaky a case is: ``2·min(passed, failed) / total``.

    0.0 for a stable or broken case, 1.0 for an even split; 0.0 when there are
    no trials.

    Args:
        passed: Passing trials.
        total: Trials.

    Returns:
        A fraction in [0, 1].
    """
    _check_counts(passed, total)
    if total == 0:
        return 0.0
    return 2.0 * min(passed, total - passed) / total
