"""A node's limit on runs that stream at once (``NAVI_MAX_LIVE_RUNS``), with a fair queue.

A run takes a slot before its first LLM call (its ``run.started`` is durable by then,
so the log shows it) and gives it back when it ends. When every slot is taken, a new
run waits in first-come order; a slot given back goes straight to the first waiter, so
no later run overtakes it. Who waits, and how many are ahead of them, can be watched
(the WebSocket's ``run_queued`` frame); the counts are on ``/health``.

A run that only waits for the model's server (``waiting_for_llm``) gives its slot back
for the wait and takes one again, in line like a new run, when it goes on (``RunSlot``).

A run's place in a long line changes with every run that starts: it is told at most once
every ``POSITION_EVERY_S`` (joining and leaving the line at once), so that a full node
with a thousand waiting sockets does not wake all of them, nor send each a frame, every
time a slot passes on (it did: O(waiters²) wake-ups, and busy clients dropped).

Own code rather than ``anyio.Semaphore``: a semaphore's waiters are FIFO too, but it
cannot say how many are ahead of a given one, nor tell anyone that the line moved.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

POSITION_EVERY_S = 1.0


@dataclass(eq=False)
class _Waiter:
    key: str
    granted: anyio.Event = field(default_factory=anyio.Event)


class RunLimiter:
    """At most ``limit`` slots taken at once (0: no limit, the slots are only counted)."""

    def __init__(self, limit: int, *, position_every_s: float = POSITION_EVERY_S) -> None:
        self.limit = limit
        self.live = 0
        self.position_every_s = position_every_s
        self._waiters: list[_Waiter] = []
        self._places: dict[str, int] | None = None  # key → place, rebuilt once per change
        self._moved: dict[str, anyio.Event] = {}  # set when that key joins or leaves the line

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def load(self) -> dict[str, int]:
        """Counts only (public on ``/health``)."""
        return {"live_runs": self.live, "queued": self.queued, "max_live_runs": self.limit}

    def ahead(self, key: str) -> int | None:
        """How many wait before ``key``'s run; None when it does not wait."""
        if self._places is None:
            self._places = {}
            for index, waiter in enumerate(self._waiters):
                self._places.setdefault(waiter.key, index)
        return self._places.get(key)

    async def acquire(self, key: str) -> None:
        """Take a slot, waiting in line for one if all are taken. Cancelled while it
        waits, it leaves the line (a slot handed to it meanwhile goes to the next)."""
        if not self._waiters and (self.limit == 0 or self.live < self.limit):
            self.live += 1  # the line did not change: no watcher is woken
            return
        waiter = _Waiter(key)
        self._waiters.append(waiter)
        self._line_changed(key)
        try:
            await waiter.granted.wait()
        except BaseException:
            if waiter.granted.is_set():
                self.release()
            else:
                self._waiters.remove(waiter)
                self._line_changed(key)
            raise

    def release(self) -> None:
        """Give a slot back: to the first waiter, or free."""
        if not self._waiters:
            self.live -= 1
            return
        waiter = self._waiters.pop(0)
        waiter.granted.set()
        self._line_changed(waiter.key)

    async def watch(self, key: str) -> AsyncIterator[int | None]:
        """``ahead(key)`` now, then each time it changes (forever: cancel to stop): at
        once when the run joins or leaves the line, its place meanwhile at most once
        every ``position_every_s``. A socket whose run does not wait is woken only when
        that run joins the line."""
        last: int | str | None = "unset"
        try:
            while True:
                now = self.ahead(key)
                if now != last:
                    last = now
                    yield now
                moved = self._moved.setdefault(key, anyio.Event())
                if now is None:
                    await moved.wait()
                else:
                    with anyio.move_on_after(self.position_every_s):
                        await moved.wait()
        finally:
            left = self._moved.get(key)
            if left is not None and not left.statistics().tasks_waiting:
                del self._moved[key]  # no other socket watches it

    def _line_changed(self, key: str) -> None:
        self._places = None
        moved = self._moved.pop(key, None)
        if moved is not None:
            moved.set()


class RunSlot:
    """One run's hold on a slot of ``limiter``: taken for the run, given back while the
    run only waits (for the model's server), taken again when it goes on. ``held``
    says whether the run has one now, so the slot is given back once and only once."""

    def __init__(self, limiter: RunLimiter, key: str) -> None:
        self.limiter = limiter
        self.key = key
        self.held = False

    async def take(self) -> None:
        """A slot, in line with every other run when all are taken."""
        if not self.held:
            await self.limiter.acquire(self.key)
            self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.limiter.release()
