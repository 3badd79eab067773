"""The OpenAI-compatible chat-completions service (zig_eval's HTTP client, on trio).

One :class:`OpenAICompatService` per configured service, created inside the
run's trio loop. It owns:

* a :class:`~evalhydra.http.pool.TransportPool`: the lean transport
  (``service.transport: lean``, the default) or httpx transport shards
  (``httpx``, or any service behind a proxy);
* a ``trio.CapacityLimiter(max_concurrency)`` held for the whole call;
* the ``rpm``/``tpm`` buckets (:mod:`evalhydra.services.ratelimit`);
* the retry policy (:mod:`evalhydra.services.retry`).

:meth:`OpenAICompatService.complete` never raises for a call problem: HTTP
errors, timeouts and bad bodies come back as a :class:`~evalhydra.types.Completion`
with ``error_kind`` set. Cancellation propagates.

Attachments are rendered before the call (:mod:`evalhydra.services.render`,
re-exported here: ``build_chat_request``, ``render_request``, ``RenderError``,
``render_error_completion``); the runner catches ``RenderError`` and records
``render_error_completion(err, resolve_model(cfg))``. A payload
that cannot be JSON-encoded (e.g. a NaN in ``params``) is also a
``render_error`` (``InvalidPayload``), returned by :meth:`complete`.

Rate limits: each attempt waits for one ``rpm`` token and the request's
estimated ``tpm`` tokens (outside its timeout, inside the call's concurrency
slot); a successful attempt corrects the ``tpm`` charge with the real usage, a
failed one keeps the estimate charged.

Secrets: the API key and ``${env:NAME}`` header values are read from the
environment for each call and never stored on the service or logged.
"""

from __future__ import annotations

import json
import os
import random
import re
import zlib
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
from omegaconf import DictConfig, ListConfig, OmegaConf

from evalhydra import __version__, fastpath, strictjson
from evalhydra.config.schema import ServiceConfig
from evalhydra.errors import EvalHydraError
from evalhydra.http.lean import DEADLINE, CompleteBody, LeanTransport
from evalhydra.http.pool import TransportPool, tls_context
from evalhydra.registry.attachments import RenderError
from evalhydra.services.pricing import cost_usd
from evalhydra.services.ratelimit import RateLimiter, estimate_tokens
from evalhydra.services.render import build_chat_request, render_error_completion, render_request
from evalhydra.services.retry import (
    AttemptResult,
    RetryOutcome,
    RetryPolicy,
    classify_status,
    parse_retry_after,
    run_with_retries,
)
from evalhydra.types import ChatRequest, Completion, ErrorKind, ToolCall, ToolSpec, Usage, immutable

__all__ = [
    "MAX_RESPONSE_BYTES",
    "check_header_values",
    "mask_secrets",
    "ChatAnswer",
    "InvalidResponseError",
    "OpenAICompatService",
    "RenderError",
    "build_chat_request",
    "build_payload",
    "missing_api_key_warning",
    "normalize_chat_url",
    "parse_chat_response",
    "render_error_completion",
    "render_request",
    "resolve_model",
    "upstream_error_message",
]

#: zig_eval's response cap: a larger body is ``invalid_response``.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024

#: Most distinct body lengths whose headers are kept (then the set starts again).
_HEADER_SETS = 256
_ENV_REF = re.compile(r"\$\{env:([^}]+)\}")
#: Request bodies: compact UTF-8 JSON, NaN refused (one encoder, not one per call).
_BODY_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_BASE_HEADERS = {"content-type": "application/json", "accept": "application/json",
                 "accept-encoding": "gzip, deflate", "user-agent": f"evalhydra/{__version__}"}


# --------------------------------------------------------------------------- config


def normalize_chat_url(base_url: str) -> str:
    """Turn a service ``base_url`` into its chat-completions endpoint (zig_eval rule).

    ``…/chat/completions`` is kept; ``…/v1`` gets ``/chat/completions``;
    ``…/v1/`` gets ``chat/completions``; ``…/`` gets ``v1/chat/completions``;
    anything else gets ``/v1/chat/completions``.

    Args:
        base_url: The configured URL (surrounding whitespace is ignored).

    Returns:
        The endpoint URL.
    """
    url = base_url.strip()
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    if url.endswith("/v1/"):
        return url + "chat/completions"
    if url.endswith("/"):
        return url + "v1/chat/completions"
    return url + "/v1/chat/completions"


def _read_env(name: str | None) -> str | None:
    """The trimmed value of env var ``name``, or None when unnamed, unset or blank."""
    if not name or not name.strip():
        return None
    value = os.environ.get(name.strip())
    if value is None:
        return None
    return value.strip() or None


#: Shorter values are not masked (masking "1" would garble every number in a reply).
MIN_SECRET_LENGTH = 6
MASK = "***"


def mask_secrets(completion: Completion, secrets: list[str]) -> Completion:
    """The completion with every known secret value replaced by ``***`` in its output, its
    error message and its attempts' messages: a gateway that echoes the key (a 401 body that
    quotes it) cannot write it to the store or a report."""
    if not secrets:
        return completion

    def clean(text: str | None) -> str | None:
        if not text:
            return text
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    attempts = tuple(replace(a, error_message=clean(a.error_message)) for a in completion.attempts)
    return replace(completion, output=clean(completion.output) or "",
                   error_message=clean(completion.error_message), attempts=attempts)


def check_header_values(config: ServiceConfig) -> None:
    """The key and every header value must fit an HTTP header: printable ASCII (or tabs).

    Raises:
        EvalHydraError: Naming the variable or header (the value itself is never printed).
    """
    where = f"service '{config.name}'"
    fix = "Copy the value again: a pasted smart quote, non-breaking space or line break is the usual cause."
    if config.api_key_env and not _sendable(_read_env(config.api_key_env) or ""):
        raise EvalHydraError(f"{where}: ${config.api_key_env} holds a character that cannot be sent in an "
                             "HTTP header (non-ASCII or a control character).", fix)
    for header, template in (config.headers or {}).items():
        for name in _ENV_REF.findall(str(template)):
            if not _sendable(_read_env(name) or ""):
                raise EvalHydraError(f"{where}: ${name} (header {header}) holds a character that cannot be "
                                     "sent in an HTTP header (non-ASCII or a control character).", fix)
        if not _sendable(_ENV_REF.sub("", str(template))):
            raise EvalHydraError(f"{where}: header {header} has a character that cannot be sent in an HTTP "
                                 "header (non-ASCII or a control character).", fix)


def _sendable(value: str) -> bool:
    return all(32 <= ord(ch) < 127 or ch == "\t" for ch in value)


def missing_api_key_warning(config: ServiceConfig) -> str | None:
    """A warning when ``api_key_env`` names a variable that is unset or blank.

    Requests are still sent, without an ``Authorization`` header (zig_eval: a
    missing key is not an error). The runner prints the warning once.

    Args:
        config: The service.

    Returns:
        The warning text, or None when no key is expected or the key is set.
    """
    name = (config.api_key_env or "").strip()
    if not name or _read_env(name) is not None:
        return None
    return (
        f"Service '{config.name}': environment variable {name} is not set or blank; "
        f"requests are sent without an Authorization header. Set {name} to authenticate."
    )


def _resolve_header(template: str) -> str | None:
    """Substitute ``${env:NAME}`` references; None if one of them is unset or blank."""
    missing = False

    def sub(match: re.Match[str]) -> str:
        nonlocal missing
        value = _read_env(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    resolved = _ENV_REF.sub(sub, template)
    return None if missing else resolved


def _plain(value: Any) -> Any:
    """OmegaConf containers → plain Python (a no-op for plain values)."""
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _split_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Split configured headers into static ones and ``${env:…}`` templates."""
    static: dict[str, str] = {}
    dynamic: list[tuple[str, str]] = []
    for key, value in _plain(headers).items():
        text = str(value)
        if _ENV_REF.search(text):
            dynamic.append((str(key), text))
        else:
            static[str(key)] = text
    return static, tuple(dynamic)


# --------------------------------------------------------------------------- payload


def resolve_model(config: ServiceConfig, request: ChatRequest | None = None) -> str:
    """The model a request uses: the request's, else ``model``, else ``default_model``.

    Args:
        config: The service.
        request: The request, if any.

    Returns:
        The model name.
    """
    return (request.model if request else None) or config.model or config.default_model


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def build_payload(config: ServiceConfig, request: ChatRequest) -> dict[str, Any]:
    """Build the chat-completions body for one request.

    Shape: ``{model, messages: [system?, user], tools?, stream: false,
    provider?}`` then ``config.params`` and ``request.params`` merged on top (the
    request's win; params may override any key). A conversation's messages are
    sent as they are; the system prompt is prepended only when they have no
    system message.

    Args:
        config: The service.
        request: The request.

    Returns:
        The JSON-ready body.
    """
    system = request.system_prompt if request.system_prompt is not None else config.system_prompt
    messages: list[dict[str, Any]] = []
    if system and system.strip() and not any(m["role"] == "system" for m in request.messages or ()):
        messages.append({"role": "system", "content": system})
    if request.messages:
        messages.extend(dict(m) for m in request.messages)
    else:
        messages.append({"role": "user", "content": request.user_content})
    payload: dict[str, Any] = {"model": resolve_model(config, request), "messages": messages}
    if request.tools:
        payload["tools"] = [_tool_json(tool) for tool in request.tools]
    payload["stream"] = False
    if config.provider and config.provider.strip():
        payload["provider"] = config.provider.strip()
    if config.params:
        payload.update(_plain(config.params))
    if request.params:
        payload.update(request.params)
    return payload


def _count_image_chars(content: str | list[dict[str, Any]]) -> tuple[int, int]:
    """(number of image parts, characters of their data URLs)."""
    if isinstance(content, str):
        return 0, 0
    images = [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    chars = sum(len(str(p.get("image_url", {}).get("url", ""))) for p in images)
    return len(images), chars


# --------------------------------------------------------------------------- response


@immutable
class ChatAnswer:
    """A parsed successful completion."""

    output: str
    model: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage


class InvalidResponseError(Exception):
    """A 2xx body that is not a usable completion; ``args[0]`` is the seed reason.

    The reason is ``InvalidUpstreamJson`` or ``MalformedSuccessPayload``.
    """


def _nonneg_int(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0  # not a bool, not a float


def _parse_usage(data: dict[str, Any]) -> Usage:
    usage = data.get("usage")
    if type(usage) is not dict:
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if type(details) is dict else 0
    return Usage(_nonneg_int(usage.get("prompt_tokens")), _nonneg_int(usage.get("completion_tokens")),
                 _nonneg_int(cached))


def _parse_tool_calls(message: dict[str, Any]) -> tuple[ToolCall, ...] | None:
    raw = message.get("tool_calls")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InvalidResponseError("MalformedSuccessPayload")
    calls = []
    for entry in raw:
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(function, dict):
            raise InvalidResponseError("MalformedSuccessPayload")
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise InvalidResponseError("MalformedSuccessPayload")
        calls.append(ToolCall(name, arguments))
    return tuple(calls)


def _first_message(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidResponseError("InvalidUpstreamJson")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise InvalidResponseError("MalformedSuccessPayload")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise InvalidResponseError("MalformedSuccessPayload")
    return message


def parse_chat_response(body: bytes, requested_model: str) -> ChatAnswer:
    """Parse a 2xx chat-completions body.

    Args:
        body: The raw body.
        requested_model: Used when the body names no model.

    Returns:
        The answer: content (null → ""), model, tool calls, usage.

    Raises:
        InvalidResponseError: ``InvalidUpstreamJson`` (not a JSON object) or
            ``MalformedSuccessPayload`` (no ``choices[0].message``, bad
            content or tool calls, or neither content nor tool calls).
    """
    try:
        data = strictjson.loads(body)
    except (ValueError, UnicodeDecodeError):  # also a repeated key or a lone surrogate, as zig_eval
        raise InvalidResponseError("InvalidUpstreamJson") from None
    message = _first_message(data)
    tool_calls = _parse_tool_calls(message)
    if "content" in message:
        content = message["content"]
        if content is None:
            content = ""
        elif not isinstance(content, str):
            raise InvalidResponseError("MalformedSuccessPayload")
    elif tool_calls is not None:
        content = ""
    else:
        raise InvalidResponseError("MalformedSuccessPayload")
    model = data.get("model")
    model = model if isinstance(model, str) and model else requested_model
    return ChatAnswer(content, model, tool_calls or (), _parse_usage(data))


def upstream_error_message(body: bytes) -> str:
    """The reason for a final non-2xx response (zig_eval rule).

    Args:
        body: The error response's body.

    Returns:
        The body's ``error.message``, or ``error`` when it is a string, else
        ``UpstreamHttpError``.
    """
    try:
        data = strictjson.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "UpstreamHttpError"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return "UpstreamHttpError"


async def _read_capped(response: httpx.Response, cap: int) -> bytes | None:
    """Read the body, stopping past ``cap`` decoded bytes; None when it is larger.

    The cap counts what the body decodes to: a gzip or deflate body is inflated here,
    at most ``cap + 1`` bytes of it, so a small compressed reply cannot expand past
    the cap in memory (``Content-Length`` is the compressed size). A body without a
    ``Content-Encoding`` is read from the response's raw stream: httpx's decoding
    layers would only copy it.
    """
    encoding = _content_encoding(response.headers.raw)
    stream = response.stream
    if type(stream) is CompleteBody and encoding in _IDENTITY and not response.is_stream_consumed:
        body = stream.chunks[0] if len(stream.chunks) == 1 else b"".join(stream.chunks)
        return body if len(body) <= cap else None  # the lean transport read it whole with its head
    # A response built in memory (already read) is already decoded; the paths below count it.
    raw = not response.is_stream_consumed and isinstance(stream, httpx.AsyncByteStream)
    if raw and encoding in _INFLATE_WBITS:
        return await _inflate_capped(response, cap, encoding)
    length = response.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        return None
    plain = raw and encoding in _IDENTITY
    source = aiter(response.stream) if plain else response.aiter_bytes()  # type: ignore[arg-type]
    parts: list[bytes] = []
    size = 0
    async with aclosing(source) as chunks:  # type: ignore[type-var]
        async for chunk in chunks:
            parts.append(chunk)
            size += len(chunk)
            if size > cap:
                return None
    return parts[0] if len(parts) == 1 else b"".join(parts)


_IDENTITY = ("", "identity")


def _content_encoding(headers: list[tuple[bytes, bytes]]) -> str:
    """The reply's ``Content-Encoding``, lower-cased (repeated headers joined with ``", "``, as
    ``httpx.Headers.get`` joins them); one pass over the raw headers."""
    values = [value for name, value in headers if name.lower() == b"content-encoding"]
    if not values:
        return ""
    return b", ".join(values).decode("latin-1").strip().lower()


#: zlib window bits per Content-Encoding (gzip header, or the zlib wrapper of deflate).
_INFLATE_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


async def _inflate_capped(response: httpx.Response, cap: int, encoding: str) -> bytes | None:
    """Inflate a gzip/deflate body from its raw bytes, never holding more than ``cap + 1`` of it."""
    inflater = zlib.decompressobj(_INFLATE_WBITS[encoding])
    out = bytearray()
    first = True
    try:
        async with aclosing(response.aiter_raw()) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                if first and encoding == "deflate" and chunk[:1] not in (b"x", b"X"):
                    inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as httpx accepts
                first = False
                data = chunk
                while data:
                    out += inflater.decompress(data, cap + 1 - len(out))
                    if len(out) > cap:
                        return None
                    data = inflater.unconsumed_tail
    except zlib.error as exc:
        raise httpx.DecodingError(f"invalid {encoding} body: {exc}", request=response.request) from None
    return bytes(out)


# --------------------------------------------------------------------------- service


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
    ) -> None:
        self.config = config
        self.registry_root = registry_root
        static, self._dynamic_headers = _split_headers(config.headers)
        self._static_headers = {**_BASE_HEADERS, **{k.lower(): v for k, v in static.items()}}
        self._set_url(config.base_url if base_url is None else base_url)
        self._policy = RetryPolicy.from_config(config.retry)
        self._timeout_s = config.timeout_ms / 1000.0
        self._deadline_s = config.deadline_ms / 1000.0 if config.deadline_ms else None
        self._limiter = trio.CapacityLimiter(max(1, config.max_concurrency))
        self._rate = RateLimiter.from_config(config.rate_limit)
        user_keys = {key.lower() for key in config.headers}
        self._auth_env = None if "authorization" in user_keys else config.api_key_env
        timeout = httpx.Timeout(connect=10.0, read=self._timeout_s, write=30.0, pool=None)
        self._extensions: dict[str, Any] = {"timeout": timeout.as_dict()}
        # With the attempt's deadline (below), a read timeout as long as the attempt can never
        # end a read first: none is set, and a wait costs no clock read for it.
        self._lean_timeouts = {**timeout.as_dict(), "read": None}
        context = tls_context(config.verify, config.ca_bundle)
        self._pool = TransportPool(self._url, config.max_concurrency, transport, kind=config.transport,
                                   proxy=config.proxy, ssl_context=context)
        #: The lean transport ends an attempt at its deadline itself (no cancel scope per attempt).
        self._deadline_in_transport = bool(self._timeout_s) and isinstance(self._pool.transports[0],
                                                                            LeanTransport)
        self._rng = rng or random.Random()
        self._clock = fastpath.RunClock()
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
        self._url = normalize_chat_url(base_url)
        self._http_url = httpx.URL(self._url)
        self._host = self._http_url.netloc.decode("ascii")
        fixed = {"host": self._host, **self._static_headers}
        fixed.pop("content-length", None)  # each call sends its own
        self._fixed_headers = [(name.encode("ascii"), value.encode("ascii")) for name, value in fixed.items()]
        #: Headers without secrets, by body length: httpx copies a ``Headers`` without
        #: normalising each header again.
        self._headers_by_length: dict[int, httpx.Headers] = {}

    @property
    def limiter(self) -> trio.CapacityLimiter:
        """The per-service in-flight cap (``total_tokens`` may be changed at runtime)."""
        return self._limiter

    def _request_headers(self, length: int) -> httpx.Headers | list[tuple[bytes, bytes]]:
        """The headers of one call, ``Host`` and ``Content-Length`` included; secrets are read
        now and never stored."""
        if self._auth_env is None and not self._dynamic_headers:
            return self._fixed_request_headers(length)
        headers = {"host": self._host, **self._static_headers, "content-length": str(length)}
        key = _read_env(self._auth_env)
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        for name, template in self._dynamic_headers:
            value = _resolve_header(template)
            if value is not None:
                headers[name.lower()] = value
        return [(name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()]

    def _fixed_request_headers(self, length: int) -> httpx.Headers:
        """The headers of a call that sends no secret, made once per body length."""
        headers = self._headers_by_length.get(length)
        if headers is None:
            if len(self._headers_by_length) >= _HEADER_SETS:
                self._headers_by_length.clear()
            headers = httpx.Headers([*self._fixed_headers, (b"content-length", b"%d" % length)])
            self._headers_by_length[length] = headers
        return headers

    def _estimate(self, body: bytes, request: ChatRequest) -> int:
        n_images, image_chars = _count_image_chars(request.user_content)
        return estimate_tokens(len(body) - image_chars, n_images)

    async def complete(self, request: ChatRequest) -> Completion:
        """Send one request with retries and return its outcome; never raises for call errors.

        Args:
            request: The rendered request.

        Returns:
            The Completion (``error_kind`` set on failure).
        """
        model = resolve_model(self.config, request)
        if request is self._encoded[0]:  # a case's next trial: the same body
            body = self._encoded[1]
        else:
            try:
                body = _BODY_ENCODER.encode(build_payload(self.config, request)).encode("utf-8")
            except (TypeError, ValueError) as exc:
                return _failed(model, ErrorKind.RENDER_ERROR, f"InvalidPayload: {exc}", 0)
            self._encoded = (request, body)
        estimate = self._estimate(body, request) if self._rate.counts_tokens else 0
        attempt = partial(self._attempt, body, self._request_headers(len(body)), model, estimate)
        before = partial(self._rate.acquire, estimate) if self._rate.enabled else None
        async with fastpath.Holding(self._limiter):
            outcome = await run_with_retries(
                attempt,
                self._policy,
                timeout_s=self._timeout_s,
                deadline_s=self._deadline_s,
                before_attempt=before,
                rng=self._rng,
                timeout_in_fn=self._deadline_in_transport,
                now=self._clock.now,
            )
        return mask_secrets(self._completion(outcome, model), self._secrets())

    def _secrets(self) -> list[str]:
        """The secret values this service sends now: its key and every ``${env:…}`` header value."""
        if self._auth_env is None and not self._dynamic_headers:
            return []
        values = [_read_env(self._auth_env)]
        values += [_read_env(name) for _, template in self._dynamic_headers
                   for name in _ENV_REF.findall(template)]
        return [v for v in values if v and len(v) >= MIN_SECRET_LENGTH]

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
        try:
            response = await self._pool.transports[index].handle_async_request(request)
            try:
                status = response.status_code
                raw = await _read_capped(response, MAX_RESPONSE_BYTES)
                retry_after = None if status == 200 else response.headers.get("retry-after")
            finally:
                if type(response.stream) is not CompleteBody:  # a whole body has nothing to close
                    await response.aclose()
        finally:
            self._pool.release(index)
        if status != 200:  # zig_eval: any other status, a 201 or 204 too, is a failed call
            return AttemptResult(
                status_code=status,
                error_kind=classify_status(status),
                error_message=upstream_error_message(raw or b""),
                retry_after_s=parse_retry_after(retry_after),
            )
        if raw is None:
            return _invalid(status, "ResponseTooLarge")
        try:
            answer = parse_chat_response(raw, model)
        except InvalidResponseError as exc:
            return _invalid(status, str(exc.args[0]))
        if self._rate.counts_tokens:
            self._rate.adjust(answer.usage.prompt_tokens + answer.usage.completion_tokens - estimate)
        return AttemptResult(value=answer, status_code=status)

    def _completion(self, outcome: RetryOutcome[ChatAnswer], model: str) -> Completion:
        last, n = outcome.last, len(outcome.attempts)
        answer = last.value
        if answer is None or last.error_kind is not None:
            return Completion(
                output="",
                model=model,
                status_code=last.status_code,
                attempt_count=n,
                retried=n > 1,
                latency_ms=outcome.latency_ms,
                error_kind=last.error_kind,
                error_message=last.error_message,
                attempts=tuple(outcome.attempts),
            )
        return Completion(
            output=answer.output,
            model=answer.model,
            tool_calls=answer.tool_calls,
            usage=answer.usage,
            status_code=last.status_code,
            attempt_count=n,
            retried=n > 1,
            latency_ms=outcome.latency_ms,
            attempts=tuple(outcome.attempts),
            cost_usd=cost_usd(answer.usage, self.config.pricing),
        )

    async def aclose(self) -> None:
        """Close every connection shard (idempotent)."""
        await self._pool.aclose()


def _invalid(status: int, reason: str) -> AttemptResult[ChatAnswer]:
    return AttemptResult(status_code=status, error_kind=ErrorKind.INVALID_RESPONSE, error_message=reason)


def _failed(model: str, kind: ErrorKind, message: str, attempts: int) -> Completion:
    return Completion(output="", model=model, attempt_count=attempts, error_kind=kind, error_message=message)
