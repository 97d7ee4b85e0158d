"""Stable ids for tool calls that arrive without one (older Ollama servers).

The id depends only on the response (the call's position and content), so
re-parsing the same response gives the same id, and a replayed log never needs
new ones.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

__all__ = ["stable_tool_call_id"]

_canonical = msgspec.json.Encoder(order="sorted")


def stable_tool_call_id(index: int, name: str, arguments: dict[str, Any]) -> str:
    digest = hashlib.sha256(name.encode() + b"\0" + _canonical.encode(arguments)).hexdigest()
    return f"call_{index}_{digest[:12]}"
