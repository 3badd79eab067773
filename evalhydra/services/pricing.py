"""Cost of a call from its token usage and the service's per-million-token prices."""

from __future__ import annotations

from evalhydra.config.schema import PricingConfig
from evalhydra.core.values import Usage

__all__ = ["cost_usd"]

_PER_MTOK = 1e-6


def cost_usd(usage: Usage, pricing: PricingConfig) -> float:
    """Return the USD cost of ``usage`` at ``pricing``.

    Cached prompt tokens are billed at ``cached_input_per_mtok`` (or the input
    price when that is unset); the rest of the prompt at ``input_per_mtok``;
    completion tokens at ``output_per_mtok``, except the reasoning tokens among them at
    ``reasoning_per_mtok`` when that is set::

        (prompt - cached) * input + cached * cached_input
          + (completion - reasoning) * output + reasoning * reasoning_price

    all divided by one million.

    Args:
        usage: Token counts from the response.
        pricing: USD per million tokens.

    Returns:
        The cost in USD (0.0 with the default, zero prices).
    """
    if not (pricing.input_per_mtok or pricing.output_per_mtok or pricing.cached_input_per_mtok
            or pricing.reasoning_per_mtok):
        return 0.0  # the default: no prices set
    cached_price = pricing.cached_input_per_mtok
    if cached_price is None:
        cached_price = pricing.input_per_mtok
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    thinking = min(usage.reasoning_tokens, usage.completion_tokens)
    thinking_price = pricing.reasoning_per_mtok
    if thinking_price is None:
        thinking_price = pricing.output_per_mtok
    return (
        (usage.prompt_tokens - cached) * pricing.input_per_mtok
        + cached * cached_price
        + (usage.completion_tokens - thinking) * pricing.output_per_mtok
        + thinking * thinking_price
    ) * _PER_MTOK
