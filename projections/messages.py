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
  the text says why: "interrupted" means the call may or may not have happened).
- A run that ends (stopped or failed) in the middle of a streamed answer keeps the
  partial text as an assistant message: the user saw it. Its partial tool calls are
  dropped, since none of them ran.
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
    RunStopped,
    SessionCreated,
    SessionDeleted,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    UserMessage,
)
from projections.fold import Projection
from projections.tool_results import tool_result_content, tool_succeeded
from projections.types import Message, iso_time
from projections.vec import Vec

_NO_CHUNKS: Vec[str] = Vec()


class Streaming(msgspec.Struct, frozen=True, kw_only=True):
    """The assistant message of the current tool-loop LLM call, chunk by chunk."""

    seq: int  # of its first chunk
    timestamp: float  # of its first chunk
    text: Vec[str] = _NO_CHUNKS
    thinking: Vec[str] = _NO_CHUNKS
    tool_calls: tuple[ToolCall, ...] = ()

    def message(self, *, is_subagent: bool = False) -> Message:
        return Message(
            role="assistant",
            content="".join(self.text),
            thinking="".join(self.thinking),
            tool_calls=self.tool_calls,
            created_at=iso_time(self.timestamp),
            seq=self.seq,
            is_subagent=is_subagent,
        )


class MessagesState(msgspec.Struct, frozen=True, kw_only=True):
    finished: Vec[Message]
    streaming: Streaming | None = None
    llm_purpose: str = "loop"  # purpose of the LLM call in progress: only "loop" is shown
    is_subagent: bool = False
    deleted: bool = False

    def messages(self, *, with_streaming: bool = True) -> list[Message]:
        """The display history; with the in-progress assistant message last, if any."""
        result = self.finished.to_list()
        if with_streaming and self.streaming is not None:
            result.append(self.streaming.message(is_subagent=self.is_subagent))
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
        # Chunks of an attempt this call supersedes are dropped.
        return replace(state, llm_purpose="loop", streaming=None)
    return replace(state, llm_purpose=event.purpose)


def _streaming(state: MessagesState, record: Recorded) -> Streaming:
    current = state.streaming
    if current is None:
        return Streaming(seq=record.seq, timestamp=record.timestamp)
    return current


def _on_text(state: MessagesState, record: Recorded) -> MessagesState:
    if state.llm_purpose != "loop":
        return state
    event: LLMText = record.event  # type: ignore[assignment]
    current = _streaming(state, record)
    return replace(state, streaming=replace(current, text=current.text.append(event.text)))


def _on_thinking(state: MessagesState, record: Recorded) -> MessagesState:
    if state.llm_purpose != "loop":
        return state
    event: LLMThinking = record.event  # type: ignore[assignment]
    current = _streaming(state, record)
    thinking = current.thinking.append(event.text)
    return replace(state, streaming=replace(current, thinking=thinking))


def _on_tool_calls(state: MessagesState, record: Recorded) -> MessagesState:
    if state.llm_purpose != "loop":
        return state
    event: LLMToolCalls = record.event  # type: ignore[assignment]
    current = _streaming(state, record)
    calls = current.tool_calls + event.calls
    return replace(state, streaming=replace(current, tool_calls=calls))


def _on_llm_completed(state: MessagesState, record: Recorded) -> MessagesState:
    if state.llm_purpose != "loop":
        return state
    event: LLMCompleted = record.event  # type: ignore[assignment]
    message = Message(
        role="assistant",
        content=event.content,
        thinking=event.thinking,
        tool_calls=event.tool_calls,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
        is_subagent=state.is_subagent,
    )
    return replace(state, streaming=None, finished=state.finished.append(message))


def _on_tool_result(state: MessagesState, record: Recorded) -> MessagesState:
    event: ToolCompleted | ToolFailed = record.event  # type: ignore[assignment]
    message = Message(
        role="tool",
        content=tool_result_content(event),
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
    state = replace(state, llm_purpose="loop", streaming=None)
    if current is None:
        return state
    # The user saw this partial answer: keep it, without the calls that never ran.
    partial = replace(current, tool_calls=()).message(is_subagent=state.is_subagent)
    if not (partial.content or partial.thinking):
        return state
    return _append(state, partial)


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
    ToolCompleted: _on_tool_result,
    ToolFailed: _on_tool_result,
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
