"""The session's write lock: taken on every decision the session records.

anyio's ``Lock`` looks up the current task on every acquire and release and checks
for a pending cancellation (on Python 3.11 each lookup of the running loop is a
``getpid()`` system call): several microseconds per commit, twice per iteration of
the agent loop, for a lock that is nearly always free. This one is a flag while it
is free; only a contended acquire waits, first come first served, on an
``anyio.Event`` made for it.
"""

from __future__ import annotations

from collections import deque
from types import TracebackType

import anyio

__all__ = ["SessionLock"]


class _Waiter:
    __slots__ = ("event", "owner")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.owner = False  # the lock was handed to this waiter


class SessionLock:
    """``async with lock:``. Free: taken without yielding. Released with waiters: handed
    to the first one (no one can barge in between)."""

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[_Waiter] = deque()

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        if not self._held:
            self._held = True
            return
        waiter = _Waiter()
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.owner:  # handed over just as the wait was cancelled: pass it on
                self._release()
            else:
                self._waiters.remove(waiter)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release()

    def _release(self) -> None:
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.owner = True
            waiter.event.set()
        else:
            self._held = False
