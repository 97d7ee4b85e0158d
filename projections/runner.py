"""Keeps a projection of one stream up to date: catches up from the log, then follows it.

The runner is the only impure part of ``projections``: it reads the store. The state it
holds is always ``fold(projection, events 1..seq)``; events arrive in seq order, an event
it has already applied is skipped, and a gap is an error (it would make the state lie).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Generic, TypeVar

import anyio
import structlog

from events.envelope import Recorded
from events.store import EventStore
from projections.fold import Projection

S = TypeVar("S")

log = structlog.get_logger()


class ProjectionGapError(Exception):
    """An event arrived out of order: applying it would skip or reorder events."""

    def __init__(self, projection: str, stream_id: str, expected: int, got: Recorded) -> None:
        where = f"stream {got.stream_id!r}" if got.stream_id != stream_id else "its stream"
        super().__init__(
            f"projection {projection!r} of stream {stream_id!r} expected seq {expected}, "
            f"got seq {got.seq} of {where}; nothing was applied"
        )


class ProjectionRunner(Generic[S]):
    """One projection of one stream, current as of ``seq``.

    ``catch_up`` reads what the log has; ``follow`` then applies live events as they are
    committed (``store.subscribe``), until cancelled or until ``until_seq``; ``wait_for``
    lets another task wait until a given seq is applied.
    """

    def __init__(
        self,
        store: EventStore,
        stream_id: str,
        projection: Projection[S],
        *,
        state: S | None = None,
        seq: int = 0,
    ) -> None:
        self.store = store
        self.stream_id = stream_id
        self.projection = projection
        self.state: S = projection.initial if state is None else state
        self.seq = seq
        self._changed: anyio.Event | None = None

    def apply(self, record: Recorded) -> S:
        """Apply one event; an already applied one is skipped; a gap raises."""
        if record.stream_id == self.stream_id and record.seq <= self.seq:
            return self.state
        if record.stream_id != self.stream_id or record.seq != self.seq + 1:
            raise ProjectionGapError(self.projection.name, self.stream_id, self.seq + 1, record)
        self.state = self.projection.evolve(self.state, record)
        self.seq = record.seq
        if self._changed is not None:
            self._changed.set()
            self._changed = None
        return self.state

    async def catch_up(self) -> S:
        """Apply every event the log has after ``seq``."""
        for record in await self.store.read(self.stream_id, after_seq=self.seq):
            self.apply(record)
        return self.state

    async def follow(self, *, until_seq: int | None = None) -> S:
        """Catch up, then apply live events; returns once ``until_seq`` is applied."""
        if until_seq is not None and self.seq >= until_seq:
            return self.state
        events = self.store.subscribe(self.stream_id, after_seq=self.seq)
        try:
            async for record in events:
                self.apply(record)
                if until_seq is not None and self.seq >= until_seq:
                    break
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        log.debug("projection.follow.ended", projection=self.projection.name, seq=self.seq)
        return self.state

    async def wait_for(self, seq: int) -> S:
        """Wait until events up to ``seq`` are applied (by ``follow`` in another task)."""
        while self.seq < seq:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
        return self.state


class LogProjectionRunner(Generic[S]):
    """A projection of the whole log (every stream), such as ``sessions``.

    Only for projections in which each stream's part depends on that stream's events
    alone: then events of different streams may arrive in any interleaving (for example
    from several stream subscriptions), as long as each stream's events come in order.
    ``catch_up`` reads the global log after ``position``.
    """

    def __init__(self, store: EventStore, projection: Projection[S]) -> None:
        self.store = store
        self.projection = projection
        self.state: S = projection.initial
        self.position = 0
        self.seqs: dict[str, int] = {}

    def apply(self, record: Recorded) -> S:
        """Apply one event; an already applied one is skipped; a gap in its stream raises."""
        last = self.seqs.get(record.stream_id, 0)
        if record.seq <= last:
            return self.state
        if record.seq != last + 1:
            raise ProjectionGapError(self.projection.name, record.stream_id, last + 1, record)
        self.state = self.projection.evolve(self.state, record)
        self.seqs[record.stream_id] = record.seq
        self.position = max(self.position, record.position)
        return self.state

    async def catch_up(self, *, batch: int = 10_000, skip: Collection[str] = ()) -> S:
        """Apply every event of the global log after ``position``, but those of the
        streams ``skip`` (being written, to be adopted: see ``adopt``)."""
        while records := await self.store.read_all(
            after_position=self.position, limit=batch, skip_streams=skip
        ):
            for record in records:
                self.apply(record)
            self.position = max(self.position, records[-1].position)
        return self.state

    def adopt(self, state: S, records: Sequence[Recorded]) -> None:
        """Take ``state`` as this runner's state once ``records`` are applied: the whole
        of streams it has not applied (skipped by ``catch_up`` while they were written),
        folded elsewhere (a big import's, in a worker thread). Call it once every event
        up to the last of ``records`` is applied: the caller vouches for ``state``, and
        the records only move the bookkeeping, so they are never read back from the log.
        Streams are independent here (see the class doc), so the order does not matter."""
        for record in records:
            last = self.seqs.get(record.stream_id, 0)
            if record.seq != last + 1:
                raise ProjectionGapError(self.projection.name, record.stream_id, last + 1, record)
            self.seqs[record.stream_id] = record.seq
        self.position = max([self.position, *(r.position for r in records)])
        self.state = state
