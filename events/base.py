"""What every event store shares: group commit, subscriptions and the append checks.

Appends from all writers go through one bounded queue to one committer task, which
takes everything waiting and commits it in one transaction (group commit: under load
batches grow by themselves). In a store that can commit without waiting (in memory;
SQLite without a sync to disk), an append that finds the committer idle gathers what
is appended during one loop turn and commits it itself (``_lead``), or, when no other
task is ready to run, commits it at once without suspending (``submit_nowait``).
Subscribers are woken only after the commit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence, Sized
from contextlib import aclosing
from types import TracebackType
from typing import Self

import anyio
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from events.envelope import NewEvent, Recorded
from events.errors import StoreClosedError
from events.notify import StreamNotifier
from events.planning import (
    AppendRequest,
    Clock,
    Guess,
    IdFactory,
    NewKey,
    Planned,
    Row,
    new_uuid,
    plan,
)
from events.types import Event

__all__ = ["AppendRequest", "BaseEventStore", "Clock", "IdFactory", "Planned", "new_uuid"]

log = structlog.get_logger(__name__)


# After this many leads in a row gathered nothing, only every PROBE_EVERY-th gathers.
LONE_LEADS = 8
PROBE_EVERY = 8


def _ready_queue() -> Sized | None:
    """What the running event loop has ready to run, or ``None`` if it cannot be seen:
    asyncio keeps it in ``loop._ready`` (one deque for the loop's life); uvloop and trio
    do not show it. Looked up once per store: ``asyncio.get_running_loop()`` makes a
    ``getpid()`` system call on Python 3.11, every time."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio
        return None
    ready = getattr(loop, "_ready", None)
    return ready if isinstance(ready, Sized) else None


class BaseEventStore:
    """Subclasses implement ``_open``, ``_close``, ``_commit`` and ``_read*``."""

    # Events one transaction takes at most: every event of a batch waits for the whole
    # batch's commit before a subscriber sees it (bench/stream.py's latency).
    max_batch_events = 256
    queue_size = 1024

    def __init__(self, *, clock: Clock = time.time, new_id: IdFactory = new_uuid) -> None:
        self._clock = clock
        self._new_id = new_id
        self.notifier = StreamNotifier()
        self._tg: TaskGroup | None = None
        self._send: MemoryObjectSendStream[AppendRequest] | None = None
        self.commit_count = 0
        # Requests handed to the committer and not yet done: while there are none, an
        # append may be committed by its caller at once (see _commit_now).
        self._pending = 0
        self._gathering: list[AppendRequest] | None = None  # the batch _lead gathers
        self._lone_leads = 0  # leads in a row that gathered no other append
        self._ready: Sized | None = None  # the loop's ready queue (see _gathers)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        self._ready = _ready_queue()
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
        """Hand an append to the store without waiting for others' commits;
        ``result()`` waits for its own (already done if its caller led it, ``_lead``).

        Appends are committed in the order they are submitted, so one writer may have
        several in flight (each ``expected_seq`` counting the ones before it)."""
        request = self.submit_nowait(
            stream_id, events, expected_seq=expected_seq, idempotency_key=idempotency_key
        )
        if request is not None:
            return request
        return await self.submit_waiting(stream_id, events, expected_seq, idempotency_key)

    async def submit_waiting(
        self,
        stream_id: str,
        events: Sequence[Event | NewEvent],
        expected_seq: int,
        idempotency_key: str | None = None,
    ) -> AppendRequest:
        """``submit`` once ``submit_nowait`` said it must wait (a gathering turn, or a
        full queue): not tried without waiting again."""
        request = AppendRequest(stream_id, list(events), expected_seq, idempotency_key)
        if self._pending == 0 and self.commits_now:
            with anyio.CancelScope(shield=True):  # it carries other tasks' appends too
                await self._lead([request])
        else:
            await self._enqueue(request)
        return request

    def submit_nowait(
        self,
        stream_id: str,
        events: Sequence[Event | NewEvent],
        *,
        expected_seq: int,
        idempotency_key: str | None = None,
    ) -> AppendRequest | None:
        """``submit`` when the append can be handed over without suspending: joined to
        the batch a lead gathers, committed here and now (the committer idle and no
        other task ready to append: nothing to gather), or queued. Else ``None``, with
        nothing done: then ``submit`` must be awaited (a gathering turn, or a full
        queue). Nothing can cancel what does not suspend, so this path needs no shield
        (cancel scopes cost more than the rest of a small commit's Python)."""
        if self._send is None:
            raise StoreClosedError("the event store is not open (use 'async with store')")
        request = AppendRequest(stream_id, list(events), expected_seq, idempotency_key)
        gathering = self._gathering
        if gathering is not None:
            gathering.append(request)
            return request
        if self._pending == 0 and self.commits_now:
            lone = self._lone_leads
            if self._gathers(lone):
                return None  # _lead gives the loop a turn first
            self._lone_leads = lone + 1
            if self._commit_directly([request]):
                return request
        # The committer is busy (or the store could not commit now): queue it.
        try:
            self._send.send_nowait(request)
        except anyio.WouldBlock:
            return None
        self._pending += 1
        return request

    def _gathers(self, lone: int) -> bool:
        """Whether a lead, after ``lone`` leads in a row that gathered nothing, gives the
        loop a turn to gather other appends: only if some other task is ready to run
        (alone, one session at work, the common case, the turn would gather nothing and
        cost a trip through the loop per commit). A run of lone leads stops paying the
        turn, but every PROBE_EVERY-th lead still gathers: once one gathers another
        append, they all do again."""
        ready = self._ready
        if ready is not None and not len(ready):
            return False
        return lone < LONE_LEADS or lone % PROBE_EVERY == 0

    async def _enqueue(self, request: AppendRequest) -> None:
        assert self._send is not None
        self._pending += 1
        try:
            self._send.send_nowait(request)
        except anyio.WouldBlock:
            await self._send.send(request)  # the queue is full: wait for room (backpressure)

    async def _lead(self, batch: list[AppendRequest]) -> None:
        """Group commit without the committer: an append that finds nothing queued or
        in flight gathers what other tasks append during one loop turn, then commits
        the lot here, synchronously. That saves the hand-offs to the committer's tasks
        and back (several loop turns per append, most of what a small commit costs:
        bench/loop.py). If the store cannot commit it now, or one of its appends is
        bad, the committer gets the batch, in order (it commits a bad one alone)."""
        self._gathering = batch
        try:
            lone = self._lone_leads
            if self._gathers(lone):
                await anyio.lowlevel.checkpoint()
            self._lone_leads = lone + 1 if len(batch) == 1 else 0
            if self._commit_directly(batch):
                return
            # Still gathering while these wait for room in the queue: nothing appended
            # meanwhile may overtake them.
            for request in batch:
                await self._enqueue(request)
        finally:
            self._gathering = None

    def _commit_directly(self, batch: list[AppendRequest]) -> bool:
        try:
            planned = self._commit_now(batch)
        except Exception as exc:  # rolled back: nothing of it is written
            if len(batch) > 1:
                return False
            log.warning("append failed", stream_id=batch[0].stream_id, error=str(exc))
            batch[0].error = exc
            batch[0].done.set()
            return True
        if planned is None:
            return False
        self.commit_count += 1
        self._committed_batch(planned, batch)
        return True

    @property
    def commits_now(self) -> bool:
        """Whether ``_commit_now`` can commit a batch without waiting."""
        return False

    def _commit_now(self, batch: list[AppendRequest]) -> list[Planned] | None:
        """Commit ``batch`` synchronously, or return ``None`` (having written nothing)
        when this store would have to wait after all (another process holds the lock);
        the committer then takes it."""
        return None

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
        """Two stages: this one takes what is queued and plans it ahead; the other
        commits. So a batch is planned (ids, seqs, encoding) while the one before it is
        being written, and a store whose writes wait on a thread or a server spends
        that wait on the next batch."""
        send, planned = anyio.create_memory_object_stream[
            tuple[list[AppendRequest], Guess | None]
        ]()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._commit_planned, planned)
            async with send, receive:
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
                    try:
                        guess = self._plan_ahead(batch)
                    except Exception:  # e.g. an event that cannot be encoded: its commit
                        guess = None  # fails it alone, as it would without planning ahead
                    await send.send((batch, guess))
                    if guess is None:
                        for request in batch:
                            await request.done.wait()

    async def _commit_planned(
        self, planned: MemoryObjectReceiveStream[tuple[list[AppendRequest], Guess | None]]
    ) -> None:
        async with planned:
            async for batch, guess in planned:
                await self._commit_batch(batch, guess)

    async def _commit_batch(self, batch: list[AppendRequest], guess: Guess | None = None) -> None:
        for request in batch:
            request.error = None
            request.replay_range = None
        try:
            with anyio.CancelScope(shield=True):  # a commit is never half-observed
                planned = await self._commit(batch, guess)
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
            self._pending -= 1
            return
        self._committed_batch(planned, batch)
        self._pending -= len(batch)

    def _committed_batch(self, planned: list[Planned], batch: list[AppendRequest]) -> None:
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
        *,
        rows: list[Row] | None = None,
    ) -> tuple[list[Planned], list[NewKey]]:
        """``events.planning.plan`` with this store's clock and ids."""
        return plan(
            batch, heads, position, used_keys, now=self._clock(), new_id=self._new_id, rows=rows
        )

    def _plan_ahead(self, batch: list[AppendRequest]) -> Guess | None:
        """Plan ``batch`` while the batch before it commits, or ``None``: then the
        committer plans it in its transaction, and no later batch is planned ahead
        until it has committed."""
        return None

    async def _commit(self, batch: list[AppendRequest], guess: Guess | None) -> list[Planned]:
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
        self, *, after_position: int = 0, limit: int | None = None
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
        try:
            while True:
                if wake is None or wake.is_set():  # an unset one is still registered
                    wake = self.notifier.waiter(stream_id, tags=wake_on)
                batch = self.notifier.recent_after(stream_id, last)
                if batch is None:
                    batch = await self.read(stream_id, after_seq=last, limit=1000)
                if batch:
                    yield batch
                    last = batch[-1].seq
                    continue
                await wake.wait()
        finally:
            if wake_on is not None and wake is not None and not wake.is_set():
                self.notifier.forget(stream_id, wake)
