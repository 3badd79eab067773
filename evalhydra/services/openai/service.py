"""The OpenAI-compatible chat-completions service (zig_eval's HTTP client, on trio).

One :class:`OpenAICompatService` per configured service, created inside the
run's trio loop. It owns:

* a :class:`~evalhydra.http.pool.TransportPool`: the lean transport
  (``service.transport: lean``, the default) or httpx transport shards
  (``httpx``, or any service behind a proxy), used only through httpx's
  transport interface, with :mod:`evalhydra.http.body` reading replies;
* a ``trio.CapacityLimiter(max_concurrency)`` held for the whole call;
* the ``rpm``/``tpm`` buckets (:mod:`evalhydra.services.ratelimit`);
* the retry policy (:mod:`evalhydra.services.retry`);
* its headers and the secrets among them (:mod:`evalhydra.services.openai.headers`).

:meth:`OpenAICompatService.complete` never raises for a call problem: HTTP
errors, timeouts and bad bodies come back as a :class:`~evalhydra.core.values.Completion`
with ``error_kind`` set. Cancellation propagates. A payload that cannot be
JSON-encoded (e.g. a NaN in ``params``) is a ``render_error`` (``InvalidPayload``).

Rate limits: each attempt waits for one ``rpm`` token and the request's
estimated ``tpm`` tokens (outside its timeout, inside the call's concurrency
slot); a successful attempt corrects the ``tpm`` charge with the real usage, a
failed one keeps the estimate charged.
"""

from __future__ import annotations

import dataclasses
import json
import random
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from evalhydra.config.schema import ServiceConfig
from evalhydra.core import trio_util
from evalhydra.core.masking import mask_value
from evalhydra.core.values import (
    NO_CELL,
    CallContext,
    ChatRequest,
    Completion,
    ErrorKind,
)
from evalhydra.http.body import aclose_response, read_capped
from evalhydra.http.deadlines import DEADLINE
from evalhydra.http.pool import TransportPool, tls_context
from evalhydra.services.adaptive import EndpointController, Endpoints
from evalhydra.services.attempts import run_with_retries
from evalhydra.services.base import EndpointReport
from evalhydra.services.cache import CacheEntry, ResponseCache, cache_key, request_scope
from evalhydra.services.openai.embeddings import request_embeddings
from evalhydra.services.openai.headers import ServiceHeaders
from evalhydra.services.openai.outcome import completion_of, failed_completion, invalid_reply, limit_headers
from evalhydra.services.openai.payload import (
    api_base,
    build_payload,
    count_image_chars,
    normalize_chat_url,
    resolve_model,
)
from evalhydra.services.openai.records import answer_record, completion_from_record
from evalhydra.services.openai.response import (
    ChatAnswer,
    InvalidResponseError,
    parse_chat_response,
    parse_responses_reply,
    upstream_error_message,
    whole_wire,
)
from evalhydra.services.openai.secrets import (
    mask_secrets,
)
from evalhydra.services.openai.stream import (
    ResponsesStreamAssembler,
    StreamAssembler,
    is_event_stream,
    read_stream,
)
from evalhydra.services.pricing import cost_usd
from evalhydra.services.ratelimit import RateLimiter, estimate_tokens
from evalhydra.services.responses_api import responses_request
from evalhydra.services.retry import (
    AttemptResult,
    RetryPolicy,
    classify_status,
    retry_after_header,
)

__all__ = ["MAX_RESPONSE_BYTES", "OpenAICompatService"]

#: zig_eval's response cap: a larger body is ``invalid_response``.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Request bodies: compact UTF-8 JSON, NaN refused (one encoder, not one per call).
_BODY_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class OpenAICompatService:
    """A :class:`~evalhydra.services.base.Service` for OpenAI-compatible endpoints.

    Args:
        config: The service's config.
        registry_root: The registry root (attachments are relative to it).
        base_url: Overrides ``config.base_url`` (e.g. the started mock's URL).
            It can also be changed later through :attr:`base_url`.
        transport: An httpx transport for tests (``httpx.MockTransport``), used
            instead of the connection shards.
        rng: Randomness for backoff jitter (seed it for reproducible tests).
        cache: The response cache (:mod:`evalhydra.services.cache`), closed with the service.

    Raises:
        EvalHydraError: For an unknown ``retry.strategy``.
    """

    def __init__(
        self,
        config: ServiceConfig,
        *,
        registry_root: Path,
        base_url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        rng: random.Random | None = None,
        cache: ResponseCache | None = None,
        endpoints: Endpoints | None = None,
    ) -> None:
        self.config = config
        self._endpoints = endpoints if endpoints is not None else Endpoints()  # the run's, shared
        self.registry_root = registry_root
        #: The headers it sends, the key and the ``${oc.env:…}`` ones read at each call.
        self.headers = ServiceHeaders(config)
        tags = [str(t) for t in config.reasoning.tags]
        #: The inline thinking block's tags; None leaves the reply's content as it is.
        self._reasoning_tags = (tags[0], tags[1]) if config.reasoning.parse and len(tags) == 2 else None
        self._parse = parse_responses_reply if config.api == "responses" else parse_chat_response
        self._set_url(config.base_url if base_url is None else base_url)
        self._policy = RetryPolicy.from_config(config.retry)
        #: ``stream: true``: replies are read as server-sent events (:mod:`.stream`).
        self._stream = config.stream
        self._timeout_s = config.timeout_ms / 1000.0
        self._deadline_s = config.deadline_ms / 1000.0 if config.deadline_ms else None
        self._limiter = trio.CapacityLimiter(max(1, config.max_concurrency))
        self._rate = RateLimiter.from_config(config.rate_limit)
        timeout = httpx.Timeout(connect=10.0, read=self._timeout_s, write=30.0, pool=None)
        self._extensions: dict[str, Any] = {"timeout": timeout.as_dict()}
        # With the attempt's deadline (below), a read timeout as long as the attempt can never
        # end a read first: none is set, and a wait costs no clock read for it.
        self._lean_timeouts = {**timeout.as_dict(), "read": None}
        context = tls_context(config.verify, config.ca_bundle)
        self._pool = TransportPool(self._url, config.max_concurrency, transport, kind=config.transport,
                                   proxy=config.proxy, ssl_context=context)
        #: The endpoint's shared adaptive concurrency (made in the run's trio loop, on first use).
        self._gate: EndpointController | None = None
        self._cache = cache
        self._scope: list[str] | None = None
        #: The lean transport ends an attempt at its deadline itself (no cancel scope per attempt).
        self._deadline_in_transport = bool(self._timeout_s) and self._pool.ends_at_deadline
        self._rng = rng or random.Random()
        self._clock = trio_util.RunClock()
        #: The last request sent and its encoded body (requests are immutable).
        self._encoded: tuple[ChatRequest | None, bytes] = (None, b"")

    @property
    def name(self) -> str:
        """The service's name."""
        return self.config.name

    @property
    def base_url(self) -> str:
        """The chat-completions endpoint; assign a base URL to change it.

        The proxy (from the environment) is chosen for the URL the service was
        created with.
        """
        return self._url

    @base_url.setter
    def base_url(self, value: str) -> None:
        self._set_url(value)

    def _set_url(self, base_url: str) -> None:
        """Point the service at ``base_url``: the endpoint, parsed once, and the request headers
        that never change (``Host`` and the static ones), encoded once."""
        self._url = normalize_chat_url(base_url, api=self.config.api)
        self._http_url = httpx.URL(self._url)
        self.headers.set_host(self._http_url.netloc.decode("ascii"))

    @property
    def limiter(self) -> trio.CapacityLimiter:
        """The per-service in-flight cap (``total_tokens`` may be changed at runtime)."""
        return self._limiter

    def _estimate(self, body: bytes, request: ChatRequest) -> int:
        n_images, image_chars = count_image_chars(request.user_content)
        return estimate_tokens(len(body) - image_chars, n_images)

    async def complete(self, request: ChatRequest, context: CallContext = NO_CELL) -> Completion:
        """Send one request with retries and return its outcome; never raises for call errors.

        Args:
            request: The rendered request.
            context: Whom it is for: its trial keys the response cache, which answers unless
                ``context.use_cache`` is off.

        Returns:
            The Completion (``error_kind`` set on failure).
        """
        encoded = self.encode(request)
        if isinstance(encoded, Completion):
            return encoded
        model, body = encoded
        key = None
        if self._cache is not None and context.use_cache:
            key = cache_key(self._cache_endpoint(), model, body, context.trial, self.config.system_prompt,
                            self._cache_scope())
            hit = self._cache.get(key)
            cached = self._cached(hit) if hit is not None else None
            if cached is not None:
                return cached
        estimate = self._estimate(body, request) if self._rate.counts_tokens else 0
        attempt = partial(self._attempt, body, _traced(self.headers.request(len(body)), context),
                          model, estimate)
        before = partial(self._rate.acquire, estimate) if self._rate.enabled else None
        gate = self._endpoint_gate()
        entered = self._clock.now()
        async with trio_util.Holding(self._limiter):
            outcome = await run_with_retries(
                attempt,
                self._policy,
                timeout_s=self._timeout_s,
                deadline_s=self._deadline_s,
                before_attempt=before,
                rng=self._rng,
                timeout_in_fn=self._deadline_in_transport,
                now=self._clock.now,
                gate=gate,
                rate_limit_timeout_s=self.config.rate_limit_timeout_s if gate is not None else None,
            )
        waited_ms = max(0.0, (outcome.started - entered) * 1000.0)
        completion = completion_of(outcome, model, waited_ms, self.config.pricing)
        secrets = self.headers.secrets()
        completion = mask_secrets(completion, secrets)
        if key is not None and self._cache is not None and completion.ok and self._cache.put(
                key, self._cache_endpoint(), model, mask_value(answer_record(completion), secrets),
                completion.latency_ms):
            await self._cache.aflush()
        return completion

    def encode(self, request: ChatRequest) -> tuple[str, bytes] | Completion:
        """The model and the JSON body sent for ``request`` (online, or as a batch line's ``body``),
        or a ``render_error`` completion when it cannot be encoded."""
        model = resolve_model(self.config, request)
        if request is self._encoded[0]:  # a case's next trial: the same body
            return model, self._encoded[1]
        try:
            payload = build_payload(self.config, request)
            if self.config.api == "responses":
                payload = responses_request(payload)
            body = _BODY_ENCODER.encode(payload).encode("utf-8")
        except (TypeError, ValueError) as exc:
            return failed_completion(model, ErrorKind.RENDER_ERROR, f"InvalidPayload: {exc}", 0)
        self._encoded = (request, body)
        return model, body

    def parse_answer(self, body: bytes, model: str) -> ChatAnswer:
        """A whole reply's body as this service reads it (its reasoning tags applied).

        Raises:
            InvalidResponseError: The body is no usable completion.
        """
        return self._parse(body, model, self._reasoning_tags)

    def api_headers(self) -> dict[str, str]:
        """The headers every call to the endpoint's API carries: the configured ones and the key,
        read now (for the files and batches calls of batch mode)."""
        return self.headers.api_headers()

    async def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]] | None, Completion]:
        """``texts``' vectors from the endpoint's ``/embeddings`` (one attempt), and the call's record."""
        return await request_embeddings(api_base(self._url), self.api_headers(), model, texts,
                                        timeout_s=self._timeout_s or 60.0, mask=self.mask)

    def mask(self, text: str) -> str:
        """``text`` with every secret this service sends replaced by ``***``."""
        return self.headers.mask(text)

    def _cache_endpoint(self) -> str:
        """The endpoint as the cache names it: the built-in mock's port changes with each run, so
        it is named as the mock; a URL loses its credentials and query string."""
        if self.config.mock.enabled:
            return "evalhydra-mock"
        return str(self._http_url.copy_with(userinfo=b"", query=None))

    def _cache_scope(self) -> list[str]:
        """What besides the body decides this service's answers (:func:`request_scope`), worked out
        at its first cached call (the headers' variables are read then)."""
        if self._scope is None:
            mock = self.config.mock.enabled
            url = "evalhydra-mock" if mock else str(self._http_url.copy_with(userinfo=b""))
            self._scope = request_scope(url, self.headers.scope_headers(), self.config.reasoning.parse,
                                        list(self.config.reasoning.tags))
        return self._scope

    def _cached(self, hit: CacheEntry) -> Completion | None:
        """A cached answer as a completion: nothing sent, nothing paid (what it saved is kept);
        None when the entry is not one :func:`answer_record` wrote (a miss)."""
        try:
            completion = completion_from_record(hit.answer)
        except (KeyError, TypeError, ValueError):
            assert self._cache is not None
            self._cache.unreadable()
            return None
        return dataclasses.replace(completion, cached=True, cached_latency_ms=hit.latency_ms, latency_ms=0.0,
                                   status_code=200, attempt_count=0,
                                   saved_usd=cost_usd(completion.usage, self.config.pricing))

    def _wait_cap_s(self) -> float:
        """The longest wait a header may set: ``retry.retry_after_cap_ms``, and never past
        ``service.rate_limit_timeout_s``."""
        cap = self.config.retry.retry_after_cap_ms / 1000.0
        bound = self.config.rate_limit_timeout_s
        return min(cap, bound) if bound and bound > 0 else cap

    def _endpoint_gate(self) -> EndpointController | None:
        """The run's controller of this endpoint (None with ``service.adaptive=false``)."""
        if not self.config.adaptive:
            return None
        if self._gate is None:
            self._gate = self._endpoints.controller_for(self._url, self.config.max_concurrency,
                                                        self._wait_cap_s())
        return self._gate

    async def _attempt(
        self,
        body: bytes,
        headers: httpx.Headers | list[tuple[bytes, bytes]],
        model: str,
        estimate: int,
        attempt: int,
    ) -> AttemptResult[ChatAnswer]:
        extensions = self._extensions
        if self._deadline_in_transport:
            extensions = {"timeout": self._lean_timeouts, DEADLINE: self._clock.now() + self._timeout_s}
        # stream=: the headers are complete, so httpx has nothing to add or read
        request = httpx.Request("POST", self._http_url, headers=headers, stream=httpx.ByteStream(body),
                                extensions=extensions)
        index = self._pool.acquire()
        started = self._clock.now()
        streamed: ChatAnswer | InvalidResponseError | None = None
        raw: bytes | None = b""
        try:
            response = await self._pool.transports[index].handle_async_request(request)
            try:
                status = response.status_code
                if status == 200 and self._stream and is_event_stream(response):
                    streamed = await self._read_stream(response, model, started)
                else:
                    raw = await read_capped(response, MAX_RESPONSE_BYTES)
                retry_after = None if status == 200 else retry_after_header(response.headers)
                limits = limit_headers(response.headers.raw) if self.config.adaptive else None
            finally:
                await aclose_response(response)
        finally:
            self._pool.release(index)
        if isinstance(streamed, InvalidResponseError):
            return invalid_reply(status, str(streamed.args[0]))
        if status != 200:  # zig_eval: any other status, a 201 or 204 too, is a failed call
            return AttemptResult(
                status_code=status,
                error_kind=classify_status(status),
                error_message=upstream_error_message(raw or b""),
                retry_after_s=retry_after,
                limit_headers=limits,
            )
        if raw is None:
            return invalid_reply(status, "ResponseTooLarge")
        try:
            answer = streamed or self._parse(raw, model, self._reasoning_tags)
        except InvalidResponseError as exc:
            return invalid_reply(status, str(exc.args[0]))
        if self.config.record_wire and not streamed:
            answer = dataclasses.replace(answer, wire=whole_wire(raw))
        if self._rate.counts_tokens:
            self._rate.adjust(answer.usage.prompt_tokens + answer.usage.completion_tokens - estimate)
        return AttemptResult(value=answer, status_code=status, limit_headers=limits)

    async def _read_stream(self, response: httpx.Response, model: str,
                           started: float) -> ChatAnswer | InvalidResponseError:
        """A streamed reply's answer, or why it is none (the read's own errors propagate)."""
        kind = ResponsesStreamAssembler if self.config.api == "responses" else StreamAssembler
        assembler = kind(model, self._reasoning_tags, started, self._clock.now,
                         record=self.config.record_wire)
        try:
            return await read_stream(response, assembler, MAX_RESPONSE_BYTES)
        except InvalidResponseError as exc:
            return exc

    def status(self) -> str:
        """What the progress line says of this service: its endpoints' limits once they refused."""
        return self._endpoints.status()

    def refused(self) -> list[EndpointReport]:
        """Its endpoints that refused requests (429), for the summary."""
        return self._endpoints.refused()

    async def aclose(self) -> None:
        """Close every connection shard and the response cache (idempotent)."""
        await self._pool.aclose()
        if self._cache is not None:
            cache, self._cache = self._cache, None
            cache.close()


def _traced(headers: httpx.Headers | list[tuple[bytes, bytes]],
            context: CallContext) -> httpx.Headers | list[tuple[bytes, bytes]]:
    """The request's headers with the cell's W3C ``traceparent`` and ``baggage``, when telemetry
    gave it them."""
    if context.traceparent is None:
        return headers
    added = [("traceparent", context.traceparent)]
    if context.baggage:
        added.append(("baggage", context.baggage))
    if isinstance(headers, list):
        return [*headers, *((name.encode("ascii"), value.encode("ascii")) for name, value in added)]
    traced = httpx.Headers(headers)
    traced.update(added)
    return traced
