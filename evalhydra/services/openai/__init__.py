"""The OpenAI-compatible chat-completions service.

* :mod:`~evalhydra.services.openai.payload`: the endpoint URL, model and JSON body of a request.
* :mod:`~evalhydra.services.openai.response`: a reply parsed strictly into a :class:`ChatAnswer`.
* :mod:`~evalhydra.services.openai.secrets`: the API key and ``${env:…}`` headers, read per call, masked.
* :mod:`~evalhydra.services.openai.headers`: the headers a service sends, and the secrets among them.
* :mod:`~evalhydra.services.openai.service`: :class:`OpenAICompatService`, which sends with retries.
* :mod:`~evalhydra.services.openai.embeddings`: the embeddings endpoint (OpenAI's
  ``/v1/embeddings``), for graders that compare texts by meaning.
* :mod:`~evalhydra.services.openai.reasoning`: a reasoning model's thinking, taken out of its answer
  before the answer is scored.
* :mod:`~evalhydra.services.openai.stream`: a streamed chat completion (``stream: true``):
  server-sent events assembled into one answer.
* :mod:`~evalhydra.services.openai.outcome`: a call's attempts as a Completion (priced, timed);
  :mod:`~evalhydra.services.openai.records`: what the response cache keeps of an answer.
* :mod:`~evalhydra.services.openai.tool_deltas`: a streamed reply's tool calls, from their deltas.
"""

from evalhydra.services.openai.payload import build_payload, normalize_chat_url, resolve_model
from evalhydra.services.openai.response import (
    ChatAnswer,
    InvalidResponseError,
    parse_chat_response,
    upstream_error_message,
)
from evalhydra.services.openai.secrets import check_header_values, mask_secrets, missing_api_key_warning
from evalhydra.services.openai.service import MAX_RESPONSE_BYTES, OpenAICompatService

__all__ = [
    "MAX_RESPONSE_BYTES",
    "ChatAnswer",
    "InvalidResponseError",
    "OpenAICompatService",
    "build_payload",
    "check_header_values",
    "mask_secrets",
    "missing_api_key_warning",
    "normalize_chat_url",
    "parse_chat_response",
    "resolve_model",
    "upstream_error_message",
]
