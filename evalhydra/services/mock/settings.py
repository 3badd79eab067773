"""The mock server's switches, as one mutable value object.

Every field can be changed while the server runs (``MockServer.settings`` or
``POST /_mock/config``); the server reads them afresh for each request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalhydra.config.schema import MockBehaviour
from evalhydra.services.mock.batches import BATCH_OUTCOMES
from evalhydra.services.mock.streaming import REASONING_SHAPES, STREAM_FAULTS, TOOL_WIRES, wire_set
from evalhydra.services.mock.tool_faults import TOOL_FAULTS

__all__ = ["DIALECTS", "FAULTS", "MockSettings"]

#: Values of :attr:`MockSettings.fault`, each forcing one misbehaviour on every
#: chat request (after ``fail_first_n``):
#:
#: - ``fail``: ``fail_status`` with the error body (and ``Retry-After`` when set).
#: - ``hang``: never answer; the connection is closed when the client goes away.
#: - ``malformed``: 200 with a truncated, invalid JSON body.
#: - ``reset``: headers promise a longer body; half of it is sent, then the socket closes.
#: - ``stall``: like ``reset`` but the socket stays open and silent (a read timeout).
#: - ``oversized``: a valid 200 completion whose body is larger than 8 MiB.
#: - ``missing_choices``: 200 JSON without ``choices``.
#: - ``empty_choices``: 200 JSON with ``choices: []``.
#: - ``content_null``: 200 with ``content: null`` and no tool calls.
#: - ``no_usage``: a normal completion without the ``usage`` block.
#: - ``html``: 200 ``text/html`` body that is not JSON.
#: - ``stream_cut``, ``stream_error``, ``stream_early_done``: a streamed reply cut half-way,
#:   with an error event half-way, or ended by ``[DONE]`` before any ``finish_reason``
#:   (:data:`~evalhydra.services.mock.streaming.STREAM_FAULTS`; a whole reply is answered as usual).
FAULTS = (
    "fail",
    "hang",
    "malformed",
    "reset",
    "stall",
    "oversized",
    "missing_choices",
    "empty_choices",
    "content_null",
    "no_usage",
    "html",
    *STREAM_FAULTS,
)

#: The providers whose rate-limit headers the mock can speak (:mod:`evalhydra.services.mock.limits`).
DIALECTS = ("openai", "bucket", "anthropic", "azure", "bare")

_RATES = ("fail_rate", "hang_rate", "malformed_rate", "reset_rate", "oversized_rate", "judge_sensitivity",
          "judge_specificity", "tool_wire_rate")


@dataclass
class MockSettings(MockBehaviour):
    """How the mock answers: the config's :class:`~evalhydra.config.schema.MockBehaviour`, checked.

    Rates are probabilities in [0, 1], drawn per chat request from one
    ``random.Random(seed)`` so a run is reproducible. One draw decides among
    fail, hang, malformed, reset and oversized, in that order, so their sum
    should stay <= 1.

    Every field is documented on :class:`~evalhydra.config.schema.MockBehaviour`.
    """

    @property
    def noisy_judge(self) -> bool:
        """Whether judge verdicts are drawn (the judge errs on purpose)."""
        return self.judge_sensitivity < 1.0 or self.judge_specificity < 1.0

    def __post_init__(self) -> None:
        for name in _RATES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
        if not 100 <= self.fail_status <= 599:
            raise ValueError(f"fail_status must be an HTTP status, got {self.fail_status!r}")
        if self.latency_ms < 0 or self.jitter_ms < 0:
            raise ValueError("latency_ms and jitter_ms must be >= 0")
        if self.fail_first_n < 0:
            raise ValueError("fail_first_n must be >= 0")
        if self.retry_after_s is not None and self.retry_after_s < 0:
            raise ValueError("retry_after_s must be >= 0 or None")
        if self.reasoning is not None and self.reasoning not in REASONING_SHAPES:
            raise ValueError(f"reasoning must be one of {', '.join(REASONING_SHAPES)} or null,"
                             f" got {self.reasoning!r}")
        if self.stream_delta_chars < 1 or self.stream_delay_ms < 0 or self.stream_split_bytes < 0:
            raise ValueError("stream_delta_chars must be >= 1, stream_delay_ms and stream_split_bytes >= 0")
        rates = (self.rate_limit_rps, self.rate_limit_later_rps, self.rate_limit_later_after_s)
        if min(rates) < 0 or self.rate_limit_burst < 1:
            raise ValueError("rate_limit_rps, rate_limit_later_rps and rate_limit_later_after_s must be >= 0,"
                             " rate_limit_burst >= 1")
        if self.rate_limit_dialect not in DIALECTS:
            raise ValueError(f"rate_limit_dialect must be one of {', '.join(DIALECTS)}, got "
                             f"{self.rate_limit_dialect!r}")
        if self.batch_delay_s < 0 or self.batch_fail_every < 0:
            raise ValueError("batch_delay_s and batch_fail_every must be >= 0")
        unknown = sorted(wire_set(self.tool_wire) - {*TOOL_WIRES, *TOOL_FAULTS})
        if self.tool_wire is not None and (unknown or not wire_set(self.tool_wire)):
            raise ValueError(f"tool_wire must name some of {', '.join((*TOOL_WIRES, *TOOL_FAULTS))}"
                             f" (comma-separated) or be null, got {self.tool_wire!r}")
        if self.batch_outcome is not None and self.batch_outcome not in BATCH_OUTCOMES:
            raise ValueError(f"batch_outcome must be one of {', '.join(BATCH_OUTCOMES)} or null,"
                             f" got {self.batch_outcome!r}")
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"fault must be one of {', '.join(FAULTS)} or null, got {self.fault!r}")

    @classmethod
    def from_config(cls, cfg: Any) -> MockSettings:
        """Build settings from a ``MockConfig``, a DictConfig or a plain mapping.

        Args:
            cfg: The config; its ``enabled`` key is ignored.

        Returns:
            New settings.

        Raises:
            ValueError: On an unknown key or an out-of-range value.
        """
        if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
            values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        else:
            values = {str(k): v for k, v in dict(cfg).items()}
        values.pop("enabled", None)  # the config's switch that starts the mock, not how it answers
        return cls(**_checked(values))

    def update(self, changes: Mapping[str, Any]) -> None:
        """Change some fields in place, all or none.

        Args:
            changes: Field names and new values.

        Raises:
            ValueError: On an unknown field or an invalid value (nothing changes).
        """
        new = dataclasses.replace(self, **_checked(dict(changes)))
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(new, f.name))

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dict."""
        return dataclasses.asdict(self)


def _checked(values: dict[str, Any]) -> dict[str, Any]:
    """Reject unknown field names and coerce JSON numbers to the field types."""
    types = {f.name: f.type for f in dataclasses.fields(MockSettings)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in types:
            raise ValueError(f"unknown mock setting {key!r}; known: {', '.join(types)}")
        out[key] = _coerce(key, str(types[key]), value)
    return out


def _coerce(key: str, type_name: str, value: Any) -> Any:
    """Coerce one value to the declared field type, or raise ValueError."""
    if value is None and "None" in type_name:
        return None
    kind = type_name.split(" ")[0]
    ok = {
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
    }[kind]
    if not ok:
        raise ValueError(f"mock setting {key!r} must be {type_name}, got {value!r}")
    return float(value) if kind == "float" else value
