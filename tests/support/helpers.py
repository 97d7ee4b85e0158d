"""The small helpers many test files need, kept once here.

- :func:`free_port`: a TCP port on 127.0.0.1 nobody listens on (for a server a test
  starts; under pytest-xdist every worker asks the kernel, so workers never share one).
- :func:`drain`: everything an async iterator yields (an LLM stream's chunks).
- :func:`wait_until`: until a condition holds, checked every few milliseconds, within a
  limit (for state that announces nothing: a process, a file, another thread's object).
- :func:`wait_for_events`: until a session's log holds ``count`` events of a type, woken
  by the store's own notification of each commit (no polling).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, TypeVar

import anyio

from events.base import BaseEventStore
from events.envelope import Recorded

__all__ = ["drain", "free_port", "wait_for_events", "wait_until"]

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def drain(stream: AsyncIterator[T]) -> list[T]:
    return [item async for item in stream]


async def wait_until(
    condition: Callable[[], Any], *, limit_s: float = 30.0, every_s: float = 0.02
) -> None:
    """Return once ``condition()`` is true; fail (``TimeoutError``) after ``limit_s``."""
    with anyio.fail_after(limit_s):
        while not condition():
            await anyio.sleep(every_s)


async def wait_for_events(
    store: BaseEventStore, session_id: str, kind: str, count: int = 1, *, limit_s: float = 20.0
) -> list[Recorded]:
    """The session's records once its log holds ``count`` events of type ``kind`` (e.g.
    ``"run.completed"``); fails (``TimeoutError``) after ``limit_s``."""
    seen = 0
    with anyio.fail_after(limit_s):
        async with aclosing(store.subscribe(session_id)) as stream:
            async for record in stream:
                seen += record.type == kind
                if seen >= count:
                    return await store.read(session_id)
    raise AssertionError(f"the log of {session_id} ended before {count} {kind} events")
