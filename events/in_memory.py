"""An in-memory event store: the reference implementation, and fast for tests and benches."""

from __future__ import annotations

import bisect
import time
from collections.abc import Collection

from events.batch import AppendRequest, Clock, IdFactory, Planned, new_uuid
from events.codec import encode
from events.envelope import NewEvent, Recorded
from events.errors import ConcurrencyError
from events.store import EventStore


class InMemoryEventStore(EventStore):
    """Keeps every event in lists. Payloads still go through the codec, so what tests
    see here is what a SQL store would give back."""

    def __init__(self, *, clock: Clock = time.time, new_id: IdFactory = new_uuid) -> None:
        super().__init__(clock=clock, new_id=new_id)
        self._streams: dict[str, list[Recorded]] = {}
        self._all: list[Recorded] = []
        self._keys: dict[tuple[str, str], tuple[int, int]] = {}

    async def _commit(self, batch: list[AppendRequest]) -> list[Planned]:
        heads = {r.stream_id: len(self._streams.get(r.stream_id, ())) for r in batch}
        keys = dict(self._keys)
        planned, new_keys = self.plan(batch, heads, self._position(), keys)
        # Encode as a SQL store would, so a payload that cannot be stored fails here too,
        # before anything is kept.
        for item in planned:
            for record in item.records:
                encode(record.event)
        for item in planned:
            self._streams.setdefault(item.request.stream_id, []).extend(item.records)
            self._all.extend(item.records)
        for stream_id, key, first, last in new_keys:
            self._keys[(stream_id, key)] = (first, last)
        return planned

    def _position(self) -> int:
        # Not len(self._all): a rewritten stream leaves gaps (rewrite_stream).
        return self._all[-1].position if self._all else 0

    async def _rewrite(
        self,
        stream_id: str,
        events: list[NewEvent],
        expected_seq: int,
        keys_after: int,
        keys_moved_by: int,
    ) -> None:
        head = len(self._streams.get(stream_id, ()))
        if head != expected_seq:
            raise ConcurrencyError(stream_id, expected_seq, head)
        records = self.plan_stream(stream_id, events, self._position(), None)
        for record in records:
            encode(record.event)
        self._all = [r for r in self._all if r.stream_id != stream_id] + records
        self._streams[stream_id] = records
        for (sid, key), (first, last) in list(self._keys.items()):
            if sid == stream_id and first > keys_after:
                self._keys[(sid, key)] = (first + keys_moved_by, last + keys_moved_by)

    async def _read(
        self, stream_id: str, *, after_seq: int, to_seq: int | None, limit: int | None
    ) -> list[Recorded]:
        stream = self._streams.get(stream_id, [])
        end = len(stream) if to_seq is None else min(to_seq, len(stream))
        if limit is not None:
            end = min(end, after_seq + limit)
        return stream[after_seq:end]

    async def read_all(
        self,
        *,
        after_position: int = 0,
        limit: int | None = None,
        skip_streams: Collection[str] = (),
    ) -> list[Recorded]:
        start = bisect.bisect_right(self._all, after_position, key=lambda r: r.position)
        if skip_streams:
            kept = [r for r in self._all[start:] if r.stream_id not in skip_streams]
            return kept if limit is None else kept[:limit]
        end = len(self._all) if limit is None else start + limit
        return self._all[start:end]

    async def last_seq(self, stream_id: str) -> int:
        return len(self._streams.get(stream_id, ()))

    async def stream_heads(self) -> dict[str, Recorded]:
        return {sid: events[-1] for sid, events in self._streams.items() if events}
