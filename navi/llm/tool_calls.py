"""Tool calls as the wire formats give them: their arguments, and stable ids for calls
that arrive without one (older Ollama servers, llama.cpp).

The id depends only on the response (the call's position and content), so
re-parsing the same response gives the same id, and a replayed log never needs
new ones.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from navi.llm.errors import MalformedToolCall

__all__ = ["stable_tool_call_id", "tool_arguments"]

_canonical = msgspec.json.Encoder(order="sorted")


def stable_tool_call_id(index: int, name: str, arguments: dict[str, Any]) -> str:
    digest = hashlib.sha256(name.encode() + b"\0" + _canonical.encode(arguments)).hexdigest()
    return f"call_{index}_{digest[:12]}"


def tool_arguments(name: str, raw: dict[str, Any] | str) -> dict[str, Any]:
    """A call's arguments: an object as it came, or JSON text of one (blank text is no
    arguments). Anything else is a :class:`MalformedToolCall` the model can be told of."""
    if isinstance(raw, dict):
        return raw
    if not raw.strip():
        return {}
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise MalformedToolCall(name, raw) from None
    if not isinstance(value, dict):
        raise MalformedToolCall(name, raw)
    return value
