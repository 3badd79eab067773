"""A service's connections: one lean transport, or httpx transports leased least-loaded.

``service.transport`` picks the wire:

* ``lean`` (the default): one :class:`~evalhydra.http.lean.LeanTransport` with
  a pool of ``max_concurrency`` keep-alive connections, replies parsed by
  ``httptools``; several times less CPU per request than httpcore + h11.
* ``httpx``: ``httpx.AsyncHTTPTransport`` shards of :data:`CONNECTIONS_PER_SHARD`
  connections each. One shared httpcore pool on trio collapses under high
  concurrency (a few hundred requests per second where thousands are
  possible), so requests are spread over shards, each to the shard with the
  fewest in flight.

A service whose URL goes through a proxy (``service.proxy``, or ``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY`` without a matching ``NO_PROXY``) always uses the
``httpx`` shards: the lean transport does not speak to proxies.

Requests go to the transport directly rather than through
``httpx.AsyncClient``: a service needs none of the client's per-request work
(cookies, redirects, auth flows, event hooks, URL merging).
What the client would take from the environment is applied here: proxies and
the CA bundle (``SSL_CERT_FILE``, ``SSL_CERT_DIR``).
"""

from __future__ import annotations

import math
import ssl
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.http.lean import LeanTransport

__all__ = ["CONNECTIONS_PER_SHARD", "TRANSPORTS", "TransportPool", "environment_proxy", "tls_context"]

#: The values of ``service.transport``.
TRANSPORTS = ("lean", "httpx")

CONNECTIONS_PER_SHARD = 16


def environment_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url``, or None (``NO_PROXY`` honoured).

    Args:
        url: The request URL.

    Returns:
        The proxy URL from ``<scheme>_proxy`` or ``all_proxy`` (either case).
    """
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def tls_context(verify: bool = True, ca_bundle: str | None = None) -> ssl.SSLContext | None:
    """The TLS context for ``service.verify`` and ``service.ca_bundle``; None for httpx's default
    (the ``certifi`` bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built when first needed.

    Raises:
        EvalHydraError: ``ca_bundle`` is not a file or directory, or holds no readable CA.
    """
    if not verify:
        return httpx.create_ssl_context(verify=False)
    if not ca_bundle:
        return None
    path = Path(ca_bundle).expanduser()
    fix = "Give the path of a PEM file (or a directory of them) holding the CA certificates to trust."
    if not path.exists():
        raise EvalHydraError(f"service.ca_bundle={ca_bundle}: no such file or directory.", fix)
    try:
        context = ssl.create_default_context(cafile=str(path) if path.is_file() else None,
                                             capath=str(path) if path.is_dir() else None)
    except (ssl.SSLError, OSError) as exc:
        raise EvalHydraError(f"service.ca_bundle={ca_bundle}: not a CA bundle ({exc}).", fix) from None
    context.set_alpn_protocols(["http/1.1"])
    return context


class TransportPool:
    """The transports for requests to one URL, sized for a concurrency.

    Args:
        url: Where requests go (chooses the environment's proxy).
        concurrency: Most requests in flight (the service's ``max_concurrency``).
        transport: A transport to use instead (tests: ``httpx.MockTransport``).
        kind: ``lean`` or ``httpx`` (``service.transport``).
        proxy: A proxy URL for every request (``service.proxy``); None takes
            the environment's.
        ssl_context: For ``https`` (:func:`tls_context`); None: httpx's default.

    Raises:
        EvalHydraError: For an unknown ``kind``.
    """

    def __init__(self, url: str, concurrency: int, transport: httpx.AsyncBaseTransport | None = None,
                 *, kind: str = "lean", proxy: str | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        if kind not in TRANSPORTS:
            raise EvalHydraError(f"service.transport {kind!r} is not a transport",
                                 did_you_mean(kind, TRANSPORTS))
        proxy = proxy or environment_proxy(url)
        #: ``lean`` or ``httpx``: what this pool actually sends with.
        self.kind = "httpx" if proxy else kind
        if transport is not None:
            self.transports: list[httpx.AsyncBaseTransport] = [transport]
        elif self.kind == "lean":
            self.transports = [LeanTransport(max(1, concurrency), ssl_context=ssl_context)]
        else:
            count = max(1, math.ceil(concurrency / CONNECTIONS_PER_SHARD))
            self.transports = _shards(proxy, count, ssl_context or httpx.create_ssl_context())
        self.in_flight = [0] * len(self.transports)

    @property
    def ends_at_deadline(self) -> bool:
        """True when the transport ends each exchange at its request's
        :data:`~evalhydra.http.deadlines.DEADLINE` extension (no cancel scope is needed)."""
        return isinstance(self.transports[0], LeanTransport)

    def acquire(self) -> int:
        """The index of the transport with the fewest requests in flight, now counted as one more.

        Give it back with :meth:`release` once the response is closed.
        """
        index = 0 if len(self.transports) == 1 else min(range(len(self.transports)),
                                                          key=self.in_flight.__getitem__)
        self.in_flight[index] += 1
        return index

    def release(self, index: int) -> None:
        """One request on transport ``index`` is done."""
        self.in_flight[index] -= 1

    async def aclose(self) -> None:
        """Close every transport's connections (idempotent)."""
        for transport in self.transports:
            await transport.aclose()


def _shards(proxy: str | None, count: int, ssl_context: ssl.SSLContext) -> list[httpx.AsyncBaseTransport]:
    """``count`` httpx transports sharing one TLS context (the CA bundle is loaded once)."""
    limits = httpx.Limits(max_connections=CONNECTIONS_PER_SHARD,
                          max_keepalive_connections=CONNECTIONS_PER_SHARD, keepalive_expiry=30)
    return [httpx.AsyncHTTPTransport(verify=ssl_context, limits=limits, proxy=proxy)
            for _ in range(count)]
