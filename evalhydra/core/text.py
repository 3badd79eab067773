"""Text from outside shown safely: control characters made visible.

Outputs, reasons and ids come from endpoints, datasets, judges and merged
stores. Printed raw, an escape sequence (``ESC[2J`` clears the screen, OSC 52
writes the clipboard) acts on the reader's terminal, and in Markdown it hides
text. :func:`visible` spells every C0 and C1 control character (and DEL) as
``\\xNN`` instead.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["command_line", "override", "visible"]

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS_AND_LINES = re.compile("[\x00-\x1f\x7f-\x9f]")


def visible(text: str, *, lines: bool = True) -> str:
    """``text`` with its control characters written as ``\\xNN``.

    Args:
        text: Any text.
        lines: Keep newlines and tabs as they are (else they are spelled out too).

    Returns:
        The text, unchanged when it has no control character.
    """
    pattern = _CONTROLS if lines else _CONTROLS_AND_LINES
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


#: Characters a Hydra override value may hold unquoted (no sweep comma, no grammar character).
_PLAIN_VALUE = re.compile(r"[\w./:@+-]*")


def override(key: str, value: object) -> str:
    """``key=value`` as Hydra reads it: a value of other characters is quoted (double quotes, or
    single ones when it holds a double), its quotes and backslashes escaped (the shell's quoting
    is :func:`command_line`'s)."""
    text = str(value)
    if _PLAIN_VALUE.fullmatch(text):
        return f"{key}={text}"
    quote = "'" if '"' in text else '"'
    escaped = text.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return f"{key}={quote}{escaped}{quote}"


def command_line(*words: object) -> str:
    """A command to print for pasting: each word shell-quoted, control characters spelled out, so
    a value from a file (a model named ``gpt-4o; touch x #``) stays one argument."""
    return visible(" ".join(shlex.quote(str(word)) for word in words), lines=False)
