"""In-process wake-ups for subscribers, plus a short cache of each stream's newest events.

Both are filled only after a commit, so whatever a subscriber takes from here is durable.
The cache lets a live subscriber skip re-reading the log for what was just written.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence

import anyio

from events.envelope import Recorded
from events.types import tag_of


class _Recent:
    __slots__ = ("events", "head")

    def __init__(self, maxlen: int) -> None:
        self.events: deque[Recorded] = deque(maxlen=maxlen)
        self.head = 0


class StreamNotifier:
    def __init__(self, *, recent_per_stream: int = 4096, max_streams: int = 1024) -> None:
        self._waiters: dict[str, anyio.Event] = {}
        # Waiters for commits that hold certain event types (a run's end, say).
        self._tagged: dict[str, list[tuple[frozenset[str], anyio.Event]]] = {}
        self._recent: OrderedDict[str, _Recent] = OrderedDict()
        self._recent_per_stream = recent_per_stream
        self._max_streams = max_streams

    def waiter(self, stream_id: str, *, tags: frozenset[str] | None = None) -> anyio.Event:
        """The event that the next commit to ``stream_id`` sets (with ``tags``: the next
        commit holding an event of one of these types, or a write by another process).
        Take it *before* reading."""
        if tags is not None:
            tagged = anyio.Event()
            self._tagged.setdefault(stream_id, []).append((tags, tagged))
            return tagged
        event = self._waiters.get(stream_id)
        if event is None:
            event = self._waiters[stream_id] = anyio.Event()
        return event

    def committed(self, stream_id: str, records: Sequence[Recorded]) -> None:
        recent = self._recent.get(stream_id)
        if recent is None:
            recent = self._recent[stream_id] = _Recent(self._recent_per_stream)
            if len(self._recent) > self._max_streams:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(stream_id)
        if records and recent.head and records[0].seq != recent.head + 1:
            recent.events.clear()  # a gap: someone else wrote; the log is the truth
        recent.events.extend(records)
        if records:
            recent.head = records[-1].seq
        event = self._waiters.pop(stream_id, None)
        if event is not None:
            event.set()
        tagged = self._tagged.get(stream_id)
        if tagged is not None:
            types = {tag_of(record.event) for record in records}
            waiting = []
            for tags, waiter in tagged:
                if tags.isdisjoint(types):
                    waiting.append((tags, waiter))
                else:
                    waiter.set()
            if waiting:
                self._tagged[stream_id] = waiting
            else:
                del self._tagged[stream_id]

    def forget(self, stream_id: str, event: anyio.Event) -> None:
        """Drop a waiter taken with ``tags`` that nobody waits on any more."""
        tagged = self._tagged.get(stream_id)
        if tagged is not None:
            tagged[:] = [(tags, e) for tags, e in tagged if e is not event]
            if not tagged:
                del self._tagged[stream_id]

    def wake(self, stream_id: str) -> None:
        """Wake every waiter of ``stream_id``: its log changed in a way this cache cannot
        tell (another process wrote)."""
        event = self._waiters.pop(stream_id, None)
        if event is not None:
            event.set()
        for _, tagged in self._tagged.pop(stream_id, ()):
            tagged.set()

    def seen(self, stream_id: str, head: int) -> None:
        """A full read found ``head`` as the stream's last seq. Remember it, unless the
        stream is known already (a commit may have landed while the read ran)."""
        if stream_id in self._recent:
            return
        recent = self._recent[stream_id] = _Recent(self._recent_per_stream)
        recent.head = head
        if len(self._recent) > self._max_streams:
            self._recent.popitem(last=False)

    def invalidate(self, stream_id: str) -> None:
        """Another process wrote to this stream: forget the cache and wake the readers."""
        self._recent.pop(stream_id, None)
        self.wake(stream_id)

    def invalidate_all(self) -> None:
        """Notifications from other processes may have been missed (the listening
        connection was down): forget every cached stream and wake every reader."""
        self._recent.clear()
        for stream_id in list(self._waiters) + list(self._tagged):
            self.wake(stream_id)

    def recent_after(
        self,
        stream_id: str,
        after_seq: int,
        *,
        to_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Recorded] | None:
        """Cached events after ``after_seq`` (up to ``to_seq``, at most ``limit``);
        ``None`` when the cache cannot answer. The cache holds a run of the stream's
        events that ends at its head, so any range inside that run can be sliced."""
        recent = self._recent.get(stream_id)
        if recent is None:
            return None
        if recent.head == after_seq:
            return []
        if not recent.events:
            return None
        first = recent.events[0].seq
        if first > after_seq + 1 or recent.head < after_seq:
            return None
        start = after_seq + 1 - first
        end = len(recent.events)
        if to_seq is not None:
            end = min(end, to_seq + 1 - first)
        if limit is not None:
            end = min(end, start + limit)
        return [recent.events[i] for i in range(start, end)]
