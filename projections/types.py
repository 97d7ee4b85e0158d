"""What the projections hand to clients: messages in the original Navi's JSON shape."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Literal

import msgspec

from events.types import FileRef, ImageRef, ToolCall

Role = Literal["user", "assistant", "tool", "system"]


class ApprovalNote(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool call a person decided on (``tool.approval_decided``), as its result shows
    it: who, how, why, and how long the call waited (from event timestamps)."""

    approved: bool
    by: str
    scope: str = "once"
    reason: str = ""
    waited_seconds: float = 0.0
    # What a "session" scope approved, as its button said ("Allow file writes in this
    # chat"); absent for older logs (the whole tool) and for "once".
    scope_label: str = ""


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
    # A user's images, or the image a tool returned (a tool message): references to the
    # blob store (``GET /sessions/{id}/blobs/{sha256}`` serves them); base64 strings where
    # the log recorded a user's inline.
    images: tuple[str | ImageRef, ...] = ()
    files: tuple[FileRef, ...] = ()
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_plan: bool = False
    is_summary: bool = False
    success: bool | None = None
    is_subagent: bool = False
    # What the live page showed about this answer, for a history that shows the same
    # (display history only; each from event timestamps, never the clock):
    # how long the model thought before it answered ("Thought for 3 s" / "briefly"),
    thinking_seconds: float | None = None
    # how the run ended when this is its last message: stopped, or failed with ``error``,
    stopped: bool = False
    error: str | None = None
    # and a completed run's figures, as in its ``stream_end`` frame.
    elapsed_seconds: float | None = None
    tool_call_count: int | None = None
    token_count: int | None = None
    # a tool result whose call a person decided on (display history only)
    approval: ApprovalNote | None = None
    # a call that was declined (``tool.failed`` reason ``denied``): its text is Navi's
    # and the user's words (the user's reason), never tool output (context only)
    declined: bool = False


def iso_time(timestamp: float) -> str:
    """An envelope timestamp (seconds since the epoch) as ISO 8601 in UTC, with offset.

    Pure: the result depends on the timestamp only, never on the machine's time zone.
    Exactly ``datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")``
    (the fraction rounded half to even to microseconds, then cut to milliseconds), with
    the date and time of the whole second reused: every message of the context gets
    one, and the events of a run mostly fall within the same second.
    """
    global _last_second, _last_prefix
    fraction, whole = math.modf(timestamp)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole += 1.0
        micros -= 1_000_000
    elif micros < 0:
        whole -= 1.0
        micros += 1_000_000
    second = int(whole)
    if second != _last_second:
        _last_prefix = datetime.fromtimestamp(second, UTC).isoformat()[:19]
        _last_second = second
    return f"{_last_prefix}.{micros // 1000:03d}+00:00"


_last_second: int | None = None
_last_prefix = ""
