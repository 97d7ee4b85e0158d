"""Building logs for projection tests: records from events, and valid generated session logs.

``session_logs()`` is a hypothesis strategy of whole session logs that the run state
machine accepts: turns with planning, streamed chunks (some interrupted and re-issued),
LLM failures and retries, tool calls (results, failures, images, interruptions),
injected messages, compressions with arbitrary ranges (some superseding an earlier one),
stops mid-stream and mid-tools, failed runs, and session bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import strategies as st

from events.envelope import Recorded
from events.types import (
    ContextCompressed,
    ContextCompressing,
    ContextCompressionFailed,
    ContextInjected,
    Event,
    FileRef,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    PlanReady,
    PlanStatus,
    ProfileSwitched,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStopped,
    ScratchpadUpdated,
    SessionCreated,
    SessionPinned,
    SessionRenamed,
    StopRequested,
    SubagentFinished,
    SubagentSpawned,
    TodoItem,
    TodoUpdated,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    ToolStarted,
    UserMessage,
)

T0 = 1_700_000_000.0


def records(
    events: Iterable[Event],
    *,
    stream_id: str = "s1",
    start_seq: int = 1,
    start_position: int = 1,
    t0: float = T0,
) -> list[Recorded]:
    """The events as one stream would record them: seq from ``start_seq``, a second apart."""
    result = []
    for offset, event in enumerate(events):
        seq = start_seq + offset
        result.append(
            Recorded(
                stream_id=stream_id,
                seq=seq,
                position=start_position + offset,
                event_id=f"{stream_id}-{seq}",
                timestamp=t0 + seq,
                event=event,
            )
        )
    return result


def interleave(streams: Sequence[Sequence[Recorded]], order: Sequence[int]) -> list[Recorded]:
    """Merge per-stream records into one global log, taking streams in ``order`` (indexes,
    cycled and skipping exhausted streams), renumbering positions from 1."""
    cursors = [0] * len(streams)
    merged: list[Recorded] = []
    total = sum(len(s) for s in streams)
    step = 0
    while len(merged) < total:
        index = order[step % len(order)] % len(streams) if order else step % len(streams)
        step += 1
        if cursors[index] >= len(streams[index]):
            index = next(i for i, s in enumerate(streams) if cursors[i] < len(s))
        record = streams[index][cursors[index]]
        cursors[index] += 1
        merged.append(_with_position(record, len(merged) + 1))
    return merged


def _with_position(record: Recorded, position: int) -> Recorded:
    return Recorded(
        stream_id=record.stream_id,
        seq=record.seq,
        position=position,
        event_id=record.event_id,
        timestamp=record.timestamp,
        event=record.event,
    )


# ---------------------------------------------------------------- generated logs

_words = st.sampled_from(["alpha", "beta", "gamma", "delta", "navi", "tool", "é", "🚀", "\n"])
texts = st.lists(_words, min_size=1, max_size=6).map(" ".join)
chunk_texts = st.lists(_words, min_size=0, max_size=5).map(lambda ws: "".join(ws))


class _Log:
    """A log under construction; knows the next seq so compressions can aim at real ones."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.events: list[Event] = []
        self.calls = 0
        self.compressions: list[int] = []

    def add(self, *events: Event) -> None:
        self.events.extend(events)

    @property
    def seq(self) -> int:
        return len(self.events)

    def chunks(self, stopping: bool = False) -> None:
        draw = self.draw
        for kind in draw(st.lists(st.sampled_from(["text", "thinking"]), max_size=4)):
            text = draw(chunk_texts)
            self.add(LLMText(text=text) if kind == "text" else LLMThinking(text=text))

    def compression(self) -> None:
        draw = self.draw
        self.add(ContextCompressing(context_tokens=draw(st.integers(0, 9000))))
        self.add(LLMRequested(purpose="compress"), LLMCompleted(content="summary"))
        if draw(st.integers(0, 5)) == 0:
            self.add(ContextCompressionFailed(error="model went away"))
            return
        last = self.seq
        first = draw(st.integers(1, max(1, last)))
        to = draw(st.integers(first - 1, last + 2))  # sometimes empty or past the end
        supersedes = draw(st.sampled_from([None, *self.compressions[-2:]]))
        self.add(
            ContextCompressed(
                from_seq=first, to_seq=to, summary=draw(texts), supersedes_seq=supersedes
            )
        )
        self.compressions.append(self.seq)

    def llm_call(self, iteration: int) -> None:
        """llm.requested + chunks, with interrupted/failed attempts re-issued first."""
        draw = self.draw
        attempt = 1
        self.add(LLMRequested(iteration=iteration, attempt=attempt))
        while True:
            self.chunks()
            mishap = draw(st.sampled_from(["none", "none", "none", "reissue", "fail"]))
            if mishap == "none" or attempt >= 3:
                return
            if mishap == "fail":
                self.add(LLMFailed(error="connection reset", retryable=True))
            attempt += 1
            self.add(LLMRequested(iteration=iteration, attempt=attempt))

    def tool_calls(self) -> tuple[ToolCall, ...]:
        count = self.draw(st.integers(1, 3))
        calls = []
        for _ in range(count):
            self.calls += 1
            name = self.draw(st.sampled_from(["web_search", "image_view", "todo", "spawn_agent"]))
            calls.append(ToolCall(id=f"call-{self.calls}", name=name, arguments={"q": "x"}))
        return tuple(calls)

    def tool_result(self, call: ToolCall) -> None:
        draw = self.draw
        outcome = draw(st.sampled_from(["ok", "ok", "error", "failed", "interrupted", "image"]))
        if outcome == "ok":
            self.add(ToolCompleted(call_id=call.id, name=call.name, output=draw(texts)))
        elif outcome == "error":
            self.add(
                ToolCompleted(
                    call_id=call.id, name=call.name, output="", success=False, error="boom"
                )
            )
        elif outcome == "image":
            metadata = {"is_image": True, "base64": "aW1hZ2U="}
            self.add(
                ToolCompleted(call_id=call.id, name=call.name, output="an image", metadata=metadata)
            )
        elif outcome == "interrupted":
            self.add(ToolFailed(call_id=call.id, name=call.name, reason="interrupted"))
        else:
            self.add(ToolFailed(call_id=call.id, name=call.name, error="no route"))
        extra = draw(st.sampled_from(["none", "none", "none", "inject", "todo", "profile"]))
        if extra == "inject":
            self.add(ContextInjected(kind="budget", content="3 iterations left"))
        elif extra == "todo":
            self.add(TodoUpdated(items=(TodoItem(id=1, text="step", status="done"),)))
        elif extra == "profile":
            self.add(ProfileSwitched(profile_id=draw(st.sampled_from(["coder", "secretary"]))))

    def stop(self, open_calls: Sequence[ToolCall] = ()) -> None:
        self.add(StopRequested())
        if self.draw(st.booleans()):
            self.chunks()
        for call in open_calls:
            self.add(ToolFailed(call_id=call.id, name=call.name, reason="stopped"))
        self.add(RunStopped())

    def planning(self) -> None:
        draw = self.draw
        self.add(PlanStatus(phase=1, label="thinking about a plan"))
        self.add(LLMRequested(purpose="plan"))
        self.chunks()
        self.add(LLMCompleted(content="1. search\n2. answer"))
        if draw(st.booleans()):
            self.add(PlanReady(plan="1. search\n2. answer", steps=("search", "answer")))
            self.add(TodoUpdated(items=(TodoItem(id=1, text="search"),)))

    def turn(self) -> None:
        draw = self.draw
        files = draw(st.sampled_from([(), (FileRef(name="a.txt", path="/tmp/a.txt"),)]))
        images = draw(st.sampled_from([(), ("aW1n",)]))
        self.add(UserMessage(text=draw(texts), files=files, images=images))
        self.add(RunStarted(profile_id="secretary"))
        if draw(st.integers(0, 3)) == 0:
            self.compression()
        if draw(st.booleans()):
            self.planning()
        for iteration in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                self.add(ContextInjected(kind="goal", role="user", content="remember the goal"))
            self.llm_call(iteration)
            ending = draw(
                st.sampled_from(["tools", "tools", "answer", "stop", "fail", "stop_in_tools"])
            )
            if ending == "stop":
                return self.stop()
            if ending == "fail":
                self.add(LLMFailed(error="model crashed"), RunFailed(error="model crashed"))
                return None
            if ending == "answer":
                self.add(LLMCompleted(content=draw(texts), prompt_tokens=100, completion_tokens=7))
                if draw(st.integers(0, 4)) == 0:
                    return self.stop()  # the stop arrived after the answer
                self.add(RunCompleted(content="done"))
                if draw(st.integers(0, 3)) == 0:
                    self.compression()
                return None
            calls = self.tool_calls()
            self.add(LLMToolCalls(calls=calls))
            self.add(LLMCompleted(tool_calls=calls, prompt_tokens=50, completion_tokens=5))
            for call in calls:
                self.add(ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments))
            answered = draw(st.integers(0, len(calls))) if ending == "stop_in_tools" else None
            for index, call in enumerate(calls):
                if index == answered:
                    return self.stop(calls[index:])
                asked = draw(st.sampled_from(["no", "no", "no", "approved", "denied", "stop"]))
                if asked != "no":
                    self.add(ToolApprovalRequested(call_id=call.id, name=call.name))
                    if asked == "stop":  # stopped while it waited
                        return self.stop(calls[index:])
                    self.add(
                        ToolApprovalDecided(call_id=call.id, approved=asked == "approved", by="u")
                    )
                    if asked == "denied":
                        self.add(ToolFailed(call_id=call.id, name=call.name, reason="denied"))
                        continue
                self.add(ToolStarted(call_id=call.id, name=call.name))
                if call.name == "spawn_agent":
                    self.add(SubagentSpawned(child_stream_id="child", call_id=call.id, task="t"))
                    self.add(SubagentFinished(child_stream_id="child", call_id=call.id))
                self.tool_result(call)
            if ending == "stop_in_tools":
                return self.stop()
            if draw(st.integers(0, 4)) == 0:
                self.add(ScratchpadUpdated(section="notes", content=draw(st.none() | texts)))
            if draw(st.integers(0, 4)) == 0:
                self.compression()
        self.add(RunCompleted(content="", completed_normally=False))
        return None


@st.composite
def session_logs(draw: Any, max_turns: int = 3, subagent: bool = False) -> list[Event]:
    log = _Log(draw)
    parent = "parent" if subagent else None
    log.add(SessionCreated(profile_id="secretary", parent_stream_id=parent))
    for _ in range(draw(st.integers(1, max_turns))):
        log.turn()
        chore = draw(st.sampled_from(["none", "none", "pin", "rename"]))
        if chore == "pin":
            log.add(SessionPinned(pinned=draw(st.booleans())))
        elif chore == "rename":
            log.add(SessionRenamed(title=draw(texts)))
    return log.events


@st.composite
def recorded_logs(draw: Any, max_turns: int = 3) -> list[Recorded]:
    return records(draw(session_logs(max_turns=max_turns)))
