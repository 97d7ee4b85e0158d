"""Builds the golden logs: representative sessions, recorded through a real (in-memory)
event store with a fixed clock and fixed ids, written as export files (``<name>.jsonl``)
with the ``messages`` and ``context`` projections they must give (``<name>.expected.json``).

    .venv/bin/python -m tests.golden.make_golden          # (re)write the files
    .venv/bin/python -m tests.golden.make_golden --check  # exit 1 if a file would change

Re-record only on purpose: a change of these files is a change of what a replayed
session looks like. Later they may be re-recorded from real runs against the fake LLM
server; the format stays: an export file and its expected projections.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import msgspec

from events.store import EventStore
from events.envelope import NewEvent, Recorded
from events.in_memory import InMemoryEventStore
from events.types import (
    ContextCompressed,
    ContextCompressing,
    ContextInjected,
    Event,
    FileRef,
    LLMCompleted,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    PlanReady,
    PlanStatus,
    ProfileSwitched,
    RunCompleted,
    RunStarted,
    RunStopped,
    ScratchpadUpdated,
    SessionCreated,
    StopRequested,
    SubagentFinished,
    SubagentSpawned,
    TodoItem,
    TodoUpdated,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    ToolStarted,
    UserMessage,
)
from projections.context import CONTEXT
from projections.fold import fold
from projections.messages import MESSAGES
from projections.types import Message
from tests.navi.replay.support import export_bytes

HERE = Path(__file__).resolve().parent
T0 = 1_700_000_000.0
EXPORTED_AT = T0 + 86_400.0
SESSION = "00000000-0000-4000-8000-00000000a001"
CHILD = "00000000-0000-4000-8000-00000000c001"


class FixedClock:
    """Each commit is a quarter of a second after the previous one."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> float:
        return T0 + next(self._ticks) * 0.25


class FixedIds:
    def __init__(self) -> None:
        self._next = itertools.count(1)

    def __call__(self) -> str:
        return f"00000000-0000-4000-9000-{next(self._next):012x}"


def new_store() -> InMemoryEventStore:
    return InMemoryEventStore(clock=FixedClock(), new_id=FixedIds())


class Stream:
    """Appends to one stream; each ``add`` is one commit (one timestamp)."""

    def __init__(self, store: EventStore, stream_id: str, run_id: str | None = None) -> None:
        self.store = store
        self.stream_id = stream_id
        self.seq = 0
        self.run_id = run_id

    async def add(self, *events: Event) -> None:
        new = [NewEvent(event=e, run_id=self.run_id) for e in events]
        await self.store.append(self.stream_id, new, expected_seq=self.seq)
        self.seq += len(events)


def text_chunks(text: str, size: int = 6) -> list[Event]:
    return [LLMText(text=text[i : i + size]) for i in range(0, len(text), size)]


# ---------------------------------------------------------------- scenarios


async def simple_question(store: EventStore) -> None:
    s = Stream(store, SESSION, run_id="run-1")
    await s.add(SessionCreated(profile_id="secretary", title=""))
    await s.add(UserMessage(text="What is the capital of France?"))
    await s.add(RunStarted(profile_id="secretary", profile_hash="p1", model="qwen3:4b"))
    await s.add(LLMRequested(model="qwen3:4b", tools=("web_search",), options={"num_ctx": 8192}))
    await s.add(LLMThinking(text="The user asks "), LLMThinking(text="a geography question."))
    await s.add(*text_chunks("The capital of France is Paris."))
    await s.add(
        LLMCompleted(
            content="The capital of France is Paris.",
            thinking="The user asks a geography question.",
            prompt_tokens=120,
            completion_tokens=14,
        )
    )
    await s.add(RunCompleted(content="The capital of France is Paris.", iterations=1))


async def planning_and_tools(store: EventStore) -> None:
    s = Stream(store, SESSION, run_id="run-1")
    await s.add(SessionCreated(profile_id="coder"))
    files = (FileRef(name="notes.txt", path="/data/session_files/a001/notes.txt"),)
    await s.add(UserMessage(text="Summarise my notes and check the weather", files=files))
    await s.add(RunStarted(profile_id="coder", profile_hash="c1", model="qwen3:4b"))
    await s.add(PlanStatus(phase=1, label="Analysing the request"))
    await s.add(LLMRequested(purpose="plan", model="qwen3:4b"))
    await s.add(LLMText(text="1. read notes\n2. weather"))
    plan = "1. Read the notes file\n2. Look up the weather"
    await s.add(LLMCompleted(content=plan))
    await s.add(PlanReady(plan=plan, steps=("Read the notes file", "Look up the weather")))
    todo = (
        TodoItem(id=1, text="Read the notes file", status="in_progress"),
        TodoItem(id=2, text="Look up the weather"),
    )
    await s.add(TodoUpdated(items=todo))
    calls = (
        ToolCall(id="call-1", name="read_file", arguments={"path": "notes.txt"}),
        ToolCall(id="call-2", name="screenshot", arguments={"url": "https://weather.example"}),
    )
    tools = ("read_file", "screenshot", "todo")
    await s.add(LLMRequested(iteration=0, model="qwen3:4b", tools=tools, options={"think": True}))
    await s.add(LLMThinking(text="I need both tools."), LLMToolCalls(calls=calls))
    await s.add(
        LLMCompleted(
            thinking="I need both tools.",
            tool_calls=calls,
            finish_reason="tool_calls",
            prompt_tokens=300,
            completion_tokens=40,
        )
    )
    for call in calls:
        await s.add(ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments))
    await s.add(ToolStarted(call_id="call-1", name="read_file"))
    await s.add(ToolCompleted(call_id="call-1", name="read_file", output="buy milk; call mum"))
    await s.add(ToolStarted(call_id="call-2", name="screenshot"))
    image = {"is_image": True, "base64": "aW1hZ2UgYnl0ZXM="}
    await s.add(
        ToolCompleted(call_id="call-2", name="screenshot", output="a screenshot", metadata=image)
    )
    await s.add(ScratchpadUpdated(section="findings", content="notes: milk, mum"))
    todo_done = (
        TodoItem(id=1, text="Read the notes file", status="done"),
        TodoItem(id=2, text="Look up the weather", status="done"),
    )
    await s.add(TodoUpdated(items=todo_done))
    await s.add(ContextInjected(kind="budget", content="You have 48 iterations left."))
    await s.add(LLMRequested(iteration=1, model="qwen3:4b", tools=tools))
    answer = "Your notes: buy milk, call mum. The weather looks sunny."
    await s.add(*text_chunks(answer))
    await s.add(LLMCompleted(content=answer, prompt_tokens=900, completion_tokens=20))
    await s.add(RunCompleted(content=answer, iterations=2))


async def subagent(store: EventStore) -> None:
    s = Stream(store, SESSION, run_id="run-1")
    child = Stream(store, CHILD, run_id="run-c1")
    await s.add(SessionCreated(profile_id="secretary"))
    await s.add(UserMessage(text="Research three facts about otters"))
    await s.add(RunStarted(profile_id="secretary", model="qwen3:4b"))
    await s.add(LLMRequested(model="qwen3:4b", tools=("spawn_agent",)))
    call = ToolCall(id="call-1", name="spawn_agent", arguments={"task": "otter facts"})
    await s.add(LLMToolCalls(calls=(call,)))
    await s.add(LLMCompleted(tool_calls=(call,), prompt_tokens=100, completion_tokens=10))
    await s.add(ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments))
    await s.add(ToolStarted(call_id=call.id, name=call.name))
    await s.add(SubagentSpawned(child_stream_id=CHILD, call_id=call.id, task="otter facts"))
    await child.add(
        SessionCreated(profile_id="researcher", parent_stream_id=SESSION, parent_call_id="call-1")
    )
    await child.add(UserMessage(text="otter facts"))
    await child.add(RunStarted(profile_id="researcher", model="qwen3:4b"))
    await child.add(LLMRequested(model="qwen3:4b"))
    facts = "Otters hold hands; they use tools; they have pockets."
    await child.add(*text_chunks(facts))
    await child.add(LLMCompleted(content=facts, prompt_tokens=50, completion_tokens=15))
    await child.add(RunCompleted(content=facts, iterations=1))
    await s.add(SubagentFinished(child_stream_id=CHILD, call_id=call.id, result=facts))
    await s.add(ToolCompleted(call_id=call.id, name=call.name, output=facts))
    await s.add(LLMRequested(iteration=1, model="qwen3:4b", tools=("spawn_agent",)))
    answer = "Three otter facts: " + facts
    await s.add(*text_chunks(answer))
    await s.add(LLMCompleted(content=answer, prompt_tokens=200, completion_tokens=30))
    await s.add(RunCompleted(content=answer, iterations=2))


async def profile_switch(store: EventStore) -> None:
    s = Stream(store, SESSION, run_id="run-1")
    await s.add(SessionCreated(profile_id="secretary", title="Switching"))
    await s.add(UserMessage(text="Let's write some code"))
    await s.add(RunStarted(profile_id="secretary", profile_hash="s1"))
    await s.add(LLMRequested(tools=("switch_profile",)))
    call = ToolCall(id="call-1", name="switch_profile", arguments={"profile_id": "coder"})
    await s.add(LLMCompleted(tool_calls=(call,), prompt_tokens=80, completion_tokens=9))
    await s.add(ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments))
    await s.add(ToolStarted(call_id=call.id, name=call.name))
    await s.add(ProfileSwitched(profile_id="coder", profile_name="Coder"))
    await s.add(ToolCompleted(call_id=call.id, name=call.name, output="Switched to Coder."))
    await s.add(LLMRequested(iteration=1, tools=("read_file", "write_file")))
    await s.add(*text_chunks("I am the coder now. What shall we build?"))
    await s.add(LLMCompleted(content="I am the coder now. What shall we build?"))
    await s.add(RunCompleted(content="I am the coder now. What shall we build?", iterations=2))
    s.run_id = "run-2"
    await s.add(UserMessage(text="A to-do app"))
    await s.add(RunStarted(profile_id="coder", profile_hash="c1"))
    await s.add(LLMRequested(tools=("read_file", "write_file")))
    await s.add(*text_chunks("Let us start with the data model."))
    await s.add(LLMCompleted(content="Let us start with the data model."))
    await s.add(RunCompleted(content="Let us start with the data model.", iterations=1))


async def _turn(s: Stream, question: str, answer: str) -> None:
    await s.add(UserMessage(text=question))
    await s.add(RunStarted(profile_id="secretary"))
    await s.add(LLMRequested())
    await s.add(*text_chunks(answer))
    await s.add(LLMCompleted(content=answer, prompt_tokens=1000, completion_tokens=50))
    await s.add(RunCompleted(content=answer, iterations=1))


async def compression(store: EventStore) -> None:
    s = Stream(store, SESSION)
    await s.add(SessionCreated(profile_id="secretary"))
    await _turn(s, "Tell me about Rome", "Rome is the capital of Italy.")
    await _turn(s, "And its history?", "Founded in 753 BC, according to legend.")
    end_of_second_turn = s.seq
    # Post-turn compression of the first two turns.
    await s.add(ContextCompressing(context_tokens=6000))
    await s.add(LLMRequested(purpose="compress"))
    await s.add(LLMText(text="The user asked about Rome."))
    await s.add(LLMCompleted(content="The user asked about Rome and its history."))
    await s.add(
        ContextCompressed(
            from_seq=2,
            to_seq=end_of_second_turn,
            summary="The user asked about Rome and its history.",
            model="qwen3:4b",
            messages_before=4,
            messages_after=1,
        )
    )
    first_summary = s.seq
    await _turn(s, "And Florence?", "Florence is the capital of Tuscany.")
    end_of_third_turn = s.seq
    # Pre-turn compression that supersedes the first summary.
    await s.add(UserMessage(text="Compare them"))
    await s.add(RunStarted(profile_id="secretary"))
    await s.add(ContextCompressing(context_tokens=7000))
    await s.add(LLMRequested(purpose="compress"))
    await s.add(LLMCompleted(content="Rome, its history, and Florence were discussed."))
    await s.add(
        ContextCompressed(
            from_seq=first_summary,
            to_seq=end_of_third_turn,
            summary="Rome, its history, and Florence were discussed.",
            supersedes_seq=first_summary,
            messages_before=3,
            messages_after=1,
        )
    )
    await s.add(LLMRequested())
    await s.add(*text_chunks("Rome is older; Florence is smaller."))
    await s.add(LLMCompleted(content="Rome is older; Florence is smaller."))
    await s.add(RunCompleted(content="Rome is older; Florence is smaller.", iterations=1))


async def stopped_run(store: EventStore) -> None:
    s = Stream(store, SESSION)
    await s.add(SessionCreated(profile_id="secretary"))
    # Stopped while streaming: the partial answer is kept.
    await s.add(UserMessage(text="Write a long poem"))
    await s.add(RunStarted(profile_id="secretary"))
    await s.add(LLMRequested())
    await s.add(*text_chunks("Roses are red, violets are"))
    await s.add(StopRequested(reason="user"))
    await s.add(LLMText(text=" blue"))
    await s.add(RunStopped(reason="user"))
    # Stopped while tools run: the open call gets tool.failed(reason="stopped").
    await s.add(UserMessage(text="Search two things"))
    await s.add(RunStarted(profile_id="secretary"))
    await s.add(LLMRequested(tools=("web_search",)))
    calls = (
        ToolCall(id="call-1", name="web_search", arguments={"query": "a"}),
        ToolCall(id="call-2", name="web_search", arguments={"query": "b"}),
    )
    await s.add(LLMCompleted(tool_calls=calls))
    for call in calls:
        await s.add(ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments))
    await s.add(ToolStarted(call_id="call-1", name="web_search"))
    await s.add(StopRequested(reason="user"))
    await s.add(ToolCompleted(call_id="call-1", name="web_search", output="result a"))
    await s.add(ToolFailed(call_id="call-2", name="web_search", reason="stopped"))
    await s.add(RunStopped(reason="user"))


async def resumed_run(store: EventStore) -> None:
    s = Stream(store, SESSION, run_id="run-1")
    await s.add(SessionCreated(profile_id="coder"))
    await s.add(UserMessage(text="Save a file, then tell me"))
    await s.add(RunStarted(profile_id="coder"))
    await s.add(LLMRequested(tools=("write_file",)))
    call = ToolCall(id="call-1", name="write_file", arguments={"path": "a.txt", "content": "x"})
    await s.add(LLMCompleted(tool_calls=(call,)))
    await s.add(ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments))
    await s.add(ToolStarted(call_id=call.id, name=call.name))
    # Navi crashed here. On resume, the non-idempotent call is "in doubt"...
    await s.add(ToolFailed(call_id=call.id, name=call.name, reason="interrupted"))
    await s.add(LLMRequested(iteration=1, tools=("write_file",)))
    await s.add(*text_chunks("The write may not"))
    # ...and Navi crashed again mid-stream: the LLM call is re-issued.
    await s.add(LLMRequested(iteration=1, attempt=2, tools=("write_file",)))
    answer = "I could not confirm that a.txt was written; please check it."
    await s.add(*text_chunks(answer))
    await s.add(LLMCompleted(content=answer))
    await s.add(RunCompleted(content=answer, iterations=2))


Scenario = Callable[[EventStore], Awaitable[None]]

SCENARIOS: dict[str, Scenario] = {
    "simple_question": simple_question,
    "planning_and_tools": planning_and_tools,
    "subagent": subagent,
    "profile_switch": profile_switch,
    "compression": compression,
    "stopped_run": stopped_run,
    "resumed_run": resumed_run,
}

# ---------------------------------------------------------------- files

_encoder = msgspec.json.Encoder()


def expected_json(streams: dict[str, list[Message]], contexts: dict[str, list[Message]]) -> bytes:
    """The expected projections of every stream of a log, as stable, readable JSON."""
    body = {sid: {"messages": streams[sid], "context": contexts[sid]} for sid in streams}
    return msgspec.json.format(_encoder.encode(body), indent=2) + b"\n"


def expected_for(records_by_stream: dict[str, list[Recorded]]) -> bytes:
    messages = {sid: fold(MESSAGES, rs).messages() for sid, rs in records_by_stream.items()}
    contexts = {sid: fold(CONTEXT, rs).as_list() for sid, rs in records_by_stream.items()}
    return expected_json(messages, contexts)


async def record(scenario: Scenario) -> tuple[bytes, bytes]:
    """The export file and the expected projections of one scenario."""
    async with new_store() as store:
        await scenario(store)
        export = await export_bytes(store, SESSION, now=EXPORTED_AT)
        streams = {sid: await store.read(sid) for sid in (SESSION, CHILD)}
        return export, expected_for({sid: rs for sid, rs in streams.items() if rs})


def paths(name: str) -> tuple[Path, Path]:
    return HERE / f"{name}.jsonl", HERE / f"{name}.expected.json"


async def main(check: bool) -> int:
    stale = []
    for name, scenario in SCENARIOS.items():
        export, expected = await record(scenario)
        for path, content in zip(paths(name), (export, expected), strict=True):
            if path.exists() and path.read_bytes() == content:
                continue
            stale.append(path.name)
            if not check:
                path.write_bytes(content)
    verb = "would change" if check else "written"
    for name in stale:
        print(f"{verb}: {name}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the files")
    sys.exit(anyio.run(main, parser.parse_args().check))
