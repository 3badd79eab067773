"""A reasoning model's thinking, taken out of its answer before the answer is scored.

Servers return thinking in one of three shapes:

* ``message.reasoning_content`` (vLLM, SGLang, DeepSeek's API) or ``message.reasoning``
  (llama.cpp, OpenRouter): the answer is ``content`` as it is;
* a leading ``<think>…</think>`` block in ``content`` (DeepSeek-R1 and Qwen3 through servers
  that do not split it): the block is the thinking, the rest the answer;
* a closing ``</think>`` alone, for chat templates that open the block themselves: everything
  before it is the thinking.

A reply whose thinking never ends (an opening tag without its close, the reply cut by
``max_tokens``) has no answer: :data:`~evalhydra.core.values.NOT_FINISHED` says so, and the cell
fails for that reason instead of scoring the half-thought as a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Split", "split_reasoning"]

#: The failure reason of a reply whose thinking was cut before its answer.


@dataclass(frozen=True, slots=True)
class Split:
    """An answer and the thinking taken out of it.

    Attributes:
        answer: What the matchers score.
        reasoning: The thinking, or None when the reply had none.
        finished: False when the thinking never ended (there is no answer).
    """

    answer: str
    reasoning: str | None = None
    finished: bool = True


def split_reasoning(message: dict[str, Any], content: str, tags: tuple[str, str]) -> Split:
    """Separate a message's thinking from its answer.

    Args:
        message: The reply's ``choices[0].message``.
        content: Its content as text (null already made "").
        tags: The opening and closing tags of an inline thinking block.

    Returns:
        The :class:`Split`.
    """
    separate = next((message[key] for key in ("reasoning_content", "reasoning")
                     if isinstance(message.get(key), str) and message[key]), None)
    opening, closing = tags
    stripped = content.lstrip()
    if stripped.startswith(opening):
        end = stripped.find(closing, len(opening))
        if end < 0:
            return Split("", _joined(separate, stripped[len(opening):]), finished=False)
        thought = stripped[len(opening):end]
        return Split(stripped[end + len(closing):].lstrip(), _joined(separate, thought))
    end = content.find(closing)
    if end >= 0 and opening not in content[:end]:  # the template opened the block itself
        return Split(content[end + len(closing):].lstrip(), _joined(separate, content[:end]))
    return Split(content, separate)


def _joined(separate: str | None, inline: str) -> str:
    inline = inline.strip()
    return "\n\n".join(part for part in (separate, inline) if part)
