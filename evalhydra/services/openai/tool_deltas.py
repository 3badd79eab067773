"""A streamed reply's tool calls, assembled from their deltas as servers send them: ids on the
first delta only, a missing ``index``, ``index: 0`` reused for other calls, names repeated on
every delta, a character's surrogate halves split over two deltas, arguments as text or as an
object. Each delta finds its call in constant time (one event may carry tens of thousands)."""

from __future__ import annotations

import json
import re
from typing import Any

from evalhydra.core.values import ToolCall
from evalhydra.services.openai.response import InvalidResponseError

__all__ = ["ToolCallAssembly"]


class ToolCallAssembly:
    """Tool calls put together from stream deltas, as servers send them.

    A delta names its call by ``index`` and/or ``id``; either may be missing, an ``id`` may come
    on the first delta only or be reused for calls at other indexes, an ``index`` may be reused
    (0) for calls with other ids, a name may repeat on every delta. A delta joins the latest call
    with its id (and its index, when it has one); a delta without id joins the latest call at its
    index; one with neither joins the call being sent. Anything else starts a call. Argument
    pieces are joined, surrogate halves split across pieces made whole again.
    """

    def __init__(self) -> None:
        self._calls: list[list[Any]] = []  # [id, index, name, [argument pieces]], in order of arrival
        # the latest call by id and index, by id, and by index: a call's id and index never change,
        # so each delta finds its call at once (a scan of the calls made an event of many deltas
        # quadratic)
        self._by_id_index: dict[tuple[str, int], list[Any]] = {}
        self._by_id: dict[str, list[Any]] = {}
        self._by_index: dict[int, list[Any]] = {}

    def add(self, delta: Any) -> None:
        function = delta.get("function") if isinstance(delta, dict) else None
        if not isinstance(function, dict):
            raise InvalidResponseError("MalformedSuccessPayload")
        index, call_id = delta.get("index"), delta.get("id")
        if index is not None and type(index) is not int:
            raise InvalidResponseError("MalformedSuccessPayload")
        if call_id is not None and not isinstance(call_id, str):
            raise InvalidResponseError("MalformedSuccessPayload")
        call = self._call_of(index, call_id or None)
        name, arguments = function.get("name"), function.get("arguments")
        if isinstance(name, str) and name and call[2] is None:
            call[2] = name
        if isinstance(arguments, str):
            call[3].append(arguments)
        elif isinstance(arguments, (dict, list)):
            call[3].append(json.dumps(arguments, ensure_ascii=False))
            call[4] = True

    def _call_of(self, index: int | None, call_id: str | None) -> list[Any]:
        if call_id is not None:  # its id (and index): a reused id at another index is another call
            found = self._by_id.get(call_id) if index is None else self._by_id_index.get((call_id, index))
        elif index is not None:  # the latest call at its index (ids come on a first delta only)
            found = self._by_index.get(index)
        else:  # neither: the call being sent
            found = self._calls[-1] if self._calls else None
        if found is not None:
            return found
        call: list[Any] = [call_id, index, None, [], False]  # id, index, name, pieces, sent as an object
        self._calls.append(call)
        if call_id is not None:
            self._by_id[call_id] = call
            if index is not None:
                self._by_id_index[(call_id, index)] = call
        if index is not None:
            self._by_index[index] = call
        return call

    def calls(self) -> list[ToolCall]:
        """The calls, in order of arrival.

        Raises:
            InvalidResponseError: A call without a name.
        """
        out = []
        for call_id, _, name, pieces, sent_as_object in self._calls:
            if name is None:
                raise InvalidResponseError("MalformedSuccessPayload")
            out.append(ToolCall(name, _whole("".join(pieces)), call_id, sent_as_object))
        return out


def _whole(text: str) -> str:
    """``text`` with surrogate pairs split across argument pieces joined into their character (a
    half left alone becomes U+FFFD)."""
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _LONE_SURROGATE.sub("\ufffd", joined)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
