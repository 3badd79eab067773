"""``evalhydra view``: a local web app over the store, read-only, live while a run writes.

``app`` builds the Starlette application (pages, JSON for live updates; each request's queries
under a time limit), ``gate`` lets through only requests with the token to a loopback host,
``queries`` the SQL behind the run list, ``live`` running runs' summaries, ``serve`` runs it on
hypercorn under trio.

* :mod:`~evalhydra.viewer.export`: the grid as shown, every page of it, as CSV or JSONL.
* :mod:`~evalhydra.viewer.grid`: the grid of cases × targets, a page at a time, and one case whole:
  read with SQL, paged in SQLite.
* :mod:`~evalhydra.viewer.auditing`: the simulator audit: one conversation at a time, read as a
  dialogue, marked by keyboard.
* :mod:`~evalhydra.viewer.labelling`: labelling in the viewer: the label queue, and storing a label
  a page sends.
* :mod:`~evalhydra.viewer.render`: stored text as a reader wants it: a chat transcript, pretty JSON
  or markdown, and word diffs.
"""

from evalhydra.viewer.app import create_app
from evalhydra.viewer.serve import serve_viewer

__all__ = ["create_app", "serve_viewer"]
