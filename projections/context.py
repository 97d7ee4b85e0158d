"""The ``context`` projection: what the LLM sees of one session.

The same conversation as ``messages``, but:

- the plan (``plan.ready``) is an assistant message the model continues from, and
  ``context.injected`` messages are in it (role as recorded, images included);
- an image a tool returned (``tool.completed`` with ``metadata.is_image`` and
  ``metadata.base64``) follows its tool result as a synthetic user message holding it;
- thinking is left out (models do not get their old reasoning back);
- ``context.compressed`` replaces older messages by one summary (see ``compression.py``);
- a tool call is never separated from its result: while an assistant message has calls
  without results, anything else that arrives (an injected message, an image) is held in
  ``deferred`` and placed after the last result. A result for no open call is left out.
  A log that breaks the rule "every call gets a result before the next turn" (the run
  writes ``tool.failed(reason="stopped"|"interrupted")`` for open calls) still gives a
  well-formed context: the next user message, assistant answer or end of run closes the
  open calls with a "no result" tool message. tests/support/well_formed.py checks it.
- A run that ends during a streamed answer keeps the partial text, marked as cut short,
  so the model knows what the user read.

``token_count`` is the last tool-loop ``llm.completed``'s prompt + completion tokens
(kept when a backend reports none), and after a compression an estimate of the new
context: characters / 4 (``estimate_tokens``).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.types import (
    ContextCompressed,
    ContextInjected,
    FileRef,
    LLMCompleted,
    LLMRequested,
    LLMText,
    PlanReady,
    RunCompleted,
    RunFailed,
    RunStopped,
    ToolCompleted,
    ToolFailed,
    UserMessage,
)
from projections.compression import SummarySpan, compress
from projections.fold import Projection
from projections.tool_results import NO_RESULT_TEXT, image_of, tool_result_content, tool_succeeded
from projections.types import Message, iso_time
from projections.vec import Vec

_CUT_SHORT = {
    RunStopped: "[This answer was cut short: the user stopped the run.]",
    RunFailed: "[This answer was cut short: the run failed.]",
    RunCompleted: "[This answer was cut short.]",
}


class ContextState(msgspec.Struct, frozen=True, kw_only=True):
    messages: Vec[Message]
    token_count: int = 0
    # Calls of the last assistant message still waiting for a result: (call id, tool name).
    open_calls: tuple[tuple[str, str], ...] = ()
    # Messages that arrived while calls were open; they follow the last result.
    deferred: tuple[Message, ...] = ()
    # Text chunks of the tool-loop answer being streamed (kept only if the run ends early).
    partial: Vec[str] | None = None
    partial_seq: int = 0
    partial_timestamp: float = 0.0
    llm_purpose: str = "loop"
    summaries: tuple[SummarySpan, ...] = ()
    # What ``estimate_tokens`` counts of ``messages``, kept as they are added: the loop
    # asks before every LLM call, and counting the whole context each time is quadratic.
    chars: int = 0

    def as_list(self) -> list[Message]:
        return self.messages.to_list()


def _add(state: ContextState, message: Message) -> ContextState:
    if state.open_calls:
        return replace(state, deferred=(*state.deferred, message))
    return _append(state, message)


def _append(state: ContextState, *added: Message, **changes: object) -> ContextState:
    """``state`` with ``added`` at the end of its messages (and ``changes``)."""
    messages = state.messages.append(added[0]) if len(added) == 1 else state.messages.extend(added)
    chars = state.chars + sum(_chars(message) for message in added)
    return replace(state, messages=messages, chars=chars, **changes)


def _close_calls(state: ContextState, record: Recorded) -> ContextState:
    """Give every open call a "no result" tool message, then place what was deferred."""
    if not state.open_calls:
        return state
    created_at = iso_time(record.timestamp)
    closing = [
        Message(
            role="tool",
            content=NO_RESULT_TEXT,
            tool_call_id=call_id,
            name=name,
            success=False,
            created_at=created_at,
            seq=record.seq,
        )
        for call_id, name in state.open_calls
    ]
    return _append(state, *closing, *state.deferred, open_calls=(), deferred=())


def _files_text(files: tuple[FileRef, ...]) -> str:
    lines = "\n".join(f"- {file.name}: {file.path}" for file in files)
    return f"\n\nAttached files (paths on disk):\n{lines}"


def _on_user_message(state: ContextState, record: Recorded) -> ContextState:
    event: UserMessage = record.event  # type: ignore[assignment]
    content = event.text + _files_text(event.files) if event.files else event.text
    message = Message(
        role="user",
        content=content,
        images=event.images,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
    )
    state = _close_calls(state, record)
    return _append(state, message)


def _on_plan_ready(state: ContextState, record: Recorded) -> ContextState:
    event: PlanReady = record.event  # type: ignore[assignment]
    message = Message(
        role="assistant",
        content=event.plan,
        is_plan=True,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
    )
    return _add(state, message)


def _on_injected(state: ContextState, record: Recorded) -> ContextState:
    event: ContextInjected = record.event  # type: ignore[assignment]
    message = Message(
        role=event.role,
        content=event.content,
        images=event.images,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
    )
    return _add(state, message)


def _on_llm_requested(state: ContextState, record: Recorded) -> ContextState:
    event: LLMRequested = record.event  # type: ignore[assignment]
    if event.purpose == "loop":
        return replace(state, llm_purpose="loop", partial=None)
    return replace(state, llm_purpose=event.purpose)


def _on_text(state: ContextState, record: Recorded) -> ContextState:
    if state.llm_purpose != "loop":
        return state
    event: LLMText = record.event  # type: ignore[assignment]
    if state.partial is None:
        return replace(
            state,
            partial=Vec((event.text,)),
            partial_seq=record.seq,
            partial_timestamp=record.timestamp,
        )
    return replace(state, partial=state.partial.append(event.text))


def _on_llm_completed(state: ContextState, record: Recorded) -> ContextState:
    if state.llm_purpose != "loop":
        return state
    event: LLMCompleted = record.event  # type: ignore[assignment]
    message = Message(
        role="assistant",
        content=event.content,
        tool_calls=event.tool_calls,
        created_at=iso_time(record.timestamp),
        seq=record.seq,
    )
    state = _close_calls(state, record)
    tokens = event.prompt_tokens + event.completion_tokens
    return _append(
        state,
        message,
        open_calls=tuple((call.id, call.name) for call in event.tool_calls),
        partial=None,
        token_count=tokens or state.token_count,
    )


def _on_tool_result(state: ContextState, record: Recorded) -> ContextState:
    event: ToolCompleted | ToolFailed = record.event  # type: ignore[assignment]
    still_open = _still_open(state, event)
    if still_open is None:
        return state  # a result for no open call: the log keeps it, the context cannot
    created_at = iso_time(record.timestamp)
    result = Message(
        role="tool",
        content=tool_result_content(event),
        tool_call_id=event.call_id,
        name=event.name,
        success=tool_succeeded(event),
        created_at=created_at,
        seq=record.seq,
        declined=isinstance(event, ToolFailed) and event.reason == "denied",
    )
    deferred = state.deferred
    image = image_of(event) if isinstance(event, ToolCompleted) else None
    if image is not None:
        shown = Message(
            role="user",
            content=_image_text(event),
            images=(image,),
            created_at=created_at,
            seq=record.seq,
        )
        deferred = (*deferred, shown)
    if still_open:
        return _append(state, result, open_calls=still_open, deferred=deferred)
    return _append(state, result, *deferred, open_calls=(), deferred=())


def _still_open(
    state: ContextState, event: ToolCompleted | ToolFailed
) -> tuple[tuple[str, str], ...] | None:
    """The calls still open once ``event`` gives its call a result; ``None`` if its call
    is not open."""
    still_open = tuple(call for call in state.open_calls if call[0] != event.call_id)
    return None if len(still_open) == len(state.open_calls) else still_open


def _image_text(event: ToolCompleted | ToolFailed) -> str:
    return f"The image returned by {event.name} (call {event.call_id})."


def chars_after(state: ContextState, record: Recorded) -> int:
    """``evolve(state, record).chars``; for a tool result (the loop asks before it makes
    the next LLM call in the result's commit) counted without building the new state."""
    event = record.event
    if not isinstance(event, ToolCompleted | ToolFailed):
        return evolve(state, record).chars
    still_open = _still_open(state, event)
    if still_open is None:
        return state.chars
    chars = state.chars + len(tool_result_content(event))
    if still_open:
        return chars
    chars += sum(_chars(message) for message in state.deferred)
    if isinstance(event, ToolCompleted) and image_of(event) is not None:
        chars += len(_image_text(event))
    return chars


def _on_run_ended(state: ContextState, record: Recorded) -> ContextState:
    state = _close_calls(state, record)
    text = "".join(state.partial or ())
    state = replace(state, partial=None, llm_purpose="loop")
    if not text:
        return state
    note = _CUT_SHORT[type(record.event)]
    message = Message(
        role="assistant",
        content=f"{text}\n\n{note}",
        created_at=iso_time(state.partial_timestamp),
        seq=state.partial_seq,
    )
    return _append(state, message)


def _on_compressed(state: ContextState, record: Recorded) -> ContextState:
    event: ContextCompressed = record.event  # type: ignore[assignment]
    result = compress(
        state.messages.to_list(),
        state.summaries,
        event,
        seq=record.seq,
        created_at=iso_time(record.timestamp),
        open_group_at_end=bool(state.open_calls),
    )
    if result is None:
        return state  # it covers nothing that is still in the context
    messages, summaries = result
    chars = sum(_chars(message) for message in messages)
    return replace(
        state, messages=Vec(messages), summaries=summaries, token_count=chars // 4, chars=chars
    )


def estimate_tokens(messages: list[Message]) -> int:
    """A rough token count: characters of content, tool names and arguments, divided by 4.

    Images are not counted (their cost depends on the model).
    """
    return sum(_chars(message) for message in messages) // 4


def _chars(message: Message) -> int:
    if message.tool_calls:
        return len(message.content) + _call_chars(message)
    return len(message.content)


def _call_chars(message: Message) -> int:
    """The characters of a message's calls, remembered per message: the loop estimates
    the whole context before every LLM call, and encoding every call's arguments again
    each time made that quadratic in the length of a run."""
    known = _calls_counted.get(id(message))
    if known is not None and known[0] is message:
        return known[1]
    chars = sum(len(call.name) + len(_json(call.arguments)) for call in message.tool_calls)
    if len(_calls_counted) >= _MAX_COUNTED:
        _calls_counted.clear()
    _calls_counted[id(message)] = (message, chars)
    return chars


_json = msgspec.json.Encoder(order="sorted").encode
# id -> (the message itself, so that a recycled id is never mistaken for it; its chars)
_calls_counted: dict[int, tuple[Message, int]] = {}
_MAX_COUNTED = 4096

_Handler = Callable[[ContextState, Recorded], ContextState]

_HANDLERS: dict[type, _Handler] = {
    UserMessage: _on_user_message,
    PlanReady: _on_plan_ready,
    ContextInjected: _on_injected,
    LLMRequested: _on_llm_requested,
    LLMText: _on_text,
    LLMCompleted: _on_llm_completed,
    ToolCompleted: _on_tool_result,
    ToolFailed: _on_tool_result,
    RunCompleted: _on_run_ended,
    RunStopped: _on_run_ended,
    RunFailed: _on_run_ended,
    ContextCompressed: _on_compressed,
}


def evolve(state: ContextState, record: Recorded) -> ContextState:
    handler = _HANDLERS.get(type(record.event))
    return state if handler is None else handler(state, record)


INITIAL = ContextState(messages=Vec())
CONTEXT: Projection[ContextState] = Projection("context", INITIAL, evolve)
