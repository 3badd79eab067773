"""Tools of the order-desk example (``evals/tools/order_desk.json``): a support agent that looks
orders up and refunds them. One ``OrderDesk`` is made per cell; its ``state()`` is what the
``state`` matcher checks, so "did it refund" is scored apart from "said it refunded"."""

from __future__ import annotations

from typing import Any

ORDERS = {7: "delivered, box damaged", 8: "shipped", 9: "delivered", 10: "delivered, wrong size",
          11: "delivered, late", 12: "delivered, missing a part", 13: "delivered, wrong colour",
          14: "delivered, scratched", 15: "delivered, not as described", 16: "delivered, arrived wet"}


class OrderDesk:
    """A tiny order system, fresh for every cell."""

    def __init__(self) -> None:
        self.refunds: list[int] = []

    def lookup_order(self, order_id: int) -> str:
        """Look an order up by its number."""
        if order_id not in ORDERS:
            raise KeyError(f"no order {order_id}")
        return f"order {order_id}: {ORDERS[order_id]}"

    def refund(self, order_id: int, reason: str) -> dict[str, Any]:
        """Refund an order, saying why."""
        if order_id not in ORDERS:
            raise KeyError(f"no order {order_id}")
        self.refunds.append(order_id)
        return {"refunded": order_id, "reason": reason}

    def state(self) -> dict[str, Any]:
        """What the desk did in this cell."""
        return {"refunds": self.refunds, "refund_count": len(self.refunds)}
