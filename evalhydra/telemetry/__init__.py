"""Telemetry out: every cell as OpenTelemetry GenAI spans, its verdicts as evaluation events.

* :mod:`~evalhydra.telemetry.semconv`: the GenAI semantic conventions' names evalhydra emits, and
  the commit of the spec they follow.
* :mod:`~evalhydra.telemetry.cells`: a stored cell as span drafts (its trace, requests, tool calls
  and verdict), and the W3C ``traceparent`` its requests carry; pure, no OpenTelemetry import.
* :mod:`~evalhydra.telemetry.ingest`: an agent's OTLP traces as recorded answers, scored without
  running the agent again.
* :mod:`~evalhydra.telemetry.receiver`: an OTLP/HTTP traces receiver on loopback, gated by a token
  (``ingest otlp --listen``).
* :mod:`~evalhydra.telemetry.export`: the drafts out, to a file of OTLP JSON lines
  (:mod:`~evalhydra.telemetry.otlp_json` writes them) or, through the OpenTelemetry SDK, to an
  OTLP/HTTP endpoint (``pip install "evalhydra[otel]"``).
"""
