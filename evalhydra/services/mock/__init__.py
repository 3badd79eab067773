"""The built-in OpenAI-compatible mock chat-completions server.

Used in-process by the runner for ``service=mock`` and as its own process by
tests and benchmarks (``python -m evalhydra.services.mock --port 9000``). It speaks
HTTP/1.1 with keep-alive (trio + h11) and answers deterministically.

Endpoints:
    ``POST /v1/chat/completions`` (or ``/chat/completions``): an OpenAI
    ``chat.completion`` whose message follows :mod:`evalhydra.services.mock.replies`;
    ``"stream": true`` gets the same answer as server-sent events, in deltas
    (:mod:`evalhydra.services.mock.streaming`).
    ``GET /v1/models``: the mock model.
    ``GET /_mock/stats``: counters (``requests``, ``chat_requests``, ``ok``,
    ``faults``, ``bad_requests``, ``connections``, ``in_flight``,
    ``max_in_flight``). ``POST /_mock/reset`` zeroes them and reseeds.
    ``GET|POST /_mock/config``: read, or change with a JSON object of settings.
    ``GET /_mock/last``: the last chat request body; ``GET /_mock/last_headers``:
    its headers (names lower-cased). ``GET /_mock/health``.
    Every ``/_mock/...`` path also answers under ``/v1/_mock/...``.

Switches (:class:`MockSettings`, same names as ``MockConfig`` plus extras):
    ``latency_ms``, ``jitter_ms``: delay of each chat answer, +/- uniform jitter.
    ``fail_rate``, ``fail_status``: answer ``fail_status`` with
    ``{"error": {"message": "mock failure", "type": "server_error"}}``.
    ``retry_after_s``: add ``Retry-After`` to failures;
    ``retry_after_http_date`` sends it as an HTTP-date.
    ``fail_first_n``: the first N chat requests fail, the rest succeed.
    ``hang_rate``: never answer (until the client disconnects).
    ``malformed_rate``: 200 with a truncated, invalid JSON body.
    ``reset_rate``: promise a body, send half of it, close the socket.
    ``oversized_rate``: a valid completion larger than 8 MiB.
    ``fault``: force one of :data:`FAULTS` on every chat request (``fail``,
    ``hang``, ``malformed``, ``reset``, ``stall``, ``oversized``,
    ``missing_choices``, ``empty_choices``, ``content_null``, ``no_usage``,
    ``html``).
    ``seed``: seed of the per-server ``random.Random`` that draws faults and
    jitter, so a run is reproducible.
    ``model``: model reported when a request names none; ``fixed_reply``:
    always answer this text.
    ``reasoning``: think before answering, the thought in ``message.reasoning_content``,
    ``message.reasoning`` or a leading ``<think>`` block (``inline``).
    ``stream_delta_chars``, ``stream_delay_ms``, ``stream_split_bytes``: how a streamed
    answer is cut into deltas, paced, and cut into network pieces; the faults
    ``stream_cut``, ``stream_error`` and ``stream_early_done`` end it badly.

Order per chat request: ``fail_first_n``, then ``fault``, then one random
draw shared by the rates (fail, hang, malformed, reset, oversized).

* :mod:`~evalhydra.services.mock.__main__`: ``python -m evalhydra.services.mock``: the mock as its
  own process.
* :mod:`~evalhydra.services.mock.batches`: the mock's Files and Batches API: ``/v1/files`` and
  ``/v1/batches`` as OpenAI shapes them.
* :mod:`~evalhydra.services.mock.chat`: chat completions: a request's fault drawn and its reply
  built as that fault shapes it (plain replies cached on their bytes).
* :mod:`~evalhydra.services.mock.delays`: the mock's latency: one timer for every request waiting
  out its delay.
* :mod:`~evalhydra.services.mock.limits`: the mock's rate limit: a provider's request budget, as a
  token bucket on the run's clock.
* :mod:`~evalhydra.services.mock.responses`: response bodies of the mock server, as ready-to-send
  bytes.
* :mod:`~evalhydra.services.mock.stats`: what the mock received, counted (``/_mock/stats``).
* :mod:`~evalhydra.services.mock.judge_replies`: the mock as a judge (model_grade, rubric);
  :mod:`~evalhydra.services.mock.text`: a message's content as text.
* :mod:`~evalhydra.services.mock.simulated_user`: the mock as a simulated user: a case's scripted
  turns, and errors made on purpose.
* :mod:`~evalhydra.services.mock.tool_faults`: serving-stack faults in tool calling, one switch
  each (``tool_wire``), for ``evalhydra probe tools`` to find.
* :mod:`~evalhydra.services.mock.wire`: HTTP/1.1 framing for the mock: a fast path for plain
  requests, h11 for the rest.

Example:
    >>> async with trio.open_nursery() as nursery:  # doctest: +SKIP
    ...     server = await nursery.start(serve, MockSettings(latency_ms=5))
    ...     client = openai.AsyncOpenAI(base_url=server.url, api_key="x")
"""

from evalhydra.services.mock.replies import reply_for, usage_for
from evalhydra.services.mock.server import MockServer, MockStats, open_mock_server, serve
from evalhydra.services.mock.settings import FAULTS, MockSettings

__all__ = [
    "FAULTS",
    "MockServer",
    "MockSettings",
    "MockStats",
    "open_mock_server",
    "reply_for",
    "serve",
    "usage_for",
]
