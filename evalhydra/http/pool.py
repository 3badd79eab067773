"""Connection shards for one service: httpx transports, leased least-loaded.

A service sends every request through one of several
``httpx.AsyncHTTPTransport`` shards of :data:`CONNECTIONS_PER_SHARD`
connections each. One shared pool on trio collapses under high concurrency
(httpcore's pool contention: a few hundred requests per second where
thousands are possible), so requests are spread over shards, and each request
goes to the shard with the fewest in flight, so no shard queues a request
while another idles.

Requests go to the transport directly rather than through
``httpx.AsyncClient``: a service needs none of the client's per-request work
(cookies, redirects, auth flows, event hooks, URL merging), and skipping it
cuts httpx's CPU cost per request by about a quarter (``bench/throughput.py``).
What the client would take from the environment is applied here: proxies
(``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) and the CA
bundle (``SSL_CERT_FILE``, ``SSL_CERT_DIR``).
"""

from __future__ import annotations

import math
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx

__all__ = ["CONNECTIONS_PER_SHARD", "TransportPool", "environment_proxy"]

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


class TransportPool:
    """Transport shards for requests to one URL, sized for a concurrency.

    Args:
        url: Where requests go (chooses the environment's proxy).
        concurrency: Most requests in flight (the service's ``max_concurrency``).
        transport: A transport to use instead (tests: ``httpx.MockTransport``).
    """

    def __init__(self, url: str, concurrency: int,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        if transport is not None:
            self.transports: list[httpx.AsyncBaseTransport] = [transport]
        else:
            self.transports = _shards(url, max(1, math.ceil(concurrency / CONNECTIONS_PER_SHARD)))
        self.in_flight = [0] * len(self.transports)

    @contextmanager
    def lease(self) -> Iterator[httpx.AsyncBaseTransport]:
        """Lend the shard with the fewest requests in flight for one request."""
        index = min(range(len(self.transports)), key=self.in_flight.__getitem__)
        self.in_flight[index] += 1
        try:
            yield self.transports[index]
        finally:
            self.in_flight[index] -= 1

    async def aclose(self) -> None:
        """Close every shard's connections (idempotent)."""
        for transport in self.transports:
            await transport.aclose()


def _shards(url: str, count: int) -> list[httpx.AsyncBaseTransport]:
    limits = httpx.Limits(max_connections=CONNECTIONS_PER_SHARD,
                          max_keepalive_connections=CONNECTIONS_PER_SHARD, keepalive_expiry=30)
    ssl_context = httpx.create_ssl_context()  # load the CA bundle once for all shards
    proxy = environment_proxy(url)
    return [httpx.AsyncHTTPTransport(verify=ssl_context, limits=limits, proxy=proxy)
            for _ in range(count)]
