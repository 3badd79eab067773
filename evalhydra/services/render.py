"""Rendering: a case's input, files and images → the OpenAI request a service sends.

Attachments were checked when the dataset was read
(:mod:`evalhydra.registry.attachments`). At call time :func:`build_chat_request`
(or :func:`render_request` from a trio task) renders the user content. It
raises :class:`RenderError` too (a file changed since load, bad UTF-8, …). The
chat cell catches it and records :func:`render_error_completion`: error kind
``render_error``, never retried. The service never sees unrendered attachments.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from evalhydra.core.values import Attachment, Case, ChatRequest, Completion, ErrorKind, ToolSpec
from evalhydra.registry.attachments import RenderError, attachment_mime, check_attachment_path, read_capped

__all__ = [
    "RenderError",
    "build_chat_request",
    "render_error_completion",
    "render_request",
    "render_user_content",
]


def _file_block(attachment: Attachment, mime: str, path: Path) -> str:
    try:
        text = read_capped(attachment.path, path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RenderError(
            "InvalidAttachmentText",
            f"file attachment {attachment.path!r} is not valid UTF-8 (byte {exc.start})",
        ) from None
    label = attachment.label or attachment.path
    return f"\n\n[Attachment: {label} ({mime})]\n```text\n{text}\n```"


def _image_part(attachment: Attachment, mime: str, path: Path) -> dict[str, Any]:
    data = base64.b64encode(read_capped(attachment.path, path)).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def render_user_content(
    input_text: str, attachments: Sequence[Attachment], root: Path
) -> str | list[dict[str, Any]]:
    """Render a case's input and attachments into OpenAI user content.

    Args:
        input_text: The case input (already a string).
        attachments: The case's attachments, in dataset order.
        root: The registry root attachment paths are relative to.

    Returns:
        ``input_text`` itself when there are no attachments. Otherwise a list:
        one text part (the input plus a fenced block per **file**, in order),
        then one ``image_url`` data-URL part per **image**, in order.

    Raises:
        RenderError: An unsafe, missing or oversized path, an unsupported type,
            or a file that is not UTF-8.
    """
    if not attachments:
        return input_text
    text = input_text
    images: list[dict[str, Any]] = []
    for att in attachments:
        mime = attachment_mime(att)
        path = check_attachment_path(Path(att.base) if att.base else root, att.path)
        if att.kind == "image":
            images.append(_image_part(att, mime, path))
        else:
            text += _file_block(att, mime, path)
    return [{"type": "text", "text": text}, *images]


def _input_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def build_chat_request(case: Case, tools: tuple[ToolSpec, ...], root: Path,
                       params: dict[str, Any] | None = None) -> ChatRequest:
    """Build the :class:`~evalhydra.core.values.ChatRequest` for one case.

    A conversation (``case.messages``) is sent as it is, its attachments joining
    the last user message; a string input is the one user message; any other
    input is sent as its JSON text. The model and system prompt are left to the
    service (``None``); ``params`` (the eval's) merge over the service's.

    Args:
        case: The case to send.
        tools: The eval's tools (the case's own, when it has any, are sent instead).
        root: The registry root for attachment paths.
        params: The eval's generation parameters.

    Returns:
        The request (naming its case, and carrying the case's recorded sample for ``service=recorded``).

    Raises:
        RenderError: When an attachment cannot be rendered; the runner records
            :func:`render_error_completion` for the cell.
    """
    params = dict(params) if params else None
    tools = case.tools or tools  # a case's own tools (a BFCL line's) replace the eval's
    if case.messages:
        messages = list(case.messages)
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        if not users:  # a simulated user's conversation: the agent's prompt only, the user speaks first
            return ChatRequest(user_content="", tools=tools, params=params, messages=tuple(messages),
                               case_id=case.id, sample=case.sample)
        last = users[-1]
        content = _with_attachments(messages[last]["content"], case.attachments, root)
        messages[last] = {**messages[last], "content": content}
        return ChatRequest(user_content=content, tools=tools, params=params, messages=tuple(messages),
                           case_id=case.id, sample=case.sample)
    content = render_user_content(_input_text(case.input), case.attachments, root)
    return ChatRequest(user_content=content, tools=tools, params=params, case_id=case.id, sample=case.sample)


def _with_attachments(content: Any, attachments: Sequence[Attachment], root: Path) -> Any:
    """A message's content with attachments added: file blocks after its text, images as parts."""
    if isinstance(content, str) or not attachments:
        return render_user_content(content, attachments, root) if isinstance(content, str) else content
    extra = render_user_content("", attachments, root)
    assert isinstance(extra, list)
    files = [p for p in extra[:1] if p.get("text")]
    return [*content, *files, *extra[1:]]


async def render_request(case: Case, tools: tuple[ToolSpec, ...], root: Path,
                         params: dict[str, Any] | None = None) -> ChatRequest:
    """:func:`build_chat_request` for trio tasks: file reads run in a worker thread.

    Cases without attachments are built inline (no thread hop).

    Args:
        case: The case to send.
        tools: The eval's tools.
        root: The registry root for attachment paths.

    Returns:
        The request.

    Raises:
        RenderError: As :func:`build_chat_request`.
    """
    if not case.attachments:
        return build_chat_request(case, tools, root, params)
    return await trio.to_thread.run_sync(build_chat_request, case, tools, root, params)


def render_error_completion(error: RenderError, model: str) -> Completion:
    """The outcome recorded for a cell whose request could not be rendered.

    Args:
        error: The rendering error.
        model: The model the cell would have used.

    Returns:
        A failed Completion with error kind ``render_error``: as in zig_eval, its reason
        is the error's name (``InvalidAttachmentText``) and it counts one attempt; what
        exactly is wrong goes to ``error_detail``.
    """
    return Completion(
        output="",
        model=model,
        attempt_count=1,
        error_kind=ErrorKind.RENDER_ERROR,
        error_message=error.reason,
        error_detail=error.message,
    )
