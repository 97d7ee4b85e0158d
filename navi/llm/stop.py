"""A cooperative stop for one LLM call (or one run), honoured at once.

Why not a polled flag: the wait for a first chunk can last minutes (silent prefill),
and a stop must end it within milliseconds. So ``set()`` also calls the hooks
registered with it (:meth:`StopSignal.add_hook`): a cancel scope's ``cancel`` while
someone waits inside :meth:`StopSignal.scope`, or a stream watchdog that aborts the
read it guards (:mod:`navi.llm.watchdog`). Either ends the wait immediately.

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

    __slots__ = ("_event", "_flag", "_hooks", "reason")

    def __init__(self) -> None:
        self._flag = False
        # Created lazily: anyio.Event needs a running event loop.
        self._event: anyio.Event | None = None
        self._hooks: set[Callable[[], None]] = set()
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
        for hook in tuple(self._hooks):
            hook()

    def add_hook(self, hook: Callable[[], None]) -> None:
        """Have ``set()`` call ``hook`` (once, on the event-loop thread) until it is
        removed. Not called if the signal is already set: check :meth:`is_set` first."""
        self._hooks.add(hook)

    def remove_hook(self, hook: Callable[[], None]) -> None:
        self._hooks.discard(hook)

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
        signal._hooks.add(scope.cancel)
        return scope.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._signal._hooks.discard(self._scope.cancel)
        return bool(self._scope.__exit__(exc_type, exc, tb))
