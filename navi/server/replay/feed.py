"""What a replay plays: a session's recorded events from a seq on, as live frames, with
its subagents' events interleaved as the live socket interleaves them, each placed on
the replay clock (timeline.py).

``ReplayFeed(store, session_id, start, to)`` primes a ``FrameTranslator`` with the events
before ``start`` (so the frames after it are the ones a live client connected there
would have got), then ``steps()`` yields one ``Step`` per event: the session's own
events ``start..to`` in order and, between them, the events of the subagents running at
the time, in the order of their timestamps. A subagent's events all come before the
``subagent.finished`` that ends it, as live. ``Step.seq`` is the session's seq the
replay is at (a subagent's event keeps its own ``seq`` in its frames, as live).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from events.envelope import Recorded
from events.store import EventStore
from events.types import SubagentFinished, SubagentSpawned
from navi.replay.history import pages
from navi.replay.pacing import paced_gap
from navi.server.frames import Frame, FrameTranslator

PAGE = 1000


@dataclass
class Step:
    record: Recorded
    frames: list[Frame]
    seq: int  # the session seq the replay is at after this step
    t: float  # on the replay clock, from the start of the feed


@dataclass
class _Child:
    records: list[Recorded]
    translator: FrameTranslator
    index: int = 0
    children: list[str] = field(default_factory=list)

    def peek(self) -> Recorded | None:
        return self.records[self.index] if self.index < len(self.records) else None


class ReplayFeed:
    def __init__(
        self,
        store: EventStore,
        session_id: str,
        *,
        start: int,
        to: int,
        max_context_tokens: int,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.start = start
        self.to = to
        self.max_context_tokens = max_context_tokens
        self.translator = FrameTranslator(max_context_tokens=max_context_tokens)
        self._children: dict[str, _Child] = {}
        self._previous: Recorded | None = None  # the last session event (for pacing)
        self._parent_t = 0.0
        self._t = 0.0

    async def prime(self) -> None:
        """Take in the events before ``start``: the translator, the subagents running."""
        running: dict[str, None] = {}
        async for page in pages(self.store, self.session_id, to_seq=self.start - 1, size=PAGE):
            self.translator.prime(page)
            for record in page:
                if isinstance(record.event, SubagentSpawned):
                    running[record.event.child_stream_id] = None
                elif isinstance(record.event, SubagentFinished):
                    running.pop(record.event.child_stream_id, None)
            self._previous = page[-1]
        before = self._previous.timestamp if self._previous else float("-inf")
        for child in running:
            await self._open_child(child, primed_until=before)

    async def _open_child(self, child_id: str, *, primed_until: float | None = None) -> None:
        if child_id in self._children:
            return
        records = await self.store.read(child_id)
        translator = FrameTranslator(max_context_tokens=self.max_context_tokens, is_subagent=True)
        child = _Child(records=records, translator=translator)
        self._children[child_id] = child
        if primed_until is None:
            return
        # A subagent already running at the start: what it did before is primed, and
        # the subagents it had running are opened the same way.
        while (record := child.peek()) is not None and record.timestamp <= primed_until:
            translator.prime([record])
            child.index += 1
            if isinstance(record.event, SubagentSpawned):
                child.children.append(record.event.child_stream_id)
            elif (
                isinstance(record.event, SubagentFinished)
                and record.event.child_stream_id in child.children
            ):
                child.children.remove(record.event.child_stream_id)
        for grandchild in list(child.children):
            await self._open_child(grandchild, primed_until=primed_until)

    async def steps(self) -> AsyncIterator[Step]:
        position = self.start - 1
        start, to = self.start - 1, self.to
        async for page in pages(self.store, self.session_id, after_seq=start, to_seq=to, size=PAGE):
            for record in page:
                event = record.event
                async for step in self._drain(position, until=record.timestamp):
                    yield step
                if isinstance(event, SubagentFinished):
                    # The child's events all go out before the parent's tool call ends.
                    async for step in self._drain(position, until=None, only=event.child_stream_id):
                        yield step
                self._parent_t += paced_gap(self._previous, record)
                self._t = max(self._t, self._parent_t)
                self._previous = record
                position = record.seq
                yield Step(record, self.translator.frames(record), record.seq, self._t)
                if isinstance(event, SubagentSpawned):
                    await self._open_child(event.child_stream_id)
                elif isinstance(event, SubagentFinished):
                    self._close(event.child_stream_id)

    def _close(self, child_id: str) -> None:
        child = self._children.pop(child_id, None)
        for grandchild in child.children if child else []:
            self._close(grandchild)

    def _next_child(self, only: str | None) -> tuple[str, _Child] | None:
        """The running subagent whose next event is the earliest (within ``only``'s tree)."""
        allowed = self._subtree(only) if only is not None else set(self._children)
        best: tuple[str, _Child] | None = None
        for child_id in allowed:
            child = self._children.get(child_id)
            record = child.peek() if child else None
            if child is None or record is None:
                continue
            if best is None or record.timestamp < best[1].records[best[1].index].timestamp:
                best = (child_id, child)
        return best

    def _subtree(self, root: str) -> set[str]:
        found, pending = set(), [root]
        while pending:
            child_id = pending.pop()
            if child_id in found or child_id not in self._children:
                continue
            found.add(child_id)
            pending.extend(self._children[child_id].children)
        return found

    async def _drain(
        self, position: int, *, until: float | None, only: str | None = None
    ) -> AsyncIterator[Step]:
        """Subagent events up to time ``until`` (all of ``only``'s tree if ``None``)."""
        while (found := self._next_child(only)) is not None:
            _, child = found
            record = child.records[child.index]
            if until is not None and record.timestamp > until:
                return
            child.index += 1
            base = self._previous.timestamp if self._previous else record.timestamp
            self._t = max(self._t, self._parent_t + max(0.0, record.timestamp - base))
            yield Step(record, child.translator.frames(record), position, self._t)
            event = record.event
            if isinstance(event, SubagentSpawned):
                child.children.append(event.child_stream_id)
                await self._open_child(event.child_stream_id)
            elif isinstance(event, SubagentFinished):
                if event.child_stream_id in child.children:
                    child.children.remove(event.child_stream_id)
                self._close(event.child_stream_id)
