"""A stream's one writer: it queues events and group-commits them from a task of its own.

A session stages every streamed chunk and records every decision through its writer.
The writer's task reads a bounded queue and flushes what it has taken as one append:

- at once when it holds a step-boundary event (every event but a streamed chunk is
  one) or events somebody waits for (``append``, ``commit``), after taking whatever
  else is already queued;
- when it holds ``max_batch`` events;
- when its oldest event has waited ``max_delay`` seconds.

One append is in flight at a time: meanwhile the queue fills and becomes the next
batch, and a stager that finds it full waits (backpressure). An ``append`` that finds
nothing queued and nothing in flight (a run's decision between two steps: the usual
case) goes to the store's queue itself, and the task waits for it before its next
batch: the task is not woken twice (and the caller once more) for events it would only
pass on. ``stage`` only queues;
``append`` returns once its events are durable. After a failed append the writer
stops: the log may hold what it does not know of, so its owner must recover from the
log (a new writer) before writing again.

Run ``writer.run`` in the owner's task group and ``await writer.aclose()`` to end it
(what is queued is committed first), or use ``async with writer.running():``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Self

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from events.batch import AppendRequest
from events.envelope import NewEvent, Recorded, Staged
from events.errors import EventStoreError
from events.store import EventStore
from events.tuning import WRITER_MAX_BATCH, WRITER_MAX_DELAY, WRITER_QUEUE
from events.types import Event


class WriterFailedError(EventStoreError):
    """An earlier append of this writer failed (or the writer has ended); nothing after
    it was written."""


class _Awaited:
    """Events whose caller waits until they are durable: flushed at once, in one batch."""

    __slots__ = ("done", "error", "events", "records")

    def __init__(self, events: tuple[Staged, ...]) -> None:
        self.events = events
        self.done = anyio.Event()
        self.records: list[Recorded] = []
        self.error: BaseException | None = None


class StreamWriter:
    """The single writer of ``stream_id``, whose last event is at ``last_seq``."""

    def __init__(
        self,
        store: EventStore,
        stream_id: str,
        *,
        last_seq: int,
        max_batch: int = WRITER_MAX_BATCH,
        max_delay: float = WRITER_MAX_DELAY,
        queue: int = WRITER_QUEUE,
    ) -> None:
        self.store = store
        self.stream_id = stream_id
        self._queued = last_seq  # the seq of the last event queued
        self._head = last_seq  # the seq of the last event committed
        self._max_batch = max_batch
        self._max_delay = max_delay
        self._send, self._receive = anyio.create_memory_object_stream[Staged | _Awaited](queue)
        self._failed: BaseException | None = None
        self._ended = anyio.Event()
        self._closed = False
        # An append that went to the store's queue itself, until its outcome is applied.
        self._direct: AppendRequest | None = None

    @property
    def last_seq(self) -> int:
        """The seq of the last event queued (committed soon, or already)."""
        return self._queued

    # ------------------------------------------------------------------ the callers' side

    async def stage(self, *events: Event | NewEvent) -> int:
        """Queue events without waiting for their commit; returns the seq of the last.
        Waits only while the queue is full."""
        for event in events:
            await self._put(event, 1)
        return self.last_seq

    async def append(self, *events: Event | NewEvent) -> list[Recorded]:
        """Queue events and wait until they (and everything before them) are durable.
        Once queued they are committed even if the caller is cancelled meanwhile."""
        if self._queued == self._head and self._direct is None and not self._closed:
            self._check()
            if not events:
                return []  # nothing queued, nothing in flight: all is durable
            request = AppendRequest(self.stream_id, list(events), self._head, None)
            if self.store.submit(request):
                self._queued += len(events)
                self._direct = request
                await request.done.wait()
                self._apply(request)
                if request.error is not None:
                    raise request.error
                assert request.result is not None
                return request.result
        awaited = _Awaited(events)
        await self._put(awaited, len(events))
        await awaited.done.wait()
        if awaited.error is not None:
            raise awaited.error
        return awaited.records

    async def commit(self) -> None:
        """Wait until everything queued so far is durable."""
        await self.append()

    async def _put(self, item: Staged | _Awaited, count: int) -> None:
        self._check()
        try:
            try:
                self._send.send_nowait(item)
            except anyio.WouldBlock:
                # Counted once it is queued: a cancellation must not leave that in doubt.
                with anyio.CancelScope(shield=True):
                    await self._send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._check()
            raise WriterFailedError(f"stream {self.stream_id!r}: the writer has ended") from None
        self._queued += count

    def _check(self) -> None:
        if self._failed is not None:
            raise WriterFailedError(
                f"stream {self.stream_id!r}: an earlier append failed ({self._failed}); "
                "recover the stream before writing again"
            ) from self._failed

    # ------------------------------------------------------------------ the task

    async def run(self) -> None:
        """The writer task. Ends once ``close()`` was called and everything queued is
        committed, or after a failed append (then every waiting caller gets the error)."""
        try:
            async with self._receive as receive:
                while (taken := await self._take(receive)) is not None:
                    await self._flush(*taken)
                    if self._failed is not None:
                        self._fail_queued(receive)
                        return
                await self._wait_direct()
        finally:
            self._ended.set()

    def close(self) -> None:
        """Take no more events; the task commits what is queued, then ends."""
        self._closed = True
        self._send.close()

    async def aclose(self) -> None:
        """``close()``, and wait for the task to end."""
        self.close()
        await self._ended.wait()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Self]:
        """Run the task for the block, for a caller without a task group of its own;
        leaving the block commits what is queued."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.run)
            try:
                yield self
            finally:
                self.close()

    async def _take(
        self, receive: MemoryObjectReceiveStream[Staged | _Awaited]
    ) -> tuple[list[Staged], list[tuple[_Awaited, int]]] | None:
        """The next batch: its events, and the waiters among them with where their
        events start. ``None`` once the queue is closed and empty."""
        try:
            item = await receive.receive()
        except anyio.EndOfStream:
            return None
        events: list[Staged] = []
        awaited: list[tuple[_Awaited, int]] = []
        due = False
        deadline = anyio.current_time() + self._max_delay
        while True:
            if type(item) is _Awaited:
                awaited.append((item, len(events)))
                events.extend(item.events)
                due = True
            else:
                events.append(item)  # type: ignore[arg-type]
                due = due or item.boundary  # type: ignore[union-attr]
            if len(events) >= self._max_batch:
                break
            try:
                item = receive.receive_nowait()
                continue
            except anyio.WouldBlock:
                if due:
                    break
            except anyio.EndOfStream:
                break
            with anyio.move_on_after(deadline - anyio.current_time()):
                try:
                    item = await receive.receive()
                    continue
                except anyio.EndOfStream:
                    pass
            break
        return events, awaited

    async def _flush(self, events: list[Staged], awaited: list[tuple[_Awaited, int]]) -> None:
        records: list[Recorded] = []
        await self._wait_direct()  # its events come before these
        if events and self._failed is None:
            try:
                records = await self.store.append(self.stream_id, events, expected_seq=self._head)
            except Exception as exc:  # the store wrote nothing of it
                self._failed = exc
            else:
                self._head += len(events)
        for item, start in awaited:
            item.records = records[start : start + len(item.events)]
            item.error = self._failed
            item.done.set()

    async def _wait_direct(self) -> None:
        """Wait for an append that went to the store's queue itself (``append``), and
        apply its outcome if its caller has not (cancelled meanwhile)."""
        direct = self._direct
        if direct is not None:
            if not direct.done.is_set():
                await direct.done.wait()
            self._apply(direct)

    def _apply(self, request: AppendRequest) -> None:
        """A direct append's outcome, applied once (by its caller, or by the task)."""
        if self._direct is request:
            self._direct = None
            if request.error is None:
                self._head += len(request.events)
            else:
                self._failed = request.error

    def _fail_queued(self, receive: MemoryObjectReceiveStream[Staged | _Awaited]) -> None:
        while True:
            try:
                item = receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream):
                return
            if type(item) is _Awaited:
                try:
                    self._check()
                except WriterFailedError as exc:
                    item.error = exc
                item.done.set()
