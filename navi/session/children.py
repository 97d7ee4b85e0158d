"""The child actors a session spawns for work on its stream: a run, and a job at rest
(a re-summary). Each does its work once, commits, and stops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from actors import Actor
from navi.run.driver import RunDriver
from navi.run.state import RunState
from navi.run.workers import run_workers
from navi.session import messages as m

if TYPE_CHECKING:
    from navi.session.actor import SessionActor


class RunActor(Actor[object]):
    """A run: drives the loop to its end, runs the post-turn workers, then stops."""

    mailbox_size = 2

    def __init__(self, session: SessionActor) -> None:
        self.session = session

    async def receive(self, message: object) -> None:
        if not isinstance(message, m._Drive):
            return
        session = self.session
        driver = RunDriver(session, session.deps.run, resumed=message.resumed)
        try:
            await driver.drive()
            await session.commit()
            if session.state.run_state is RunState.DONE:
                await run_workers(session, session.deps.workers)
        finally:
            self.stop("run ended")


class JobActor(Actor[object]):
    """Work on a session at rest (a re-summary): runs its job once, then stops."""

    mailbox_size = 2

    def __init__(
        self, session: SessionActor, job: Callable[[SessionActor], Awaitable[None]]
    ) -> None:
        self.session = session
        self.job = job

    async def receive(self, message: object) -> None:
        if not isinstance(message, m._Drive):
            return
        try:
            await self.job(self.session)
            await self.session.commit()
        finally:
            self.stop("job ended")
