"""``evalhydra view``: a local web app over the store, read-only, live while a run writes.

``app`` builds the Starlette application (token gate, pages, JSON for live updates),
``queries`` the SQL behind the run list, ``serve`` runs it on hypercorn under trio.
"""

from evalhydra.viewer.app import create_app
from evalhydra.viewer.serve import serve_viewer

__all__ = ["create_app", "serve_viewer"]
