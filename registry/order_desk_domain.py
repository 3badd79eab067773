"""The order desk as a τ²-bench-style domain (``evals/users/order_desk_tau2.json``): a database of
customers and orders, the tools a support agent acts through, and the policy they enforce
(``data/users/order_desk_tau2/policy.md``). One ``OrderDeskDomain`` is made per cell, set to the
task's initial state; ``state()`` is the database the ``tau2`` matcher compares."""

from __future__ import annotations

import copy
from typing import Any

#: Days after delivery within which an order can be refunded (the policy's).
REFUND_DAYS = 30

BASE_DB: dict[str, Any] = {
    "customers": {
        "C1": {"name": "Sam Lee", "email": "sam@example.com"},
        "C2": {"name": "Ana Ruiz", "email": "ana@example.com"},
        "C3": {"name": "Lee Park", "email": "lee@example.com"},
    },
    "orders": {
        "O1001": {"customer_id": "C1", "status": "delivered", "days_since_delivery": 5, "total": 40.0,
                  "address": "1 Elm St"},
        "O1002": {"customer_id": "C1", "status": "pending", "days_since_delivery": None, "total": 15.5,
                  "address": "1 Elm St"},
        "O1003": {"customer_id": "C2", "status": "delivered", "days_since_delivery": 45, "total": 99.0,
                  "address": "9 Oak Ave"},
        "O1004": {"customer_id": "C2", "status": "shipped", "days_since_delivery": None, "total": 12.0,
                  "address": "9 Oak Ave"},
        "O1005": {"customer_id": "C3", "status": "pending", "days_since_delivery": None, "total": 60.0,
                  "address": "4 Pine Rd"},
        "O1006": {"customer_id": "C3", "status": "delivered", "days_since_delivery": 29, "total": 25.0,
                  "address": "4 Pine Rd"},
    },
}


class OrderDeskDomain:
    """The order desk's database and tools, fresh for every cell."""

    def __init__(self) -> None:
        self.db: dict[str, Any] = copy.deepcopy(BASE_DB)
        self.transferred = False

    def set_state(self, initial_state: dict[str, Any]) -> None:
        """Apply a task's initial state: its ``initialization_data.agent_data`` over the database."""
        data = ((initial_state or {}).get("initialization_data") or {}).get("agent_data") or {}
        for table, rows in data.items():
            self.db.setdefault(table, {}).update(copy.deepcopy(rows))

    def find_customer(self, email: str) -> dict[str, Any]:
        """Find a customer by email: their id and name."""
        for customer_id, customer in self.db["customers"].items():
            if customer["email"] == email.strip().lower():
                return {"customer_id": customer_id, "name": customer["name"]}
        raise KeyError(f"no customer with email {email}")

    def get_order(self, order_id: str) -> dict[str, Any]:
        """Look an order up by its id: status, days since delivery, total, address."""
        return {"order_id": order_id, **self._order(order_id)}

    def refund_order(self, order_id: str, reason: str) -> dict[str, Any]:
        """Refund a delivered order (within 30 days of delivery), saying why."""
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ValueError(f"order {order_id} is {order['status']}: only delivered orders are refunded")
        if order["days_since_delivery"] > REFUND_DAYS:
            raise ValueError(f"order {order_id} was delivered {order['days_since_delivery']} days ago,"
                             f" over the {REFUND_DAYS}-day limit")
        order.update(status="refunded", refund_reason=reason)
        return {"order_id": order_id, "status": "refunded", "amount": order["total"]}

    def cancel_order(self, order_id: str) -> dict[str, Any]:
        """Cancel an order that has not shipped yet."""
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ValueError(f"order {order_id} is {order['status']}: only pending orders can be cancelled")
        order["status"] = "cancelled"
        return {"order_id": order_id, "status": "cancelled"}

    def change_address(self, order_id: str, address: str) -> dict[str, Any]:
        """Change the delivery address of an order that has not shipped yet."""
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ValueError(f"order {order_id} is {order['status']}: the address can no longer change")
        order["address"] = address
        return {"order_id": order_id, "address": address}

    def transfer_to_human_agents(self, summary: str) -> str:
        """Hand the customer to a person, with a summary of the request."""
        self.transferred = True
        return "Transfer successful"

    def assert_refunded(self, order_id: str) -> bool:
        """Whether an order is refunded: an environment assertion a task may name (``assert_*``
        methods are never offered to the agent)."""
        return bool(self._order(order_id)["status"] == "refunded")

    def state(self) -> dict[str, Any]:
        """The database: what the task's expected actions must also lead to."""
        return self.db

    def _order(self, order_id: str) -> dict[str, Any]:
        orders: dict[str, dict[str, Any]] = self.db["orders"]
        if order_id not in orders:
            raise KeyError(f"no order {order_id}")
        return orders[order_id]
