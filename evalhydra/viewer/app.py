"""The viewer's application: a token gate, the pages, and the JSON that live pages poll.

Every page is read from the store when asked (read-only, one connection per
request), so it shows what a run has written so far. A run's page is the same
``report.html`` the reports write (its summary, chart, comparisons, grid and case
details), with a banner that polls the run's status every two seconds and
reloads the page when new cells are stored.

The token works as Jupyter's: ``/?token=T`` sets a cookie and redirects to the same
page without it; every later request carries the cookie. Anything but GET and
HEAD is refused: the viewer never writes.
"""

from __future__ import annotations

import html
import secrets
from contextlib import closing
from functools import cache
from pathlib import Path
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from evalhydra.core.errors import EvalHydraError
from evalhydra.reports.comparecmd import Target, compare, parse_target
from evalhydra.reports.writer import html_page
from evalhydra.store.db import Store, open_store
from evalhydra.viewer.queries import run_status, runs_page

__all__ = ["COOKIE", "create_app"]

#: The cookie that carries the token after the first visit.
COOKIE = "evalhydra_view_token"
#: How often a live page asks for its run's status.
POLL_MS = 2000


def create_app(store_path: Path, token: str) -> ASGIApp:
    """The viewer for the store at ``store_path``, open to requests that carry ``token``."""
    pages = _Pages(Path(store_path))
    app = Starlette(routes=[
        Route("/", pages.runs),
        Route("/runs/{run_id}", pages.run),
        Route("/compare", pages.compare),
        Route("/api/runs/{run_id}", pages.status),
    ])
    return TokenGate(app, token)


class TokenGate:
    """Lets through GET and HEAD requests that carry the token (query or cookie); nothing else."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        response = self._refusal(request)
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)

    def _refusal(self, request: Request) -> Response | None:
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse("the viewer is read-only", status_code=405,
                                     headers={"allow": "GET, HEAD"})
        given = request.query_params.get("token")
        if given is not None and secrets.compare_digest(given, self.token):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            redirect = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
            redirect.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return redirect
        if secrets.compare_digest(request.cookies.get(COOKIE, ""), self.token):
            return None
        return PlainTextResponse("open the URL evalhydra view printed (it carries the token)",
                                 status_code=403)


@cache
def _templates() -> Environment:
    return Environment(loader=PackageLoader("evalhydra.viewer", "templates"),
                       autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)


class _Pages:
    """The endpoints; each opens the store read-only for its request (Starlette runs them in threads)."""

    def __init__(self, store_path: Path) -> None:
        self.store_path = store_path

    def _store(self) -> Store:
        return open_store(self.store_path, read_only=True)

    def runs(self, request: Request) -> Response:
        """Every run, newest first: filter with ``q``, page with ``page``."""
        query = request.query_params.get("q", "")
        page = _page_number(request.query_params.get("page", "0"))
        with closing(self._store()) as store:
            rows, more = runs_page(store.conn, query, page)
        text = _templates().get_template("runs.html.j2").render(
            runs=rows, q=query, page=page, more=more, running=any(r["status"] == "running" for r in rows),
            poll_ms=POLL_MS, store=str(self.store_path))
        return HTMLResponse(text)

    def run(self, request: Request) -> Response:
        """One run's report, live while it runs."""
        run_id = request.path_params["run_id"]
        with closing(self._store()) as store:
            ids = _resolve(store, [run_id])
            if not ids:
                return _missing(f"no run {run_id} in this store")
            page = html_page(store, ids)
        return HTMLResponse(_with_banner(page, f"/api/runs/{ids[0]}"))

    def compare(self, request: Request) -> Response:
        """Two runs or targets (``base``, ``candidate``: ``RUN[@SERVICE[:MODEL]]``), paired."""
        texts = [request.query_params.get(name, "") for name in ("base", "candidate")]
        if not all(texts):
            return _missing("pick two runs to compare (base= and candidate=)", 400)
        with closing(self._store()) as store:
            try:
                base, cand = (_target(store, text) for text in texts)
                comparison = compare(store.conn, base, cand).to_json()
            except EvalHydraError as exc:
                return _missing(exc.message, 400)
            ids = [*base.runs, *(r for r in cand.runs if r not in base.runs)]
            page = html_page(store, ids, comparison=comparison)
        return HTMLResponse(page)

    def status(self, request: Request) -> Response:
        """The run's status and counts, for a live page."""
        with closing(self._store()) as store:
            found = run_status(store.conn, request.path_params["run_id"])
        return JSONResponse(found) if found is not None else JSONResponse({"error": "no such run"}, 404)


def _resolve(store: Store, texts: list[str]) -> list[str]:
    try:
        return list(store.resolve_run_ids(texts))
    except EvalHydraError:
        return []


def _target(store: Store, text: str) -> Target:
    run, service, model = parse_target(text)
    return Target(text, tuple(store.resolve_run_ids([run])) if run else (), service, model)


def _page_number(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _missing(message: str, status: int = 404) -> Response:
    return HTMLResponse(f"<!doctype html><title>evalhydra view</title><p>{html.escape(message)}</p>"
                        '<p><a href="/">all runs</a></p>', status_code=status)


def _with_banner(page: str, status_url: str) -> str:
    """``page`` with the live banner (``banner.html.j2``) first in its body."""
    banner = _templates().get_template("banner.html.j2").render(status_url=status_url, poll_ms=POLL_MS)
    head, sep, rest = page.partition("<body>")
    return head + sep + banner + rest if sep else banner + page
