"""A session's history: its own stream, or for a fork its origin's history up to the fork
point followed by its own events.

A fork is *linked*, not copied: its stream starts with ``session.created(forked_from=O,
forked_at_seq=k)`` and holds only what happened after the fork. Its history is

    history(O)[1..k]  +  its own events 2, 3, …  numbered k+1, k+2, …

so a history is numbered 1..N without gaps, like a plain stream, and a fork reads like
its origin until seq k, then diverges (as a git branch does). The fork's own
``session.created`` is the link, not history: it is left out. Forks of forks resolve
recursively; ``forked_at_seq`` is always a seq of the origin's *history*.

History records are re-enveloped: ``stream_id`` is the session's id and ``seq`` the
history seq; ``event_id``, ``timestamp``, ``position`` and the payload are as stored. A
plain stream's history is its stream, unchanged. ``History.offset`` converts the
session's own stored seqs (what its writer appends with) to history seqs and back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.store import EventStore
from events.types import SessionCreated
from navi.replay.errors import BrokenForkError, SessionNotFoundError


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """Stored seqs ``stored_after+1 .. stored_to`` of ``stream_id`` are history seqs
    ``stored seq + offset``. ``stored_to`` is ``None`` for the session's own stream
    (it grows)."""

    stream_id: str
    offset: int
    stored_after: int
    stored_to: int | None = None

    def history_range(self, head: int) -> tuple[int, int]:
        """History seqs ``(first, last)`` this segment covers when the session's head is
        ``head``."""
        last = head if self.stored_to is None else self.stored_to + self.offset
        return self.stored_after + self.offset + 1, last


class History:
    """Where the events of one session's history are stored, and how to read them."""

    def __init__(
        self, store: EventStore, session_id: str, segments: list[Segment], own_last_seq: int
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.segments = segments
        self.own = segments[-1]
        self.head = own_last_seq + self.own.offset

    @property
    def offset(self) -> int:
        """History seq = the session's own stored seq + ``offset`` (0 unless a fork)."""
        return self.own.offset

    @property
    def is_fork(self) -> bool:
        return len(self.segments) > 1

    def to_history_seq(self, stored_seq: int) -> int:
        return stored_seq + self.own.offset

    def to_stored_seq(self, history_seq: int) -> int:
        return history_seq - self.own.offset

    async def refresh(self) -> int:
        """Re-read the session's own head (it may have grown); returns the history head."""
        self.head = await self.store.last_seq(self.session_id) + self.own.offset
        return self.head

    async def read(self, *, after_seq: int = 0, to_seq: int | None = None) -> list[Recorded]:
        """History records with ``after_seq < seq <= to_seq`` (to the head by default)."""
        to = self.head if to_seq is None else min(to_seq, self.head)
        result: list[Recorded] = []
        for segment in self.segments:
            first, last = segment.history_range(self.head)
            lo, hi = max(first, after_seq + 1), min(last, to)
            if lo > hi:
                continue
            offset = segment.offset
            records = await self.store.read(
                segment.stream_id, after_seq=lo - 1 - offset, to_seq=hi - offset
            )
            if segment.stream_id == self.session_id and offset == 0:
                result.extend(records)
            else:
                sid = self.session_id
                result.extend(replace(r, stream_id=sid, seq=r.seq + offset) for r in records)
        return result

    async def pages(
        self, *, after_seq: int = 0, to_seq: int | None = None, size: int = 1000
    ) -> AsyncIterator[list[Recorded]]:
        """``read`` in pages of at most ``size`` events, so a long log is never all in
        memory."""
        to = self.head if to_seq is None else min(to_seq, self.head)
        start = after_seq
        while start < to:
            end = min(start + size, to)
            page = await self.read(after_seq=start, to_seq=end)
            if page:
                yield page
            start = end

    @property
    def streams(self) -> list[str]:
        """The streams the history is read from, oldest origin first."""
        return [segment.stream_id for segment in self.segments]


async def first_event(store: EventStore, stream_id: str) -> Recorded | None:
    records = await store.read(stream_id, to_seq=1)
    return records[0] if records else None


async def load_history(store: EventStore, session_id: str) -> History:
    """The history of ``session_id``; raises ``SessionNotFoundError`` or
    ``BrokenForkError``."""
    own_last = await store.last_seq(session_id)
    if own_last == 0:
        raise SessionNotFoundError(session_id)
    segments = await _segments(store, session_id, set())
    return History(store, session_id, segments, own_last)


async def _segments(store: EventStore, stream_id: str, seen: set[str]) -> list[Segment]:
    if stream_id in seen:
        raise BrokenForkError(stream_id, "its fork links form a cycle")
    seen.add(stream_id)
    first = await first_event(store, stream_id)
    if first is None:
        raise SessionNotFoundError(stream_id)
    created = first.event
    if not isinstance(created, SessionCreated) or created.forked_from is None:
        return [Segment(stream_id=stream_id, offset=0, stored_after=0)]
    at = created.forked_at_seq
    origin = created.forked_from
    if at is None or at < 1:
        raise BrokenForkError(stream_id, f"forked_at_seq is {at!r}")
    if await store.last_seq(origin) == 0:
        raise BrokenForkError(stream_id, f"its origin {origin!r} does not exist")
    origin_segments = await _segments(store, origin, seen)
    origin_head = await store.last_seq(origin) + origin_segments[-1].offset
    if at > origin_head:
        raise BrokenForkError(
            stream_id, f"forked at seq {at}, but its origin {origin!r} has {origin_head} events"
        )
    clipped: list[Segment] = []
    for segment in origin_segments:
        first_seq, _ = segment.history_range(origin_head)
        if first_seq > at:
            break
        stored_to = at - segment.offset
        if segment.stored_to is not None:
            stored_to = min(stored_to, segment.stored_to)
        clipped.append(replace(segment, stored_to=stored_to))
    # Own stored seq 1 is the link (session.created); seq 2 is history seq at + 1.
    return [*clipped, Segment(stream_id=stream_id, offset=at - 1, stored_after=1)]


async def read_history(store: EventStore, session_id: str) -> list[Recorded]:
    """Every event of the session's history, numbered 1..N (see the module doc)."""
    history = await load_history(store, session_id)
    return await history.read()


async def follow_history(
    store: EventStore, history: History, after: int
) -> AsyncIterator[Recorded]:
    """The session's history after seq ``after``, then live, numbered as the history
    (a fork's own stream is followed, its seqs shifted by ``history.offset``)."""
    if history.is_fork:
        link = history.to_history_seq(1)  # the fork point: the origin's part ends here
        if after < link:
            for record in await history.read(after_seq=after, to_seq=link):
                yield record
            after = link
    offset = history.offset
    stored_after = history.to_stored_seq(after)
    async for record in store.subscribe(history.session_id, after_seq=stored_after):
        yield record if offset == 0 else replace(record, seq=record.seq + offset)
