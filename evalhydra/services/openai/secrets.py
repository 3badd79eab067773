"""Secrets of an OpenAI-compatible service: the API key and ``${env:NAME}`` header values.

They are read from the environment for each call and never stored on the service,
in the store, in a report or in a log: :func:`mask_secrets` replaces any that an
endpoint echoes back. :func:`check_header_values` and :func:`missing_api_key_warning`
are the pre-flight checks (:mod:`evalhydra.plan.preflight`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.masking import holds_secret, mask_text
from evalhydra.core.values import Completion
from evalhydra.services.openai.payload import plain

__all__ = [
    "ENV_REF",
    "MIN_SECRET_LENGTH",
    "check_header_values",
    "mask_secrets",
    "missing_api_key_warning",
    "read_env",
    "resolve_header",
    "secrets_of",
    "split_headers",
]

#: A header value's reference to an environment variable.
ENV_REF = re.compile(r"\$\{env:([^}]+)\}")


def read_env(name: str | None) -> str | None:
    """The trimmed value of env var ``name``, or None when unnamed, unset or blank."""
    if not name or not name.strip():
        return None
    value = os.environ.get(name.strip())
    if value is None:
        return None
    return value.strip() or None


#: Shorter values are not masked (masking "1" would garble every number in a reply).
MIN_SECRET_LENGTH = 6


def mask_secrets(completion: Completion, secrets: list[str]) -> Completion:
    """The completion with every known secret value replaced by ``***`` in its output, its
    error message and its attempts' messages: a gateway that echoes the key (a 401 body that
    quotes it) cannot write it to the store or a report."""
    if not secrets:
        return completion
    texts = (completion.output, completion.error_message, *(a.error_message for a in completion.attempts))
    if not holds_secret(texts, secrets):  # the usual case: nothing to rebuild
        return completion
    attempts = tuple(replace(a, error_message=mask_text(a.error_message, secrets))
                     for a in completion.attempts)
    return replace(completion, output=mask_text(completion.output, secrets) or "",
                   error_message=mask_text(completion.error_message, secrets), attempts=attempts)


def secrets_of(configs: list[ServiceConfig]) -> list[str]:
    """Every secret value these services send now: their keys and header values (at least
    :data:`MIN_SECRET_LENGTH` long), longest first so a key containing another is masked whole."""
    values: set[str] = set()
    for config in configs:
        static, dynamic = split_headers(config.headers)
        found = [read_env(config.api_key_env), *static.values()]
        found += [read_env(name) for _, template in dynamic for name in ENV_REF.findall(template)]
        values.update(v for v in found if v and len(v) >= MIN_SECRET_LENGTH)
    return sorted(values, key=len, reverse=True)


def check_header_values(config: ServiceConfig) -> None:
    """The key and every header value must fit an HTTP header: printable ASCII (or tabs).

    Raises:
        EvalHydraError: Naming the variable or header (the value itself is never printed).
    """
    where = f"service '{config.name}'"
    fix = "Copy the value again: a pasted smart quote, non-breaking space or line break is the usual cause."
    if config.api_key_env and not _sendable(read_env(config.api_key_env) or ""):
        raise EvalHydraError(f"{where}: ${config.api_key_env} holds a character that cannot be sent in an "
                             "HTTP header (non-ASCII or a control character).", fix)
    for header, template in (config.headers or {}).items():
        for name in ENV_REF.findall(str(template)):
            if not _sendable(read_env(name) or ""):
                raise EvalHydraError(f"{where}: ${name} (header {header}) holds a character that cannot be "
                                     "sent in an HTTP header (non-ASCII or a control character).", fix)
        if not _sendable(ENV_REF.sub("", str(template))):
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
    if not name or read_env(name) is not None:
        return None
    return (
        f"Service '{config.name}': environment variable {name} is not set or blank; "
        f"requests are sent without an Authorization header. Set {name} to authenticate."
    )


def resolve_header(template: str) -> str | None:
    """Substitute ``${env:NAME}`` references; None if one of them is unset or blank."""
    missing = False

    def sub(match: re.Match[str]) -> str:
        nonlocal missing
        value = read_env(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    resolved = ENV_REF.sub(sub, template)
    return None if missing else resolved


def split_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Split configured headers into static ones and ``${env:…}`` templates."""
    static: dict[str, str] = {}
    dynamic: list[tuple[str, str]] = []
    for key, value in plain(headers).items():
        text = str(value)
        if ENV_REF.search(text):
            dynamic.append((str(key), text))
        else:
            static[str(key)] = text
    return static, tuple(dynamic)
