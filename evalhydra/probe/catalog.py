"""The probe's requests: a fixed, deterministic set, each a plain instruction any model follows
(and evalhydra's mock reads as a script: "Call NAME with {JSON}.").

Every request asks for ``temperature: 0`` and a fixed ``seed``, so the streamed and the whole
answer to the same request can be compared. The three-turn round trip is built from the replies
before it (:func:`round_trip`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CITY", "LOOKUP_SCHEMA", "PROBES", "QUICK", "SEED", "chat_body", "responses_bodies", "round_trip"]

SEED = 7
#: A city with a character outside ASCII: its UTF-8 bytes must survive being streamed in pieces.
CITY = "Zürich"
_STRING = {"type": "string"}
WEATHER: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": _STRING}, "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a timezone.",
    "parameters": {"type": "object", "properties": {"timezone": _STRING}, "required": ["timezone"]}}}
PING = {"type": "function", "function": {
    "name": "ping", "description": "Check the service is up. Takes no arguments.",
    "parameters": {"type": "object", "properties": {}}}}
LOOKUP_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"id": {"type": "integer"}},
                                 "required": ["id"], "additionalProperties": False}
LOOKUP = {"type": "function", "function": {
    "name": "lookup", "description": "Look an order up by its number.", "strict": True,
    "parameters": LOOKUP_SCHEMA}}

SINGLE = f'Call get_weather with {{"city": "{CITY}"}}.'
PARALLEL = ('Call get_weather with {"city": "Paris"}. Call get_time with {"timezone": "Europe/Paris"}. '
            "Make both calls at once, in parallel.")
HELLO = "Say hello."
TWO_STEPS = ('Call get_weather with {"city": "Paris"}. Call get_time with {"timezone": "UTC"}. '
             "One call at a time. Then reply with exactly Done.")

#: Each probe: its name, prompt, tools and the request's other fields.
PROBES: dict[str, tuple[str, list[dict[str, Any]], dict[str, Any]]] = {
    "single": (SINGLE, [WEATHER, TIME], {}),
    "single_stream": (SINGLE, [WEATHER, TIME], {"stream": True, "stream_options": {"include_usage": True}}),
    "parallel": (PARALLEL, [WEATHER, TIME], {}),
    "parallel_stream": (PARALLEL, [WEATHER, TIME], {"stream": True}),
    "parallel_off": (PARALLEL, [WEATHER, TIME], {"parallel_tool_calls": False}),
    "choice_none": (SINGLE, [WEATHER, TIME], {"tool_choice": "none"}),
    "choice_required": (HELLO, [WEATHER, TIME], {"tool_choice": "required"}),
    "choice_named": (HELLO, [WEATHER, TIME], {"tool_choice": {"type": "function",
                                                               "function": {"name": "get_time"}}}),
    "allowed_tools": (HELLO, [WEATHER, TIME], {"tool_choice": {"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "get_time"}}]}}}),
    "no_arguments": ("Call ping with {}.", [PING], {}),
    "no_arguments_stream": ("Call ping with {}.", [PING], {"stream": True}),
    "strict": ('Call lookup with {"id": 7}.', [LOOKUP], {}),
}
#: The probes ``evalhydra check`` sends (single and parallel calls, whole and streamed).
QUICK = ("single", "single_stream", "parallel", "parallel_stream")


def chat_body(model: str, name: str) -> dict[str, Any]:
    """The chat-completions body of probe ``name``."""
    prompt, tools, extra = PROBES[name]
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "tools": tools,
            "temperature": 0, "seed": SEED, "max_tokens": 256, **extra}


def round_trip(model: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    """The two-step script's next request, after ``history`` (assistant messages and tool results)."""
    return {"model": model, "messages": [{"role": "user", "content": TWO_STEPS}, *history],
            "tools": [WEATHER, TIME], "temperature": 0, "seed": SEED, "max_tokens": 256}


def responses_bodies(model: str) -> tuple[dict[str, Any], str]:
    """The Responses API's first request (a function call asked for) and the prompt it carries."""
    prompt = f"{SINGLE} Then reply with exactly Sunny."
    tools = [{"type": "function", **WEATHER["function"]}]
    return {"model": model, "input": [{"role": "user", "content": prompt}], "tools": tools,
            "temperature": 0, "max_output_tokens": 256}, prompt
