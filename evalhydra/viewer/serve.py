"""Serving the viewer: hypercorn on trio, on loopback unless told otherwise, until Ctrl-C."""

from __future__ import annotations

import logging
import secrets
import signal
from collections.abc import Callable
from functools import partial
from pathlib import Path

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from evalhydra.viewer.app import create_app

__all__ = ["serve_viewer"]


async def serve_viewer(store_path: Path, *, on_ready: Callable[[str], None], host: str = "127.0.0.1",
                       port: int = 0, path: str = "/", token: str | None = None,
                       labeller: str = "viewer", show_judge: bool = False) -> None:
    """Serve the viewer of ``store_path`` until SIGINT or SIGTERM, then stop cleanly.

    Args:
        store_path: The store (opened read-only for each request).
        on_ready: Called once listening, with the URL to open (it carries the token).
        host: The interface (loopback by default).
        port: The port; 0 picks a free one.
        path: The page the URL opens (``/``, ``/runs/ID``, ``/compare?…``).
        token: The access token; a random one by default.
        labeller: Who the labels made in the viewer name.
        show_judge: The label queue shows the judge's verdict before the person labels.
    """
    token = token or secrets.token_urlsafe(24)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("evalhydra.viewer")  # quiet unless configured
    app = create_app(store_path, token, host, labeller, show_judge=show_judge)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

        async def stopped() -> None:
            async for _ in signals:
                return

        async with trio.open_nursery() as nursery:
            binds = await nursery.start(partial(serve, app, config, shutdown_trigger=stopped))  # type: ignore[arg-type]
            sep = "&" if "?" in path else "?"
            on_ready(f"{binds[0]}{path}{sep}token={token}")
