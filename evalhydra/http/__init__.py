"""HTTP transports under httpx's API: what the OpenAI-compatible service sends requests through.

* :mod:`~evalhydra.http.body`: reading a reply's body with a cap on what it decodes to (the role of
  httpx's ``_decoders.py``).
* :mod:`~evalhydra.http.connection`: one HTTP connection's byte stream: a plain non-blocking socket,
  or TLS over trio.
* :mod:`~evalhydra.http.deadlines`: deadlines of many socket waits kept by one timer task, instead
  of a cancel scope each.
* :mod:`~evalhydra.http.lean`: a lean HTTP/1.1 transport for trio under httpx's API, replies parsed
  by ``httptools``.
* :mod:`~evalhydra.http.pool`: a service's connections: one lean transport, or httpx transports
  leased least-loaded.
"""
