"""The children a session actor spawns to work on its stream while its own mailbox
stays free: a run (``RunActor``: the tool-calling loop, then the post-turn workers) and
a job at rest (``JobActor``: a recompression). Each runs once, then stops; the session
hears of it as ``ChildStopped`` (or ``ChildFailed``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

import anyio

from actors import Actor
from navi.run.driver import RunDriver
from navi.run.limiter import RunSlot
from navi.run.state import RunState
from navi.run.workers import run_workers
from navi.session import messages as m

if TYPE_CHECKING:
    from navi.session.actor import SessionActor


class RunActor(Actor[object]):
    """A run: drives the loop to its end, runs the post-turn workers, then stops.

    Asked to stop (Navi shuts down) while the run waits for a person, or for a
    subagent (which may wait for one), it is left as a crash would leave it: the log
    says it waits, and the next start resumes the wait. Any other step is finished
    first, as before."""

    mailbox_size = 2

    def __init__(self, session: SessionActor) -> None:
        self.session = session

    async def receive(self, message: object) -> None:
        if not isinstance(message, m.Drive):
            return
        session = self.session
        driver = RunDriver(session, session.deps.run, resumed=message.resumed)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._leave_if_waiting, tg.cancel_scope)
                async with self._slot():
                    await driver.drive()
                    await session.commit()
                    if session.state.run_state is RunState.DONE:
                        await run_workers(session, session.deps.workers)
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The watcher never fails: the run's own error, as the session should see it.
            raise group.exceptions[0] if len(group.exceptions) == 1 else group from None
        finally:
            self.stop("run ended")

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """One of the node's slots for the run's life (navi/run/limiter.py), waited for in
        line when all are taken. A stop while it waits ends the wait: the driver then
        records the run as stopped, without an LLM call. A subagent runs within its
        parent's slot (waiting for one of its own could deadlock a full node). A run
        resumed while it waits for the model's server takes none yet: it takes one when
        the server is back (``slot_given_back``)."""
        session = self.session
        if session.parent is not None:
            yield
            return
        session.slot = slot = RunSlot(session.deps.run.live_runs, session.session_id)
        try:
            if session.state.run_state is not RunState.WAITING_FOR_LLM:
                await take_slot(session, slot)
            yield
        finally:
            slot.give_back()
            session.slot = None

    async def _leave_if_waiting(self, scope: anyio.CancelScope) -> None:
        await self.stop_requested()
        # A step in hand (an LLM call, a tool) is finished first; the run is left as
        # soon as it waits (for a person, a subagent, or in line).
        await self.session.waits.until_waiting()
        scope.cancel()


async def take_slot(session: SessionActor, slot: RunSlot) -> None:
    """Take ``slot``, in line; a stop (or Navi shutting down) ends the wait."""
    with session.waits.waiting(), session.stop_signal.scope():
        await slot.take()


@asynccontextmanager
async def slot_given_back(session: SessionActor) -> AsyncIterator[None]:
    """While the run only waits for the model's server, another run may stream in its
    slot; it takes one again, in line like a new run, when it goes on (not when a stop
    ended the wait, nor when the wait failed)."""
    slot = session.slot
    if slot is None:  # a subagent: its parent's slot
        yield
        return
    slot.give_back()
    yield
    if not session.stop_signal.is_set():
        await take_slot(session, slot)


class Waits:
    """Where a run waits on someone else: a person's decision, a slot of the node, a
    subagent's work. Each wait is marked while it lasts, so that a run asked to leave
    (Navi shuts down) leaves the moment it waits, woken by the mark."""

    def __init__(self) -> None:
        self._count = 0
        self._entered: anyio.Event | None = None

    @contextmanager
    def waiting(self) -> Iterator[None]:
        self._count += 1
        if self._entered is not None:
            self._entered.set()
        try:
            yield
        finally:
            self._count -= 1

    async def until_waiting(self) -> None:
        while self._count == 0:
            self._entered = entered = anyio.Event()
            await entered.wait()


class JobActor(Actor[object]):
    """Work on a session at rest (a recompression): runs its job once, then stops."""

    mailbox_size = 2

    def __init__(self, session: SessionActor, job: Callable[[SessionActor], Awaitable[None]]):
        self.session = session
        self.job = job

    async def receive(self, message: object) -> None:
        if not isinstance(message, m.Drive):
            return
        try:
            await self.job(self.session)
            await self.session.commit()
        finally:
            self.stop("job ended")
