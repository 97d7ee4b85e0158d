"""The ``messages`` projection: the display history of one session. Never compressed.

- ``user.message`` → a user message (with its images and files).
- Chunks of a tool-loop LLM call (``llm.thinking``/``llm.text``/``llm.tool_calls``) build
  ``streaming``, the assistant message in progress, kept apart from the finished ones so
  a chunk costs O(1). ``llm.completed`` replaces it with the full assistant message
  (tool calls included: the UI draws a card per call). A new tool-loop ``llm.requested``
  (a re-issued call, ``attempt`` > 1) drops the chunks of the attempt it supersedes, so
  an interrupted and re-issued call shows one answer.
- LLM calls made for planning or compression are not shown; ``plan.ready`` is, as an
  assistant message with ``is_plan``.
- ``tool.completed`` / ``tool.failed`` → a tool message (``success``; for ``tool.failed``
  the text says why: "interrupted" means the call may or may not have happened). An
  image the tool returned, kept in the blob store, is in its ``images`` (a reference).
- A run that ends (stopped or failed) in the middle of a streamed answer keeps the
  partial text as an assistant message: the user saw it. Its partial tool calls are
  dropped, since none of them ran. A partial answer that a retry superseded (an
  ``llm.failed``, then the next attempt) is kept aside: if the run ends before the new
  attempt says anything, it is the partial answer shown (the page kept it too).
- The run's end is written on its last message, as the page showed it live: ``stopped``,
  ``error`` (``run.failed``), or a completed run's ``elapsed_seconds``,
  ``tool_call_count`` and ``token_count`` (the figures of its ``stream_end`` frame).
  When the run's last message is not an answer (a failure before any text, a stop during
  a tool, the iteration budget spent), an assistant message carries them (with
  ``run.completed``'s content). ``thinking_seconds`` is how long an answer's thinking
  streamed (first thinking chunk to the first chunk after it). All from event times.
- ``tool.progress``: the last one of each call still running is kept (``progress``,
  the running tool card's bar: a replay drawn at any seq shows it); the call's result
  or the run's end clears it.
- ``context.injected`` and ``context.compressed`` are for the LLM only: not shown.
- ``session.deleted`` marks the session deleted; its history stays in the log.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.types import (
    LLMCompleted,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    PlanReady,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStopped,
    SessionCreated,
    SessionDeleted,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolProgress,
    ToolRequested,
    UserMessage,
)
from projections.fold import Projection
from projections.tool_results import shown_images, tool_result_content, tool_succeeded
from projections.types import ApprovalNote, Message, iso_time
from projections.vec import Vec

_NO_CHUNKS: Vec[str] = Vec()


class Streaming(msgspec.Struct, frozen=True, kw_only=True):
    """The assistant message of the current tool-loop LLM call, chunk by chunk."""

    seq: int  # of its first chunk
    timestamp: float  # of its first chunk
    text: Vec[str] = _NO_CHUNKS
    thinking: Vec[str] = _NO_CHUNKS
    tool_calls: tuple[ToolCall, ...] = ()
    # When its thinking streamed: the first thinking chunk, and the first chunk after it.
    thinking_from: float | None = None
    thinking_to: float | None = None

    @property
    def shows_something(self) -> bool:
        return any(self.text) or any(self.thinking)

    def thinking_seconds(self, end: float) -> float | None:
        """How long the thinking streamed; ``end``: the time of the event that ended it,
        if no chunk after it did."""
        if self.thinking_from is None:
            return None
        to = end if self.thinking_to is None else self.thinking_to
        return round(max(0.0, to - self.thinking_from), 3)

    def message(self, *, end: float, is_subagent: bool = False) -> Message:
        return Message(
            role="assistant",
            content="".join(self.text),
            thinking="".join(self.thinking),
            tool_calls=self.tool_calls,
            created_at=iso_time(self.timestamp),
            seq=self.seq,
            is_subagent=is_subagent,
            thinking_seconds=self.thinking_seconds(end),
        )


class MessagesState(msgspec.Struct, frozen=True, kw_only=True):
    finished: Vec[Message]
    streaming: Streaming | None = None
    # The partial answer of an attempt a retry superseded, until the next one says something.
    superseded: Streaming | None = None
    llm_purpose: str = "loop"  # purpose of the LLM call in progress: only "loop" is shown
    is_subagent: bool = False
    deleted: bool = False
    # The run in progress, for its figures (counted as the stream_end frame counts them).
    run_started: float = 0.0
    run_tool_calls: int = 0
    run_tokens: int = 0
    run_answered: bool = False  # a tool-loop llm.completed came in this run
    # Calls that asked for approval (call id, when), and their decisions, until the result.
    asked: tuple[tuple[str, float], ...] = ()
    decided: tuple[tuple[str, ApprovalNote], ...] = ()
    # The last progress of each call still running (its card's bar), in call order.
    progress: tuple[ToolProgress, ...] = ()

    def messages(self, *, with_streaming: bool = True) -> list[Message]:
        """The display history; with the in-progress assistant message last, if any."""
        result = self.finished.to_list()
        if with_streaming and self.streaming is not None:
            last = self.streaming
            end = last.thinking_to or last.timestamp
            result.append(last.message(end=end, is_subagent=self.is_subagent))
        return result


def _append(state: MessagesState, message: Message) -> MessagesState:
    return replace(state, finished=state.finished.append(message))


def _on_session_created(state: MessagesState, record: Recorded) -> MessagesState:
    event: SessionCreated = record.event  # type: ignore[assignment]
    return replace(state, is_subagent=event.parent_stream_id is not None)


def _on_session_deleted(state: MessagesState, record: Recorded) -> MessagesState:
    return replace(state, deleted=True)


def _on_user_message(state: MessagesState, record: Recorded) -> MessagesState:
    event: UserMessage = record.event  # type: ignore[assignment]
    message = Message(
        role="user",
        content=event.text,
        images=event.images,
        files=event.files,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
        is_subagent=state.is_subagent,
    )
    return _append(state, message)


def _on_llm_requested(state: MessagesState, record: Recorded) -> MessagesState:
    event: LLMRequested = record.event  # type: ignore[assignment]
    if event.purpose == "loop":
        # Chunks of an attempt this call supersedes are dropped (kept aside, in case the
        # run ends before the new attempt says anything).
        current = state.streaming
        superseded = current if current is not None and current.shows_something else None
        return replace(
            state,
            llm_purpose="loop",
            streaming=None,
            superseded=superseded or state.superseded,
        )
    return replace(state, llm_purpose=event.purpose)


def _streaming(state: MessagesState, record: Recorded) -> Streaming:
    current = state.streaming
    if current is None:
        return Streaming(seq=record.seq, timestamp=record.timestamp)
    return current


def _thinking_ended(current: Streaming, record: Recorded) -> Streaming:
    if current.thinking_from is None or current.thinking_to is not None:
        return current
    return replace(current, thinking_to=record.timestamp)


def _on_text(state: MessagesState, record: Recorded) -> MessagesState:
    if state.llm_purpose != "loop":
        return state
    event: LLMText = record.event  # type: ignore[assignment]
    current = _thinking_ended(_streaming(state, record), record)
    streaming = replace(current, text=current.text.append(event.text))
    return replace(state, streaming=streaming, superseded=_unless(event.text, state))


def _on_thinking(state: MessagesState, record: Recorded) -> MessagesState:
    if state.llm_purpose != "loop":
        return state
    event: LLMThinking = record.event  # type: ignore[assignment]
    current = _streaming(state, record)
    thinking = current.thinking.append(event.text)
    started = record.timestamp if current.thinking_from is None else current.thinking_from
    streaming = replace(current, thinking=thinking, thinking_from=started)
    return replace(state, streaming=streaming, superseded=_unless(event.text, state))


def _unless(said: str, state: MessagesState) -> Streaming | None:
    """The superseded partial answer is gone once the next attempt says something."""
    return None if said else state.superseded


def _on_tool_calls(state: MessagesState, record: Recorded) -> MessagesState:
    if state.llm_purpose != "loop":
        return state
    event: LLMToolCalls = record.event  # type: ignore[assignment]
    current = _thinking_ended(_streaming(state, record), record)
    calls = current.tool_calls + event.calls
    return replace(state, streaming=replace(current, tool_calls=calls), superseded=None)


def _on_llm_completed(state: MessagesState, record: Recorded) -> MessagesState:
    event: LLMCompleted = record.event  # type: ignore[assignment]
    # Every call of the run counts its tokens (planning too), as stream_end does.
    state = replace(state, run_tokens=state.run_tokens + event.completion_tokens)
    if state.llm_purpose != "loop":
        return state
    state = replace(state, run_answered=True)
    streamed = state.streaming
    message = Message(
        role="assistant",
        content=event.content,
        thinking=event.thinking,
        tool_calls=event.tool_calls,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
        is_subagent=state.is_subagent,
        thinking_seconds=None if streamed is None else streamed.thinking_seconds(record.timestamp),
    )
    finished = state.finished.append(message)
    return replace(state, streaming=None, superseded=None, finished=finished)


def _on_run_started(state: MessagesState, record: Recorded) -> MessagesState:
    return replace(
        state, run_started=record.timestamp, run_tool_calls=0, run_tokens=0, run_answered=False
    )


def _on_tool_requested(state: MessagesState, record: Recorded) -> MessagesState:
    return replace(state, run_tool_calls=state.run_tool_calls + 1)


def _on_approval_requested(state: MessagesState, record: Recorded) -> MessagesState:
    event: ToolApprovalRequested = record.event  # type: ignore[assignment]
    return replace(state, asked=(*state.asked, (event.call_id, record.timestamp)))


def _on_approval_decided(state: MessagesState, record: Recorded) -> MessagesState:
    event: ToolApprovalDecided = record.event  # type: ignore[assignment]
    since = next((t for c, t in state.asked if c == event.call_id), record.timestamp)
    note = ApprovalNote(
        approved=event.approved,
        by=event.by,
        scope=event.scope,
        reason=event.reason,
        waited_seconds=round(max(0.0, record.timestamp - since), 3),
        scope_label=event.scope_label,
    )
    asked = tuple(a for a in state.asked if a[0] != event.call_id)
    return replace(state, asked=asked, decided=(*state.decided, (event.call_id, note)))


def _on_tool_progress(state: MessagesState, record: Recorded) -> MessagesState:
    event: ToolProgress = record.event  # type: ignore[assignment]
    others = tuple(p for p in state.progress if p.call_id != event.call_id)
    return replace(state, progress=(*others, event))


def _on_tool_result(state: MessagesState, record: Recorded) -> MessagesState:
    event: ToolCompleted | ToolFailed = record.event  # type: ignore[assignment]
    if state.progress:
        state = replace(
            state, progress=tuple(p for p in state.progress if p.call_id != event.call_id)
        )
    note = None
    if state.decided or state.asked:
        note = next((n for c, n in state.decided if c == event.call_id), None)
        state = replace(
            state,
            asked=tuple(a for a in state.asked if a[0] != event.call_id),
            decided=tuple(d for d in state.decided if d[0] != event.call_id),
        )
    message = Message(
        approval=note,
        role="tool",
        content=tool_result_content(event),
        images=shown_images(event),
        tool_call_id=event.call_id,
        name=event.name,
        success=tool_succeeded(event),
        created_at=iso_time(record.timestamp),
        seq=record.seq,
        is_subagent=state.is_subagent,
    )
    return _append(state, message)


def _on_plan_ready(state: MessagesState, record: Recorded) -> MessagesState:
    event: PlanReady = record.event  # type: ignore[assignment]
    message = Message(
        role="assistant",
        content=event.plan,
        is_plan=True,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
        is_subagent=state.is_subagent,
    )
    return _append(state, message)


def _on_run_ended(state: MessagesState, record: Recorded) -> MessagesState:
    current = state.streaming
    if current is None or not current.shows_something:
        current = state.superseded
    state = replace(state, llm_purpose="loop", streaming=None, superseded=None, progress=())
    if current is not None and current.shows_something:
        # The user saw this partial answer: keep it, without the calls that never ran.
        partial = replace(current, tool_calls=())
        state = _append(state, partial.message(end=record.timestamp, is_subagent=state.is_subagent))
    if state.is_subagent:
        return state  # a subagent's run ends inside its parent's tool card
    return _with_outcome(state, record)


def _with_outcome(state: MessagesState, record: Recorded) -> MessagesState:
    """The run's end written on its last message (an answer), else on a new one."""
    event = record.event
    completed = isinstance(event, RunCompleted)
    outcome = _Outcome(
        stopped=isinstance(event, RunStopped),
        error=event.error if isinstance(event, RunFailed) else None,
        elapsed_seconds=round(max(0.0, record.timestamp - state.run_started), 3)
        if completed
        else None,
        tool_call_count=state.run_tool_calls if completed else None,
        token_count=state.run_tokens if completed else None,
    )
    finished = state.finished
    last = finished[-1] if finished else None
    said = event.content if isinstance(event, RunCompleted) else ""
    if completed and not said and not state.run_answered:
        return state  # the model never answered and nothing is said (a /v1 system turn)
    if last is not None and is_answer(last):
        marked = replace(last, **msgspec.structs.asdict(outcome))
        return replace(state, finished=Vec(finished[:-1]).append(marked))
    message = Message(
        role="assistant",
        content=event.content if isinstance(event, RunCompleted) else "",
        created_at=iso_time(record.timestamp),
        seq=record.seq,
        **msgspec.structs.asdict(outcome),
    )
    return _append(state, message)


class _Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of ``Message`` that say how a run ended."""

    stopped: bool
    error: str | None
    elapsed_seconds: float | None
    tool_call_count: int | None
    token_count: int | None


def is_answer(message: Message) -> bool:
    """An assistant message the model wrote (not a plan): a run's end can go on it."""
    return message.role == "assistant" and not message.is_plan


_Handler = Callable[[MessagesState, Recorded], MessagesState]

_HANDLERS: dict[type, _Handler] = {
    SessionCreated: _on_session_created,
    SessionDeleted: _on_session_deleted,
    UserMessage: _on_user_message,
    LLMRequested: _on_llm_requested,
    LLMText: _on_text,
    LLMThinking: _on_thinking,
    LLMToolCalls: _on_tool_calls,
    LLMCompleted: _on_llm_completed,
    RunStarted: _on_run_started,
    ToolRequested: _on_tool_requested,
    ToolApprovalRequested: _on_approval_requested,
    ToolApprovalDecided: _on_approval_decided,
    ToolCompleted: _on_tool_result,
    ToolFailed: _on_tool_result,
    ToolProgress: _on_tool_progress,
    PlanReady: _on_plan_ready,
    RunCompleted: _on_run_ended,
    RunStopped: _on_run_ended,
    RunFailed: _on_run_ended,
}


def evolve(state: MessagesState, record: Recorded) -> MessagesState:
    handler = _HANDLERS.get(type(record.event))
    return state if handler is None else handler(state, record)


INITIAL = MessagesState(finished=Vec())
MESSAGES: Projection[MessagesState] = Projection("messages", INITIAL, evolve)
