"""Attachment safety: paths that stay inside the registry, sizes, MIME types.

The dataset loader checks every attachment with :func:`check_attachment_path`
and :func:`attachment_mime` when a line is read, so an unsafe path, a missing
or oversized file or an unsupported type stops the run before any call. Both
raise :class:`RenderError`, an :class:`~evalhydra.core.errors.EvalHydraError`; the
loader adds the dataset file and line. At call time the renderer
(:mod:`evalhydra.services.render`) uses the same checks.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Attachment

__all__ = [
    "IMAGE_MIME_TYPES",
    "MAX_ATTACHMENT_BYTES",
    "MIME_BY_EXTENSION",
    "RenderError",
    "attachment_mime",
    "check_attachment_path",
    "check_text",
    "read_capped",
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

    A subclass of :class:`~evalhydra.core.errors.EvalHydraError`, so at load time it
    stops the run like any user error. At call time the runner turns it into a
    ``render_error`` :class:`~evalhydra.core.values.Completion`.

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
        raise RenderError("InvalidAttachmentPath", f"attachment path {rel!r} must be relative", _PATH_HINT)
    if "\x00" in rel:
        raise RenderError("InvalidAttachmentPath", f"attachment path {rel!r} holds a NUL character",
                          _PATH_HINT)
    if not _segments_ok(rel):
        raise RenderError(
            "InvalidAttachmentPath",
            f"attachment path {rel!r} has an empty, '.' or '..' segment", _PATH_HINT,
        )
    try:
        real_root = root.resolve()
        real = (real_root / rel.replace("\\", "/")).resolve()
        if not real.is_relative_to(real_root):
            raise RenderError(
                "InvalidAttachmentPath",
                f"attachment path {rel!r} resolves outside the registry root {str(real_root)!r}",
                _PATH_HINT,
            )
        if not real.is_file():
            raise RenderError("AttachmentNotFound", f"attachment {rel!r} does not exist under {root}",
                              _PATH_HINT)
        _check_size(rel, real.stat().st_size)
    except (OSError, RuntimeError) as exc:  # permissions, symlink loops, a name too long
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise RenderError("AttachmentUnreadable", f"attachment {_shown(rel)}: {why}", _PATH_HINT) from None
    return real


def _shown(rel: str) -> str:
    """A path as an error message shows it: quoted, its middle cut when it is long."""
    return repr(rel if len(rel) <= 120 else f"{rel[:60]}…{rel[-40:]}")


_PATH_HINT = "Give a path relative to the registry root that stays inside it, e.g. assets/images/mug.png."


def _check_size(rel: str, size: int) -> None:
    if size > MAX_ATTACHMENT_BYTES:
        raise RenderError(
            "AttachmentTooLarge",
            f"attachment {rel!r} is {size} bytes; the limit is {MAX_ATTACHMENT_BYTES} (5 MiB)",
            "Shrink the file, or attach only the part the case needs.",
        )


def read_capped(rel: str, path: Path) -> bytes:
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


def check_text(rel: str, path: Path) -> None:
    """A file attachment must be UTF-8 text.

    Raises:
        RenderError: ``InvalidAttachmentText``, naming the path and the first bad byte's offset.
    """
    try:
        read_capped(rel, path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RenderError("InvalidAttachmentText",
                          f"file attachment {rel!r} is not valid UTF-8 (byte {exc.start})",
                          "Save it as UTF-8 (iconv -t UTF-8), or attach it as an image if it is one.",
                          ) from None
