"""How many sandboxed calls run at once: at most ``NAVI_MAX_SANDBOXES`` in this server,
at most ``NAVI_USER_MAX_SANDBOXES`` of one user.

A call beyond a bound waits for a slot, and the wait is part of its time limit: it ends
when a slot frees, when the run is stopped (Stop cancels the call's scope), or when the
call's time is up, and then the call fails saying which bound held it and how many
calls ran. One user's waiting calls hold no slot, so they never keep another user's
call out. With every slot taken, the memory of all sandboxes together is at most the
bound times the per-call limit (where a cgroup cannot cap it as a whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import structlog

from tools.base import ToolError

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class SlotBounds:
    total: int
    per_user: int


class SandboxSlots:
    """The slots of one process (one server): counts per user and in all, and the calls
    waiting for them. Plain counters and an event per waiting call: nothing tied to an
    event loop outlives a wait."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self._waiting: list[anyio.Event] = []

    @property
    def total(self) -> int:
        return sum(self.running.values())

    def _free_for(self, user: str, bounds: SlotBounds) -> bool:
        return self.total < bounds.total and self.running[user] < bounds.per_user

    def _busy(self, user: str, bounds: SlotBounds) -> str:
        if self.running[user] >= bounds.per_user:
            return (
                f"{self.running[user]} sandboxed calls of this user are running "
                f"(NAVI_USER_MAX_SANDBOXES={bounds.per_user})"
            )
        return (
            f"{self.total} sandboxed calls are running on this server "
            f"(NAVI_MAX_SANDBOXES={bounds.total})"
        )

    @contextlib.asynccontextmanager
    async def slot(self, user: str, bounds: SlotBounds, wait_s: float) -> AsyncIterator[float]:
        """Hold a slot for ``user`` for the block; yields the seconds spent waiting.

        Raises :class:`ToolError` when none frees within ``wait_s``."""
        started = anyio.current_time()
        if not self._free_for(user, bounds):
            log.info("tools.sandbox_wait", user=user, busy=self._busy(user, bounds))
        with anyio.move_on_after(wait_s):
            while not self._free_for(user, bounds):
                event = anyio.Event()
                self._waiting.append(event)
                try:
                    await event.wait()
                finally:
                    self._waiting.remove(event)
        if not self._free_for(user, bounds):
            raise ToolError(
                f"no sandbox was free within {wait_s:g}s: {self._busy(user, bounds)}; "
                "try again when they are done"
            )
        self.running[user] += 1
        try:
            yield anyio.current_time() - started
        finally:
            self.running[user] -= 1
            if not self.running[user]:
                del self.running[user]
            for waiting in self._waiting:  # each looks again; one may get the slot
                waiting.set()


_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SandboxSlots] = (
    weakref.WeakKeyDictionary()
)


def server_slots() -> SandboxSlots:
    """The slots of the server running on this event loop (a server is one loop; tests
    that run several servers in one process run each on its own loop in a thread)."""
    loop = asyncio.get_running_loop()
    slots = _SLOTS.get(loop)
    if slots is None:
        slots = _SLOTS[loop] = SandboxSlots()
    return slots
