"""Test helpers for the actor runtime: an inbox the test can await, and small actors."""

from __future__ import annotations

from typing import Any

import anyio

from actors import Actor


class Inbox:
    """Where test actors report what happened; ``next()`` waits (with a timeout)."""

    def __init__(self, size: int = 1000) -> None:
        self._tx, self._rx = anyio.create_memory_object_stream[Any](size)

    def put(self, item: object) -> None:
        self._tx.send_nowait(item)

    async def next(self, seconds: float = 5.0) -> Any:
        with anyio.fail_after(seconds):
            return await self._rx.receive()

    async def take(self, count: int, seconds: float = 5.0) -> list[Any]:
        return [await self.next(seconds) for _ in range(count)]

    def drain(self) -> list[Any]:
        items = []
        while True:
            try:
                items.append(self._rx.receive_nowait())
            except anyio.WouldBlock:
                return items

    def close(self) -> None:
        self._tx.close()
        self._rx.close()


class Recorder(Actor[Any]):
    """Reports every message (and its start/stop) to an inbox; replies with the message."""

    def __init__(self, box: Inbox, label: str = "") -> None:
        self.box = box
        self.label = label

    async def on_start(self) -> None:
        self.box.put(("started", self.label))

    async def on_stop(self) -> None:
        self.box.put(("stopped", self.label))

    async def receive(self, message: Any) -> Any:
        self.box.put(message)
        return message


class Gate(Actor[Any]):
    """Blocks in ``receive`` on "block" until the test opens the gate; reports the rest."""

    def __init__(self, box: Inbox) -> None:
        self.box = box
        self.gate = anyio.Event()

    async def receive(self, message: Any) -> Any:
        if message == "block":
            self.box.put("blocked")
            await self.gate.wait()
        self.box.put(message)
        return message
