"""Attachment safety and rendering: a case's files and images → OpenAI user content.

Two moments use this module:

* **Load time.** The dataset loader calls :func:`check_attachment_path` and
  :func:`attachment_mime` for every attachment, so an unsafe path, a missing or
  oversized file or an unsupported type stops the run before any call. Both
  raise :class:`RenderError`, an :class:`~evalhydra.errors.EvalHydraError`; the
  loader adds the dataset file and line.
* **Call time.** :func:`build_chat_request` (or :func:`render_request` from a
  trio task) renders the user content. It raises :class:`RenderError` too
  (a file changed since load, bad UTF-8, …). **The runner** catches it and
  records :func:`render_error_completion`: error kind ``render_error``, never
  retried. The service never sees unrendered attachments.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import trio

from evalhydra.errors import EvalHydraError
from evalhydra.types import Attachment, Case, ChatRequest, Completion, ErrorKind, ToolSpec

__all__ = [
    "IMAGE_MIME_TYPES",
    "MAX_ATTACHMENT_BYTES",
    "MIME_BY_EXTENSION",
    "RenderError",
    "attachment_mime",
    "build_chat_request",
    "check_attachment_path",
    "render_error_completion",
    "render_request",
    "render_user_content",
]

#: zig_eval's attachment cap: 5 MiB per file or image.
MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024

#: Extension (lower case, no dot) → MIME type, as in zig_eval.
MIME_BY_EXTENSION: dict[str, str] = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
    "txt": "text/plain",
    "md": "text/markdown",
    "json": "application/json",
    "jsonl": "application/x-ndjson",
    "csv": "text/csv",
    "zig": "text/plain",
    "py": "text/x-python",
    "js": "text/javascript",
    "ts": "text/typescript",
}

#: MIME types an ``image`` attachment may have.
IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})
_TEXT_APPLICATION_TYPES = frozenset({"application/json", "application/x-ndjson"})


class RenderError(EvalHydraError):
    """An attachment cannot be checked or rendered.

    A subclass of :class:`~evalhydra.errors.EvalHydraError`, so at load time it
    stops the run like any user error. At call time the runner turns it into a
    ``render_error`` :class:`~evalhydra.types.Completion`.

    Attributes:
        reason: The seed-style error name, e.g. ``UnsupportedAttachmentType``.
    """

    def __init__(self, reason: str, message: str, hint: str | None = None) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {message}", hint)


def _segments_ok(rel: str) -> bool:
    parts = rel.replace("\\", "/").split("/")
    return all(part not in ("", ".", "..") for part in parts)


def _is_absolute(rel: str) -> bool:
    return (
        rel.startswith(("/", "\\"))
        or os.path.isabs(rel)
        or PurePosixPath(rel).is_absolute()
        or (len(rel) >= 2 and rel[0].isalpha() and rel[1] == ":")  # Windows drive: C:...
    )


def check_attachment_path(root: Path, rel: str) -> Path:
    """Check that ``rel`` names an existing file of at most 5 MiB inside ``root``.

    Rules (zig_eval): the path must be relative; ``/`` and ``\\`` both split
    segments and no segment may be empty, ``.`` or ``..``; the real path
    (symlinks resolved) must stay under the real root, so a symlink inside the
    root is fine as long as its target is too.

    Args:
        root: The registry root the path is relative to.
        rel: The attachment path as written in the dataset.

    Returns:
        The resolved absolute path of the file.

    Raises:
        RenderError: Naming the path and what is wrong with it.
    """
    if not rel or _is_absolute(rel):
        raise RenderError("InvalidAttachmentPath", f"attachment path {rel!r} must be relative")
    if not _segments_ok(rel):
        raise RenderError(
            "InvalidAttachmentPath",
            f"attachment path {rel!r} has an empty, '.' or '..' segment",
        )
    try:
        real_root = root.resolve()
        real = (real_root / rel.replace("\\", "/")).resolve()
        if not real.is_relative_to(real_root):
            raise RenderError(
                "InvalidAttachmentPath",
                f"attachment path {rel!r} resolves outside the registry root {str(real_root)!r}",
            )
        if not real.is_file():
            raise RenderError("AttachmentNotFound", f"attachment {rel!r} does not exist under {root}")
        _check_size(rel, real.stat().st_size)
    except (OSError, RuntimeError) as exc:  # permissions, symlink loops
        raise RenderError("AttachmentUnreadable", f"attachment {rel!r}: {exc}") from None
    return real


def _check_size(rel: str, size: int) -> None:
    if size > MAX_ATTACHMENT_BYTES:
        raise RenderError(
            "AttachmentTooLarge",
            f"attachment {rel!r} is {size} bytes; the limit is {MAX_ATTACHMENT_BYTES} (5 MiB)",
        )


def _read_capped(rel: str, path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_ATTACHMENT_BYTES + 1)
    except OSError as exc:
        raise RenderError("AttachmentUnreadable", f"attachment {rel!r}: {exc}") from None
    _check_size(rel, len(data))
    return data


def attachment_mime(attachment: Attachment) -> str:
    """Return the attachment's MIME type, checked against its kind.

    The type is ``attachment.mime_type`` when set, otherwise it comes from the
    extension (:data:`MIME_BY_EXTENSION`). An image needs png, jpeg or webp; a
    file needs a non-image ``text/*``, ``application/json`` or
    ``application/x-ndjson`` type.

    Args:
        attachment: The attachment to check.

    Returns:
        The MIME type.

    Raises:
        RenderError: ``UnsupportedAttachmentType`` or ``InvalidAttachmentMimeType``.
    """
    mime = (attachment.mime_type or "").strip().lower()
    if not mime:
        ext = PurePosixPath(attachment.path.replace("\\", "/")).suffix.lower().lstrip(".")
        found = MIME_BY_EXTENSION.get(ext)
        if found is None:
            raise RenderError(
                "UnsupportedAttachmentType",
                f"attachment {attachment.path!r}: extension {ext or '(none)'!r} is not supported",
                f"Set mime_type, or use one of: {', '.join(sorted(MIME_BY_EXTENSION))}",
            )
        mime = found
    _check_kind_mime(attachment, mime)
    return mime


def _check_kind_mime(attachment: Attachment, mime: str) -> None:
    is_image = mime in IMAGE_MIME_TYPES
    if attachment.kind == "image":
        if not is_image:
            raise RenderError(
                "InvalidAttachmentMimeType",
                f"image attachment {attachment.path!r} has type {mime!r}; "
                "use image/png, image/jpeg or image/webp",
            )
    elif attachment.kind == "file":
        if mime.startswith("image/"):
            raise RenderError(
                "InvalidAttachmentMimeType",
                f"file attachment {attachment.path!r} has image type {mime!r}; use kind: image",
            )
        if not (mime.startswith("text/") or mime in _TEXT_APPLICATION_TYPES):
            raise RenderError(
                "UnsupportedAttachmentType",
                f"file attachment {attachment.path!r} has type {mime!r}; "
                "use text/*, application/json or application/x-ndjson",
            )
    else:
        raise RenderError(
            "InvalidAttachmentKind",
            f"attachment {attachment.path!r} has kind {attachment.kind!r}; use 'file' or 'image'",
        )


def _file_block(attachment: Attachment, mime: str, path: Path) -> str:
    try:
        text = _read_capped(attachment.path, path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RenderError(
            "InvalidAttachmentText",
            f"file attachment {attachment.path!r} is not valid UTF-8 (byte {exc.start})",
        ) from None
    label = attachment.label or attachment.path
    return f"\n\n[Attachment: {label} ({mime})]\n```text\n{text}\n```"


def _image_part(attachment: Attachment, mime: str, path: Path) -> dict[str, Any]:
    data = base64.b64encode(_read_capped(attachment.path, path)).decode("ascii")
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
        path = check_attachment_path(root, att.path)
        if att.kind == "image":
            images.append(_image_part(att, mime, path))
        else:
            text += _file_block(att, mime, path)
    return [{"type": "text", "text": text}, *images]


def _input_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def build_chat_request(case: Case, tools: tuple[ToolSpec, ...], root: Path) -> ChatRequest:
    """Build the :class:`~evalhydra.types.ChatRequest` for one case.

    The model, system prompt and params are left to the service
    (``None``). A non-string input is sent as its JSON text.

    Args:
        case: The case to send.
        tools: The eval's tools.
        root: The registry root for attachment paths.

    Returns:
        The request.

    Raises:
        RenderError: When an attachment cannot be rendered; the runner records
            :func:`render_error_completion` for the cell.
    """
    content = render_user_content(_input_text(case.input), case.attachments, root)
    return ChatRequest(user_content=content, tools=tools)


async def render_request(case: Case, tools: tuple[ToolSpec, ...], root: Path) -> ChatRequest:
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
        return build_chat_request(case, tools, root)
    return await trio.to_thread.run_sync(build_chat_request, case, tools, root)


def render_error_completion(error: RenderError, model: str) -> Completion:
    """The outcome recorded for a cell whose request could not be rendered.

    Args:
        error: The rendering error.
        model: The model the cell would have used.

    Returns:
        A failed Completion with error kind ``render_error`` and no attempts.
    """
    return Completion(
        output="",
        model=model,
        attempt_count=0,
        error_kind=ErrorKind.RENDER_ERROR,
        error_message=error.message,
    )
