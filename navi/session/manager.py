"""Session actors on demand: one per session, spawned when first needed, recovered
from the log; and the resume of unfinished runs at start-up."""

from __future__ import annotations

from typing import Any

import anyio
import structlog

from actors import ActorRef, ActorSystem, Supervision
from actors.errors import ActorNameTaken, ActorStopped
from events.types import TERMINAL_RUN_EVENTS
from navi.session import messages as m
from navi.session.actor import SessionActor, SessionDeps
from navi.session.errors import SessionNotFound

log = structlog.get_logger(__name__)

ASK_TIMEOUT = 30.0
# Streams that are not sessions carry a prefix ("memory:local", …).
NOT_A_SESSION = ":"
NOT_RESUMABLE = frozenset({"session.created", "session.deleted", "session.pinned"})


class SessionManager:
    def __init__(self, system: ActorSystem, deps: SessionDeps) -> None:
        self.system = system
        self.deps = deps
        self._spawning = anyio.Lock()

    async def ref(self, session_id: str) -> ActorRef[object]:
        existing = self.system.lookup(session_id)
        if existing is not None and not existing.is_stopped:
            return existing
        if NOT_A_SESSION in session_id or await self.deps.store.last_seq(session_id) == 0:
            raise SessionNotFound(session_id)
        return await self._spawn(session_id)

    async def _spawn(self, session_id: str) -> ActorRef[object]:
        async with self._spawning:
            existing = self.system.lookup(session_id)
            if existing is not None and not existing.is_stopped:
                return existing
            try:
                return await self.system.spawn(
                    SessionActor(session_id, self.deps),
                    session_id,
                    supervision=Supervision.restart(max_restarts=5, within=60.0),
                )
            except ActorNameTaken:
                return self.system.get(session_id)

    async def create(self, request: m.Create, session_id: str | None = None) -> str:
        session_id = session_id or self.deps.new_id()
        ref = await self._spawn(session_id)
        _answer(await ref.ask(request, timeout=ASK_TIMEOUT))
        return session_id

    async def ask(self, session_id: str, message: object, wait_s: float = ASK_TIMEOUT) -> Any:
        ref = await self.ref(session_id)
        try:
            return _answer(await ref.ask(message, timeout=wait_s))
        except ActorStopped:
            # It stopped between lookup and ask (a restart gave up): one fresh try.
            ref = await self._spawn(session_id)
            return _answer(await ref.ask(message, timeout=wait_s))

    async def resume_all(self) -> int:
        """Resume every run the log shows as unfinished; returns how many."""
        heads = await self.deps.store.stream_heads()
        resumed = 0
        for stream_id, head in heads.items():
            if NOT_A_SESSION in stream_id:
                continue
            if head.type in TERMINAL_RUN_EVENTS or head.type in NOT_RESUMABLE:
                continue
            try:
                if await self.ask(stream_id, m.Resume()):
                    resumed += 1
            except Exception as exc:
                log.error("run.resume_failed", session_id=stream_id, error=str(exc))
        if resumed:
            log.info("runs.resumed", count=resumed)
        return resumed


def _answer(reply: Any) -> Any:
    if isinstance(reply, m.Refusal):
        raise reply.error
    return reply
