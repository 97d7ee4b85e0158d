"""The event store: an append-only log of streams, and what every backend (in-memory,
SQLite, PostgreSQL) shares: the one way in (``append``), group commit, reads and
subscriptions.

``append`` puts its request on one bounded queue and waits for it. One committer task
per store takes everything waiting (up to ``STORE_MAX_BATCH`` events) and commits it in
one transaction: under load, batches grow by themselves. Subscribers are woken only
after the commit, so they only ever see durable events.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import Self

import anyio
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from events.batch import AppendRequest, Clock, IdFactory, NewKey, Planned, Row, new_uuid, plan
from events.envelope import NewEvent, Recorded
from events.errors import StoreClosedError, is_storage_full
from events.notify import StreamNotifier
from events.tuning import STORE_MAX_BATCH, STORE_QUEUE
from events.types import Event

__all__ = ["EventStore"]

log = structlog.get_logger(__name__)

# A follower reads the log in pages of at most this many events.
FOLLOW_PAGE = 1000


class EventStore:
    """An append-only log of streams.

    ``append`` is atomic and checked: it writes all events or none, and only when the
    stream is at ``expected_seq`` (0 for a new stream). With an ``idempotency_key`` a
    retried append is a no-op that returns what the first one stored.
    Subscribers see an event only after it is durable.

    Subclasses implement ``_commit`` (one transaction for a batch of appends) and
    ``_read*``; ``_open``, ``_started`` and ``_close`` if they hold resources."""

    def __init__(self, *, clock: Clock = time.time, new_id: IdFactory = new_uuid) -> None:
        self._clock = clock
        self._new_id = new_id
        self.notifier = StreamNotifier()
        self._tg: TaskGroup | None = None
        self._send: MemoryObjectSendStream[AppendRequest] | None = None
        self.commit_count = 0
        self._full = False  # the last commit was refused for want of space
        # How long a follower waits for a wake-up before it reads again anyway: none
        # where every commit wakes it (this process commits them); a store whose
        # commits come from other processes too (PostgreSQL's NOTIFY) sets it, so that
        # a notification lost or late is covered.
        self.recheck_s = math.inf

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        await self._open()
        send, receive = anyio.create_memory_object_stream[AppendRequest](STORE_QUEUE)
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
        """Append ``events`` to a stream at ``expected_seq`` and wait until they are
        durable. Once queued, an append is committed even if its caller is cancelled."""
        send = self._send
        if send is None:
            raise StoreClosedError("the event store is not open (use 'async with store')")
        if not events:
            return []
        request = AppendRequest(stream_id, list(events), expected_seq, idempotency_key)
        if not self.submit(request):
            try:
                await send.send(request)  # the queue is full: wait for room (backpressure)
            except anyio.ClosedResourceError:
                raise StoreClosedError("the event store is closing") from None
        await request.done.wait()
        if request.error is not None:
            raise request.error
        if request.replay_range is not None:
            first, last = request.replay_range
            return await self.read(stream_id, after_seq=first - 1, to_seq=last)
        assert request.result is not None
        return request.result

    def submit(self, request: AppendRequest) -> bool:
        """Queue ``request`` for the committer if there is room now (False: the queue is
        full); its ``done`` is set once it is committed or has failed."""
        send = self._send
        if send is None:
            raise StoreClosedError("the event store is not open (use 'async with store')")
        try:
            send.send_nowait(request)
        except anyio.WouldBlock:
            return False
        except anyio.ClosedResourceError:
            raise StoreClosedError("the event store is closing") from None
        return True

    async def _committer(self, receive: MemoryObjectReceiveStream[AppendRequest]) -> None:
        """The store's one writer: takes what is queued, commits it, wakes subscribers."""
        async with receive:
            async for first in receive:
                batch = [first]
                size = len(first.events)
                while size < STORE_MAX_BATCH:
                    try:
                        request = receive.receive_nowait()
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                    batch.append(request)
                    size += len(request.events)
                with anyio.CancelScope(shield=True):  # a commit is never half-observed
                    await self._commit_batch(batch)

    async def _commit_batch(self, batch: list[AppendRequest]) -> None:
        for request in batch:
            request.error = None
            request.replay_range = None
        try:
            planned = await self._commit(batch)
        except Exception as exc:  # the transaction rolled back: nothing of the batch is written
            if len(batch) > 1:
                # Commit one by one so that a single bad request fails alone.
                for request in batch:
                    await self._commit_batch([request])
                return
            log.warning("append failed", stream_id=batch[0].stream_id, error=str(exc))
            if is_storage_full(exc):
                self._note_full()
            batch[0].error = exc
            batch[0].done.set()
            return
        self.commit_count += 1
        self._full = False
        for item in planned:
            item.request.result = item.records
            if item.records:
                self.notifier.committed(item.request.stream_id, item.records)
        for request in batch:
            request.done.set()

    def _note_full(self) -> None:
        self._full = True

    def storage_full(self) -> bool:
        """Whether writes are refused for want of space (the disk, or the database's
        own limit): set by a commit refused so, cleared by one that succeeds (or, on
        SQLite, once space has been freed on its disk)."""
        return self._full

    async def _commit(self, batch: list[AppendRequest]) -> list[Planned]:
        """Write ``batch`` in one transaction, planned (``plan``) under the write lock;
        requests that write nothing get their ``error`` or ``replay_range``."""
        raise NotImplementedError

    def plan(
        self,
        batch: list[AppendRequest],
        heads: dict[str, int],
        position: int,
        used_keys: dict[tuple[str, str], tuple[int, int]],
        *,
        rows: list[Row] | None = None,
    ) -> tuple[list[Planned], list[NewKey]]:
        """``events.batch.plan`` with this store's clock and ids."""
        return plan(
            batch, heads, position, used_keys, now=self._clock(), new_id=self._new_id, rows=rows
        )

    # ------------------------------------------------------------------ rewrite

    async def rewrite_stream(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        *,
        expected_seq: int,
        keys_after: int = 0,
        keys_moved_by: int = 0,
    ) -> None:
        """Replace the whole of ``stream_id``, whose head must still be ``expected_seq``,
        by ``events``, in one transaction. For schema upgrades at start-up only
        (navi/replay/fork_upgrade.py), while nothing follows the stream: its events get
        new positions at the end of the log, so that within a stream positions still
        follow seqs (``read_all`` readers rely on it); an idempotency key whose range
        starts after seq ``keys_after`` moves by ``keys_moved_by``, with its events."""
        if not events:
            raise ValueError("a stream cannot be rewritten empty")
        await self._rewrite(stream_id, list(events), expected_seq, keys_after, keys_moved_by)
        self.notifier.invalidate(stream_id)

    async def _rewrite(
        self,
        stream_id: str,
        events: list[NewEvent],
        expected_seq: int,
        keys_after: int,
        keys_moved_by: int,
    ) -> None:
        raise NotImplementedError

    def plan_stream(
        self, stream_id: str, events: list[NewEvent], position: int, rows: list[Row] | None
    ) -> list[Recorded]:
        """The records (and rows) of ``events`` as a whole stream from seq 1, at
        positions after ``position`` (``rewrite_stream``)."""
        request = AppendRequest(stream_id, list(events), 0, None)
        [planned], _ = self.plan([request], {stream_id: 0}, position, {}, rows=rows)
        return planned.records

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

        A read is answered from the notifier's cache when the cache holds the whole
        range (the stream's commits happened here, or a full read saw its head), so
        that a projection catching up on an unchanged stream, or a look at a new
        session's first event, costs no query."""
        cached = self.notifier.recent_after(stream_id, after_seq, to_seq=to_seq, limit=limit)
        if cached is not None:
            return cached
        records = await self._read(stream_id, after_seq=after_seq, to_seq=to_seq, limit=limit)
        last = records[-1].seq if records else after_seq
        reached_head = (limit is None or len(records) < limit) and (to_seq is None or last < to_seq)
        if reached_head and (records or after_seq == 0):  # else the head is only known <= after
            self.notifier.seen(stream_id, last)
        return records

    async def _read(
        self, stream_id: str, *, after_seq: int, to_seq: int | None, limit: int | None
    ) -> list[Recorded]:
        raise NotImplementedError

    async def read_all(
        self,
        *,
        after_position: int = 0,
        limit: int | None = None,
        skip_streams: Collection[str] = (),
    ) -> list[Recorded]:
        raise NotImplementedError

    async def last_seq(self, stream_id: str) -> int:
        raise NotImplementedError

    async def stream_heads(self) -> dict[str, Recorded]:
        raise NotImplementedError

    async def subscribe(self, stream_id: str, *, after_seq: int = 0) -> AsyncIterator[Recorded]:
        async with aclosing(self.subscribe_batches(stream_id, after_seq=after_seq)) as batches:
            async for batch in batches:
                for record in batch:
                    yield record

    async def subscribe_batches(
        self, stream_id: str, *, after_seq: int = 0, wake_on: frozenset[str] | None = None
    ) -> AsyncGenerator[list[Recorded], None]:
        """``subscribe``, a commit's events (or a page of the catch-up) at a time: for a
        follower that looks at each batch as a whole. With ``wake_on`` (event types),
        live batches come only once a commit holds one of those types (then with all
        the events since the last batch): a follower waiting for a run's end is not
        woken by every commit of the run."""
        last = after_seq
        wake: anyio.Event | None = None
        at_head = False  # the last read reached the head: nothing to read until woken
        fresh = False  # no wake-up for recheck_s: read the log itself, not the cache
        try:
            while True:
                if wake is None or wake.is_set():  # an unset one is still registered
                    wake = self.notifier.waiter(stream_id, tags=wake_on)
                    at_head = False
                if not at_head or fresh:
                    batch, at_head = await self._follow_read(stream_id, last, fresh=fresh)
                    fresh = False
                    if batch:
                        yield batch
                        last = batch[-1].seq
                        continue
                with anyio.move_on_after(self.recheck_s) as timer:
                    await wake.wait()
                fresh = timer.cancelled_caught
        finally:
            if wake_on is not None and wake is not None and not wake.is_set():
                self.notifier.forget(stream_id, wake)

    async def _follow_read(
        self, stream_id: str, last: int, *, fresh: bool
    ) -> tuple[list[Recorded], bool]:
        """A follower's next page after ``last``, and whether it reaches the head. A
        ``fresh`` read skips the cache: it runs when no wake-up came for ``recheck_s``,
        which a lost NOTIFY, or a cache made stale by another node's commit, would
        otherwise turn into a wait forever."""
        if not fresh:
            cached = self.notifier.recent_after(stream_id, last)
            if cached is not None:
                return cached, True  # the cache holds a run of events ending at the head
        page = FOLLOW_PAGE
        if fresh:
            batch = await self._read(stream_id, after_seq=last, to_seq=None, limit=page)
            if batch:  # a wake-up was missed here: by every follower of the stream
                self.notifier.invalidate(stream_id)
        else:
            batch = await self.read(stream_id, after_seq=last, limit=page)
        return batch, len(batch) < page
