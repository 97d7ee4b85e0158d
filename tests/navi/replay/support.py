"""Building session logs in a store for replay tests."""

from __future__ import annotations

from events.store import EventStore
from events.types import (
    Event,
    LLMCompleted,
    LLMRequested,
    LLMText,
    RunCompleted,
    RunStarted,
    SessionCreated,
    ToolCall,
    ToolCompleted,
    ToolRequested,
    ToolStarted,
    UserMessage,
)
from navi.replay.export import export_lines
from navi.replay.snapshots import load_projection
from projections.context import ContextState


def turn(text: str, answer: str | None = None, chunks: int = 3) -> list[Event]:
    answer = answer if answer is not None else f"answer to {text}"
    return [
        UserMessage(text=text),
        RunStarted(profile_id="secretary", profile_hash="h1", model="m"),
        LLMRequested(tools=("web_search",), options={"temperature": 0.2}),
        *[LLMText(text=f"{answer[:3]}{i} ") for i in range(chunks)],
        LLMCompleted(content=answer, prompt_tokens=10, completion_tokens=5),
        RunCompleted(content=answer),
    ]


def tool_turn(text: str, call_id: str = "call-1") -> list[Event]:
    """A turn that stops in the middle of a tool call (no result yet)."""
    call = ToolCall(id=call_id, name="web_search", arguments={"q": text})
    return [
        UserMessage(text=text),
        RunStarted(profile_id="secretary"),
        LLMRequested(tools=("web_search",)),
        LLMCompleted(tool_calls=(call,)),
        ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments),
        ToolStarted(call_id=call.id, name=call.name),
    ]


def tool_result(call_id: str = "call-1") -> list[Event]:
    return [ToolCompleted(call_id=call_id, name="web_search", output="found")]


async def make_session(
    store: EventStore, session_id: str, *turns: list[Event], profile_id: str = "secretary"
) -> int:
    """A session with the given turns; returns its last seq."""
    events: list[Event] = [SessionCreated(profile_id=profile_id)]
    for t in turns:
        events += t
    await store.append(session_id, events, expected_seq=0)
    return len(events)


async def long_session(store: EventStore, session_id: str, turns: int) -> int:
    events: list[Event] = [SessionCreated(profile_id="secretary")]
    for i in range(turns):
        events += turn(f"question {i}", f"answer {i}", chunks=4)
    await store.append(session_id, events, expected_seq=0)
    return len(events)


async def export_bytes(store: EventStore, session_id: str, *, now: float | None = None) -> bytes:
    """A whole export at once (the server streams ``export_lines``)."""
    return b"".join([line async for line in export_lines(store, session_id, now=now)])


async def load_context(store: EventStore, session_id: str, *, every: int) -> ContextState:
    """The ``context`` projection of a session, through the snapshots."""
    state: ContextState = await load_projection(store, session_id, "context", every=every)
    return state
