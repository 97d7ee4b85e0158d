"""The single writer of one stream: stages events and group-commits them.

Streamed chunks are staged and committed together: a batch goes to the store when a
boundary event arrives (every non-chunk event is one), when it holds ``max_batch``
events, or ``max_delay`` seconds after its first event. Batches are submitted without
waiting for the previous commit, so a fast stream is never throttled by the disk;
``commit()`` (and ``append()`` of a boundary event) waits until all is durable.
"""

from __future__ import annotations

import contextlib
from collections import deque

import anyio
from anyio.abc import TaskGroup

from events.base import AppendRequest, BaseEventStore
from events.envelope import NewEvent, Recorded, as_new
from events.errors import EventStoreError
from events.types import Event


class WriterFailedError(EventStoreError):
    """An earlier batch of this writer failed; nothing after it was written."""


class StreamWriter:
    def __init__(
        self,
        store: BaseEventStore,
        stream_id: str,
        *,
        last_seq: int,
        task_group: TaskGroup,
        max_batch: int = 512,
        max_delay: float = 0.005,
        max_in_flight: int = 8,
    ) -> None:
        self.store = store
        self.stream_id = stream_id
        self._seq = last_seq  # the seq of the last event staged
        self._staged: list[NewEvent] = []
        self._in_flight: deque[AppendRequest] = deque()
        self._tg = task_group
        self._max_batch = max_batch
        self._max_delay = max_delay
        self._max_in_flight = max_in_flight
        self._timer: anyio.CancelScope | None = None
        self._failed: BaseException | None = None

    @property
    def last_seq(self) -> int:
        """The seq the last staged event will have."""
        return self._seq

    async def stage(self, *events: Event | NewEvent) -> int:
        """Stage events; a boundary event or a full batch sends the batch on its way.
        Returns the seq of the last one. Does not wait for durability."""
        self._check()
        boundary = False
        for item in events:
            new = as_new(item)
            self._staged.append(new)
            boundary = boundary or type(new.event).boundary
        self._seq += len(events)
        if boundary or len(self._staged) >= self._max_batch:
            await self._send()
        elif self._timer is None and self._staged:
            self._timer = anyio.CancelScope()
            self._tg.start_soon(self._flush_later, self._timer)
        return self._seq

    async def append(self, *events: Event | NewEvent) -> list[Recorded]:
        """Stage events and wait until they (and everything before) are durable."""
        await self.stage(*events)
        return (await self.commit())[-len(events) :] if events else []

    async def commit(self) -> list[Recorded]:
        """Wait until everything staged is durable; returns the last batch's records."""
        self._check()
        await self._send()
        last: list[Recorded] = []
        while self._in_flight:
            request = self._in_flight[0]
            try:
                last = await self.store.result(request)
            except BaseException as exc:
                self._failed = exc
                raise
            finally:
                if self._in_flight and self._in_flight[0] is request:
                    self._in_flight.popleft()
        return last

    async def _send(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._staged:
            return
        batch, self._staged = self._staged, []
        expected = self._seq - len(batch)
        while len(self._in_flight) >= self._max_in_flight:
            await self._await_oldest()
        self._in_flight.append(
            await self.store.submit(self.stream_id, batch, expected_seq=expected)
        )

    async def _await_oldest(self) -> None:
        request = self._in_flight.popleft()
        try:
            await self.store.result(request)
        except BaseException as exc:
            self._failed = exc
            raise

    async def _flush_later(self, scope: anyio.CancelScope) -> None:
        with scope:
            await anyio.sleep(self._max_delay)
            if self._timer is scope:
                self._timer = None
                # A failure is kept in self._failed; the writer's next call raises it.
                with contextlib.suppress(Exception):
                    await self._send()

    def _check(self) -> None:
        if self._failed is not None:
            raise WriterFailedError(
                f"stream {self.stream_id!r}: an earlier append failed ({self._failed}); "
                "recover the stream before writing again"
            ) from self._failed
