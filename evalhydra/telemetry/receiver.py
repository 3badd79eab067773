"""An OTLP/HTTP traces receiver on loopback, gated by a token: what ``ingest otlp --listen`` keeps.

An instrumented agent's OTLP/HTTP exporter posts to ``/v1/traces`` (protobuf, or OTLP JSON with
``content-type: application/json``; plain or gzip-compressed) with the header ``authorization:
Bearer <token>``; the token is made when the receiver starts and printed with the endpoint, as the
viewer's is. A request without it is refused (401), on any other path 404, by any other method
405, without a ``content-length`` 411. It binds loopback only.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.telemetry.ingest import request_spans

__all__ = ["LOOPBACK", "MAX_BODY_BYTES", "TraceReceiver"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: The largest export request taken (an OTLP exporter batches a few hundred spans).
MAX_BODY_BYTES = 64 << 20
PATH = "/v1/traces"
#: Seconds a connection may sit without sending (an exporter sends each request at once).
SOCKET_TIMEOUT_S = 60.0


class TraceReceiver:
    """The receiver: :meth:`serve_forever` until interrupted, then :attr:`spans` holds what came."""

    def __init__(self, host: str, port: int) -> None:
        """Bind ``host:port`` (loopback only; port 0: any free one).

        Raises:
            EvalHydraError: A host that is not loopback.
        """
        if host not in LOOPBACK:
            raise EvalHydraError(f"--listen {host}:{port}: the receiver listens on loopback only.",
                                 "Use --listen 127.0.0.1:4318 (an agent on this machine).")
        self.token = secrets.token_urlsafe(24)
        self.spans: list[dict[str, Any]] = []
        self.refused = 0
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), _handler(self))
        self.server.daemon_threads = True

    @property
    def endpoint(self) -> str:
        """The traces URL an exporter posts to."""
        host, port = self.server.server_address[:2]
        shown = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{shown}:{port}{PATH}"

    def take(self, body: bytes, content_type: str) -> int:
        """Keep one export request's spans; returns how many."""
        spans = request_spans(body, protobuf="json" not in content_type, where="the request")
        with self._lock:
            self.spans.extend(spans)
        return len(spans)

    def refuse(self) -> None:
        """Count a request refused for want of the token."""
        with self._lock:
            self.refused += 1

    def authorized(self, header: str) -> bool:
        """Whether an ``authorization`` header carries the token."""
        return hmac.compare_digest(header.encode("utf-8", "surrogateescape"),
                                   f"Bearer {self.token}".encode())

    def close(self) -> None:
        """Stop serving and free the port."""
        self.server.server_close()


def _decoded(body: bytes, encoding: str) -> bytes:
    """The body as sent before ``content-encoding`` (gzip: what OTLP exporters compress with when
    ``OTEL_EXPORTER_OTLP_COMPRESSION=gzip``), inflated to at most :data:`MAX_BODY_BYTES`.

    Raises:
        EvalHydraError: An encoding other than gzip or none, a body that does not inflate, or one
            that inflates past the cap.
    """
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip"):
        raise EvalHydraError(f"content-encoding {encoding!r}: send the traces plain or gzip-compressed.")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        plain = inflater.decompress(body, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise EvalHydraError(f"the request's gzip body does not inflate ({exc}).") from None
    if len(plain) > MAX_BODY_BYTES or inflater.unconsumed_tail:
        raise EvalHydraError(f"the request inflates past {MAX_BODY_BYTES} bytes.")
    return plain


def _handler(receiver: TraceReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = SOCKET_TIMEOUT_S  # a sender that stalls mid-request frees its thread

        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            if self.path.split("?", 1)[0] != PATH:
                self._answer(404, b"traces go to /v1/traces")
                return
            if not receiver.authorized(self.headers.get("authorization", "")):
                receiver.refuse()
                self._answer(401, b"send the token evalhydra printed: authorization: Bearer ...")
                return
            length = self.headers.get("content-length", "")
            if not length.isdigit():
                self._answer(411, b"send the body with a content-length")
                return
            if int(length) > MAX_BODY_BYTES:
                self._answer(413, b"too large")
                return
            try:
                raw = self.rfile.read(int(length))
            except OSError:  # the sender stalled past the timeout, or went away: nothing to answer
                self.close_connection = True
                return
            try:
                body = _decoded(raw, self.headers.get("content-encoding", ""))
                receiver.take(body, self.headers.get("content-type", ""))
            except EvalHydraError as exc:
                self._answer(400, exc.message.encode())
                return
            self._answer(200, b"", "application/x-protobuf")

        def do_GET(self) -> None:  # noqa: N802
            self._answer(405, b"POST OTLP traces to /v1/traces")

        def _answer(self, status: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            """Quiet: the summary says what came."""

    return Handler
