"""A bounded two-lane mailbox.

The normal lane holds ordinary messages in arrival order. The priority lane is small
and read first, so a message such as "stop this run" overtakes a backlog. A priority
``Stop`` is not queued at all: it sets a flag that the reader checks before anything
else, so stopping an actor never waits for room in its mailbox.

Both lanes are bounded anyio memory object streams: ``put`` waits for room (back
pressure), ``put_nowait`` raises ``MailboxFull``. Only the actor's own task reads.
"""

from __future__ import annotations

from typing import Any

import anyio

from actors.errors import ActorStopped, MailboxFull
from actors.messages import Stop


class Mailbox:
    def __init__(self, path: str, capacity: int, priority_capacity: int) -> None:
        if capacity < 1 or priority_capacity < 1:
            raise ValueError(
                f"actor {path!r}: mailbox capacities must be at least 1 "
                f"(got {capacity} and {priority_capacity})"
            )
        self.path = path
        self.capacity = capacity
        self.priority_capacity = priority_capacity
        self._normal_tx, self._normal_rx = anyio.create_memory_object_stream[Any](capacity)
        self._priority_tx, self._priority_rx = anyio.create_memory_object_stream[Any](
            priority_capacity
        )
        # Replaced (never reset) each time the reader is about to wait.
        self._arrived = anyio.Event()
        self.stop_requested = anyio.Event()
        self.stop_reason = ""
        self.closed = False

    # ---------------------------------------------------------------- senders

    async def put(self, message: object, *, priority: bool = False) -> None:
        if priority and isinstance(message, Stop):
            self.request_stop(message.reason)
            return
        if self.closed:
            raise ActorStopped(self.path)
        lane = self._priority_tx if priority else self._normal_tx
        try:
            await lane.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ActorStopped(self.path) from None
        self._arrived.set()

    def put_nowait(self, message: object, *, priority: bool = False) -> None:
        if priority and isinstance(message, Stop):
            self.request_stop(message.reason)
            return
        if self.closed:
            raise ActorStopped(self.path)
        lane = self._priority_tx if priority else self._normal_tx
        try:
            lane.send_nowait(message)
        except anyio.WouldBlock:
            capacity = self.priority_capacity if priority else self.capacity
            raise MailboxFull(self.path, capacity, priority=priority) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ActorStopped(self.path) from None
        self._arrived.set()

    def request_stop(self, reason: str = "") -> None:
        """Stop next: checked before any queued message. Idempotent; never blocks."""
        if self.closed or self.stop_requested.is_set():
            return
        self.stop_reason = reason
        self.stop_requested.set()
        self._arrived.set()

    # ---------------------------------------------------------------- the reader

    def get_nowait(self) -> object:
        """The next message: a priority stop, then the priority lane, then the normal
        lane. Raises ``anyio.WouldBlock`` when there is none."""
        if self.stop_requested.is_set():
            return Stop(self.stop_reason)
        try:
            message = self._priority_rx.receive_nowait()
        except anyio.WouldBlock:
            pass
        else:
            return message
        return self._normal_rx.receive_nowait()

    async def get(self) -> object:
        while True:
            try:
                return self.get_nowait()
            except anyio.WouldBlock:
                pass
            # No await between the empty check and the new event: no put is missed.
            self._arrived = anyio.Event()
            await self._arrived.wait()

    def close(self) -> list[object]:
        """Refuse new messages, wake blocked senders (they get ``ActorStopped``) and
        return what was still queued (the dead letters). Idempotent."""
        if self.closed:
            return []
        self.closed = True
        left: list[object] = []
        for rx in (self._priority_rx, self._normal_rx):
            while True:
                try:
                    left.append(rx.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
        for stream in (self._priority_rx, self._normal_rx, self._priority_tx, self._normal_tx):
            stream.close()
        return left

    def __len__(self) -> int:
        normal = self._normal_rx.statistics()
        priority = self._priority_rx.statistics()
        return (
            normal.current_buffer_used
            + normal.tasks_waiting_send
            + priority.current_buffer_used
            + priority.tasks_waiting_send
        )
