"""``evalhydra view``: serve the store as a local web app, or write one report.html (``--static``)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import webbrowser
from pathlib import Path
from urllib.parse import quote, urlencode

import trio

from evalhydra.analysis.comparison import compare
from evalhydra.cli.callbacks import sweep_run_ids
from evalhydra.cli.store_access import open_read_only, target_of
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode
from evalhydra.reports.writer import write_run_reports
from evalhydra.store.db import Store

__all__ = ["cmd_view", "configure_view"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def cmd_view(args: argparse.Namespace) -> int:
    """Open the store in the browser: every run, a run's report with its grid and cases (live
    while the run writes), and any two runs compared. The server only reads, but for the labels
    a case page sends (p pass, f fail, s skip: the label queue of a model-graded run, which
    `evalhydra calibrate` measures the judge against); it listens on 127.0.0.1 and lets in only
    the URL it prints (a token, as Jupyter's); Ctrl-C stops it. Without a display (CI, SSH) it
    prints the URL to open.

    --static writes report.html for the runs, a sweep or a comparison instead (one file per
    selection, beside the store under view/) and prints its path.

    Examples:
      evalhydra view                                  (serve; the run list)
      evalhydra view eval-smoke-1a2b3c4d              (serve; open that run)
      evalhydra view --sweep outputs/multirun/2026-11-29/22-40-52   (serve; open the sweep)
      evalhydra view --compare eval-smoke-1a2b3c4d eval-smoke-5e6f7a8b
      evalhydra view --static --sweep outputs/multirun/2026-11-29/22-40-52
    """
    if args.static or args.out:
        return _write_static(args)
    store_path = Path(args.store).expanduser()
    if not store_path.is_file():
        raise EvalHydraError(f"{store_path}: there is no store here.",
                             "Run an eval first, or pass --store PATH.")
    store = open_read_only(args)  # an older store is migrated, a damaged one refused, before serving
    try:
        # an unknown run or target is refused now, not as a page
        ids = _selection(store, args)[0] if args.run_ids or args.compare or args.sweep else []
    finally:
        store.close()
    if args.host not in _LOOPBACK:
        print(f"warning: --host {args.host}: anyone who can reach this address and has the URL can read"
              " the store", file=sys.stderr)
    trio.run(_serve, store_path, args, _start_page(args, ids))
    return ExitCode.OK


async def _serve(store_path: Path, args: argparse.Namespace, start: str) -> None:
    from evalhydra.viewer import serve_viewer  # Starlette and hypercorn: only for the server

    def ready(url: str) -> None:
        print(f"evalhydra view: {url}\n(Ctrl-C stops it)", flush=True)
        if _can_open_a_browser() and not args.no_browser:
            webbrowser.open(url)

    await serve_viewer(store_path, on_ready=ready, host=args.host, port=args.port, path=start,
                       labeller=args.labeller or _user(), show_judge=args.show_judge)


def _user() -> str:
    """The labeller the viewer's labels name by default: the login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's numeric user)
        return "viewer"


def _start_page(args: argparse.Namespace, ids: list[str]) -> str:
    """The page the printed URL opens: the comparison, the runs (a sweep's together), or the list."""
    if args.compare:
        return "/compare?" + urlencode({"base": args.compare[0], "candidate": args.compare[1]})
    return f"/runs/{quote(','.join(ids), safe=',')}" if ids else "/"


def _write_static(args: argparse.Namespace) -> int:
    store = open_read_only(args)
    try:
        ids, comparison, name = _selection(store, args)
        out = Path(args.out) if args.out else Path(args.store).expanduser().resolve().parent / "view" / name
        (page,) = write_run_reports(store, ids, out, formats=["html"], cumulative=False,
                                    comparison=comparison)
    finally:
        store.close()
    print(page)
    if _can_open_a_browser():
        webbrowser.open(page.resolve().as_uri())
    return ExitCode.OK


def _selection(store: Store, args: argparse.Namespace) -> tuple[list[str], dict[str, object] | None, str]:
    """The runs of the page, its comparison, and a folder name no other selection shares."""
    if args.compare:
        base, cand = (target_of(store, text) for text in args.compare)
        ids = [*base.runs, *(r for r in cand.runs if r not in base.runs)]
        if not ids:
            raise EvalHydraError("No runs selected.", "Name two targets: --compare RUN_A RUN_B.")
        safe = "-vs-".join(_slug(text) for text in args.compare)
        return ids, compare(store.conn, base, cand).to_json(), f"compare-{safe}"
    ids = store.resolve_run_ids(args.run_ids or (["latest"] if not args.sweep else []))
    if args.sweep:
        sweep = Path(args.sweep).resolve()
        ids = [*ids, *sweep_run_ids(store, sweep)] if args.run_ids else sweep_run_ids(store, sweep)
        if not ids:
            raise EvalHydraError(f"{sweep}: no run of this store belongs to that sweep.",
                                 "Pass the sweep's directory (outputs/multirun/DATE/TIME).")
        return ids, None, f"sweep-{_slug(sweep.parent.name + '-' + sweep.name)}"
    if not ids:
        raise EvalHydraError("No runs selected.", "Name RUN_IDs, --sweep DIR or --compare A B.")
    return ids, None, ids[0] if len(ids) == 1 else f"{ids[0]}-and-{len(ids) - 1}-more"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-") or "x"


def _can_open_a_browser() -> bool:
    """A desktop session that is not CI: macOS and Windows always, Linux with a display."""
    if os.environ.get("CI"):
        return False
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    return sys.platform in ("darwin", "win32") or bool(display)


def configure_view(p: argparse.ArgumentParser) -> None:
    """The options of ``evalhydra view``."""
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID",
                   help="run ids or unique prefixes: the page to open (--static: the runs of the page)")
    p.add_argument("--sweep", metavar="DIR", help="every job of a Hydra sweep directory, on one page")
    p.add_argument("--compare", nargs=2, metavar=("BASELINE", "CANDIDATE"),
                   help="two targets [RUN][@SERVICE[:MODEL]], paired case by case")
    p.add_argument("--static", action="store_true", help="write report.html and print its path; no server")
    p.add_argument("--out", metavar="DIR",
                   help="--static: where report.html goes (default: <store dir>/view/<selection>)")
    p.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    p.add_argument("--host", default="127.0.0.1", help="the interface (default 127.0.0.1; others warn)")
    p.add_argument("--show-judge", action="store_true",
                   help="the label queue shows the judge's verdict, reason and score before you label"
                        " (by default it hides them: labels anchored on the judge measure it too kindly)")
    p.add_argument("--labeller", metavar="NAME",
                   help="who the labels made in the viewer name (default: your login name)")
    p.add_argument("--no-browser", action="store_true", help="print the URL without opening a browser")
