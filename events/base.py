"""What every event store shares: group commit, subscriptions and the append checks.

Appends from all writers go through one bounded queue to one committer task, which
takes everything waiting and commits it in one transaction (group commit: under load
batches grow by themselves; alone, an append is committed at once). Subscribers are
woken only after the commit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import anyio
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from events.envelope import NewEvent, Recorded, Staged
from events.errors import ConcurrencyError, StoreClosedError
from events.notify import StreamNotifier
from events.types import Event

log = structlog.get_logger(__name__)

Clock = Callable[[], float]
IdFactory = Callable[[], str]


class EventIds:
    """Unique ids in UUID form, cheaply: a random 80-bit prefix per process and a counter.
    (``uuid4()`` per streamed chunk costs more than the rest of an append.)"""

    # The counter starts at 16**11 so that ``hex()`` always gives the 12 digits of the
    # UUID's last group without padding (a third of the cost of a format spec).
    _FIRST = 16**11

    def __init__(self) -> None:
        p = uuid.uuid4().hex[:20]
        self._head = f"{p[:8]}-{p[8:12]}-4{p[13:16]}-{p[16:20]}-"
        self._last = self._FIRST
        self._lock = threading.Lock()  # SQLite plans a large batch in a worker thread

    def __call__(self) -> str:
        return self.many(1)[0]

    def many(self, n: int) -> list[str]:
        with self._lock:
            first = self._last
            self._last += n
        head = self._head
        return [head + hex(i)[2:] for i in range(first, first + n)]


new_uuid = EventIds()


@dataclass(eq=False)
class AppendRequest:
    stream_id: str
    events: list[Staged]
    expected_seq: int
    idempotency_key: str | None
    done: anyio.Event = field(default_factory=anyio.Event)
    result: list[Recorded] | None = None
    error: BaseException | None = None
    # Set by the committer when the idempotency key was already used: (first, last) seq.
    replay_range: tuple[int, int] | None = None


@dataclass
class Planned:
    """The rows one request will write, decided under the store's write lock."""

    request: AppendRequest
    records: list[Recorded]


class BaseEventStore:
    """Subclasses implement ``_open``, ``_close``, ``_commit`` and ``_read*``."""

    max_batch_events = 1024
    queue_size = 1024

    def __init__(self, *, clock: Clock = time.time, new_id: IdFactory = new_uuid) -> None:
        self._clock = clock
        self._new_id = new_id
        self.notifier = StreamNotifier()
        self._tg: TaskGroup | None = None
        self._send: MemoryObjectSendStream[AppendRequest] | None = None
        self.commit_count = 0

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        await self._open()
        send, receive = anyio.create_memory_object_stream[AppendRequest](self.queue_size)
        self._send = send
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._committer, receive)
        await self._started()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tg is not None and self._send is not None
        await self._send.aclose()  # the committer drains what is queued, then ends
        self._send = None
        # An ordinary error of the block propagates as itself, not wrapped in a group;
        # cancellation goes to the task group so the committer is cancelled with it.
        passthrough = exc is not None and not isinstance(exc, Exception)
        try:
            if passthrough:
                await self._tg.__aexit__(exc_type, exc, tb)
            else:
                await self._tg.__aexit__(None, None, None)
        finally:
            self._tg = None
            await self._close()

    async def _open(self) -> None:
        """Connect and create the schema."""

    async def _started(self) -> None:
        """Start background work needing the task group (e.g. a LISTEN connection)."""

    async def _close(self) -> None:
        pass

    @property
    def task_group(self) -> TaskGroup:
        if self._tg is None:
            raise StoreClosedError("the event store is not open (use 'async with store')")
        return self._tg

    # ------------------------------------------------------------------ append

    async def append(
        self,
        stream_id: str,
        events: Sequence[Event | NewEvent],
        *,
        expected_seq: int,
        idempotency_key: str | None = None,
    ) -> list[Recorded]:
        if not events:
            if self._send is None:
                raise StoreClosedError("the event store is not open (use 'async with store')")
            return []
        request = await self.submit(
            stream_id, events, expected_seq=expected_seq, idempotency_key=idempotency_key
        )
        return await self.result(request)

    async def submit(
        self,
        stream_id: str,
        events: Sequence[Event | NewEvent],
        *,
        expected_seq: int,
        idempotency_key: str | None = None,
    ) -> AppendRequest:
        """Queue an append and return at once; ``result()`` waits for its commit.

        Appends are committed in the order they are submitted, so one writer may have
        several in flight (each ``expected_seq`` counting the ones before it)."""
        if self._send is None:
            raise StoreClosedError("the event store is not open (use 'async with store')")
        request = AppendRequest(stream_id, list(events), expected_seq, idempotency_key)
        try:
            self._send.send_nowait(request)
        except anyio.WouldBlock:
            await self._send.send(request)  # the queue is full: wait for room (backpressure)
        return request

    async def result(self, request: AppendRequest) -> list[Recorded]:
        await request.done.wait()
        if request.error is not None:
            raise request.error
        if request.replay_range is not None:
            first, last = request.replay_range
            return await self.read(request.stream_id, after_seq=first - 1, to_seq=last)
        assert request.result is not None
        return request.result

    async def _committer(self, receive: MemoryObjectReceiveStream[AppendRequest]) -> None:
        async with receive:
            async for first in receive:
                batch = [first]
                size = len(first.events)
                while size < self.max_batch_events:
                    try:
                        request = receive.receive_nowait()
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                    batch.append(request)
                    size += len(request.events)
                await self._commit_batch(batch)

    async def _commit_batch(self, batch: list[AppendRequest]) -> None:
        for request in batch:
            request.error = None
            request.replay_range = None
        try:
            with anyio.CancelScope(shield=True):  # a commit is never half-observed
                planned = await self._commit(batch)
            self.commit_count += 1
        except Exception as exc:  # the transaction rolled back: nothing of the batch is written
            if len(batch) > 1:
                # Commit one by one so that a single bad request fails alone.
                for request in batch:
                    await self._commit_batch([request])
                return
            log.warning("append failed", stream_id=batch[0].stream_id, error=str(exc))
            batch[0].error = exc
            batch[0].done.set()
            return
        for item in planned:
            item.request.result = item.records
            if item.records:
                self.notifier.committed(item.request.stream_id, item.records)
        for request in batch:
            request.done.set()

    def plan(
        self,
        batch: list[AppendRequest],
        heads: dict[str, int],
        position: int,
        used_keys: dict[tuple[str, str], tuple[int, int]],
    ) -> tuple[list[Planned], list[tuple[str, str, int, int]]]:
        """Decide, under the write lock, which requests are written and with which seqs.

        ``heads`` holds each stream's current last seq; requests whose ``expected_seq``
        is stale get a ``ConcurrencyError`` and write nothing. Returns the plan and the
        new idempotency keys to record.
        """
        planned: list[Planned] = []
        new_keys: list[tuple[str, str, int, int]] = []
        now = self._clock()
        for request in batch:
            key = request.idempotency_key
            if key is not None:
                used = used_keys.get((request.stream_id, key))
                if used is not None:
                    request.replay_range = used
                    continue
            head = heads.get(request.stream_id, 0)
            if request.expected_seq != head:
                request.error = ConcurrencyError(request.stream_id, request.expected_seq, head)
                continue
            records = self._records(request, head, position, now)
            head += len(records)
            position += len(records)
            heads[request.stream_id] = head
            if key is not None:
                rng = (records[0].seq, records[-1].seq)
                used_keys[(request.stream_id, key)] = rng
                new_keys.append((request.stream_id, key, *rng))
            planned.append(Planned(request, records))
        return planned, new_keys

    def _records(
        self, request: AppendRequest, head: int, position: int, now: float
    ) -> list[Recorded]:
        """The records of one request, after ``head`` and ``position``. The hot loop of
        every append (once per streamed chunk), so it is kept to the bare minimum."""
        stream_id = request.stream_id
        events = request.events
        new_id = self._new_id
        ids = new_id.many(len(events)) if isinstance(new_id, EventIds) else None
        records = []
        for i, item in enumerate(events):
            if type(item) is NewEvent:
                records.append(
                    Recorded(
                        stream_id=stream_id,
                        seq=head + i + 1,
                        position=position + i + 1,
                        event_id=item.event_id or (new_id() if ids is None else ids[i]),
                        timestamp=now if item.timestamp is None else item.timestamp,
                        event=item.event,
                        run_id=item.run_id,
                        causation_id=item.causation_id,
                    )
                )
            else:
                records.append(
                    Recorded(
                        stream_id=stream_id,
                        seq=head + i + 1,
                        position=position + i + 1,
                        event_id=new_id() if ids is None else ids[i],
                        timestamp=now,
                        event=item,  # type: ignore[arg-type]
                    )
                )
        return records

    async def _commit(self, batch: list[AppendRequest]) -> list[Planned]:
        raise NotImplementedError

    # ------------------------------------------------------------------ read

    async def read(
        self,
        stream_id: str,
        *,
        after_seq: int = 0,
        to_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Recorded]:
        """Events of a stream after ``after_seq`` (up to ``to_seq``, at most ``limit``).

        Reading a stream's tail is answered from the notifier's cache when it knows
        the stream (its commits happened here, or a full read saw its head), so that
        a projection catching up on an unchanged stream costs no query."""
        if to_seq is None and limit is None:
            cached = self.notifier.recent_after(stream_id, after_seq)
            if cached is not None:
                return cached
            records = await self._read(stream_id, after_seq=after_seq, to_seq=None, limit=None)
            if records or after_seq == 0:  # otherwise the head is only known to be <= after
                self.notifier.seen(stream_id, records[-1].seq if records else 0)
            return records
        return await self._read(stream_id, after_seq=after_seq, to_seq=to_seq, limit=limit)

    async def _read(
        self, stream_id: str, *, after_seq: int, to_seq: int | None, limit: int | None
    ) -> list[Recorded]:
        raise NotImplementedError

    async def read_all(
        self, *, after_position: int = 0, limit: int | None = None
    ) -> list[Recorded]:
        raise NotImplementedError

    async def last_seq(self, stream_id: str) -> int:
        raise NotImplementedError

    async def stream_heads(self) -> dict[str, Recorded]:
        raise NotImplementedError

    async def subscribe(self, stream_id: str, *, after_seq: int = 0) -> AsyncIterator[Recorded]:
        last = after_seq
        while True:
            wake = self.notifier.waiter(stream_id)
            batch = self.notifier.recent_after(stream_id, last)
            if batch is None:
                batch = await self.read(stream_id, after_seq=last, limit=1000)
            if batch:
                for record in batch:
                    yield record
                last = batch[-1].seq
                continue
            await wake.wait()
