"""Services: the things evals call (OpenAI-compatible endpoints, agent CLIs).

* :mod:`~evalhydra.services.adaptive`: adaptive concurrency per endpoint: live within a provider's
  limits without being told them.
* :mod:`~evalhydra.services.base`: the seam between the runner and whatever answers a case.
* :mod:`~evalhydra.services.cache`: the response cache: the same request to the same model is not
  paid for twice.
* :mod:`~evalhydra.services.limit_headers`: a provider's rate-limit headers, read: a budget's limit,
  what remains and when it is whole again.
* :mod:`~evalhydra.services.pricing`: cost of a call from its token usage and the service's
  per-million-token prices.
* :mod:`~evalhydra.services.ratelimit`: per-service request and token budgets (``rate_limit.rpm`` /
  ``rate_limit.tpm``).
* :mod:`~evalhydra.services.recorded`: the ``recorded`` service: a case's stored sample is its
  answer.
* :mod:`~evalhydra.services.render`: rendering: a case's input, files and images → the OpenAI
  request a service sends.
* :mod:`~evalhydra.services.responses_api`: openAI's Responses API (``POST /v1/responses``) as a
  translation of Chat Completions.
* :mod:`~evalhydra.services.retry`: retries: policy, backoff, ``Retry-After``, error classification.
* :mod:`~evalhydra.services.attempts`: the attempt loop: one call's attempts, timeouts, deadline,
  the endpoint's gate, backoff, 429s waited out.
* :mod:`~evalhydra.services.batch`: batch mode: chat cells answered through a provider's batch jobs
  (``service.batch``).
* :mod:`~evalhydra.services.mock`: the built-in OpenAI-compatible mock chat-completions server.
* :mod:`~evalhydra.services.openai`: the OpenAI-compatible chat-completions service, in four parts.
"""
