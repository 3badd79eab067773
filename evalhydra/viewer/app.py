"""The viewer's application: a token gate, the pages, and the JSON that live pages poll.

Every page is read from the store when asked (read-only, one connection per
request), so it shows what a run has written so far. The pages: the run list
(``/``), a run or a sweep (``/runs/ID[,ID…]``: the summary and chart
``report.html`` shows, from the same template parts, then a page of the grid,
filtered, searched and sorted in SQL), a case (``/runs/ID/case?eval=E&case=C``)
and two runs compared (``/compare?base=A&candidate=B``). A page of a running run
polls its status every two seconds and swaps in the grid when new cells are
stored; the query string holds everything a page shows, so its URL can be shared.

The token works as Jupyter's: ``/?token=T`` sets a cookie and redirects to the same
page without it; every later request carries the cookie. Anything but GET and
HEAD is refused, but one write: a label a case page posts to ``/api/labels``
(with the cookie and a header only pages the token opened know; see
:mod:`evalhydra.viewer.labelling`). The label queue (``/runs/ID/label``) opens the
next output to label.
"""

from __future__ import annotations

import html
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from jinja2 import ChoiceLoader, Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import ASGIApp

from evalhydra.analysis.calibration import calibration_docs
from evalhydra.analysis.comparison import Target, compare, parse_target
from evalhydra.analysis.judges import has_labels
from evalhydra.analysis.runsummary import header_facts, summary_histograms, target_rows
from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.simulator_audit import has_audits, simulator_corrections
from evalhydra.core.errors import EvalHydraError
from evalhydra.reports.html import STATUS_MARKS, chart
from evalhydra.store.db import Store, open_store
from evalhydra.store.timelimit import interrupted, time_limit
from evalhydra.viewer.auditing import audit_page, store_audit
from evalhydra.viewer.export import FORMATS, export_lines
from evalhydra.viewer.gate import AUDITS_PATH, LABELS_PATH, LOOPBACK_HOSTS, TokenGate
from evalhydra.viewer.grid import (
    CaseView,
    GridPage,
    case_view,
    grid_page,
    neighbours,
    previous_run,
    side_by_side,
)
from evalhydra.viewer.labelling import label_key, labels_of, next_in_queue, save_label
from evalhydra.viewer.live import LiveSummaries
from evalhydra.viewer.queries import (
    comparisons,
    history,
    run_status,
    runs_page,
    selection_summary,
    side_targets,
)
from evalhydra.viewer.render import DIFF_LINES, render_text

__all__ = ["create_app"]

#: The highest page number a link may name (a larger one is the last page anyway).
MAX_PAGE = 1_000_000
#: The lists of cases a comparison row holds, and how a page names them.
CHANGE_LISTS = {"regressed": "regressed cases (lower pass fraction on the candidate)",
                "improved": "improved cases (higher pass fraction on the candidate)",
                "judge_flips": "judge flips (case#trial: same output, other verdict)"}
#: Cases on one page of such a list.
CHANGES_PAGE = 200
#: The longest any page's queries may run (the store is read in SQL; a page never hangs).
PAGE_QUERY_S = 30.0
#: How often a live page asks for its run's status.
POLL_MS = 2000
#: The largest label a page may send.
MAX_LABEL_BYTES = 16_384


def create_app(store_path: Path, token: str, host: str = "127.0.0.1", labeller: str = "viewer", *,
               show_judge: bool = False) -> ASGIApp:
    """The viewer for the store at ``store_path``, open to requests that carry ``token`` and name
    a loopback host or ``host`` (the interface it serves); labels it stores name ``labeller``. The
    label queue is blind (the judge's verdicts hidden until the person labels) unless ``show_judge``."""
    pages = _Pages(Path(store_path), label_key(token), labeller, show_judge=show_judge)
    app = Starlette(routes=[
        Route("/", pages.runs),
        Route("/runs/{ids}", pages.run),
        Route("/runs/{ids}/case", pages.case),
        Route("/runs/{ids}/changes", pages.changes),
        Route("/runs/{ids}/export.{fmt}", pages.export),
        Route("/runs/{ids}/label", pages.queue),
        Route(LABELS_PATH, pages.label, methods=["POST"]),
        Route("/runs/{ids}/audit", pages.audit),
        Route(AUDITS_PATH, pages.save_audit, methods=["POST"]),
        Route("/compare", pages.compare),
        Route("/api/runs/{ids}", pages.status),
    ], exception_handlers={sqlite3.Error: _store_trouble, EvalHydraError: _store_trouble})
    return TokenGate(app, token, LOOPBACK_HOSTS | {host, f"[{host}]"})


def _store_trouble(request: Request, exc: Exception) -> Response:
    """A store that cannot be read (deleted, replaced, damaged), or a page whose queries ran past
    :data:`PAGE_QUERY_S`: a page naming the problem."""
    if interrupted(exc):
        return _missing(f"this page's queries ran longer than {PAGE_QUERY_S:g} s and were stopped;"
                        " narrow it (a filter, a search, fewer runs)", 503)
    detail = exc.message if isinstance(exc, EvalHydraError) else f"{type(exc).__name__}: {exc}"
    return _missing(f"the store cannot be read: {detail}", 503)


@cache
def _templates() -> Environment:
    loader = ChoiceLoader([PackageLoader("evalhydra.viewer", "templates"),
                           PackageLoader("evalhydra.reports", "templates")])
    return Environment(loader=loader, autoescape=select_autoescape(["html", "j2"]), trim_blocks=True,
                       lstrip_blocks=True)


def _render(request: Request, name: str, **values: Any) -> HTMLResponse:
    nonce = request.scope.get("state", {}).get("nonce", "")
    return HTMLResponse(_templates().get_template(name).render(marks=STATUS_MARKS, poll_ms=POLL_MS,
                                                               nonce=nonce, render_input=render_text,
                                                               **values))


class _Pages:
    """The endpoints; each opens the store read-only for its request (Starlette runs them in threads)."""

    def __init__(self, store_path: Path, key: str = "", labeller: str = "viewer", *,
                 show_judge: bool = False) -> None:
        self.store_path = store_path
        self.live = LiveSummaries()  # running runs' summaries, brought up to date on each request
        self.key, self.labeller, self.show_judge = key, labeller, show_judge

    @contextmanager
    def _store(self) -> Iterator[Store]:
        """The store, read-only, for one request, its statements stopped past :data:`PAGE_QUERY_S`."""
        with closing(open_store(self.store_path, read_only=True)) as store, \
                time_limit(store.conn, PAGE_QUERY_S):
            yield store

    def runs(self, request: Request) -> Response:
        """Every run, newest first: search with ``q``, filter with ``status``, page with ``page``."""
        query = request.query_params.get("q", "")
        page = _page_number(request.query_params.get("page", "0"))
        status = request.query_params.get("status", "")
        with self._store() as store:
            rows, more = runs_page(store.conn, query, page, status, self.live)
        return _render(request, "runs.html.j2", runs=rows, q=query, page=page, more=more, status=status,
                       running=any(r["status"] == "running" for r in rows), store=str(self.store_path))

    def run(self, request: Request) -> Response:
        """A run, or several (a sweep): the summary, the chart and a page of the grid, live while it runs."""
        params = request.query_params
        with self._store() as store:
            ids = _resolve(store, request.path_params["ids"].split(","))
            if not ids:
                return _missing(f"no run {request.path_params['ids']} in this store")
            previous = previous_run(store.conn, ids)
            base, base_problem = _base_run(store, params.get("base"), previous)
            grid = grid_page(store.conn, ids, page=_page_number(params.get("page", "0")),
                             filter=params.get("filter", "all"), query=params.get("q", ""),
                             sort=params.get("sort", "case"), base=base, after=_key(params, "after"),
                             before=_key(params, "before"), last="last" in params)
            kept = {k: v for k, v in params.items() if k in ("filter", "sort", "base")}  # a search keeps them
            summary = selection_summary(store.conn, ids, self.live)
            rows = target_rows(summary)
            selected = select_runs(store.conn, ids)
            judges = (calibration_docs(store.conn, selected, hists=summary_histograms(summary),
                                       summary=summary) if has_labels(store.conn) else [])
            simulators = simulator_corrections(store.conn, ids) if has_audits(store.conn) else []
            return _render(request, "run.html.j2", header=header_facts(summary, store.runs(ids)), rows=rows,
                           comparisons=comparisons(store.conn, ids, summary),
                           graders=summary.get("graders", []), chart=chart(rows),
                           previous=previous if len(ids) == 1 else None, grid=grid, ids=",".join(ids),
                           link=_linker(params), kept=kept, base_problem=base_problem,
                           history=history(store.conn, ids[0], self.live) if len(ids) == 1 else [],
                           pager=_pager(grid, _linker(params), params), judges=judges, simulators=simulators,
                           judged=any(t.get("judges") for t in summary["targets"]))

    def case(self, request: Request) -> Response:
        """One case of a run (or of several), whole: two of its columns side by side with a word
        diff (``a``, ``b``, ``trial``), and the cases before and after it in the grid it came from."""
        params = request.query_params
        back = urlencode(parse_qsl(params.get("back", "")))  # the grid's filter, sort, search and page
        grid = dict(parse_qsl(back))
        with self._store() as store:
            ids = _resolve(store, request.path_params["ids"].split(","))
            key = (params.get("eval", ""), params.get("case", ""))
            found = case_view(store.conn, ids, *key) if ids else None
            if found is None:
                return _missing("no such case in these runs")
            base, _ = _base_run(store, grid.get("base"), previous_run(store.conn, ids))
            before, after = neighbours(store.conn, ids, key, filter=grid.get("filter", "all"),
                                       query=grid.get("q", ""), sort=grid.get("sort", "case"), base=base)
            labelling = self._labelling(found, labels_of(store.conn, *key), ids, params)
        trial = params.get("trial", "")
        pair = side_by_side(found, params.get("a"), params.get("b"), int(trial) if trial.isdigit() else None)
        return _render(request, "case.html.j2", view=found, ids=",".join(ids), back=back, pair=pair,
                       diff_lines=DIFF_LINES,
                       before=before, after=after, link=_linker(params), labelling=labelling,
                       queued=params.get("queued", ""))

    def _labelling(self, view: CaseView, labels: dict[str, str], ids: list[str],
                   params: Any) -> dict[str, Any] | None:
        """The output the case page labels (``label=HASH``, else the first judged one not yet
        labelled), its label, and where the page goes next; None when no judge scored the case.
        Opened from the queue (``pos``), the page is blind while that output has no label: it
        shows no verdict, reason or score, so the judge cannot anchor the person checking it."""
        judged = [t for trials in view.trials.values() for t in trials if t["judge_model"] and not t["err"]]
        for t in judged:
            t["human_label"] = labels.get(t["output_sha256"])
        if not judged:
            return None
        wanted = params.get("label")
        focus = next((t for t in judged if t["output_sha256"] == wanted), None) \
            or next((t for t in judged if t["human_label"] is None), judged[0])
        after = _position(params.get("pos", ""))
        blind = "pos" in params and not self.show_judge and focus["human_label"] is None
        return {"trial": focus, "sha": focus["output_sha256"], "key": self.key, "blind": blind,
                "next": f"/runs/{','.join(ids)}/label?" + urlencode({"after": after}) if after >= 0
                else f"/runs/{','.join(ids)}/label"}

    def queue(self, request: Request) -> Response:
        """The label queue: the next output to label (``after``: past this position), opened on its
        case page; or how far the labelling got."""
        after = _position(request.query_params.get("after", ""))
        with self._store() as store:
            ids = _resolve(store, request.path_params["ids"].split(","))
            if not ids:
                return _missing(f"no run {request.path_params['ids']} in this store")
            item, labelled, total = next_in_queue(store.conn, ids, after)
        if item is None:
            return _render(request, "queue.html.j2", ids=",".join(ids), labelled=labelled, total=total,
                           skipped=after >= 0 and labelled < total)
        query = {"eval": item.eval_id, "case": item.case_id, "label": item.output_sha256,
                 "pos": item.position, "queued": f"{labelled}/{total}"}
        return RedirectResponse(f"/runs/{','.join(ids)}/case?{urlencode(query)}", status_code=303)

    async def label(self, request: Request) -> Response:
        """Store a label a case page sent (JSON: ``eval``, ``case``, ``output_sha256``, ``label``)."""
        return await self._write(request, save_label)

    def audit(self, request: Request) -> Response:
        """The simulator audit: the next conversation to audit (``after``: past this position)."""
        with self._store() as store:
            ids = _resolve(store, request.path_params["ids"].split(","))
            if not ids:
                return _missing(f"no run {request.path_params['ids']} in this store")
            values = audit_page(store.conn, ids, _position(request.query_params.get("after", "")))
        return _render(request, "audit.html.j2", ids=",".join(ids), key=self.key, **values)

    async def save_audit(self, request: Request) -> Response:
        """Store an audit the audit page sent (JSON: ``eval``, ``case``, ``transcript_sha256``,
        ``broke``, ``kind``)."""
        return await self._write(request, store_audit)

    async def _write(self, request: Request, write: Callable[[Path, Any, str], str]) -> Response:
        """Store what a page sent (a JSON object) with ``write``; its answer, or the problem (400)."""
        body = await request.body()
        if len(body) > MAX_LABEL_BYTES:
            return JSONResponse({"error": "too large"}, 413)
        try:
            sent = json.loads(body)
            if not isinstance(sent, dict):
                raise ValueError("not an object")
            stored = await run_in_threadpool(write, self.store_path, sent, self.labeller)
        except (ValueError, EvalHydraError) as exc:
            return JSONResponse({"error": getattr(exc, "message", None) or str(exc)}, 400)
        return JSONResponse({"stored": stored})

    def export(self, request: Request) -> Response:
        """The grid as shown (``filter``, ``q``, ``sort``, ``base``), every page, as CSV or JSONL."""
        fmt, params = request.path_params["fmt"], request.query_params
        if fmt not in FORMATS:
            return _missing("export as .csv or .jsonl", 404)
        with self._store() as store:
            ids = _resolve(store, request.path_params["ids"].split(","))
            if not ids:
                return _missing(f"no run {request.path_params['ids']} in this store")
            base, _ = _base_run(store, params.get("base"), previous_run(store.conn, ids))
        store_path = self.store_path

        def lines() -> Iterator[str]:
            with closing(open_store(store_path, read_only=True)) as reader:
                yield from export_lines(reader.conn, ids, fmt, filter=params.get("filter", "all"),
                                        query=params.get("q", ""), sort=params.get("sort", "case"), base=base)

        name = f"{ids[0] if len(ids) == 1 else 'sweep'}-{params.get('filter', 'all')}.{fmt}"
        return StreamingResponse(lines(), media_type=FORMATS[fmt],
                                 headers={"content-disposition": f'attachment; filename="{name}"'})

    def compare(self, request: Request) -> Response:
        """Two runs or targets (``base``, ``candidate``: ``RUN[,RUN…][@SERVICE[:MODEL]]``), paired;
        with ``list`` and ``row``, one row's whole list of changed cases, a page at a time; with
        ``judge_corrected=1``, also corrected for each side's judge (``compare --judge-corrected``)."""
        params = request.query_params
        texts = [params.get(name, "") for name in ("base", "candidate")]
        if not all(texts):
            return _missing("pick two runs to compare (base= and candidate=)", 400)
        corrected = params.get("judge_corrected") == "1"
        with self._store() as store:
            try:
                base, cand = (_target(store, text) for text in texts)
                comparison = compare(store.conn, base, cand, judge_corrected=corrected).to_json()
            except EvalHydraError as exc:
                return _missing(exc.message, 400)
            labelled = has_labels(store.conn)
            targets = [side_targets(store.conn, t.runs, t.service, t.model, self.live) for t in (base, cand)]
        ids = ",".join([*base.runs, *(r for r in cand.runs if r not in base.runs)])
        if "list" in params:
            return self._changes(request, [*comparison["comparisons"], comparison["overall"]], ids)
        return _render(request, "compare.html.j2", comparison=comparison, base=base, candidate=cand,
                       ids=ids, labelled=labelled, targets=targets)

    def changes(self, request: Request) -> Response:
        """One comparison row of a sweep's page (``row``): its whole list (``list``) of changed cases."""
        with self._store() as store:
            ids = _resolve(store, request.path_params["ids"].split(","))
            if not ids:
                return _missing(f"no run {request.path_params['ids']} in this store")
            rows = comparisons(store.conn, ids, selection_summary(store.conn, ids, self.live))
        return self._changes(request, rows, ",".join(ids))

    def _changes(self, request: Request, rows: list[dict[str, Any]], ids: str) -> Response:
        params = request.query_params
        kind, row = params.get("list", ""), _page_number(params.get("row", "x"))
        if kind not in CHANGE_LISTS or not params.get("row", "").isdigit() or row >= len(rows):
            return _missing("no such list of cases (list=regressed, improved or judge_flips; row=N)", 400)
        found = (rows[row].get("paired") or {}).get(kind) or []
        page = _page_number(params.get("page", "0"))
        shown = found[page * CHANGES_PAGE:(page + 1) * CHANGES_PAGE]
        return _render(request, "changes.html.j2", row=rows[row], kind=kind, label=CHANGE_LISTS[kind],
                       cases=shown, total=len(found), page=page,
                       more=(page + 1) * CHANGES_PAGE < len(found), first=page * CHANGES_PAGE,
                       ids=ids, link=_linker(params))

    def status(self, request: Request) -> Response:
        """The runs' status and counts, for a live page."""
        with self._store() as store:
            ids = _resolve(store, request.path_params["ids"].split(","))
            found = run_status(store.conn, ids, self.live) if ids else None
        return JSONResponse(found) if found is not None else JSONResponse({"error": "no such run"}, 404)


#: Query parameters a link leaves out when they hold these values.
_DEFAULTS = {"page": "0", "filter": "all", "sort": "case"}


def _linker(params: Any) -> Callable[..., str]:
    """``link(page=2)``: this page's query string with some parameters changed (empty ones dropped)."""
    current = {k: v for k, v in params.items() if k != "token"}

    def link(**changes: Any) -> str:
        merged = {**current, **{k: str(v) for k, v in changes.items()}}
        return urlencode({k: v for k, v in merged.items() if v and _DEFAULTS.get(k) != v})

    return link


def _resolve(store: Store, texts: list[str]) -> list[str]:
    try:
        return list(store.resolve_run_ids(texts))
    except EvalHydraError:
        return []


def _target(store: Store, text: str) -> Target:
    run, service, model = parse_target(text)
    return Target(text, tuple(store.resolve_run_ids(run.split(","))) if run else (), service, model)


def _base_run(store: Store, text: str | None, previous: str | None) -> tuple[str | None, str | None]:
    """The run a grid's regressions are measured against: ``base=`` resolved as any run id (an id,
    a unique prefix, ``latest``), else ``previous``; and what is wrong with a ``base=`` given."""
    if not text:
        return previous, None
    try:
        return store.resolve_run_ids([text])[0], None
    except EvalHydraError as exc:
        return None, exc.message


#: The parameters that place a page of the grid: cleared by every pager link but the one it sets.
_PLACE = {"page": "", "after_eval": "", "after_case": "", "before_eval": "", "before_case": "", "last": "",
          "from_end": ""}


def _pager(grid: GridPage, link: Callable[..., str], params: Any) -> dict[str, str | None]:
    """The grid's first/previous/next/last links and its page's name. Pages read by key count from
    the start (``page``) or, reached from the last page, from the end (``from_end``)."""
    if not grid.keyset:
        return {"first": None, "prev": link(page=grid.page - 1) if grid.page else None,
                "next": link(page=grid.page + 1) if grid.more else None, "last": None,
                "label": f"page {grid.page + 1}"}
    from_end = 1 if "last" in params else _page_number(params.get("from_end", "0"))
    counted = {"from_end": from_end + 1} if from_end else {"page": grid.page - 1}
    prev = link(**{**_PLACE, "before_eval": grid.first[0], "before_case": grid.first[1], **counted}) \
        if grid.earlier and grid.first else None
    ahead = {"from_end": from_end - 1} if from_end else {"page": grid.page + 1}
    following = link(**{**_PLACE, "after_eval": grid.last[0], "after_case": grid.last[1], **ahead}) \
        if grid.more and grid.last else None
    label = ("last page" if from_end == 1 else f"page {from_end} from the end") if from_end \
        else f"page {grid.page + 1}"
    return {"first": link(**_PLACE) if grid.earlier else None, "prev": prev, "next": following,
            "last": link(**{**_PLACE, "last": 1}) if grid.more else None, "label": label}


def _key(params: Any, name: str) -> tuple[str, str] | None:
    """A grid key from ``{name}_eval`` and ``{name}_case`` (None unless both are given)."""
    eval_id, case_id = params.get(f"{name}_eval"), params.get(f"{name}_case")
    return (eval_id, case_id) if eval_id is not None and case_id is not None else None


def _page_number(text: str) -> int:
    return max(_position(text), 0)


def _position(text: str) -> int:
    """A page number or queue position from a link: at most :data:`MAX_PAGE`; -1 when it is not a
    number (digits past the page limit are not read: a huge one is the limit)."""
    if not (text.isascii() and text.isdigit()):
        return -1
    return MAX_PAGE if len(text) > len(str(MAX_PAGE)) else min(int(text), MAX_PAGE)


def _missing(message: str, status: int = 404) -> Response:
    return HTMLResponse(f"<!doctype html><title>evalhydra view</title><p>{html.escape(message)}</p>"
                        '<p><a href="/">all runs</a></p>', status_code=status)
