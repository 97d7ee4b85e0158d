"""A cooperative stop for one LLM call (or one run), honoured at once.

Why not a polled flag: the wait for a first chunk can last minutes (silent prefill),
and a stop must end it within milliseconds. So ``set()`` also cancels every cancel
scope open in :meth:`StopSignal.scope` (the stream guard waits for each read inside
one), which ends the wait immediately.

``set()`` must be called from the event-loop thread (like everything anyio). Worker
threads may read :meth:`is_set` at any time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import TracebackType

import anyio

__all__ = ["StopScope", "StopSignal"]


class StopSignal:
    """Set once, never cleared. Create one per run; pass it to ``stream_complete``."""

    __slots__ = ("_cancels", "_event", "_flag", "reason")

    def __init__(self) -> None:
        self._flag = False
        # Created lazily: anyio.Event needs a running event loop.
        self._event: anyio.Event | None = None
        # The ``cancel`` of each scope open in :meth:`scope`.
        self._cancels: set[Callable[[], None]] = set()
        self.reason = ""

    def is_set(self) -> bool:
        return self._flag

    def set(self, reason: str = "user") -> None:
        if self._flag:
            return
        self._flag = True
        self.reason = reason
        if self._event is not None:
            self._event.set()
        for cancel in tuple(self._cancels):
            cancel()

    async def wait(self) -> None:
        if self._flag:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    def scope(self, deadline: float = math.inf) -> StopScope:
        """A cancel scope that ``set()`` cancels (and that also ends at ``deadline``).

        After the block, ``scope.cancelled_caught`` tells that it was cut short; the
        caller checks :meth:`is_set` to tell a stop from a deadline.
        """
        return StopScope(self, deadline)


class StopScope:
    """``StopSignal.scope``: a class rather than a generator-based context manager,
    entered once per network read of a stream (half the cost)."""

    __slots__ = ("_scope", "_signal")

    def __init__(self, signal: StopSignal, deadline: float) -> None:
        self._signal = signal
        self._scope = anyio.CancelScope(deadline=deadline)

    def __enter__(self) -> anyio.CancelScope:
        scope = self._scope
        signal = self._signal
        if signal._flag:
            scope.cancel()
        signal._cancels.add(scope.cancel)
        return scope.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._signal._cancels.discard(self._scope.cancel)
        return bool(self._scope.__exit__(exc_type, exc, tb))
