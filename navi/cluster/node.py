"""``ClusterNode``: this process as one of several Navi nodes on one PostgreSQL.

It is the session manager's ``Placement``: a request for a session this node owns (or
can claim, because nobody owns it) goes to the actor here; any other goes through the
durable inbox to the owner (``Forwarder``). It also runs the owner's side of the inbox
(``InboxDelivery``) and the sweeps (``Sweeper``): takeover of a dead node's sessions,
resume of stuck runs, release of idle sessions. Those three get the inbox, the run index
and the ownership they use, and the node only as ``LocalSessions`` (navi/cluster/local.py).

A queued message (``Send(queue=True)``) always goes through the inbox, even on its
owner: the actor's queue lives in memory, the inbox row survives the node.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import asyncpg
import structlog
from anyio.abc import TaskGroup

from events.pg_writes import wait_settings
from events.postgres import PostgresEventStore
from events.store import EventStore
from navi.cluster.delivery import InboxDelivery
from navi.cluster.forward import Forwarder
from navi.cluster.inbox import Inbox, RunIndex
from navi.cluster.ownership import ClusterUnavailable, PostgresOwnership
from navi.cluster.sweep import Sweeper
from navi.session import messages as m
from navi.session.manager import ASK_TIMEOUT, SessionManager

log = structlog.get_logger(__name__)

STOP_ACTOR_S = 10.0


class ClusterNode:
    def __init__(
        self,
        store: EventStore,
        dsn: str,
        *,
        sweep_s: float = 1.0,
        idle_release_s: float = 600.0,
        accept_wait_s: float = 5.0,
        db_timeout_s: float = 10.0,
    ) -> None:
        self.store = store
        self.dsn = dsn
        self.node_id = uuid.uuid4().hex[:12]
        self.ownership = PostgresOwnership(
            dsn,
            node_id=self.node_id,
            on_lost=self._lost,
            on_notify=self._notified,
            db_timeout_s=db_timeout_s,
            fences=store if isinstance(store, PostgresEventStore) else None,
        )
        self.db_timeout_s = db_timeout_s
        self._pool: asyncpg.Pool | None = None
        self._inbox: Inbox | None = None
        self._runs: RunIndex | None = None
        self._manager: SessionManager | None = None
        self._tg: TaskGroup | None = None
        self.sweep_s = sweep_s
        self.idle_release_s = idle_release_s
        self.accept_wait_s = accept_wait_s
        # Made by open(): they work on the inbox, which needs the connection pool.
        self.forwarder: Forwarder
        self.delivery: InboxDelivery
        self.sweeper: Sweeper
        self._users: dict[str, int] = {}
        self._last_used: dict[str, float] = {}
        self._releasing: dict[str, anyio.Event] = {}

    # ---------------------------------------------------------------- lifecycle

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ClusterNode]:
        """Connect (the lock connection, a small pool) and create the inbox table."""
        pool = await asyncpg.create_pool(
            self.dsn, min_size=1, max_size=4, server_settings=wait_settings(self.db_timeout_s)
        )
        try:
            self._pool = pool
            self._inbox = inbox = Inbox(pool, node_id=self.node_id)
            self._runs = runs = RunIndex(pool)
            await inbox.create_schema()
            self.forwarder = Forwarder(inbox, runs, accept_wait_s=self.accept_wait_s)
            self.delivery = InboxDelivery(inbox, runs, self.ownership, self)
            self.sweeper = Sweeper(
                self.store,
                inbox,
                runs,
                self.ownership,
                self,
                on_claimed=self.delivery.wake,
                interval=self.sweep_s,
                idle_release_s=self.idle_release_s,
            )
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await tg.start(self.ownership.run)
                log.info("cluster.node_started", node=self.node_id)
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._tg = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await pool.close()

    def attach(self, manager: SessionManager) -> None:
        self._manager = manager
        manager.placement = self

    async def serve(self, *, background: bool = True) -> None:
        """Deliver the inbox of this node's sessions; with ``background``, sweep too."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.delivery.run)
            if background:
                tg.start_soon(self.sweeper.run)

    @property
    def inbox(self) -> Inbox:
        assert self._inbox is not None, "the cluster node is not open"
        return self._inbox

    @property
    def runs(self) -> RunIndex:
        assert self._runs is not None, "the cluster node is not open"
        return self._runs

    @property
    def manager(self) -> SessionManager:
        assert self._manager is not None, "no session manager attached"
        return self._manager

    # ---------------------------------------------------------------- Placement

    @asynccontextmanager
    async def local(self, session_id: str, message: object) -> AsyncIterator[bool]:
        if isinstance(message, m.Send) and message.queue and message.run_id is None:
            # Durable first: through the inbox (claimed if nobody owns the session, so
            # that this node delivers it at once).
            async with self.holding(session_id, claim=True):
                yield False
            return
        async with self.holding(session_id, claim=True) as here:
            yield here

    async def forward(self, session_id: str, message: object, wait_s: float) -> Any:
        result = await self.forwarder.forward(session_id, message, wait_s)
        if isinstance(message, m.Send) and session_id in self.ownership.held:
            self.delivery.wake()
        return result

    @asynccontextmanager
    async def holding(self, session_id: str, *, claim: bool = False) -> AsyncIterator[bool]:
        """Whether this node owns the session (claiming it first with ``claim``); while
        the block runs, the session is not released as idle."""
        while (releasing := self._releasing.get(session_id)) is not None:
            await releasing.wait()
        if session_id not in self.ownership.held and (
            not claim or not await self.ownership.claim([session_id])
        ):
            yield False
            return
        self._users[session_id] = self._users.get(session_id, 0) + 1
        try:
            yield True
        finally:
            self._users[session_id] -= 1
            if not self._users[session_id]:
                del self._users[session_id]
            self._last_used[session_id] = time.monotonic()

    async def ask_here(
        self, session_id: str, message: object, *, wait_s: float = ASK_TIMEOUT
    ) -> Any:
        """Ask this node's actor of a session it owns."""
        async with self.holding(session_id) as here:
            if not here:
                raise ClusterUnavailable(f"session {session_id!r} is no longer on this node")
            return await self.manager.ask(session_id, message, wait_s)

    async def start_here(self, session_id: str) -> bool:
        async with self.holding(session_id) as here:
            if not here:
                raise ClusterUnavailable(f"session {session_id!r} is no longer on this node")
            running = self.manager.system.lookup(session_id)
            if running is not None and not running.is_stopped:
                return False
            await self.manager.ref(session_id)
            return True

    # ---------------------------------------------------------------- ownership

    def idle_for(self, session_id: str, now: float) -> float:
        if session_id in self._users:
            return 0.0
        return now - self._last_used.setdefault(session_id, now)

    async def release(self, session_id: str) -> None:
        """Let go of an idle session: stop its actor here, then release its lock."""
        if session_id in self._releasing or session_id in self._users:
            return
        done = self._releasing[session_id] = anyio.Event()
        try:
            ref = self.manager.system.lookup(session_id)
            if ref is not None:
                with anyio.move_on_after(STOP_ACTOR_S) as scope:
                    await ref.stop("idle: released to the cluster")
                if scope.cancelled_caught:
                    log.warning("cluster.release_slow", session_id=session_id)
                    return  # keep it: the next request finds it here
            await self.ownership.release(session_id)
            self._last_used.pop(session_id, None)
            log.debug("cluster.released", session_id=session_id)
        finally:
            del self._releasing[session_id]
            done.set()

    async def _lost(self, session_ids: set[str]) -> None:
        """Another node owns these now (this one's connection was down too long): stop
        their actors here, without waiting for them."""
        log.error("cluster.sessions_lost", node=self.node_id, sessions=sorted(session_ids))
        if self._manager is None or self._tg is None:
            return
        for session_id in session_ids:
            ref = self._manager.system.lookup(session_id)
            if ref is not None:
                self._tg.start_soon(ref.stop, "ownership lost to another node")

    # ---------------------------------------------------------------- notifications

    def _notified(self, payload: str) -> None:
        kind, _, rest = payload.partition(":")
        if kind == "new" and rest in self.ownership.held:
            self.delivery.wake()
        elif kind == "done":
            self.forwarder.row_done(rest)
