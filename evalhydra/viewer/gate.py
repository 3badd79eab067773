"""The viewer's gate: every request must name a loopback host (or the one it serves) and carry the
token, as a query parameter once (then a cookie), and a label's POST the label header too; every
answer carries the security headers."""

from __future__ import annotations

import secrets
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evalhydra.viewer.labelling import label_key

__all__ = ["AUDITS_PATH", "COOKIE", "LABEL_HEADER", "LABELS_PATH", "LOOPBACK_HOSTS", "WRITE_PATHS",
           "TokenGate"]


#: The cookie that carries the token after the first visit, suffixed by the server's port (two
#: viewers in one browser keep their own).
COOKIE = "evalhydra_view_token"


#: Host names the viewer answers to besides the one it was started on (a DNS-rebinding page
#: names another host and gets 421).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


#: The paths the viewer takes a POST on (a label; a simulator audit), and the header that must
#: carry :func:`label_key`.
LABELS_PATH = "/api/labels"
AUDITS_PATH = "/api/audits"
WRITE_PATHS = frozenset({LABELS_PATH, AUDITS_PATH})


LABEL_HEADER = "x-evalhydra-label"


class TokenGate:
    """Lets through GET and HEAD requests to an allowed host that carry the token (query or
    cookie), and a label's POST that carries the cookie and the label header; nothing else. Every
    answer carries the security headers (:func:`_secure`)."""

    def __init__(self, app: ASGIApp, token: str, hosts: frozenset[str] = LOOPBACK_HOSTS) -> None:
        self.app = app
        self.token = token.encode()
        self.label_key = label_key(token).encode()
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope["state"] = {**scope.get("state", {}), "nonce": secrets.token_urlsafe(16)}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_secure(scope)]}
            await send(message)

        request = Request(scope)
        response = self._refusal(request, _cookie_name(scope))
        if response is None:
            await self.app(scope, receive, secured)
        else:
            await response(scope, receive, secured)

    def _refusal(self, request: Request, cookie: str) -> Response | None:
        host = (request.headers.get("host") or "").rpartition(":")[0] or request.headers.get("host", "")
        if host.lower() not in self.hosts:  # a page of another site that rebound its name to us
            return PlainTextResponse("this viewer answers on its own address only", status_code=421)
        if request.method == "POST" and request.url.path in WRITE_PATHS:
            sent = request.headers.get(LABEL_HEADER, "").encode("utf-8", "surrogateescape")
            if self._holds(request.cookies.get(cookie, "")) and secrets.compare_digest(sent, self.label_key):
                return None
            return PlainTextResponse("a label comes from a case page the viewer's URL opened",
                                     status_code=403)
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse("the viewer only reads (and takes labels)", status_code=405,
                                     headers={"allow": "GET, HEAD"})
        given = request.query_params.get("token")
        if given is not None and self._holds(given):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            redirect = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
            redirect.set_cookie(cookie, self.token.decode(), httponly=True, samesite="strict")
            return redirect
        if self._holds(request.cookies.get(cookie, "")):
            return None
        return PlainTextResponse("open the URL evalhydra view printed (it carries the token)",
                                 status_code=403)

    def _holds(self, given: str) -> bool:
        """Whether ``given`` is the token (compared as bytes: any text may come in)."""
        return secrets.compare_digest(given.encode("utf-8", "surrogateescape"), self.token)


def _cookie_name(scope: Scope) -> str:
    server = scope.get("server")
    return f"{COOKIE}_{server[1]}" if server and server[1] else COOKIE


def _secure(scope: Scope) -> list[tuple[bytes, bytes]]:
    """The headers every answer carries: a policy allowing only this page's own nonced scripts and
    styles, no framing, no referrer, no sniffing, no caching."""
    nonce = scope["state"]["nonce"]
    policy = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
              "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
              "frame-ancestors 'none'")
    return [(b"content-security-policy", policy.encode()), (b"referrer-policy", b"no-referrer"),
            (b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"),
            (b"x-frame-options", b"DENY")]
