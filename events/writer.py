"""The single writer of one stream: stages events and group-commits them.

Streamed chunks are staged and committed together: a batch goes to the store when a
boundary event arrives (every non-chunk event is one), when it holds ``max_batch``
events, or once its oldest event is ``max_delay`` seconds old (checked at the next
``stage``, and by a timer inside ``async with writer.ticking():`` so that a pause in
the stream does not hold back what was staged). Batches are submitted without waiting
for the previous commit, so a fast stream is never throttled by the disk;
``commit()`` (and ``append()``) waits until everything is durable.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence

import anyio
import anyio.lowlevel

from events.base import AppendRequest, BaseEventStore
from events.envelope import NewEvent, Recorded, Staged
from events.errors import EventStoreError
from events.types import Event


class WriterFailedError(EventStoreError):
    """An earlier batch of this writer failed; nothing after it was written."""


class Ticking:
    """``StreamWriter.ticking()``: a timer of the event loop, not a task. Entered for
    every streamed answer; a ticker task would cost a task group, and ending it a
    cancellation (anyio formats the cancelling task's repr on every cancel). A tick
    that has to wait hands its send to a task of its own (``StreamWriter._tick``),
    which leaving the block waits for."""

    __slots__ = ("_loop", "_timer", "_writer")

    def __init__(self, writer: StreamWriter) -> None:
        self._writer = writer
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(self._writer._max_delay, self._tick)

    async def __aexit__(self, *exc_info: object) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        sending = self._writer._tick_send
        if sending is not None:
            # Its batch is counted in the writer's seqs: it is submitted whatever comes.
            await asyncio.shield(sending)

    def _tick(self) -> None:
        if self._timer is not None and self._writer._tick():
            self._timer = self._loop.call_later(self._writer._max_delay, self._tick)
        else:
            self._timer = None


class StreamWriter:
    def __init__(
        self,
        store: BaseEventStore,
        stream_id: str,
        *,
        last_seq: int,
        max_batch: int = 512,
        max_delay: float = 0.005,
        max_in_flight: int = 8,
    ) -> None:
        self.store = store
        self.stream_id = stream_id
        self._seq = last_seq  # the seq of the last event staged
        self._staged: list[Staged] = []
        self._staged_at = 0.0
        self._in_flight: deque[AppendRequest] = deque()
        self._max_batch = max_batch
        self._max_delay = max_delay
        self._max_in_flight = max_in_flight
        self._failed: BaseException | None = None
        # fast_acquire: taking the free lock (nearly always) does not yield to the loop.
        self._sending = anyio.Lock(fast_acquire=True)
        self._due = False
        self.batches_sent = 0  # batches submitted to the store so far
        self._tick_send: asyncio.Task[None] | None = None  # a tick's send that waits

    @property
    def last_seq(self) -> int:
        """The seq the last staged event will have."""
        return self._seq

    async def stage(self, *events: Event | NewEvent) -> int:
        """Stage events; a boundary event, a full batch or an old one sends the batch on
        its way. Returns the seq of the last one. Does not wait for durability."""
        seq = self.stage_nowait(*events)
        # send_if_due(), inlined: this runs once per streamed chunk.
        if self._due:
            self._due = False
            await self._send()
        elif (
            len(self._staged) >= self._max_batch
            or time.monotonic() - self._staged_at >= self._max_delay
        ):
            await self._send()
            # A stager that never waits (chunks arriving faster than they are written)
            # would hold the loop until the writer is max_in_flight batches ahead; let the
            # committer take this batch now, so that writing overlaps with staging.
            await anyio.lowlevel.checkpoint()
        return seq

    def stage_nowait(self, *events: Event | NewEvent) -> int:
        """Stage events without yielding: the seq order is fixed here. Call
        ``send_if_due()`` after (the caller may first apply the events elsewhere)."""
        if self._failed is not None:
            self._check()
        staged = self._staged
        if not staged:
            self._staged_at = time.monotonic()
        for item in events:
            staged.append(item)
            if item.boundary:
                self._due = True
        self._seq += len(events)
        return self._seq

    async def send_if_due(self) -> None:
        if (
            self._due
            or len(self._staged) >= self._max_batch
            or (self._staged and time.monotonic() - self._staged_at >= self._max_delay)
        ):
            self._due = False
            await self._send()

    async def append(self, *events: Event | NewEvent) -> list[Recorded]:
        """Stage events and wait until they (and everything before) are durable."""
        if not events or self._staged or self._in_flight or self._sending.locked():
            await self.stage(*events)
            records = await self.commit()
            return records[-len(events) :] if events else []
        # Nothing before them is on its way (a decision between streams, the usual
        # case): they go to the store as one append, without passing through the stage.
        self._check()
        expected = self._seq
        self._seq += len(events)
        await self._submit(events, expected)
        return self._given(await self._await_oldest())

    async def commit(self) -> list[Recorded]:
        """Wait until everything staged is durable; returns the last batch's records."""
        self._check()
        await self._send()
        last: list[Recorded] = []
        while self._in_flight:
            last = await self._await_oldest()
        return self._given(last)

    def _given(self, records: list[Recorded]) -> list[Recorded]:
        """Committed records as this writer gives them out (a subclass may renumber)."""
        return records

    def ticking(self) -> Ticking:
        """``async with writer.ticking():`` sends what is staged every ``max_delay`` while
        the block runs (a stream that pauses)."""
        return Ticking(self)

    def _tick(self) -> bool:
        """The ticker's turn (a loop callback): send the staged batch if it is old, as
        the stager would. Handed to the store here if it takes it without waiting (alone
        on the loop, the usual case); else a task sends it (a gathering turn with other
        appends, room to make in flight). False once the writer has failed: no more
        ticks."""
        if self._failed is not None:
            return False
        staged = self._staged
        if (
            not staged
            or time.monotonic() - self._staged_at < self._max_delay
            or self._sending.locked()  # a sender is at it
            or self._tick_send is not None
        ):
            return True
        if not self._must_wait():
            try:
                handed = self._hand_over(staged, self._seq - len(staged))
            except Exception as exc:  # kept: the writer's next call raises
                self._failed = exc
                return False
            if handed:
                self._staged = []
                return True
        self._tick_send = asyncio.get_running_loop().create_task(self._send_for_tick())
        return True

    async def _send_for_tick(self) -> None:
        try:
            await self._send()
        except Exception as exc:  # kept: the writer's next call raises
            if self._failed is None:
                self._failed = exc
        finally:
            self._tick_send = None

    async def _send(self) -> None:
        # One sender at a time (the ticker and the stager may race), and a batch once
        # taken from the stage is always submitted: a cancellation cannot lose it.
        async with self._sending:
            # Room in flight; and once a batch was refused, nothing more is sent (its
            # error is raised here): a later batch could fit the log by chance.
            while self._staged and self._must_wait():
                await self._await_oldest()
            if not self._staged:
                return
            batch, self._staged = self._staged, []
            await self._submit(batch, self._seq - len(batch))

    def _must_wait(self) -> bool:
        """Whether a batch must wait for the oldest on its way: no room in flight, or a
        batch came back refused (not yet raised to the writer)."""
        in_flight = self._in_flight
        return len(in_flight) >= self._max_in_flight or any(
            sent.done.is_set() and sent.error is not None for sent in in_flight
        )

    def _hand_over(self, batch: Sequence[Staged], expected: int) -> bool:
        """Submit ``batch`` if the store takes it without suspending (nothing can cancel
        that, the usual case); False, with nothing done, if it must be awaited."""
        request = self.store.submit_nowait(self.stream_id, batch, expected_seq=expected)
        if request is None:
            return False
        self._in_flight.append(request)
        self.batches_sent += 1
        return True

    async def _submit(self, batch: Sequence[Staged], expected: int) -> None:
        # Once counted in _seq, always submitted: handed over at once, or under a shield.
        if self._hand_over(batch, expected):
            return
        with anyio.CancelScope(shield=True):
            waited = await self.store.submit_waiting(self.stream_id, batch, expected)
        self._in_flight.append(waited)
        self.batches_sent += 1

    async def _await_oldest(self) -> list[Recorded]:
        request = self._in_flight[0]
        try:
            records = await self.store.result(request)
        except BaseException as exc:
            if not isinstance(exc, anyio.get_cancelled_exc_class()):
                self._failed = exc
            raise
        finally:
            if self._in_flight and self._in_flight[0] is request and request.done.is_set():
                self._in_flight.popleft()
        return records

    def _check(self) -> None:
        if self._failed is not None:
            raise WriterFailedError(
                f"stream {self.stream_id!r}: an earlier append failed ({self._failed}); "
                "recover the stream before writing again"
            ) from self._failed
