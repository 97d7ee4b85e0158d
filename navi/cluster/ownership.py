"""Which node runs a session's actor: one PostgreSQL advisory lock per session, all held
on one connection of the node, as a lease, with a fencing epoch.

PostgreSQL releases a session-level advisory lock the moment the connection holding it
ends, so a node that dies (SIGKILL, power loss, a network cut that TCP keepalive
notices) lets go of its sessions at once and another node's sweep takes them over.

*The lease.* The connection has ``idle_session_timeout`` set to the node's database
bound (NAVI_DB_TIMEOUT_S) and the node asks ``SELECT 1`` every ``check_s``: a node that
hangs with its sockets open (SIGSTOP, a stuck event loop, a paused VM) stops asking, the
server ends its connection after the bound, and its sessions are free to take.

*The fence.* Each claim moves the session's epoch on (``navi_owners``, in a transaction
holding the session's stream write lock, so it falls between two write transactions)
and tells this node's store (``Fences``), which then writes the session only while that
epoch is current (``events.pg_writes``): a node that woke after its sessions were taken
over has its late appends refused (``FencedError``) before any effect that waits for
them (a tool call is recorded before it runs). ``UNIQUE(stream_id, seq)`` stays the
last line of defence.

A node whose connection breaks while it lives (a database restart) reconnects and takes
its locks (and new epochs) again; the sessions it cannot get back (another node was
faster) are given up (``on_lost``), their actors here are stopped, and their fences
stay: anything still queued for them is refused.

The same connection LISTENs on the inbox channel (``on_notify``): a node hears about a
forwarded message on the connection that says it owns the session.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import anyio
import asyncpg
import structlog
from anyio.abc import TaskStatus

from events.pg_writes import (
    LOCK_STREAMS,
    NEXT_EPOCHS,
    OWNERS_TABLE,
    SCHEMA_LOCK_KEY,
    stream_lock_key,
    wait_settings,
)
from events.postgres import is_disconnect
from navi.session.errors import SessionError

log = structlog.get_logger(__name__)

INBOX_CHANNEL = "navi_inbox"
# Server-side TCP keepalive on the lock connection: PostgreSQL notices a node that
# vanished without closing its socket (a network cut) within about 11 seconds.
KEEPALIVE = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
}

LostHandler = Callable[[set[str]], Awaitable[None]]
NotifyHandler = Callable[[str], None]


class Fences(Protocol):
    """Where the epochs this node was given go: its event store, which writes a
    session only while its epoch is current (events/pg_writes.py, "Fencing")."""

    def fence(self, stream_id: str, epoch: int) -> None: ...

    def unfence(self, stream_id: str) -> None: ...


class NoFences:
    def fence(self, stream_id: str, epoch: int) -> None:
        pass

    def unfence(self, stream_id: str) -> None:
        pass


class ClusterUnavailable(SessionError):
    status = 503


def lock_key(session_id: str) -> int:
    """The advisory lock key of a session: 64 bits of a keyed hash of its id, the same
    on every node (Python's ``hash`` is salted per process)."""
    digest = hashlib.blake2b(session_id.encode(), digest_size=8, person=b"navi-own").digest()
    return int.from_bytes(digest, "big", signed=True)


def _lock_ids(key: int) -> tuple[int, int]:
    """How ``pg_locks`` shows a bigint advisory key: (classid, objid), high and low half."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


class PostgresOwnership:
    def __init__(
        self,
        dsn: str,
        *,
        node_id: str,
        on_lost: LostHandler,
        on_notify: NotifyHandler,
        check_s: float = 1.0,
        db_timeout_s: float = 10.0,
        fences: Fences | None = None,
    ) -> None:
        self.dsn = dsn
        self.node_id = node_id
        self.held: set[str] = set()
        self.connected = False
        self.reconnects = 0
        self._on_lost = on_lost
        self._on_notify = on_notify
        self._check_s = check_s
        self._db_timeout_s = db_timeout_s
        self._fences = fences or NoFences()
        self._conn: asyncpg.Connection | None = None
        self._use = anyio.Lock()  # one query at a time on the connection

    # ---------------------------------------------------------------- the connection

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the connection (and with it the locks) until cancelled; reconnect when
        it breaks. Started once the first connection is up."""
        started = False
        delay = 0.1
        try:
            while True:
                try:
                    await self._connect()
                except Exception as exc:
                    if not started or not is_disconnect(exc):
                        raise
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                delay = 0.1
                if not started:
                    started = True
                    task_status.started()
                else:
                    await self._take_back()
                await self._until_broken()
                await self._disconnect()
        finally:
            with anyio.CancelScope(shield=True):
                await self._disconnect()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(
            self.dsn,
            timeout=10,
            server_settings={
                **KEEPALIVE,
                **wait_settings(self._db_timeout_s),
                # The lease: a node that stops asking (it froze) is disconnected after
                # this long, and its locks go with the connection.
                "idle_session_timeout": wait_settings(self._db_timeout_s)["lock_timeout"],
                "application_name": f"navi-node-{self.node_id}",
            },
        )
        try:
            async with conn.transaction():  # the epochs' table, if no store made it yet
                await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK_KEY)
                await conn.execute(OWNERS_TABLE)
            await conn.add_listener(INBOX_CHANNEL, self._notified)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await conn.close()
            raise
        self._conn = conn
        self.connected = True

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        self.connected = False
        if conn is not None:
            with anyio.move_on_after(2):
                await conn.close()
            if not conn.is_closed():
                conn.terminate()

    async def _until_broken(self) -> None:
        while True:
            await anyio.sleep(self._check_s)
            try:
                with anyio.fail_after(max(5.0, self._check_s * 3)):
                    await self._fetch("SELECT 1")
            except Exception as exc:
                if not is_disconnect(exc):
                    raise
                log.warning("cluster.connection_lost", node=self.node_id, error=str(exc))
                return

    async def _take_back(self) -> None:
        """After a reconnect: take the locks of our sessions again; give up the others."""
        wanted = set(self.held)
        got = await self._try_lock(wanted)
        lost = wanted - got
        self.held -= lost  # their fences stay: this node's late writes are refused
        self.reconnects += 1  # counted once the locks are back (or given up)
        log.warning("cluster.reconnected", node=self.node_id, kept=len(got), lost=len(lost))
        if lost:
            await self._on_lost(lost)

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self._on_notify(payload)

    async def _fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        async with self._use:
            conn = self._conn
            if conn is None:
                raise ClusterUnavailable(
                    "the database is unreachable (this node is reconnecting); try again"
                )
            rows: list[asyncpg.Record] = await conn.fetch(query, *args)
            return rows

    # ---------------------------------------------------------------- locks

    async def _try_lock(self, session_ids: set[str]) -> set[str]:
        """Take the locks of those sessions nobody holds, and a new epoch for each."""
        if not session_ids:
            return set()
        by_key = {lock_key(s): s for s in session_ids}
        rows = await self._fetch(
            "SELECT k FROM unnest($1::bigint[]) AS k WHERE pg_try_advisory_lock(k)",
            list(by_key),
        )
        got = {by_key[row[0]] for row in rows}
        try:
            await self._next_epochs(got)
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                keys = [lock_key(s) for s in got]
                await self._fetch(
                    "SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS k", keys
                )
            raise
        return got

    async def _next_epochs(self, session_ids: set[str]) -> None:
        """Each session's epoch grows by one, between two of its write transactions
        (under its streams' write locks), and this node's store is told."""
        if not session_ids:
            return
        keys = sorted({stream_lock_key(s) for s in session_ids})
        async with self._use:
            conn = self._conn
            if conn is None:
                raise ClusterUnavailable("the database is unreachable; try again")
            async with conn.transaction():
                await conn.execute(LOCK_STREAMS, keys)
                rows = await conn.fetch(NEXT_EPOCHS, sorted(session_ids))
        for session_id, epoch in rows:
            self._fences.fence(session_id, epoch)

    async def claim(self, session_ids: Iterable[str]) -> set[str]:
        """Take the sessions nobody owns; returns those this node owns now (with the
        ones it owned already)."""
        wanted = set(session_ids)
        new = wanted - self.held
        if new:
            started = time.monotonic()
            got = await self._try_lock(new)
            self.held |= got
            if got:
                log.debug(
                    "cluster.claimed", count=len(got), ms=round((time.monotonic() - started) * 1e3)
                )
        return wanted & self.held

    async def release(self, session_id: str) -> None:
        if session_id not in self.held:
            return
        self.held.discard(session_id)
        self._fences.unfence(session_id)
        await self._fetch("SELECT pg_advisory_unlock($1)", lock_key(session_id))

    async def locked(self, session_ids: Iterable[str]) -> set[str]:
        """Which of these sessions some node (this one included) owns right now."""
        ids = set(session_ids)
        if not ids:
            return set()
        by_lock = {_lock_ids(lock_key(s)): s for s in ids}
        rows = await self._fetch(
            "SELECT classid::bigint, objid::bigint FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        return {by_lock[(c, o)] for c, o in rows if (c, o) in by_lock}
