"""The headers a service sends, and the secrets among them.

The key (``service.api_key_env``) and every ``${oc.env:…}``/``${env:…}`` header are read from
the environment at each call and never kept; the headers without a secret are encoded once
and reused by body length. Every configured header value counts as a secret when masking,
whatever its origin (a literal, or an ``${oc.env:…}`` that OmegaConf resolved before the
service saw it).
"""

from __future__ import annotations

import httpx

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.masking import mask_text
from evalhydra.core.version import __version__
from evalhydra.services.openai.secrets import (
    ENV_REF,
    MIN_SECRET_LENGTH,
    read_env,
    resolve_header,
    split_headers,
)

__all__ = ["KEY_HEADERS", "ServiceHeaders"]

#: Headers that carry an API key: left out of the cache key, so two keys share their answers.
KEY_HEADERS = frozenset({"authorization", "api-key", "x-api-key"})
#: Most distinct body lengths whose headers are kept (then the set starts again).
_HEADER_SETS = 256
_BASE_HEADERS = {"content-type": "application/json", "accept": "application/json",
                 "accept-encoding": "gzip, deflate", "user-agent": f"evalhydra/{__version__}"}


class ServiceHeaders:
    """One service's request headers: fixed ones encoded once, secrets read per call.

    Args:
        config: The service's config (``headers`` and ``api_key_env``).
    """

    def __init__(self, config: ServiceConfig) -> None:
        self._static, self._dynamic = split_headers(config.headers)
        values = (v.strip() for v in self._static.values())
        self._static_secrets = [v for v in values if len(v) >= MIN_SECRET_LENGTH]
        self._base = {**_BASE_HEADERS, **{k.lower(): v for k, v in self._static.items()}}
        user_keys = {key.lower() for key in config.headers}
        self._auth_env = None if "authorization" in user_keys else config.api_key_env
        self.set_host("")

    def set_host(self, host: str) -> None:
        """Send ``Host: host`` from now on (the endpoint changed)."""
        self._host = host
        fixed = {"host": host, **self._base}
        fixed.pop("content-length", None)  # each call sends its own
        self._fixed = [(name.encode("ascii"), value.encode("ascii")) for name, value in fixed.items()]
        self._fixed_names = {name for name, _ in self._fixed}
        #: Headers without secrets, by body length: httpx copies a ``Headers`` without
        #: normalising each header again.
        self._by_length: dict[int, httpx.Headers] = {}

    def request(self, length: int) -> httpx.Headers | list[tuple[bytes, bytes]]:
        """The headers of one call with a ``length``-byte body, ``Host`` and ``Content-Length``
        included; secrets are read now and never stored."""
        if self._auth_env is None and not self._dynamic:
            return self._without_secrets(length)
        secret = [(name.encode("ascii"), value.encode("ascii"))
                  for name, value in self.secret_headers().items()]
        named = {name for name, _ in secret}
        fixed = [h for h in self._fixed if h[0] not in named] if named & self._fixed_names else self._fixed
        return [*fixed, (b"content-length", b"%d" % length), *secret]  # a secret header wins its name

    def secret_headers(self) -> dict[str, str]:
        """The key and the ``${oc.env:…}`` headers, read now (names lower-cased)."""
        headers = {}
        key = read_env(self._auth_env)
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        for name, template in self._dynamic:
            value = resolve_header(template)
            if value is not None:
                headers[name.lower()] = value
        return headers

    def api_headers(self) -> dict[str, str]:
        """The headers every call to the endpoint's API carries: the configured ones and the key,
        read now (for the files and batches calls of batch mode)."""
        static = {name.lower(): value for name, value in self._static.items()}
        return {"user-agent": f"evalhydra/{__version__}", **static, **self.secret_headers()}

    def scope_headers(self) -> dict[str, str]:
        """The headers that may change an answer: every one but the key's (the response cache's scope)."""
        secret = {k: v for k, v in self.secret_headers().items() if k.lower() not in KEY_HEADERS}
        return {**self._static, **secret}

    def secrets(self) -> list[str]:
        """The secret values this service sends now: its key and every header value."""
        if self._auth_env is None and not self._dynamic:
            return self._static_secrets
        values = [read_env(self._auth_env), *self._static_secrets]
        values += [read_env(name) for _, template in self._dynamic for name in ENV_REF.findall(template)]
        return [v for v in values if v and len(v) >= MIN_SECRET_LENGTH]

    def mask(self, text: str) -> str:
        """``text`` with every secret this service sends replaced by ``***``."""
        return mask_text(text, self.secrets()) or text

    def _without_secrets(self, length: int) -> httpx.Headers:
        """The headers of a call that sends no secret, made once per body length."""
        headers = self._by_length.get(length)
        if headers is None:
            if len(self._by_length) >= _HEADER_SETS:
                self._by_length.clear()
            headers = httpx.Headers([*self._fixed, (b"content-length", b"%d" % length)])
            self._by_length[length] = headers
        return headers
