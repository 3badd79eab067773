"""The request an OpenAI-compatible service sends: its endpoint URL, model and JSON body."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import ChatRequest, ToolSpec

__all__ = ["api_base", "build_payload", "count_image_chars", "normalize_chat_url", "plain", "resolve_model"]


def api_base(base_url: str) -> str:
    """The API root a service's ``base_url`` names (``…/v1``), where ``files`` and ``batches`` live."""
    url = base_url.strip().partition("?")[0].rstrip("/")
    url = url.removesuffix("/chat/completions").removesuffix("/responses")
    return url if url.endswith("/v1") else url + "/v1"


def normalize_chat_url(base_url: str, *, api: str = "chat") -> str:
    """Turn a service ``base_url`` into its chat-completions endpoint (zig_eval rule).

    ``…/chat/completions`` is kept; ``…/v1`` gets ``/chat/completions``;
    ``…/v1/`` gets ``chat/completions``; ``…/`` gets ``v1/chat/completions``;
    anything else gets ``/v1/chat/completions``. With ``api="responses"`` the endpoint is the
    API root's ``/responses`` instead. A query string (Azure's ``?api-version=…``) is kept after
    the path.

    Args:
        base_url: The configured URL (surrounding whitespace is ignored).
        api: ``chat`` or ``responses`` (``service.api``).

    Returns:
        The endpoint URL.
    """
    url, mark, query = base_url.strip().partition("?")
    path = api_base(url) + "/responses" if api == "responses" else _chat_path(url)
    return path + mark + query


def _chat_path(url: str) -> str:
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    if url.endswith("/v1/"):
        return url + "chat/completions"
    if url.endswith("/"):
        return url + "v1/chat/completions"
    return url + "/v1/chat/completions"


def plain(value: Any) -> Any:
    """OmegaConf containers → plain Python (a no-op for plain values)."""
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


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

    Shape: ``{model, messages: [system?, user], tools?, stream, stream_options?,
    provider?}`` then ``config.params`` and ``request.params`` merged on top (the
    request's win; params may override any key). ``stream`` is ``service.stream``;
    a stream asks for its usage chunk. A conversation's messages are
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
    payload["stream"] = config.stream
    if config.stream:
        payload["stream_options"] = {"include_usage": True}  # the tokens come in a last chunk
    if config.provider and config.provider.strip():
        payload["provider"] = config.provider.strip()
    if config.params:
        payload.update(plain(config.params))
    if request.params:
        payload.update(request.params)
    return payload


def count_image_chars(content: str | list[dict[str, Any]]) -> tuple[int, int]:
    """(number of image parts, characters of their data URLs)."""
    if isinstance(content, str):
        return 0, 0
    images = [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    chars = sum(len(str(p.get("image_url", {}).get("url", ""))) for p in images)
    return len(images), chars
