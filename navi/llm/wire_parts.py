"""Pieces of request bodies encoded once and reused while the same objects come back.

A run's context grows by a message or two per LLM call and every call offers the same
tools, yet each request body holds all of them: encoding the whole body afresh makes
a run's requests quadratic in its length. Messages and tool lists are immutable, so
their encoding can be kept by object identity. ``IdentityCache`` holds a reference to
each key, so an id is never reused while its entry lives, and forgets the older half
of its entries when full (a bound, not a policy: a run's context is always recent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, Generic, TypeVar

import msgspec

from navi.llm.types import ChatMessage, ToolSpec

__all__ = ["IdentityCache", "ListMemo", "WireParts"]

K = TypeVar("K")
V = TypeVar("V")

_encode = msgspec.json.Encoder().encode


class IdentityCache(Generic[K, V]):
    """``make(key)`` for each key object, computed once while the entry lives."""

    __slots__ = ("_entries", "_make", "_max")

    def __init__(self, make: Callable[[K], V], *, max_entries: int = 2048) -> None:
        self._make = make
        self._max = max_entries
        self._entries: dict[int, tuple[K, V]] = {}

    def __call__(self, key: K) -> V:
        entry = self._entries.get(id(key))
        if entry is not None and entry[0] is key:
            return entry[1]
        value = self._make(key)
        if len(self._entries) >= self._max:
            for old in list(islice(self._entries, len(self._entries) // 2 + 1)):
                del self._entries[old]
        self._entries[id(key)] = (key, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


class ListMemo(Generic[K, V]):
    """``convert`` applied to each item of a list, reusing the answer for a recent list
    that these items begin with (the same objects): a run's context only grows between
    two LLM calls, so each call converts its new messages alone, and the part already
    seen is found by one identity comparison of C code instead of a cache lookup per
    message. Answers are tuples: they are shared with the memo.

    The last ``keep`` lists are remembered (the runs of sessions active at once); a list
    that extends none of them is converted item by item."""

    __slots__ = ("_convert", "_keep", "_recent")

    def __init__(self, convert: Callable[[K], V], *, keep: int = 16) -> None:
        self._convert = convert
        self._keep = keep
        self._recent: list[tuple[tuple[K, ...], tuple[V, ...]]] = []  # most recent first

    def __call__(self, items: Sequence[K]) -> tuple[V, ...]:
        items = tuple(items)
        count = len(items)
        recent = self._recent
        for i, (seen, done) in enumerate(recent):
            n = len(seen)
            # The last item first: a list of another session fails there, in O(1).
            if n <= count and items[n - 1] is seen[-1] and items[:n] == seen:
                if n == count:
                    answer = done
                else:
                    convert = self._convert
                    answer = done + tuple([convert(item) for item in items[n:]])
                del recent[i]
                break
        else:
            if not count:
                return ()
            convert = self._convert
            answer = tuple([convert(item) for item in items])
            if len(recent) >= self._keep:
                recent.pop()
        recent.insert(0, (items, answer))
        return answer


class WireParts:
    """A backend's encoded messages and tool lists (``msgspec.Raw``: the encoder copies
    them into a body as they are). A body built with them encodes to the same bytes
    as one built without."""

    def __init__(
        self,
        encode_message: Callable[[ChatMessage], Any],
        encode_tool: Callable[[ToolSpec], Any],
    ) -> None:
        self._encode_message = encode_message
        self._message = IdentityCache[ChatMessage, msgspec.Raw](self._encoded, max_entries=4096)
        self._messages = ListMemo[ChatMessage, msgspec.Raw](self._cached)
        self._tools = IdentityCache[Sequence[ToolSpec], msgspec.Raw](
            lambda tools: msgspec.Raw(_encode([encode_tool(tool) for tool in tools])),
            max_entries=64,
        )

    def messages(self, messages: Sequence[ChatMessage]) -> Sequence[msgspec.Raw]:
        return self._messages(messages)

    def _cached(self, message: ChatMessage) -> msgspec.Raw:
        # A message that comes back in another list (a session's first call after a
        # compression, or a session the memo has forgotten) is still encoded only once;
        # not one with images: rare, and too large to keep for long.
        return self._encoded(message) if message.images else self._message(message)

    def _encoded(self, message: ChatMessage) -> msgspec.Raw:
        return msgspec.Raw(_encode(self._encode_message(message)))

    def tools(self, tools: Sequence[ToolSpec]) -> msgspec.Raw:
        return self._tools(tools)
