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

from navi.llm.types import ChatMessage, ToolCall, ToolSpec

__all__ = ["IdentityCache", "WireParts", "encode_tool", "encode_tool_call"]

K = TypeVar("K")
V = TypeVar("V")

_encode = msgspec.json.Encoder().encode


def encode_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool as OpenAI's function format gives it, which Ollama and llama.cpp take too."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def encode_tool_call(call: ToolCall) -> dict[str, Any]:
    """An assistant's tool call as OpenAI's format gives it (the arguments as a JSON
    string), which llama-cpp-python's chat formats take too."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": _encode(call.arguments).decode()},
    }


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


class WireParts:
    """A backend's encoded messages and tool lists (``msgspec.Raw``: the encoder copies
    them into a body as they are). A body built with them encodes to the same bytes
    as one built without."""

    def __init__(self, encode_message: Callable[[ChatMessage], Any]) -> None:
        self._encode_message = encode_message
        self._message = IdentityCache[ChatMessage, msgspec.Raw](self._encoded, max_entries=4096)
        self._tools = IdentityCache[Sequence[ToolSpec], msgspec.Raw](
            lambda tools: msgspec.Raw(_encode([encode_tool(tool) for tool in tools])),
            max_entries=64,
        )

    def messages(self, messages: Sequence[ChatMessage]) -> list[msgspec.Raw]:
        # Each message is encoded once, whichever call it comes back in; not one with
        # images: rare, and too large to keep for long.
        return [self._encoded(m) if m.images else self._message(m) for m in messages]

    def _encoded(self, message: ChatMessage) -> msgspec.Raw:
        return msgspec.Raw(_encode(self._encode_message(message)))

    def tools(self, tools: Sequence[ToolSpec]) -> msgspec.Raw:
        return self._tools(tools)
