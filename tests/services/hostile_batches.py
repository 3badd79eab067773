"""A Files and Batches API on loopback that answers what a broken or hostile provider might.

The standard library's HTTP server, in a thread. Batches complete at once; each
answer to the case "Reply with exactly Vn." is "Vn". ``HostileBatches.poison``
picks what goes wrong:

* ``deep``: case 0's output line nests 100,000 arrays deep;
* ``status_list`` / ``counts_text`` / ``counts_list``: the polled batch's ``status`` is a list,
  its ``request_counts`` a string or a list;
* ``deep_batch``: the polled batch is JSON nested 100,000 deep;
* ``no_id``: the created batch has no ``id``;
* ``stranger``: the output file also answers a request nobody sent;
* ``duplicate``: case 0 is answered twice, right then wrong;
* ``missing``: case 1 is not answered at all;
* ``bomb``: the output file is gzip that inflates to ``BOMB_BYTES`` of one line;
* ``long_lines``: case 0's line is longer than any reply may be;
* ``secret``: the error file quotes the key the run sent.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BOMB_BYTES = 400 << 20
_ASKED = re.compile(rb'"custom_id":("[^"]+"),.*?Reply with exactly V(\d+)\.')


def completion(content: str) -> dict[str, Any]:
    """A chat.completion body answering ``content``."""
    return {"id": "chatcmpl-h", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def answer_line(custom_id: str, content: Any) -> bytes:
    """One output line answering ``custom_id`` with ``content``."""
    return json.dumps({"id": "r", "custom_id": custom_id,
                       "response": {"status_code": 200, "body": completion(content)}}).encode()


def bomb(size: int) -> bytes:
    """Gzip of one output line ``size`` bytes long (about a thousandth of that on the wire)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [packer.compress(b'{"custom_id":"')]
    block = b"a" * (1 << 20)
    parts += [packer.compress(block) for _ in range(size >> 20)]
    parts.append(packer.compress(b'"}\n') + packer.flush())
    return b"".join(parts)


@functools.cache
def _bomb() -> bytes:
    return bomb(BOMB_BYTES)


class HostileBatches(ThreadingHTTPServer):
    """The server; ``poison`` and ``key`` are read at each request."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.poison = ""
        self.key = ""
        self.asked: dict[str, list[tuple[str, int]]] = {}  # file id -> (custom_id, case number)
        self.batches: dict[str, dict[str, Any]] = {}
        self.downloads = 0
        self.authorizations: list[str] = []  # every Authorization header received

    @property
    def url(self) -> str:
        """The API root (``…/v1``)."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def batch(self, batch_id: str) -> dict[str, Any]:
        found = dict(self.batches[batch_id])
        if self.poison == "status_list":
            found["status"] = ["completed"]
        if self.poison == "counts_text":
            found["request_counts"] = "lots"
        if self.poison == "counts_list":
            found["request_counts"] = [3, 3, 0]
        return found

    def output(self, file_id: str) -> tuple[bytes, dict[str, str]]:
        """An output file's bytes and extra headers."""
        if self.poison == "bomb":
            return _bomb(), {"Content-Encoding": "gzip"}
        lines = []
        for custom_id, n in self.asked[file_id.removeprefix("out-")]:
            if self.poison == "deep" and n == 0:
                lines.append(answer_line(custom_id, "x")[:-2] + b', "deep": ' + b"[" * 100_000
                             + b"]" * 100_000 + b"}")
                continue
            if self.poison == "missing" and n == 1:
                continue
            if self.poison == "long_lines" and n == 0:
                lines.append(answer_line(custom_id, "V0" + " " * (9 << 20)))
                continue
            lines.append(answer_line(custom_id, f"V{n}"))
            if self.poison == "duplicate" and n == 0:
                lines.append(answer_line(custom_id, "WRONG"))
        if self.poison == "stranger":
            lines.append(answer_line("never-asked", "V9"))
        return b"\n".join(lines) + b"\n", {}

    def errors(self, file_id: str) -> bytes:
        first = self.asked[file_id.removeprefix("err-")][0][0]
        line = {"custom_id": first, "error": {"code": "bad", "message": f"key {self.key} refused"}}
        return json.dumps(line).encode() + b"\n"


class _Handler(BaseHTTPRequestHandler):
    server: HostileBatches

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.authorizations.append(self.headers.get("Authorization") or "")
        if self.path.endswith("/cancel"):
            self._json({**self.server.batches[self.path.split("/")[3]], "status": "cancelling"})
        elif self.path == "/v1/files":
            file_id = f"f{len(self.server.asked)}"
            self.server.asked[file_id] = [(json.loads(cid), int(n)) for cid, n in _ASKED.findall(body)]
            self._json({"id": file_id, "object": "file", "purpose": "batch"})
        elif self.path == "/v1/batches":
            file_id = json.loads(body)["input_file_id"]
            batch = {"id": f"b-{file_id}", "object": "batch", "status": "completed",
                     "input_file_id": file_id, "output_file_id": f"out-{file_id}",
                     "request_counts": {"total": len(self.server.asked[file_id])}}
            if self.server.poison == "secret":
                batch["error_file_id"] = f"err-{file_id}"
            self.server.batches[batch["id"]] = batch
            created = {**batch, "status": "validating"}  # completed at the first poll
            self._json({k: v for k, v in created.items() if k != "id"} if self.server.poison == "no_id"
                       else created)
        else:
            self._json({"error": {"message": "no such path"}}, 404)

    def do_GET(self) -> None:  # noqa: N802
        parts = self.path.split("?")[0].split("/")
        if self.path.startswith("/v1/batches/") and self.server.poison == "deep_batch":
            self._raw(b'{"id": "x", "status": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", {})
        elif self.path.startswith("/v1/batches/"):
            self._json(self.server.batch(parts[3]))
        elif self.path.startswith("/v1/batches"):
            self._json({"object": "list", "data": [], "has_more": False})
        elif parts[-1] == "content" and parts[3].startswith("out-"):
            self.server.downloads += 1
            data, headers = self.server.output(parts[3])
            self._raw(data, headers)
        elif parts[-1] == "content":
            self._raw(self.server.errors(parts[3]), {})
        else:
            self._json({"error": {"message": "no such path"}}, 404)

    def do_DELETE(self) -> None:  # noqa: N802
        self._json({"deleted": True})

    def _json(self, value: Any, status: int = 200) -> None:
        self._raw(json.dumps(value).encode(), {}, status)

    def _raw(self, data: bytes, headers: dict[str, str], status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@contextmanager
def hostile_batches() -> Iterator[HostileBatches]:
    """A running :class:`HostileBatches` (shut down on exit)."""
    server = HostileBatches()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


__all__ = ["BOMB_BYTES", "HostileBatches", "answer_line", "bomb", "completion", "hostile_batches"]
