"""Session actors on demand: one per session, spawned when first needed, recovered
from the log; and the resume of unfinished runs at start-up."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import anyio
import structlog

from actors import ActorRef, ActorSystem, Backoff, Supervision
from actors.errors import ActorNameTaken, ActorStopped
from events.types import TERMINAL_RUN_EVENTS, SessionCreated, Unreadable
from navi.session import messages as m
from navi.session.actor import SessionActor, SessionDeps
from navi.session.errors import SessionError, SessionNotFound

log = structlog.get_logger(__name__)

ASK_TIMEOUT = 30.0
# Streams that are not sessions carry a prefix ("memory:local", …).
NOT_A_SESSION = ":"
NOT_RESUMABLE = frozenset({"session.created", "session.deleted", "session.pinned"})
# A session whose actor fails (its store refuses writes: a full disk) is restarted, a
# little later each time in a row, up to every 30 s; it never gives up, as at most 5 of
# those fit in the window. Each restart recovers and continues the run the log shows.
SUPERVISION = Supervision.restart(
    max_restarts=10, within=120.0, backoff=Backoff(initial=0.5, maximum=30.0)
)


class Placement(Protocol):
    """Where a session's actor runs (navi/cluster): on this node, or on another one
    sharing the database, which then gets the request through its durable inbox."""

    def local(self, session_id: str, message: object) -> AbstractAsyncContextManager[bool]:
        """While the block runs: whether this node's actor takes ``message`` (the node
        owns the session, claiming it if nobody does, and keeps it meanwhile); if not,
        ``forward`` it."""
        ...

    async def forward(self, session_id: str, message: object, wait_s: float) -> Any:
        """Deliver a request to the node that owns the session; answer as it would."""
        ...


class SessionManager:
    def __init__(self, system: ActorSystem, deps: SessionDeps) -> None:
        self.system = system
        self.deps = deps
        # Set by navi/cluster on a shared PostgreSQL; None: every session is here.
        self.placement: Placement | None = None
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
                    supervision=SUPERVISION,
                )
            except ActorNameTaken:
                return self.system.get(session_id)

    async def create(self, request: m.Create, session_id: str | None = None) -> str:
        session_id = session_id or self.deps.new_id()
        if self.placement is not None:
            async with self.placement.local(session_id, request) as here:
                if not here:
                    raise SessionError(f"session {session_id!r} already exists on another node")
                return await self._create(request, session_id)
        return await self._create(request, session_id)

    async def _create(self, request: m.Create, session_id: str) -> str:
        ref = await self._spawn(session_id)
        _answer(await ref.ask(request, timeout=ASK_TIMEOUT))
        return session_id

    async def ask(self, session_id: str, message: object, wait_s: float = ASK_TIMEOUT) -> Any:
        if self.placement is not None:
            async with self.placement.local(session_id, message) as here:
                if not here:
                    return await self.placement.forward(session_id, message, wait_s)
                return await self._ask(session_id, message, wait_s)
        return await self._ask(session_id, message, wait_s)

    async def _ask(self, session_id: str, message: object, wait_s: float) -> Any:
        ref = await self.ref(session_id)
        try:
            reply = _answer(await ref.ask(message, timeout=wait_s))
        except ActorStopped:
            # It stopped between lookup and ask (a restart gave up): one fresh try.
            ref = await self._spawn(session_id)
            reply = _answer(await ref.ask(message, timeout=wait_s))
        return reply

    async def start(self, session_id: str) -> bool:
        """Start the session's actor on this node, if it runs here (``placement``: this
        node owns it, claiming it if nobody does): its recovery continues a run the log
        shows open. How every run resumes — at start-up, after a takeover."""
        if self.placement is None:
            await self.ref(session_id)
            return True
        async with self.placement.local(session_id, None) as here:
            if here:
                await self.ref(session_id)
            return here

    async def resume_all(self) -> int:
        """Start the actor of every session whose log shows an unfinished run (not a
        subagent's: its parent's run resumes it); returns how many."""
        heads = await self.deps.store.stream_heads()
        resumed = 0
        for stream_id, head in heads.items():
            if NOT_A_SESSION in stream_id or isinstance(head.event, Unreadable):
                continue  # not a session; or its log ends in an event no Navi can read
            if head.type in TERMINAL_RUN_EVENTS or head.type in NOT_RESUMABLE:
                continue
            try:
                first = await self.deps.store.read(stream_id, to_seq=1)
                created = first[0].event if first else None
                if isinstance(created, SessionCreated) and created.parent_call_id is not None:
                    continue
                if await self.start(stream_id):
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
