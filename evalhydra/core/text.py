"""Text from outside shown safely: control characters made visible.

Outputs, reasons and ids come from endpoints, datasets, judges and merged
stores. Printed raw, an escape sequence (``ESC[2J`` clears the screen, OSC 52
writes the clipboard) acts on the reader's terminal, and in Markdown it hides
text. :func:`visible` spells every C0 and C1 control character (and DEL) as
``\\xNN`` instead.
"""

from __future__ import annotations

import re

__all__ = ["visible"]

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
