"""The WebSocket protocol, typed: what a client sends and every frame the server sends.

The wire is the original Navi's (``API-SHAPES.md`` in the shared folder) plus Navi's
additions; docs/api.md lists it, and tests/navi/server/test_protocol.py checks that
list against the Structs here, field by field. Each message and frame is a tagged
``msgspec.Struct`` (the tag is its ``type``). A frame leaves out what it does not
have: ``seq`` when it does not come from the log, ``subagent_id`` (and, on the frames
that do not always say it, ``is_subagent``) when it is not a subagent's, a failed
``tool_call``'s ``reason`` when it did not fail, a bad request's ``error`` its
``fatal``. Decoding a client's message never raises anything but ``BadMessage``, whose
text is what the client reads in its ``error`` frame.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.types import FileRef, ImageRef

# ---------------------------------------------------------------- client → server


class ClientMessage(msgspec.Struct, tag_field="type", kw_only=True):
    pass


class SendMessage(ClientMessage, tag="message"):
    content: str = ""
    images: list[str] = []
    files: list[FileRef] = []
    queue: bool = False  # run it after the current turn instead of refusing it


class Stop(ClientMessage, tag="stop"):
    pass


class Ping(ClientMessage, tag="ping"):
    pass


class TryAgain(ClientMessage, tag="try_again"):
    """Go on now with the run that waits for the model's server (``llm_waiting``)."""


class Approve(ClientMessage, tag="approve"):
    call_id: str
    stream_id: str = ""  # where the call waits (the approval_required frame's)
    scope: str = "once"  # the session refuses anything but "once" and "session"
    reason: str = ""


class Deny(ClientMessage, tag="deny"):
    call_id: str
    stream_id: str = ""
    reason: str = ""


LiveMessage = SendMessage | Stop | Ping | Approve | Deny | TryAgain


class Pause(ClientMessage, tag="pause"):
    pass


class Resume(ClientMessage, tag="resume"):
    pass


class Seek(ClientMessage, tag="seek"):
    seq: int | None = None  # checked by the player, which says the range


class Speed(ClientMessage, tag="speed"):
    speed: float | str | None = None  # a factor or "max"


ReplayMessage = Pause | Resume | Seek | Speed


class BadMessage(Exception):
    """A client's message that cannot be read; ``str()`` is what the client is told."""


class _TypeOnly(msgspec.Struct):
    type: object = None


def _reader(kind: Any, names: str) -> Any:
    decode = msgspec.json.Decoder(kind).decode
    sniff = msgspec.json.Decoder(_TypeOnly).decode

    def read(text: str) -> Any:
        try:
            return decode(text)
        except msgspec.ValidationError as exc:
            problem = str(exc)
            if problem.endswith("at `$.type`") or "field `type`" in problem:
                found = sniff(text).type
                said = (
                    "malformed frame: no type"
                    if found is None
                    else f"unknown message type {repr(found)[:60]}"
                )
                raise BadMessage(f"{said}: send {names}") from None
            raise BadMessage(f"malformed frame: {problem}") from None
        except msgspec.DecodeError:
            raise BadMessage("malformed frame: not valid JSON") from None

    return read


read_live_message = _reader(
    LiveMessage, "'message', 'stop', 'try_again', 'approve', 'deny' or 'ping'"
)
read_replay_message = _reader(ReplayMessage, "pause, resume, seek or speed")


# ---------------------------------------------------------------- server → client


class Frame(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """``seq``: the log event the frame comes from (none: not from the log).
    ``is_subagent`` and ``subagent_id`` (its stream) mark a subagent's frames; frames
    that always say whether they are a subagent's declare ``is_subagent`` again,
    without a default, so it is sent also when false."""

    seq: int | None = None
    is_subagent: bool = False
    subagent_id: str | None = None


# --- the model's stream


class StreamStart(Frame, tag="stream_start"):
    run_id: str | None  # null in logs written before runs had ids


class ThinkingDelta(Frame, tag="thinking_delta"):
    delta: str


class ThinkingEnd(Frame, tag="thinking_end"):
    pass


class TurnThinking(Frame, tag="turn_thinking"):
    thinking: str
    is_subagent: bool


class StreamDelta(Frame, tag="stream_delta"):
    delta: str


class LLMFailedFrame(Frame, tag="llm_failed"):
    error: str
    attempt: int
    max_attempts: int  # 0: not said
    retrying: bool


class StreamRetry(Frame, tag="stream_retry"):
    attempt: int
    max_attempts: int


class LLMWaitingFrame(Frame, tag="llm_waiting"):
    """The retries are spent and the run waits for the model's server to answer."""

    error: str


class StreamEnd(Frame, tag="stream_end"):
    content: str
    context_tokens: int
    max_context_tokens: int
    elapsed_seconds: float
    tool_call_count: int
    token_count: int
    message_index: int
    completed_normally: bool


class StreamStopped(Frame, tag="stream_stopped"):
    pass


class ErrorFrame(Frame, tag="error"):
    message: str
    fatal: bool = False  # the run failed (a stream_end follows); else a bad request


# --- tools and their approvals


class ToolStarted(Frame, tag="tool_started"):
    tool: str
    args: dict[str, Any]
    is_subagent: bool
    call_id: str


class ToolProgressFrame(Frame, tag="tool_progress"):
    """How far a running call has got (``tool.progress``): ``total`` null when the
    tool did not say; ``message`` redacted and short."""

    call_id: str
    progress: float
    total: float | None
    message: str
    is_subagent: bool


class SessionScope(msgspec.Struct, kw_only=True):
    key: str
    label: str


class ApprovalRequired(Frame, tag="approval_required"):
    call_id: str
    stream_id: str
    tool: str
    args: dict[str, Any]
    policy: str
    summary: str
    target: str
    risk: str
    asked_by: str
    session_scope: SessionScope | None  # null: it can only be approved once
    is_subagent: bool


class ApprovalDecided(Frame, tag="approval_decided"):
    call_id: str
    stream_id: str
    approved: bool
    scope: str
    scope_label: str
    by: str
    reason: str
    is_subagent: bool


class ToolCall(Frame, tag="tool_call"):
    tool: str
    args: dict[str, Any]
    result: str
    success: bool
    is_subagent: bool
    call_id: str
    reason: str | None = None  # a failed call's: error, stopped, interrupted, timeout, denied
    is_image: bool = False
    images: list[ImageRef] = []  # the image the tool returned, as the user sees it


# --- the conversation around the run


class UserMessageFrame(Frame, tag="user_message"):
    content: str
    images: list[str | ImageRef]
    files: list[FileRef]


class PlanningStatus(Frame, tag="planning_status"):
    phase: int
    label: str
    is_subagent: bool


class PlanReadyFrame(Frame, tag="plan_ready"):
    plan: str
    is_subagent: bool


class TodoEntry(msgspec.Struct, kw_only=True):
    id: int
    text: str
    status: str


class TodoUpdatedFrame(Frame, tag="todo_updated"):
    items: list[TodoEntry]
    is_subagent: bool


class ProfileSwitchedFrame(Frame, tag="profile_switched"):
    profile_id: str
    profile_name: str


class ContextCompressedFrame(Frame, tag="context_compressed"):
    messages_before: int
    messages_after: int


# --- not from the log


class Pong(Frame, tag="pong"):
    pass


class RunQueued(Frame, tag="run_queued"):
    ahead: int


class RunDequeued(Frame, tag="run_dequeued"):
    pass


# --- the replay socket's own


class ReplayStatus(Frame, tag="replay_status"):
    state: str  # playing | paused | ended
    seq: int | None  # always sent: where the replay is
    next_seq: int
    from_: int = msgspec.field(name="from")
    to: int
    head: int
    speed: float | str  # a factor, or "max"


class ReplayEnd(Frame, tag="replay_end"):
    seq: int | None  # always sent
    from_: int = msgspec.field(name="from")
    to: int
    head: int


# Every frame either socket sends: a client reads one of these.
ServerFrame = (
    StreamStart
    | ThinkingDelta
    | ThinkingEnd
    | TurnThinking
    | StreamDelta
    | LLMFailedFrame
    | StreamRetry
    | LLMWaitingFrame
    | StreamEnd
    | StreamStopped
    | ErrorFrame
    | ToolStarted
    | ToolProgressFrame
    | ApprovalRequired
    | ApprovalDecided
    | ToolCall
    | UserMessageFrame
    | PlanningStatus
    | PlanReadyFrame
    | TodoUpdatedFrame
    | ProfileSwitchedFrame
    | ContextCompressedFrame
    | Pong
    | RunQueued
    | RunDequeued
    | ReplayStatus
    | ReplayEnd
)

DELTAS = (StreamDelta, ThinkingDelta)

_encoder = msgspec.json.Encoder()


def encode(frame: Frame) -> str:
    return _encoder.encode(frame).decode()
