"""The frame translator's table: one small function per event type (or small family).

Each function takes the translator's state, the record and its event, updates the
state and returns the frames the event makes (often none), typed (protocol.py).
``TABLE`` maps an event's exact type to its function; an event type it does not name
makes no frame. Which calls wait for a decision is not kept here: the translator
folds ``projections/waiting.py``, as every other view of it does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from events.envelope import Recorded
from events.types import (
    ContextCompressed,
    Event,
    FileRef,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    LLMWaiting,
    PlanReady,
    PlanStatus,
    ProfileSwitched,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStopped,
    TodoUpdated,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolProgress,
    ToolRequested,
    UserMessage,
)
from navi.server import protocol as p
from navi.server.protocol import Frame
from projections import messages as messages_projection
from projections import waiting as waiting_projection
from projections.tool_results import shown_images


@dataclass
class FrameState:
    """What a translator remembers of one stream's log."""

    max_context_tokens: int
    is_subagent: bool
    thinking: bool = False
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    run_started: float = 0.0
    tool_calls: int = 0
    tokens: int = 0
    context_tokens: int = 0
    messages: messages_projection.MessagesState = messages_projection.INITIAL
    # The calls of this stream still waiting for a decision.
    waiting: waiting_projection.Waiting = waiting_projection.NONE
    llm_call: LLMRequested = field(default_factory=LLMRequested)  # the last one
    # While the run waits for the model's server: its llm_waiting frame (sent again to a
    # parent's client that connects meanwhile, for a subagent).
    away: p.LLMWaitingFrame | None = None


def _end_thinking(s: FrameState) -> list[Frame]:
    if s.thinking:
        s.thinking = False
        return [p.ThinkingEnd()]
    return []


# --- the model's stream -------------------------------------------------------------


def _llm_text(s: FrameState, record: Recorded, e: LLMText) -> list[Frame]:
    out = _end_thinking(s)
    if not s.is_subagent:  # a subagent's text is its result, shown in its tool card
        out.append(p.StreamDelta(delta=e.text))
    return out


def _llm_thinking(s: FrameState, record: Recorded, e: LLMThinking) -> list[Frame]:
    if s.is_subagent:
        return []
    s.thinking = True
    return [p.ThinkingDelta(delta=e.text)]


def _llm_tool_calls(s: FrameState, record: Recorded, e: LLMToolCalls) -> list[Frame]:
    return _end_thinking(s)


def _llm_requested(s: FrameState, record: Recorded, e: LLMRequested) -> list[Frame]:
    s.llm_call = e
    away, s.away = s.away, None
    if s.is_subagent and away is not None:
        # Its server is back: the parent's banner goes (a subagent's stream_retry says
        # only that; its text is not streamed, so there is no attempt to drop).
        return [p.StreamRetry(attempt=e.attempt, max_attempts=e.max_attempts)]
    if e.purpose == "loop" and e.attempt > 1 and not s.is_subagent:
        # An interrupted call is asked again: drop the partial answer shown so far.
        out = _end_thinking(s)
        out.append(p.StreamRetry(attempt=e.attempt, max_attempts=e.max_attempts))
        return out
    return []


def _llm_failed(s: FrameState, record: Recorded, e: LLMFailed) -> list[Frame]:
    """An attempt failed; ``retrying``: another follows after a back-off (else the
    run fails, and an ``error`` frame says so)."""
    call = s.llm_call
    if call.purpose != "loop" or s.is_subagent:
        return []
    out = _end_thinking(s)
    left = call.max_attempts == 0 or call.attempt < call.max_attempts
    out.append(
        p.LLMFailedFrame(
            error=e.error,
            attempt=call.attempt,
            max_attempts=call.max_attempts,
            retrying=e.retryable and left,
        )
    )
    return out


def _llm_waiting(s: FrameState, record: Recorded, e: LLMWaiting) -> list[Frame]:
    """The retries are spent: the run waits for the model's server (the client shows
    a banner with Try again until the next attempt's ``stream_retry`` or the end). A
    subagent's too, marked as its: the parent's user sees that it waits, and Try again
    in the parent goes on with it."""
    s.away = p.LLMWaitingFrame(error=e.error)
    return [s.away]


def _llm_completed(s: FrameState, record: Recorded, e: LLMCompleted) -> list[Frame]:
    out = _end_thinking(s)
    s.tokens += e.completion_tokens
    s.context_tokens = e.prompt_tokens + e.completion_tokens
    if s.is_subagent and e.thinking:
        out.append(p.TurnThinking(thinking=e.thinking, is_subagent=True))
    return out


# --- tools and their approvals ------------------------------------------------------


def _tool_requested(s: FrameState, record: Recorded, e: ToolRequested) -> list[Frame]:
    s.calls[e.call_id] = (e.name, e.arguments)
    s.tool_calls += 1
    return [
        p.ToolStarted(tool=e.name, args=e.arguments, is_subagent=s.is_subagent, call_id=e.call_id)
    ]


def _tool_progress(s: FrameState, record: Recorded, e: ToolProgress) -> list[Frame]:
    return [
        p.ToolProgressFrame(
            call_id=e.call_id,
            progress=e.progress,
            total=e.total,
            message=e.message,
            is_subagent=s.is_subagent,
        )
    ]


def _approval_requested(s: FrameState, record: Recorded, e: ToolApprovalRequested) -> list[Frame]:
    return [approval_required(e, record.stream_id, is_subagent=s.is_subagent)]


def _approval_decided(s: FrameState, record: Recorded, e: ToolApprovalDecided) -> list[Frame]:
    return [
        p.ApprovalDecided(
            call_id=e.call_id,
            stream_id=record.stream_id,
            approved=e.approved,
            scope=e.scope,
            scope_label=e.scope_label,
            by=e.by,
            reason=e.reason,
            is_subagent=s.is_subagent,
        )
    ]


def _tool_ended(s: FrameState, record: Recorded, e: ToolCompleted | ToolFailed) -> list[Frame]:
    name, args = s.calls.pop(e.call_id, (e.name, {}))
    frame = p.ToolCall(
        tool=name,
        args=args,
        result=e.output if isinstance(e, ToolCompleted) else e.error,
        success=isinstance(e, ToolCompleted) and e.success,
        is_subagent=s.is_subagent,
        call_id=e.call_id,
    )
    if isinstance(e, ToolFailed):
        frame.reason = e.reason
    elif e.metadata.get("is_image"):
        frame.is_image = True
        # The image as the user sees it: a reference to the blob store.
        frame.images = list(shown_images(e))
    return [frame]


def approval_required(
    e: ToolApprovalRequested, stream_id: str, *, is_subagent: bool
) -> p.ApprovalRequired:
    """A waiting call as a client shows it and answers it: ``call_id`` and ``stream_id``
    name it in a decision; ``summary``, ``target``, ``risk`` and ``asked_by`` say what it
    does, where, and who asked; ``session_scope`` (``{"key", "label"}``, or null: it can
    only be approved once) what "for this session" would approve. A request of an older
    log (described by nothing but its tool) offered the whole tool, as it then did."""
    described = bool(e.asked_by or e.scope_key or e.once_only)
    scope: p.SessionScope | None = None
    if e.scope_key:
        scope = p.SessionScope(key=e.scope_key, label=e.scope_label)
    elif not described:
        scope = p.SessionScope(key=e.name, label=f"Allow every {e.name} call in this chat")
    return p.ApprovalRequired(
        call_id=e.call_id,
        stream_id=stream_id,
        tool=e.name,
        args=e.arguments,
        policy=e.policy,
        summary=e.summary or f"Run the tool {e.name} with the arguments shown",
        target=e.target or e.name,
        risk=e.risk,
        asked_by=e.asked_by or e.policy,
        session_scope=scope,
        is_subagent=is_subagent,
    )


# --- the conversation around the run -------------------------------------------------


def _user_message(s: FrameState, record: Recorded, e: UserMessage) -> list[Frame]:
    if s.is_subagent:
        return []
    files = [FileRef(name=f.name, path=f.path) for f in e.files]
    return [p.UserMessageFrame(content=e.text, images=list(e.images), files=files)]


def _plan_status(s: FrameState, record: Recorded, e: PlanStatus) -> list[Frame]:
    return [p.PlanningStatus(phase=e.phase, label=e.label, is_subagent=s.is_subagent)]


def _plan_ready(s: FrameState, record: Recorded, e: PlanReady) -> list[Frame]:
    return [p.PlanReadyFrame(plan=e.plan, is_subagent=s.is_subagent)]


def _todo_updated(s: FrameState, record: Recorded, e: TodoUpdated) -> list[Frame]:
    items = [p.TodoEntry(id=i.id, text=i.text, status=i.status) for i in e.items]
    return [p.TodoUpdatedFrame(items=items, is_subagent=s.is_subagent)]


def _profile_switched(s: FrameState, record: Recorded, e: ProfileSwitched) -> list[Frame]:
    return [p.ProfileSwitchedFrame(profile_id=e.profile_id, profile_name=e.profile_name)]


def _context_compressed(s: FrameState, record: Recorded, e: ContextCompressed) -> list[Frame]:
    return [
        p.ContextCompressedFrame(messages_before=e.messages_before, messages_after=e.messages_after)
    ]


# --- the run's start and end (a subagent's run ends inside its parent's tool call) ----


def _run_started(s: FrameState, record: Recorded, e: RunStarted) -> list[Frame]:
    s.run_started = record.timestamp
    s.tool_calls = 0
    s.tokens = 0
    return [] if s.is_subagent else [p.StreamStart(run_id=record.run_id)]


def _run_completed(s: FrameState, record: Recorded, e: RunCompleted) -> list[Frame]:
    s.away = None
    if s.is_subagent:
        return []
    out = _end_thinking(s)
    out.append(_stream_end(s, record, e.content, e.completed_normally))
    return out


def _run_stopped(s: FrameState, record: Recorded, e: RunStopped) -> list[Frame]:
    s.away = None
    if s.is_subagent:
        return []
    out = _end_thinking(s)
    out.append(p.StreamStopped())
    return out


def _run_failed(s: FrameState, record: Recorded, e: RunFailed) -> list[Frame]:
    s.away = None
    if s.is_subagent:
        return []
    out = _end_thinking(s)
    out.append(p.ErrorFrame(message=e.error, fatal=True))
    # Clients of the original unlock their input at stream_end.
    out.append(_stream_end(s, record, "", False))
    return out


def _stream_end(s: FrameState, record: Recorded, content: str, normally: bool) -> p.StreamEnd:
    count = len(s.messages.messages(with_streaming=False))
    return p.StreamEnd(
        content=content,
        context_tokens=s.context_tokens,
        max_context_tokens=s.max_context_tokens,
        elapsed_seconds=round(max(0.0, record.timestamp - s.run_started), 3),
        tool_call_count=s.tool_calls,
        token_count=s.tokens,
        message_index=max(0, count - 1),
        completed_normally=normally,
    )


Handler = Callable[[FrameState, Recorded, Any], list[Frame]]

# Event types not named here (``SubagentSpawned``/``SubagentFinished`` among them: the
# server follows the child stream itself) make no frame.
TABLE: dict[type[Event], Handler] = {
    LLMText: _llm_text,
    LLMThinking: _llm_thinking,
    LLMToolCalls: _llm_tool_calls,
    LLMRequested: _llm_requested,
    LLMFailed: _llm_failed,
    LLMWaiting: _llm_waiting,
    LLMCompleted: _llm_completed,
    ToolRequested: _tool_requested,
    ToolProgress: _tool_progress,
    ToolApprovalRequested: _approval_requested,
    ToolApprovalDecided: _approval_decided,
    ToolCompleted: _tool_ended,
    ToolFailed: _tool_ended,
    RunStarted: _run_started,
    UserMessage: _user_message,
    PlanStatus: _plan_status,
    PlanReady: _plan_ready,
    TodoUpdated: _todo_updated,
    ProfileSwitched: _profile_switched,
    ContextCompressed: _context_compressed,
    RunCompleted: _run_completed,
    RunStopped: _run_stopped,
    RunFailed: _run_failed,
}
