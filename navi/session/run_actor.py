"""The children a session actor spawns to work on its stream while its own mailbox
stays free: a run (``RunActor``: the tool-calling loop, then the post-turn workers) and
a job at rest (``JobActor``: a re-summary). Each runs once, then stops; the session
hears of it as ``ChildStopped`` (or ``ChildFailed``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from actors import Actor
from navi.run.driver import RunDriver
from navi.run.state import RunState
from navi.run.workers import run_workers
from navi.session import messages as m

if TYPE_CHECKING:
    from navi.session.actor import SessionActor
    from navi.session.state import SessionState


class RunActor(Actor[object]):
    """A run: drives the loop to its end, runs the post-turn workers, then stops.

    Asked to stop (Navi shuts down) while the run waits for a person, or for a
    subagent (which may wait for one), it is left as a crash would leave it: the log
    says it waits, and the next start resumes the wait. Any other step is finished
    first, as before."""

    mailbox_size = 2

    def __init__(self, session: SessionActor) -> None:
        self.session = session
        self.queued = False  # waiting for a slot of the node (NAVI_MAX_LIVE_RUNS)

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
        parent's slot (waiting for one of its own could deadlock a full node)."""
        session = self.session
        limiter = session.deps.run.live_runs
        if session.parent is not None:
            yield
            return
        self.queued = True
        with session.stop_signal.scope() as wait:
            await limiter.acquire(session.session_id)
        self.queued = False
        if wait.cancelled_caught:
            yield
            return
        try:
            yield
        finally:
            limiter.release()

    async def _leave_if_waiting(self, scope: anyio.CancelScope) -> None:
        await self.stop_requested()
        # A step in hand (an LLM call, a tool) is finished first; looked at a few times a
        # second, the run is left as soon as it waits (for a person, or in line).
        while True:
            if self.queued or _waits(self.session.state):
                scope.cancel()
                return
            await anyio.sleep(LEAVE_POLL_S)


# After a stop request, how often a run that is busy looks whether it now waits.
LEAVE_POLL_S = 0.1


def _waits(state: SessionState) -> bool:
    """The run waits for a person (its own call), or for a subagent still working."""
    if state.run_state is RunState.AWAITING_APPROVAL:
        return True
    progress = state.progress
    finished = {s.call_id for s in progress.subagents_finished}
    return state.run_state is RunState.EXECUTING_TOOLS and any(
        s.call_id not in finished for s in progress.subagents
    )


class JobActor(Actor[object]):
    """Work on a session at rest (a re-summary): runs its job once, then stops."""

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
