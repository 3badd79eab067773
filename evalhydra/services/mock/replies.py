"""Deterministic replies: what the mock model "says" for a chat request.

:func:`reply_for` is a pure function of the request payload. Rules, tried in
order on the text of the last user message (text parts concatenated):

0. A simulated user's request (its system message carries a ``<mock-user-script>``): the
   script's next turn (:mod:`evalhydra.services.mock.simulated_user`).

1. Judge prompts.
   a. zig_eval ``model_grade`` (starts with "You are grading an LLM or product
      response for an eval."): JSON only, ``{"score", "passed", "reason"}``;
      score 1.0 when the candidate output and the ideal answer contain one
      another (case-insensitive), or when there is no ideal and the output is
      non-empty; else 0.0. ``passed`` = score >= the prompt's passing score.
      A judge that errs (``judge_errors``: sensitivity, specificity) draws its verdict instead:
      a right output passes with the first chance, a wrong one fails with the second.
   b. aiwg rubric evaluator (any system or user text mentions
      ``rubric_scores``): JSON with ``score``, ``pass``, ``feedback``,
      ``rubric_scores`` (one per criterion of the ``Weights:`` line),
      ``failure_category`` and ``suggested_fix``. Each criterion scores 1.0
      when the generated output is non-empty and free of the token "BAD", else
      0.3; ``score`` is the weighted mean; ``pass`` = score >= 0.85 (or the
      prompt's ``score >= X``). ``MOCK_FENCE`` anywhere in the request wraps
      the JSON in a ```json fence.
2. Refinement: "Previous attempt was insufficient." replaces the text with
   its "Original request:" part, with every "BAD" token removed, and the
   rules below apply to that.
3. Tool scripts and results: "Call NAME with {JSON}." steps in the text are called one per turn
   (all in one turn when the text says "in parallel"), each call's id ``call_K`` for step K; once
   every step is called, or when the conversation holds tool results but no step is left, the
   reply answers from the tool results: "Reply with exactly X." in the text gives X, else the
   last tool message's text.
   Then, when tools are offered and the text names one (the name, the name
   with "_" as spaces, or every "_"-separated word of it as words of the
   text; case-insensitive), the reply is ``content: null`` plus one tool call.
   ``tool_choice`` "none" disables this; a named ``tool_choice`` forces it (a script's step that
   names another tool is not called); ``allowed_tools`` offers only the tools it lists (its
   ``mode`` read as ``tool_choice``); ``parallel_tool_calls: false`` makes one call a message.
   String arguments are the text's words after "for", lowercased, without
   punctuation and stopwords ("Search the web for the weather in Melbourne."
   gives "weather melbourne"); integer 1, number 1.0, boolean true, array [],
   object {}.
4. "Reply with exactly X." gives X (quotes around X dropped). "Reply X with
   probability P." gives X with probability P and "not X" otherwise, drawn
   from the server's seeded generator (``chance``): a case whose true pass
   rate is known, for testing statistics end to end.
5. JSON (the text says "JSON", or ``response_format`` is ``json_object`` or
   ``json_schema``): "with an answer field set to OK." gives
   ``{"answer": "OK"}``; otherwise ``{"answer": <text>}``, or, for a
   ``json_schema``, an object filling its properties.
6. Otherwise the text itself (echo).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

from evalhydra.services.mock.judge_replies import judge_draw, judge_reply
from evalhydra.services.mock.simulated_user import user_message
from evalhydra.services.mock.text import message_text

__all__ = ["CHANCE_MARK", "prompt_text", "reply_for", "usage_for"]

_REFINE_MARK = "Previous attempt was insufficient."
_STOPWORDS = frozenset({"the", "a", "an", "in", "of", "for", "on", "at", "to"})
_CHANCE = re.compile(r"reply\s+(\S+)\s+with probability\s+([0-9]*\.?[0-9]+)", re.I)
#: The bytes that mark a request whose reply is drawn at random (it must not be cached).
CHANCE_MARK = b"with probability"
_EXACTLY = re.compile(r"reply with exactly\s+([^\n]*?)(?:\.(?=\s|$)|\n|$)", re.I)
_FIELD = re.compile(r"\bwith an?\s+(\w+)\s+field\b(?:\s+set to\s+([^\n]*?)(?:\.(?=\s|$)|\n|$))?", re.I)
_BAD = re.compile(r"\bBAD\b[ \t]?")
_WORD = re.compile(r"\w+")
_TYPE_DEFAULTS: dict[str, Any] = {
    "integer": 1,
    "number": 1.0,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}


def prompt_text(payload: dict[str, Any]) -> str:
    """Return the text of the last user message ("" when there is none)."""
    for message in reversed(payload.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def reply_for(payload: dict[str, Any], chance: Callable[[], float] | None = None, *,
              judge_errors: tuple[float, float] | None = None) -> dict[str, Any]:
    """Return the assistant message the mock sends for a chat request.

    Args:
        payload: The parsed ``/chat/completions`` request body.
        chance: Draws a uniform number in [0, 1) for "Reply X with probability P."
            (None: the reply is X exactly when P >= 0.5).
        judge_errors: As a ``model_grade`` judge, its (sensitivity, specificity): a right output
            passes with the first chance, a wrong one fails with the second (drawn by ``chance``).

    Returns:
        ``{"role": "assistant", "content": str | None}`` plus ``tool_calls``
        when the reply is a tool call.
    """
    said = user_message(payload)
    if said is not None:
        return said
    text = prompt_text(payload)
    judged = judge_reply(payload, text, judge_draw(chance, judge_errors))
    if judged is not None:
        return _content(judged)
    if _REFINE_MARK in text:
        text = _original_request(text)
    scripted = _scripted_reply(payload, text)
    if scripted is not None:
        return scripted
    call = _tool_reply(payload, text)
    if call is not None:
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    drawn = _CHANCE.search(text)
    if drawn:
        word, probability = drawn.group(1), float(drawn.group(2))
        hit = (chance() if chance else 0.5) < probability
        return _content(word if hit else f"not {word}")
    exact = _EXACTLY.search(text)
    if exact:
        return _content(_unquote(exact.group(1).strip()))
    if _wants_json(payload, text):
        return _content(_json_reply(payload, text))
    return _content(text)


def usage_for(payload: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    """Return a deterministic OpenAI ``usage`` block (about 4 characters a token).

    Text parts count by length, each non-text part (an image) as 85 tokens,
    offered tools by the length of their JSON.
    """
    chars, images = 0, 0
    for m in payload.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        chars += len(message_text(content))
        if isinstance(content, list):
            images += sum(1 for p in content if isinstance(p, dict) and "text" not in p)
    prompt = math.ceil(chars / 4) + 85 * images
    if payload.get("tools"):
        prompt += math.ceil(len(json.dumps(payload["tools"])) / 4)
    out = message.get("content") or ""
    for call in message.get("tool_calls") or ():
        out += call["function"]["arguments"]
    thought = message.get("reasoning_content") or message.get("reasoning") or ""
    prompt, completion = max(prompt, 1), max(math.ceil(len(out + thought) / 4), 1)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    if not thought and out.startswith("<think>"):  # the thinking inline, in the content
        end = out.find("</think>")
        thought = out if end < 0 else out[:end + len("</think>")]
    if thought:  # a reasoning reply: how many of the completion tokens were thinking
        usage["completion_tokens_details"] = {"reasoning_tokens": math.ceil(len(thought) / 4)}
    return usage


def _content(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text


# -- judges -------------------------------------------------------------------


# -- refinement, tools, JSON ----------------------------------------------------


def _original_request(text: str) -> str:
    marker = text.find("Original request:")
    original = text[marker + len("Original request:") :] if marker >= 0 else text
    return _BAD.sub("", original).strip()


def _tool_specs(payload: dict[str, Any]) -> list[dict[str, Any]]:
    specs = []
    allowed = _allowed(payload)
    for tool in payload.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        spec: dict[str, Any] = tool["function"] if isinstance(tool.get("function"), dict) else tool
        if isinstance(spec.get("name"), str) and (allowed is None or spec["name"] in allowed):
            specs.append(spec)
    return specs


def _declared(payload: dict[str, Any]) -> set[str]:
    """Every tool name the request declares, whatever its ``tool_choice`` allows."""
    names: set[str] = set()
    for tool in payload.get("tools") or []:
        spec = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            names.add(spec["name"])
    return names


def _allowed(payload: dict[str, Any]) -> set[str] | None:
    """The tool names an ``allowed_tools`` choice lists (None: no such choice, every tool)."""
    choice = payload.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "allowed_tools":
        return None
    listed = (choice.get("allowed_tools") or {}).get("tools") or []
    return {str((t.get("function") or t).get("name")) for t in listed if isinstance(t, dict)}


def _choice(payload: dict[str, Any]) -> Any:
    """``tool_choice`` with an ``allowed_tools`` choice read as its ``mode``."""
    choice = payload.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return (choice.get("allowed_tools") or {}).get("mode") or "auto"
    return choice


def _forced(payload: dict[str, Any]) -> str | None:
    """The tool a named ``tool_choice`` forces, if any."""
    choice = _choice(payload)
    return (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None


def _names_tool(name: str, text: str) -> bool:
    lower = text.lower()
    name = name.lower()
    if name in lower or name.replace("_", " ") in lower:
        return True
    words = set(_WORD.findall(lower))
    parts = [p for p in re.split(r"[_\W]+", name) if p]
    return bool(parts) and all(p in words for p in parts)


def _pick_tool(payload: dict[str, Any], text: str) -> dict[str, Any] | None:
    specs = _tool_specs(payload)
    choice = _choice(payload)
    if not specs or choice == "none":
        return None
    forced = _forced(payload)
    if forced is not None:
        for spec in specs:
            if spec["name"] == forced:
                return spec
    for spec in specs:
        if _names_tool(spec["name"], text):
            return spec
    return specs[0] if choice == "required" else None


def _tool_reply(payload: dict[str, Any], text: str) -> dict[str, Any] | None:
    spec = _pick_tool(payload, text)
    if spec is None:
        return None
    arguments = json.dumps(_tool_arguments(spec.get("parameters"), text), separators=(",", ":"))
    digest = hashlib.sha1(f"{spec['name']}\0{arguments}".encode()).hexdigest()[:24]
    return {
        "id": f"call_{digest}",
        "type": "function",
        "function": {"name": spec["name"], "arguments": arguments},
    }


_STEP = re.compile(r"\bcall\s+(\w+)\s+with\s+(?=\{)", re.I)
_DECODER = json.JSONDecoder()


def _script(text: str) -> list[tuple[str, str]]:
    """The "Call NAME with {JSON}." steps of a text: (name, arguments), in order."""
    steps = []
    for match in _STEP.finditer(text):
        try:
            arguments, _ = _DECODER.raw_decode(text, match.end())
        except ValueError:
            continue
        steps.append((match.group(1), json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)))
    return steps


def _calls_made(payload: dict[str, Any]) -> int:
    """Tool calls the assistant made over the whole conversation."""
    return sum(len(m.get("tool_calls") or ()) for m in payload.get("messages") or []
               if isinstance(m, dict) and m.get("role") == "assistant")


def _since_user(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages after the last user message."""
    messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return messages[last + 1:]


def _scripted_reply(payload: dict[str, Any], text: str) -> dict[str, Any] | None:
    """Rule 3's tool script, or an answer from tool results; None when neither applies."""
    after = _since_user(payload)
    made = sum(len(m.get("tool_calls") or ()) for m in after if m.get("role") == "assistant")
    results = [m for m in after if m.get("role") == "tool"]
    steps = _script(text) if payload.get("tools") and _choice(payload) != "none" else []
    # A script may name a tool nobody declared (a model's slip, for the loop's unknown-tool path), but
    # never one an allowed_tools choice leaves out or a named tool_choice overrides.
    excluded = _declared(payload) - {spec["name"] for spec in _tool_specs(payload)}
    forced = _forced(payload)
    if made < len(steps) and steps[made][0] not in excluded and forced in (None, steps[made][0]):
        parallel = "in parallel" in text.lower() and payload.get("parallel_tool_calls") is not False
        todo = steps[made:] if parallel else steps[made:made + 1]
        before = _calls_made(payload) - made  # ids stay unique over a conversation's user turns
        calls = [{"id": f"call_{before + made + i}", "type": "function",
                  "function": {"name": name, "arguments": args}} for i, (name, args) in enumerate(todo)]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if not results:
        return None
    exact = _EXACTLY.search(text)
    return _content(_unquote(exact.group(1).strip()) if exact else message_text(results[-1].get("content")))


def _query_words(text: str) -> str:
    match = re.search(r"\bfor\b(.*)", text, re.I | re.S)
    words = _WORD.findall((match.group(1) if match else text).lower())
    kept = [w for w in words if w not in _STOPWORDS]
    if not kept and match:
        kept = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
    return " ".join(kept)


def _tool_arguments(schema: Any, text: str) -> dict[str, Any]:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {}
    props: dict[str, Any] = schema["properties"]
    names = [n for n in schema.get("required") or [] if n in props] or list(props)[:1]
    return {name: _value_for(props[name], text) for name in names}


def _value_for(prop: Any, text: str) -> Any:
    kind = prop.get("type", "string") if isinstance(prop, dict) else "string"
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if not isinstance(kind, str):
        kind = "string"
    if isinstance(prop, dict) and isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    return _TYPE_DEFAULTS[kind] if kind in _TYPE_DEFAULTS else _query_words(text)


def _wants_json(payload: dict[str, Any], text: str) -> bool:
    fmt = payload.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        return True
    return re.search(r"\bjson\b", text, re.I) is not None


def _json_reply(payload: dict[str, Any], text: str) -> str:
    match = _FIELD.search(text)
    field = match.group(1) if match else "answer"
    value = _unquote(match.group(2).strip()) if match and match.group(2) else text
    schema = _response_schema(payload)
    if schema is None:
        return json.dumps({field: value})
    props = schema["properties"]
    obj = {name: value if name == field else _value_for(props[name], text) for name in props}
    return json.dumps(obj)


def _response_schema(payload: dict[str, Any]) -> dict[str, Any] | None:
    fmt = payload.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema") or {}
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        return schema
    return None
