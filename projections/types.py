"""What the projections hand to clients: messages in the original Navi's JSON shape."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import msgspec

from events.types import FileRef, ToolCall

Role = Literal["user", "assistant", "tool", "system"]


class Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One message of the display history or of the LLM context.

    Encoded with ``omit_defaults``: a field that does not apply is absent, not null.
    ``seq`` is the seq of the log event the message came from (for a compression
    summary, the seq of the ``context.compressed`` event).
    """

    role: Role
    content: str
    created_at: str
    seq: int
    images: tuple[str, ...] = ()
    files: tuple[FileRef, ...] = ()
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_plan: bool = False
    is_summary: bool = False
    success: bool | None = None
    is_subagent: bool = False


def iso_time(timestamp: float) -> str:
    """An envelope timestamp (seconds since the epoch) as ISO 8601 in UTC, with offset.

    Pure: the result depends on the timestamp only, never on the machine's time zone.
    """
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")
