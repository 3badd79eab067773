"""YAML from outside, read safely: no aliases, bounded nesting.

``yaml.safe_load`` builds no objects, but it expands aliases: half a kilobyte of
nested ``*a`` references (a "billion laughs") becomes gigabytes. Eval files and
schemas have no use for aliases, so :func:`load` refuses them, and refuses
nesting deeper than :data:`~evalhydra.core.strictjson.MAX_DEPTH`.
"""

from __future__ import annotations

from typing import Any

import yaml

from evalhydra.core.strictjson import MAX_DEPTH, too_deep

__all__ = ["load"]


class _NoAliases(yaml.SafeLoader):
    """A safe loader that stops at the first alias."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not allowed here", mark)
        return super().compose_node(parent, index)


def load(text: str) -> Any:
    """Parse YAML without aliases and at most :data:`MAX_DEPTH` levels deep.

    Raises:
        yaml.YAMLError: Invalid YAML, an alias, or nesting too deep.
    """
    try:
        value = yaml.load(text, Loader=_NoAliases)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise yaml.YAMLError(f"YAML nested more than {MAX_DEPTH} levels deep") from None
    if too_deep(value):
        raise yaml.YAMLError(f"YAML nested more than {MAX_DEPTH} levels deep")
    return value
