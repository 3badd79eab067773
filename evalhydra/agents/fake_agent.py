"""A scriptable stand-in for an agent CLI, for tests and demos (stdlib only).

Run it as ``python -m evalhydra.agents.fake_agent`` with any built-in
template's arguments:

* zrb: ``chat --interactive false --yolo true --model M --message I --session S``
  (writes the session history, prints ``💸`` usage lines)
* claude-code: ``-p I --output-format json --model M`` (prints one JSON result)
* opencode: ``run --model M I`` (prints a ``Tokens:`` line)

It obeys directives in the instruction, one per line; other lines are ignored:

=========================  ====================================================
``SAY <text>``             print assistant text
``WRITE <file> <text>``    write text to a file in the cwd (``\\n``, ``\\t`` escapes)
``READ <file>``            print a file of the cwd
``NOTE <text>``            append a line to ``$<P>_LLM_JOURNAL_DIR/<session>.md``
``STDERR <text>``          print to stderr
``ENV <name>``             print ``<name>=<its value in the environment>`` (empty when unset)
``MARKER <status>``        print ``VERIFICATION_RESULT: <status>``
``TOKENS <in> <out> [c]``  set the usage reported at the end (default 100 50 0)
``HISTORY <shape>``        ``pydantic`` (default), ``legacy``, ``bad`` or ``none``
``SLEEP <seconds>``        sleep
``EXIT <n>``               stop and exit with status n
``SPAWN``                  start a sleeping child (its pid goes to ``child.pid``)
``HANG``                   ``SPAWN``, then sleep forever
``SPAWN_SESSION``          ``SPAWN`` a child in a session of its own (as ``setsid`` does)
``FLOOD <MiB>``            print that many MiB of lines to stdout
=========================  ====================================================

A model whose name contains ``lazy`` skips every ``WRITE`` (to demo failures).
The history goes to ``$<P>_LLM_HISTORY_DIR/<session>.json`` after every step,
so a killed run leaves a partial history; ``<P>`` is found from the
environment (``ZRB`` preferred).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalhydra.core.version import __version__

__all__ = ["main"]

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}


@dataclass
class _Run:
    """The fake agent's state: what it did, and what it will report."""

    instruction: str
    model: str
    session: str | None
    events: list[tuple[str, Any]] = field(default_factory=list)
    usage: tuple[int, int, int] = (100, 50, 0)
    history_shape: str = "pydantic"
    exit_code: int = 0
    finished: bool = False

    def text(self, value: str) -> None:
        print(value, flush=True)
        self.events.append(("text", value))

    def tool(self, name: str, args: dict[str, Any], result: str) -> None:
        self.events.append(("tool", (name, args, result)))
        count = sum(kind == "tool" for kind, _ in self.events)
        print(f"🧰 call_{count} | {name} {json.dumps(args)}", flush=True)


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


# ------------------------------------------------------------------ directives


def _write(run: _Run, arg: str) -> None:
    path, _, content = arg.partition(" ")
    if "lazy" in run.model:
        run.text(f"I would rather not write {path}.")
        return
    text = _unescape(content)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")
    run.tool("write_file", {"path": path, "content": text}, "ok")


def _read(run: _Run, arg: str) -> None:
    try:
        content = Path(arg).read_text(encoding="utf-8")
    except OSError as exc:
        content = f"error: {exc}"
    print(content, flush=True)
    run.tool("read_file", {"path": arg}, content)


def _note(run: _Run, arg: str) -> None:
    journal = _env_dir("JOURNAL")
    if journal and run.session:
        with (journal / f"{run.session}.md").open("a", encoding="utf-8") as handle:
            handle.write(arg + "\n")


def _tokens(run: _Run, arg: str) -> None:
    numbers = [int(n) for n in arg.split()] + [0, 0, 0]
    run.usage = (numbers[0], numbers[1], numbers[2])


def _spawn(run: _Run, arg: str, *, session: bool = False) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                             start_new_session=session)
    Path("child.pid").write_text(str(child.pid), encoding="utf-8")
    print(f"CHILD_PID {child.pid}", flush=True)


def _hang(run: _Run, arg: str) -> None:
    _spawn(run, arg)
    _save_history(run)
    while True:
        time.sleep(3600)


def _flood(run: _Run, arg: str) -> None:
    line = b"flood " * 170 + b"\n"  # about 1 KiB
    out = sys.stdout.buffer
    for i in range(int(arg or "1") * 1024):
        out.write(b"%d " % i + line)
    out.flush()


def _exit(run: _Run, arg: str) -> None:
    run.exit_code = int(arg or "1")


_DIRECTIVES: dict[str, Callable[[_Run, str], None]] = {
    "SAY": lambda run, arg: run.text(arg),
    "WRITE": _write,
    "READ": _read,
    "NOTE": _note,
    "STDERR": lambda run, arg: print(arg, file=sys.stderr, flush=True),
    "ENV": lambda run, arg: print(f"{arg}={os.environ.get(arg, '')}", flush=True),
    "MARKER": lambda run, arg: print(f"VERIFICATION_RESULT: {arg}", flush=True),
    "TOKENS": _tokens,
    "HISTORY": lambda run, arg: setattr(run, "history_shape", arg.strip()),
    "SLEEP": lambda run, arg: time.sleep(float(arg)),
    "EXIT": _exit,
    "SPAWN": _spawn,
    "SPAWN_SESSION": lambda run, arg: _spawn(run, arg, session=True),
    "FLOOD": _flood,
    "HANG": _hang,
}


def _perform(run: _Run, on_step: Callable[[_Run], None]) -> None:
    for line in run.instruction.splitlines():
        keyword, _, arg = line.strip().partition(" ")
        action = _DIRECTIVES.get(keyword)
        if action is None:
            continue
        action(run, arg.strip())
        if keyword == "EXIT":
            return
        on_step(run)
    run.text("Done.")
    run.finished = True


# ------------------------------------------------------------------ history


def _env_dir(kind: str) -> Path | None:
    suffix = f"_LLM_{kind}_DIR"
    names = sorted(name for name in os.environ if name.endswith(suffix))
    if f"ZRB{suffix}" in names:
        names.insert(0, f"ZRB{suffix}")
    return Path(os.environ[names[0]]) if names else None


def _pydantic_history(run: _Run) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": run.instruction}]}
    ]
    for index, (kind, value) in enumerate(run.events):
        if kind == "text":
            messages.append({"kind": "response", "parts": [{"part_kind": "text", "content": value}]})
            continue
        name, args, result = value
        call_id = f"call_{index}"
        encoded = json.dumps(args) if index % 2 else args  # both shapes pydantic-ai writes
        call = {"part_kind": "tool-call", "tool_name": name, "args": encoded, "tool_call_id": call_id}
        ret = {"part_kind": "tool-return", "tool_name": name, "content": result, "tool_call_id": call_id}
        messages.append({"kind": "response", "parts": [call]})
        messages.append({"kind": "request", "parts": [ret]})
    return messages


def _legacy_history(run: _Run) -> dict[str, Any]:
    entries: list[dict[str, Any]] = [{"role": "user", "content": run.instruction}]
    for index, (kind, value) in enumerate(run.events):
        if kind == "text":
            entries.append({"role": "assistant", "content": value})
        elif index % 2:
            entries.append({"tool_call": {"name": value[0], "arguments": json.dumps(value[1])}})
        else:
            entries.append({"tool_name": value[0], "args": value[1]})
    return {"history": entries}


def _save_history(run: _Run) -> None:
    history_dir = _env_dir("HISTORY")
    if history_dir is None or run.session is None or run.history_shape == "none":
        return
    if run.history_shape == "bad":
        text = "{not json"
    elif run.history_shape == "legacy":
        text = json.dumps(_legacy_history(run), indent=2)
    else:
        text = json.dumps(_pydantic_history(run), indent=2)
    target = history_dir / f"{run.session}.json"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


# ------------------------------------------------------------------ usage output


def _zrb_usage(run: _Run, requests: int, scale: float = 1.0) -> str:
    tin, tout, cache = (int(n * scale) for n in run.usage)
    tools = sum(kind == "tool" for kind, _ in run.events)
    return (
        f"💸 (Requests: {requests} | Tool Calls: {tools} | Total: {tin + tout}) "
        f"Input: {tin} | Audio Input: 7 | Output: {tout} | Audio Output: 9 | "
        f"Cache Read: {cache} | Cache Write: 0 | Details: {{}}"
    )


def _claude_result(run: _Run) -> str:
    tin, tout, cache = run.usage
    texts = [value for kind, value in run.events if kind == "text"]
    return json.dumps(
        {
            "type": "result",
            "subtype": "success" if run.exit_code == 0 else "error",
            "is_error": run.exit_code != 0,
            "result": "\n".join(texts),
            "num_turns": len(run.events),
            "usage": {
                "input_tokens": tin,
                "output_tokens": tout,
                "cache_read_input_tokens": cache,
                "cache_creation_input_tokens": 0,
            },
        }
    )


# ------------------------------------------------------------------ CLI


def _parse(argv: list[str]) -> tuple[str, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="fake_agent", add_help=False)
    if argv[:1] == ["chat"]:
        for flag in ("--interactive", "--yolo", "--model", "--message", "--session"):
            parser.add_argument(flag)
        return "zrb", parser.parse_args(argv[1:])
    if argv[:1] == ["run"]:
        parser.add_argument("--model", default="")
        parser.add_argument("message")
        return "opencode", parser.parse_args(argv[1:])
    parser.add_argument("-p", dest="message", required=True)
    parser.add_argument("--output-format", default="text")
    parser.add_argument("--model", default="")
    return "claude-code", parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the fake agent; returns the exit status."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8")
    args_given = list(sys.argv[1:] if argv is None else argv)
    if args_given == ["--version"]:
        print(f"fake_agent {__version__}")
        return 0
    mode, args = _parse(args_given)
    session = getattr(args, "session", None) if mode == "zrb" else None
    run = _Run(instruction=args.message or "", model=args.model or "", session=session)
    _note(run, f"session {session} started")
    requests = [0]

    def on_step(current: _Run) -> None:
        _save_history(current)
        if mode == "zrb":
            requests[0] += 1
            print(_zrb_usage(current, requests[0], scale=0.5), flush=True)

    _perform(run, on_step)
    _save_history(run)
    if mode == "zrb":
        print(_zrb_usage(run, requests[0] + 1), flush=True)
    elif mode == "opencode":
        tin, tout, cache = run.usage
        print(f"Tokens: {tin:,} input, {tout:,} output, {cache:,} cache read", flush=True)
    else:
        print(_claude_result(run), flush=True)
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
