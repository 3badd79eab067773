"""A small HTTP server on 127.0.0.1 that answers as a test says: a hostile endpoint, a schema host."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: (method, path, request body) -> (status, headers, body).
Answer = Callable[[str, str, bytes], tuple[int, list[tuple[str, str]], bytes]]


@contextmanager
def loopback_http(answer: Answer) -> Iterator[str]:
    """A threaded server answering every GET and POST with ``answer``; yields its root URL
    (``http://127.0.0.1:PORT``), and shuts it down after."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            status, headers, data = answer(method, self.path, body)
            self.send_response(status)
            for name, value in [("content-length", str(len(data))), *headers]:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (the standard library's names)
            self._reply("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._reply("POST")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
