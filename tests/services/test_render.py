"""Attachment path safety, MIME rules and user-content rendering."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Attachment, Case, ErrorKind, ToolSpec
from evalhydra.registry.attachments import (
    MAX_ATTACHMENT_BYTES,
    RenderError,
    attachment_mime,
    check_attachment_path,
)
from evalhydra.services.render import (
    build_chat_request,
    render_error_completion,
    render_request,
    render_user_content,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.fixture
def root(tmp_path: Path) -> Path:
    reg = tmp_path / "registry"
    (reg / "assets").mkdir(parents=True)
    (reg / "assets" / "notes.txt").write_text("line one\nline two", encoding="utf-8")
    (reg / "assets" / "data.jsonl").write_text('{"a":1}\n', encoding="utf-8")
    (reg / "assets" / "mug.png").write_bytes(PNG)
    (reg / "assets" / "blob.bin").write_bytes(b"\x00\x01")
    (reg / "assets" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    return reg


def file_att(path: str, mime: str = "", label: str | None = None) -> Attachment:
    return Attachment(kind="file", path=path, mime_type=mime, label=label)


def image_att(path: str, mime: str = "") -> Attachment:
    return Attachment(kind="image", path=path, mime_type=mime)


# ---------------------------------------------------------------- path safety


def test_safe_path_resolves(root: Path) -> None:
    assert check_attachment_path(root, "assets/notes.txt") == (root / "assets" / "notes.txt").resolve()
    assert check_attachment_path(root, "assets\\notes.txt").name == "notes.txt"


@pytest.mark.parametrize(
    ("rel", "problem"),
    [
        ("/etc/passwd", "must be relative"),
        ("\\etc\\passwd", "must be relative"),
        ("C:\\x.txt", "must be relative"),
        ("", "must be relative"),
        ("../secret.txt", "segment"),
        ("assets/../../secret.txt", "segment"),
        ("assets/./notes.txt", "segment"),
        ("assets//notes.txt", "segment"),
        ("assets\\\\notes.txt", "segment"),
        ("assets/notes.txt/", "segment"),
    ],
)
def test_unsafe_paths_are_rejected(root: Path, rel: str, problem: str) -> None:
    with pytest.raises(EvalHydraError, match=problem) as info:
        check_attachment_path(root, rel)
    assert repr(rel) in str(info.value)
    assert info.value.reason == "InvalidAttachmentPath"  # type: ignore[attr-defined]


def test_symlink_inside_root_is_fine(root: Path) -> None:
    os.symlink(root / "assets" / "notes.txt", root / "assets" / "link.txt")
    assert check_attachment_path(root, "assets/link.txt") == (root / "assets" / "notes.txt").resolve()


def test_symlink_escaping_root_is_rejected(root: Path) -> None:
    os.symlink(root.parent / "secret.txt", root / "assets" / "escape.txt")
    with pytest.raises(RenderError, match="outside the registry root"):
        check_attachment_path(root, "assets/escape.txt")


def test_missing_file_is_rejected(root: Path) -> None:
    with pytest.raises(RenderError, match="'assets/nope.txt' does not exist"):
        check_attachment_path(root, "assets/nope.txt")


def test_directory_is_rejected(root: Path) -> None:
    with pytest.raises(RenderError, match="does not exist"):
        check_attachment_path(root, "assets")


def test_oversized_file_is_rejected(root: Path) -> None:
    big = root / "assets" / "big.txt"
    with big.open("wb") as fh:
        fh.truncate(MAX_ATTACHMENT_BYTES + 1)
    with pytest.raises(RenderError, match="5 MiB") as info:
        check_attachment_path(root, "assets/big.txt")
    assert info.value.reason == "AttachmentTooLarge"


def test_exactly_five_mib_is_fine(root: Path) -> None:
    edge = root / "assets" / "edge.txt"
    with edge.open("wb") as fh:
        fh.truncate(MAX_ATTACHMENT_BYTES)
    assert check_attachment_path(root, "assets/edge.txt") == edge.resolve()


# ---------------------------------------------------------------- MIME


@pytest.mark.parametrize(
    ("path", "kind", "mime"),
    [
        ("a.png", "image", "image/png"),
        ("a.JPG", "image", "image/jpeg"),
        ("a.jpeg", "image", "image/jpeg"),
        ("a.webp", "image", "image/webp"),
        ("a.txt", "file", "text/plain"),
        ("a.md", "file", "text/markdown"),
        ("a.json", "file", "application/json"),
        ("a.jsonl", "file", "application/x-ndjson"),
        ("a.csv", "file", "text/csv"),
        ("a.zig", "file", "text/plain"),
        ("a.py", "file", "text/x-python"),
        ("a.js", "file", "text/javascript"),
        ("a.ts", "file", "text/typescript"),
    ],
)
def test_mime_from_extension(path: str, kind: str, mime: str) -> None:
    assert attachment_mime(Attachment(kind=kind, path=path, mime_type="")) == mime


def test_explicit_mime_wins() -> None:
    assert attachment_mime(file_att("notes.log", "text/x-log")) == "text/x-log"


@pytest.mark.parametrize(
    ("att", "reason"),
    [
        (file_att("blob.bin"), "UnsupportedAttachmentType"),
        (file_att("noext"), "UnsupportedAttachmentType"),
        (image_att("mug.gif"), "UnsupportedAttachmentType"),
        (image_att("notes.txt"), "InvalidAttachmentMimeType"),
        (image_att("x.svg", "image/svg+xml"), "InvalidAttachmentMimeType"),
        (file_att("mug.png"), "InvalidAttachmentMimeType"),
        (file_att("doc.pdf", "application/pdf"), "UnsupportedAttachmentType"),
        (Attachment(kind="video", path="a.txt", mime_type=""), "InvalidAttachmentKind"),
    ],
)
def test_bad_types_are_rejected(att: Attachment, reason: str) -> None:
    with pytest.raises(RenderError) as info:
        attachment_mime(att)
    assert info.value.reason == reason
    assert att.path in str(info.value)


# ---------------------------------------------------------------- rendering


def test_no_attachments_is_a_plain_string(root: Path) -> None:
    assert render_user_content("hello", (), root) == "hello"


def test_files_then_images_in_order(root: Path) -> None:
    atts = [
        image_att("assets/mug.png"),
        file_att("assets/notes.txt", label="the notes"),
        file_att("assets/data.jsonl"),
        image_att("assets/mug.png", "image/webp"),
    ]
    content = render_user_content("Describe.", atts, root)
    assert isinstance(content, list)
    assert content[0] == {
        "type": "text",
        "text": "Describe."
        "\n\n[Attachment: the notes (text/plain)]\n```text\nline one\nline two\n```"
        '\n\n[Attachment: assets/data.jsonl (application/x-ndjson)]\n```text\n{"a":1}\n\n```',
    }
    b64 = base64.b64encode(PNG).decode()
    assert content[1:] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/webp;base64,{b64}"}},
    ]


def test_image_only_keeps_a_text_part(root: Path) -> None:
    content = render_user_content("What is this?", [image_att("assets/mug.png")], root)
    assert isinstance(content, list)
    assert content[0] == {"type": "text", "text": "What is this?"}
    assert len(content) == 2


def test_non_utf8_file_is_a_render_error(root: Path) -> None:
    with pytest.raises(RenderError, match="not valid UTF-8") as info:
        render_user_content("x", [file_att("assets/latin1.txt")], root)
    assert info.value.reason == "InvalidAttachmentText"


def test_render_rechecks_the_path(root: Path) -> None:
    with pytest.raises(RenderError, match="segment"):
        render_user_content("x", [file_att("../secret.txt")], root)


def test_build_chat_request_dumps_non_string_input(root: Path) -> None:
    tools = (ToolSpec("search", "Search", {"type": "object"}),)
    req = build_chat_request(Case(id="c1", input={"q": "café", "n": 2}), tools, root)
    assert req.user_content == '{"q": "café", "n": 2}'
    assert req.tools == tools
    assert req.model is None
    assert req.system_prompt is None


async def test_render_request_with_attachments_uses_a_thread(root: Path) -> None:
    case = Case(id="c1", input="See file.", attachments=(file_att("assets/notes.txt"),))
    req = await render_request(case, (), root)
    assert isinstance(req.user_content, list)
    assert "line two" in req.user_content[0]["text"]
    plain = await render_request(Case(id="c2", input="hi"), (), root)
    assert plain.user_content == "hi"


async def test_render_request_raises_render_error(root: Path) -> None:
    case = Case(id="c1", input="x", attachments=(file_att("assets/blob.bin"),))
    with pytest.raises(RenderError):
        await render_request(case, (), root)


def test_render_error_completion() -> None:
    err = RenderError("UnsupportedAttachmentType", "attachment 'a.bin': nope")
    done = render_error_completion(err, "gpt-x")
    assert done.error_kind is ErrorKind.RENDER_ERROR
    # zig_eval: the reason is the error's name and the call counts one attempt
    assert done.error_message == "UnsupportedAttachmentType"
    assert done.error_detail == "UnsupportedAttachmentType: attachment 'a.bin': nope"
    assert done.model == "gpt-x"
    assert done.attempt_count == 1
    assert not done.ok
