"""The ``/v1`` ledger in PostgreSQL: the ``Ledger`` of ledger.py, shared by every node
of a cluster, so that a retry a balancer sends to another node follows the run the
first attempt started there (docs/api.md, "Retries"; docs/deployment.md).

One row per (user, name) in ``navi_v1_requests``: the request's fingerprint, the run
(session, run id, the seq before it) once started, how many requests followed it, and
when the row expires. The first request inserts the row (the primary key makes one
winner among equal requests on any node), starts the run and writes it in; an equal
request meanwhile waits for that (``START_WAIT_S``), then follows the same run. A
start that fails deletes its row; a node that dies while starting leaves a row that
expires ``START_WAIT_S`` later. Times are the database's (``now()``), never a node's.

Expiry: ``keep_s`` after the last request that followed the run left; while one
follows, ``FOLLOW_KEEP_S`` (a request a node lost while following cannot keep its row
for ever).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import structlog

from events.store import EventStore
from navi.server.openai.errors import OpenAIError
from navi.server.openai.ledger import Entry, Ledger, RunLedger, Start, key_reused
from navi.session import messages as m

log = structlog.get_logger(__name__)

START_WAIT_S = 30.0  # an equal request waits this long for the first one's run
FOLLOW_KEEP_S = 3600.0
PRUNE_EVERY_S = 60.0
POLL_S = 0.05
# Guards the schema creation against two nodes starting at once (navi/cluster/inbox.py's
# key + 2).
SCHEMA_LOCK_KEY = 0x6E617669_0000_0003

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS navi_v1_requests (
        user_id text NOT NULL,
        name text NOT NULL,
        fingerprint text NOT NULL,
        session_id text,
        run_id text,
        after_seq bigint,
        queued boolean NOT NULL DEFAULT false,
        follows bigint NOT NULL DEFAULT 0,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, name)
    )""",
    "CREATE INDEX IF NOT EXISTS navi_v1_requests_expiry ON navi_v1_requests (expires_at)",
)

_CLAIM = (
    "INSERT INTO navi_v1_requests (user_id, name, fingerprint, expires_at) "
    "VALUES ($1, $2, $3, now() + make_interval(secs => $4)) "
    "ON CONFLICT (user_id, name) DO NOTHING RETURNING 1"
)
_DROP_EXPIRED = (
    "DELETE FROM navi_v1_requests WHERE user_id = $1 AND name = $2 AND expires_at < now()"
)
_FIND = (
    "SELECT fingerprint, session_id, run_id, after_seq, queued "
    "FROM navi_v1_requests WHERE user_id = $1 AND name = $2"
)
# A request follows the run: counted, and kept while it follows.
_FOLLOW = (
    "UPDATE navi_v1_requests SET follows = follows + 1, "
    "expires_at = now() + make_interval(secs => $3) "
    "WHERE user_id = $1 AND name = $2 AND session_id IS NOT NULL RETURNING follows"
)
_STARTED = (
    "UPDATE navi_v1_requests SET session_id = $3, run_id = $4, after_seq = $5, queued = $6, "
    "follows = 1, expires_at = now() + make_interval(secs => $7) "
    "WHERE user_id = $1 AND name = $2 RETURNING follows"
)
_OF_RUN = "user_id = $1 AND name = $2 AND run_id = $3"


class PostgresRunLedger:
    """The ``Ledger`` in ``navi_v1_requests`` (open it with ``open``)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._pruned = 0.0

    @classmethod
    @asynccontextmanager
    async def open(
        cls, dsn: str, *, server_settings: dict[str, str] | None = None
    ) -> AsyncIterator[PostgresRunLedger]:
        """A small pool of its own (two connections at most), the table made if missing."""
        pool = await asyncpg.create_pool(
            dsn, min_size=0, max_size=2, server_settings=server_settings
        )
        try:
            ledger = cls(pool)
            await ledger.create_schema()
            yield ledger
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await pool.close()

    async def create_schema(self) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK_KEY)
            for statement in SCHEMA:
                await conn.execute(statement)

    async def start_or_follow(
        self, user_id: str, name: str, fingerprint: str, keep_s: float, start: Start
    ) -> tuple[Entry, bool]:
        await self._prune()
        deadline = time.monotonic() + START_WAIT_S
        while True:
            async with self.pool.acquire() as conn:
                await conn.execute(_DROP_EXPIRED, user_id, name)
                claimed = await conn.fetchval(_CLAIM, user_id, name, fingerprint, START_WAIT_S)
                if claimed:
                    return await self._start(user_id, name, fingerprint, keep_s, start), False
                entry = await self._follow(conn, user_id, name, fingerprint, keep_s)
            if entry is not None:
                return entry, True
            if time.monotonic() > deadline:
                raise OpenAIError(
                    409,
                    "an equal request is still starting its run: retry it later",
                    code="request_in_progress",
                )
            await anyio.sleep(POLL_S)  # the first request is starting the run

    async def _start(
        self, user_id: str, name: str, fingerprint: str, keep_s: float, start: Start
    ) -> Entry:
        try:
            session_id, reply = await start()
        except BaseException:
            with anyio.CancelScope(shield=True):
                async with self.pool.acquire() as conn:
                    await conn.execute(
                        "DELETE FROM navi_v1_requests WHERE user_id = $1 AND name = $2 "
                        "AND session_id IS NULL",
                        user_id,
                        name,
                    )
            raise
        async with self.pool.acquire() as conn:
            follows = await conn.fetchval(
                _STARTED,
                user_id,
                name,
                session_id,
                reply.run_id,
                reply.after_seq,
                reply.queued,
                FOLLOW_KEEP_S,
            )
        return self._entry(user_id, name, session_id, reply, fingerprint, keep_s, follows or 1)

    async def _follow(
        self,
        conn: asyncpg.Connection,
        user_id: str,
        name: str,
        fingerprint: str,
        keep_s: float,
    ) -> Entry | None:
        """The run of the row there is (None: it is still starting, or was dropped)."""
        row = await conn.fetchrow(_FIND, user_id, name)
        if row is None:
            return None
        if row["fingerprint"] != fingerprint:
            raise key_reused()
        if row["session_id"] is None:
            return None
        follows = await conn.fetchval(_FOLLOW, user_id, name, FOLLOW_KEEP_S)
        if follows is None:
            return None
        reply = m.RunStartedReply(
            run_id=row["run_id"], after_seq=row["after_seq"], queued=row["queued"]
        )
        return self._entry(user_id, name, row["session_id"], reply, fingerprint, keep_s, follows)

    def _entry(
        self,
        user_id: str,
        name: str,
        session_id: str,
        reply: m.RunStartedReply,
        fingerprint: str,
        keep_s: float,
        follows: int,
    ) -> Entry:
        entry = Entry(session_id, reply, fingerprint, keep_s, key=(user_id, name), mark=follows)
        entry.follow()
        return entry

    async def leave(self, entry: Entry) -> None:
        entry.leave()
        async with self.pool.acquire() as conn:
            await conn.execute(
                "UPDATE navi_v1_requests SET expires_at = now() + make_interval(secs => $4) "
                f"WHERE {_OF_RUN}",
                *entry.key,
                entry.reply.run_id,
                entry.keep_s,
            )

    async def forget(self, entry: Entry) -> None:
        async with self.pool.acquire() as conn:
            await conn.execute(
                f"DELETE FROM navi_v1_requests WHERE {_OF_RUN}", *entry.key, entry.reply.run_id
            )

    async def retried(self, entry: Entry) -> bool:
        async with self.pool.acquire() as conn:
            follows = await conn.fetchval(
                f"SELECT follows FROM navi_v1_requests WHERE {_OF_RUN}",
                *entry.key,
                entry.reply.run_id,
            )
        return follows is not None and follows > entry.mark

    async def _prune(self) -> None:
        """Now and then, the rows of every user that expired (the table stays small)."""
        now = time.monotonic()
        if now - self._pruned < PRUNE_EVERY_S:
            return
        self._pruned = now
        async with self.pool.acquire() as conn:
            await conn.execute("DELETE FROM navi_v1_requests WHERE expires_at < now()")


@asynccontextmanager
async def open_ledger(store: EventStore) -> AsyncIterator[Ledger]:
    """The ledger for a server on ``store``: PostgreSQL's, shared by the nodes, when the
    log is in PostgreSQL; else one in this node's memory (one node)."""
    from events.pg_writes import wait_settings
    from events.postgres import PostgresEventStore, asyncpg_dsn

    if not isinstance(store, PostgresEventStore):
        yield RunLedger()
        return
    settings = wait_settings(store.wait_timeout_s)
    async with PostgresRunLedger.open(asyncpg_dsn(store.url), server_settings=settings) as ledger:
        yield ledger
