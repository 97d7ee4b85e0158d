"""The timeline of a session (``GET /sessions/{id}/timeline``).

The timeline places events on the replay clock (``t``, navi/replay/pacing.py), the
clock the replay socket paces its frames by, so the web client's cursor moves as the
frames arrive.

A timeline has one lane per stream: the session's, then each subagent's stream
(nested under the lane that spawned it, ``depth``). A lane lists its events as parallel
arrays (``type`` indexes ``types``; ``t`` is the replay clock; the session's lane covers
seqs 1..head in order, a subagent's lane gives ``at``, the session seq each of its
events happened after) and its spans: runs, LLM calls, tool calls, approvals (from the
request to the decision: the wait), compressions and subagents, each with its first and last event and its recorded duration.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from events.envelope import Recorded
from events.store import EventStore
from events.types import (
    TERMINAL_RUN_EVENTS,
    ContextCompressed,
    ContextCompressing,
    ContextCompressionFailed,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    RunStarted,
    SubagentFinished,
    SubagentSpawned,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
)
from navi.replay.history import session_head
from navi.replay.pacing import paced_gap

MAX_SUBAGENT_LANES = 200


class Span(msgspec.Struct, kw_only=True):
    kind: str  # run | llm | tool | approval | compress | subagent
    label: str
    first: int  # seq (of the lane's stream) where it starts
    last: int  # where it ends (the lane's last event if it never did)
    t0: float
    t1: float
    duration: float  # recorded seconds
    ok: bool = True
    open: bool = False  # never ended in the log
    lane: str | None = None  # a subagent span: the lane of its stream


class Lane(msgspec.Struct, kw_only=True):
    id: str
    label: str
    depth: int
    parent: str | None
    first_seq: int  # the seq of the lane's first event
    type: list[int]
    t: list[float]
    spans: list[Span]
    at: list[int] | None = None  # subagent lanes: the session seq before each event


class Timeline(msgspec.Struct, kw_only=True):
    session_id: str
    head: int
    duration: float  # of the replay clock
    types: list[str]
    lanes: list[Lane]


class _Clock:
    """Maps recorded times to the replay clock, from the session's own events."""

    def __init__(self, records: Sequence[Recorded]) -> None:
        self.real: list[float] = []
        self.paced: list[float] = []
        self.seqs: list[int] = []
        t = 0.0
        previous: Recorded | None = None
        for record in records:
            t += paced_gap(previous, record)
            self.real.append(record.timestamp)
            self.paced.append(round(t, 4))
            self.seqs.append(record.seq)
            previous = record

    def place(self, timestamp: float) -> tuple[float, int]:
        """A subagent's event: its time on the clock and the session seq it followed."""
        from bisect import bisect_right

        i = bisect_right(self.real, timestamp) - 1
        if i < 0:
            return 0.0, 0
        t = self.paced[i] + (timestamp - self.real[i])
        if i + 1 < len(self.paced):
            t = min(t, self.paced[i + 1])
        return round(t, 4), self.seqs[i]


class _Spans:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.open: dict[tuple[str, str], tuple[Span, float]] = {}

    def start(self, key: tuple[str, str], record: Recorded, t: float, label: str) -> Span:
        span = Span(kind=key[0], label=label, first=record.seq, last=record.seq, t0=t, t1=t,
                    duration=0.0, open=True)  # fmt: skip
        self.open[key] = (span, record.timestamp)
        self.spans.append(span)
        return span

    def end(self, key: tuple[str, str], record: Recorded, t: float, ok: bool = True) -> None:
        found = self.open.pop(key, None)
        if found is None:
            return
        span, started = found
        span.last, span.t1, span.ok, span.open = record.seq, t, ok, False
        span.duration = round(max(0.0, record.timestamp - started), 4)

    def close_open(self, last: Recorded, t: float) -> None:
        for span, started in self.open.values():
            span.last, span.t1 = last.seq, t
            span.duration = round(max(0.0, last.timestamp - started), 4)


def _spans_of(records: Sequence[Recorded], times: Sequence[float]) -> tuple[list[Span], list[str]]:
    """The spans of one stream, and the subagent streams it spawned (in order)."""
    spans = _Spans()
    children: list[str] = []
    runs = 0
    for record, t in zip(records, times, strict=True):
        e = record.event
        if isinstance(e, RunStarted):
            runs += 1
            spans.start(("run", ""), record, t, f"run {runs}")
        elif record.type in TERMINAL_RUN_EVENTS:
            spans.end(("run", ""), record, t, ok=record.type == "run.completed")
        elif isinstance(e, LLMRequested):
            label = f"LLM {e.purpose}" + (f" · {e.model}" if e.model else "")
            spans.start(("llm", ""), record, t, label)
        elif isinstance(e, LLMCompleted | LLMFailed):
            spans.end(("llm", ""), record, t, ok=isinstance(e, LLMCompleted))
        elif isinstance(e, ToolRequested):
            spans.start(("tool", e.call_id), record, t, e.name)
        elif isinstance(e, ToolApprovalRequested):
            spans.start(("approval", e.call_id), record, t, f"approval · {e.name}")
        elif isinstance(e, ToolApprovalDecided):
            verdict = "approved" if e.approved else "denied"
            if e.approved and e.scope == "session":
                verdict += f" ({e.scope_label or 'for the session'})"
            found = spans.open.get(("approval", e.call_id))
            if found is not None:  # the label says what became of it, and who said so
                found[0].label += f" · {verdict} by {e.by or '?'}"
            spans.end(("approval", e.call_id), record, t, ok=e.approved)
        elif isinstance(e, ToolCompleted | ToolFailed):
            ok = isinstance(e, ToolCompleted) and e.success
            spans.end(("approval", e.call_id), record, t, ok=False)  # a stop ended the wait
            spans.end(("tool", e.call_id), record, t, ok=ok)
        elif isinstance(e, ContextCompressing):
            spans.start(("compress", ""), record, t, "compression")
        elif isinstance(e, ContextCompressed | ContextCompressionFailed):
            spans.end(("compress", ""), record, t, ok=isinstance(e, ContextCompressed))
        elif isinstance(e, SubagentSpawned):
            span = spans.start(("subagent", e.child_stream_id), record, t, e.task[:80])
            span.lane = e.child_stream_id
            children.append(e.child_stream_id)
        elif isinstance(e, SubagentFinished):
            spans.end(("subagent", e.child_stream_id), record, t, ok=e.completed_normally)
    if records:
        spans.close_open(records[-1], times[-1])
    return spans.spans, children


async def build_timeline(store: EventStore, session_id: str) -> Timeline:
    head = await session_head(store, session_id)
    records = await store.read(session_id, to_seq=head)
    clock = _Clock(records)
    types: dict[str, int] = {}

    def type_index(record: Recorded) -> int:
        return types.setdefault(record.type, len(types))

    spans, children = _spans_of(records, clock.paced)
    lanes = [
        Lane(id=session_id, label="Session", depth=0, parent=None,
             first_seq=records[0].seq if records else 1,
             type=[type_index(r) for r in records], t=clock.paced, spans=spans)
    ]  # fmt: skip
    pending: list[tuple[str, str, int]] = [(c, session_id, 1) for c in children]
    seen = {session_id}
    while pending and len(lanes) < MAX_SUBAGENT_LANES:
        child, parent, depth = pending.pop(0)
        if child in seen:
            continue
        seen.add(child)
        child_records = await store.read(child)
        if not child_records:
            continue
        placed = [clock.place(r.timestamp) for r in child_records]
        times = [t for t, _ in placed]
        child_spans, grandchildren = _spans_of(child_records, times)
        label = next((s.label for lane in lanes for s in lane.spans if s.lane == child), child)
        lanes.append(
            Lane(id=child, label=label, depth=depth, parent=parent, first_seq=1,
                 type=[type_index(r) for r in child_records], t=times, spans=child_spans,
                 at=[seq for _, seq in placed])
        )  # fmt: skip
        pending = [(g, child, depth + 1) for g in grandchildren] + pending
    return Timeline(
        session_id=session_id,
        head=head,
        duration=clock.paced[-1] if clock.paced else 0.0,
        types=list(types),
        lanes=lanes,
    )
