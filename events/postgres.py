"""The PostgreSQL event store (asyncpg through SQLAlchemy Core).

Writers of different streams never wait for each other: a transaction locks only the
streams it writes, and an event's global position comes from its transaction's id;
``read_all`` reads only below the oldest running transaction, so it never skips an
event committed late (``events.pg_writes`` says why this holds). After a commit,
``NOTIFY navi_events`` wakes subscribers in other processes; its payload only says
which stream to re-read (and which node wrote, so a node ignores its own).

A stream this node owns in a cluster is written only while the node's ownership epoch
is current (``fence``, set by navi/cluster/ownership.py): a stale owner's appends fail
with ``FencedError``.

A database restart does not lose or double an append: a commit that fails because the
connection broke is retried on a fresh one (with backoff, for up to ``retry_for_s``),
and before a retry the store checks whether the failed attempt did commit after all
(the connection can die between COMMIT and its answer) by looking for the event ids it
had planned. The LISTEN connection reconnects too, and then forgets every cached
stream head, since notifications sent meanwhile were missed.

Every wait is bounded (``wait_timeout_s``, ``NAVI_DB_TIMEOUT_S``): a lock, a statement,
and a transaction left open by a client that froze (SIGSTOP, a hung host) are ended by
the server after it, so a frozen node holds up no other node for longer. An append that
times out fails with its error and writes nothing.

A write transaction is four round trips on one connection: BEGIN with the streams'
locks, the heads and transaction id (which also queues the NOTIFY), COPY of the rows,
COMMIT.
"""

from __future__ import annotations

import time
import uuid
import weakref
from collections.abc import Collection
from types import TracebackType
from typing import Any

import anyio
import asyncpg
import structlog
from anyio.abc import TaskStatus
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from events.batch import AppendRequest, Clock, IdFactory, Planned, new_uuid
from events.envelope import Recorded
from events.pg_connect import asyncpg_dsn, is_disconnect, sqlalchemy_url
from events.pg_reads import HELD_BACK_WAIT_S, read_below_horizon
from events.pg_writes import (
    CHANNEL,
    HEADS_AND_XID,
    MAX_EVENTS_PER_TRANSACTION,
    OWNERS_TABLE,
    POSITION_SHIFT,
    SCHEMA_LOCK_KEY,
    FencedError,
    as_wait_timeout,
    begin_locked,
    roll_back,
    stream_lock_key,
    wait_settings,
)
from events.sql import INSERT_COLUMNS, SqlEventStore

__all__ = ["PostgresEventStore", "asyncpg_dsn", "is_disconnect", "sqlalchemy_url"]

log = structlog.get_logger(__name__)

# A follower on this node reads its stream again after this long without a NOTIFY.
RECHECK_S = 2.0
# The default bound of every database wait (NAVI_DB_TIMEOUT_S).
DB_TIMEOUT_S = 10.0


class PostgresEventStore(SqlEventStore):
    # How long commits are retried while the database is unreachable, from the first
    # failure of an outage; after that they fail at once until one succeeds again.
    retry_for_s = 30.0
    listen_check_s = 5.0

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        wait_timeout_s: float = DB_TIMEOUT_S,
        clock: Clock = time.time,
        new_id: IdFactory = new_uuid,
    ) -> None:
        super().__init__(sqlalchemy_url(url), clock=clock, new_id=new_id)
        self.node_id = uuid.uuid4().hex[:12]
        # Other nodes' commits arrive by NOTIFY, which a dropped listener connection
        # loses: followers read again after this long without one.
        self.recheck_s = RECHECK_S
        self._pool_size = pool_size
        self.wait_timeout_s = wait_timeout_s
        self.held_back_wait_s = HELD_BACK_WAIT_S
        self._fences: dict[str, int] = {}  # stream → the owner epoch this node holds
        self.held_back_reads = 0  # reads of the global log that waited for a transaction
        self._listener: asyncpg.Connection | None = None
        self._listen_scope: anyio.CancelScope | None = None
        self._down_since: float | None = None
        # The event ids a request was given by an attempt whose outcome is unknown.
        self._attempted: weakref.WeakKeyDictionary[AppendRequest, list[str]] = (
            weakref.WeakKeyDictionary()
        )
        self._foreign_notifies = 0  # other nodes' notifications received
        self.reconnects = 0
        # The committer's connection: (SQLAlchemy's, asyncpg's), opened at the first commit.
        self._writer: tuple[AsyncConnection, asyncpg.Connection] | None = None

    def _make_engines(self) -> tuple[AsyncEngine, AsyncEngine]:
        connect_args = {"server_settings": wait_settings(self.wait_timeout_s)}
        writer = create_async_engine(
            self.url, pool_size=1, max_overflow=0, pool_pre_ping=True, connect_args=connect_args
        )
        reader = create_async_engine(
            self.url, pool_size=self._pool_size, pool_pre_ping=True, connect_args=connect_args
        )
        return writer, reader

    async def _lock_for_write(self, conn: AsyncConnection) -> None:
        # Only the creation of the tables, at open: two nodes starting at once.
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})

    def _rewrite_engine(self) -> AsyncEngine:
        # The write engine's one connection belongs to the committer.
        return self.engine

    async def _locked_for_rewrite(self, conn: AsyncConnection, stream_id: str) -> int:
        # The stream's lock, as an append takes it; positions from this transaction's id
        # (events.pg_writes); and the NOTIFY that makes other nodes read it again.
        await conn.execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": stream_lock_key(stream_id)}
        )
        xid = await conn.scalar(text("SELECT pg_current_xact_id()::text::bigint"))
        await conn.execute(
            text("SELECT pg_notify(:channel, :payload)"),
            {"channel": CHANNEL, "payload": f"{self.node_id}:{stream_id}"},
        )
        return int(xid) << POSITION_SHIFT

    async def _open(self) -> None:
        await super()._open()
        assert self._write_engine is not None
        async with self._write_engine.begin() as conn:
            await self._lock_for_write(conn)
            await conn.execute(text(OWNERS_TABLE))

    async def _write_batch(
        self, conn: asyncpg.Connection, batch: list[AppendRequest]
    ) -> list[Planned]:
        """Plan ``batch`` on the heads read under the streams' locks, then write it:
        BEGIN and the locks, this read, COPY (asyncpg sends the rows right behind the
        statement: one round trip) and COMMIT."""
        if sum(len(r.events) for r in batch) > MAX_EVENTS_PER_TRANSACTION:
            raise ValueError(f"more than {MAX_EVENTS_PER_TRANSACTION} events in one append")
        streams = sorted({r.stream_id for r in batch})
        await conn.execute(begin_locked(streams))
        try:
            rows = await conn.fetch(HEADS_AND_XID, streams, CHANNEL, f"{self.node_id}:")
            heads = {row[0]: row[1] for row in rows}
            position = rows[0][2] << POSITION_SHIFT
            batch = self._within_fences(batch, {row[0]: row[3] for row in rows})
            batch = [r for r in batch if not await self._landed_before(conn, r)]
            used: dict[tuple[str, str], tuple[int, int]] = {}
            keyed = [r for r in batch if r.idempotency_key is not None]
            if keyed:
                found = await conn.fetch(
                    "SELECT stream_id, key, first_seq, last_seq FROM navi_idempotency "
                    "WHERE (stream_id, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
                    [r.stream_id for r in keyed],
                    [r.idempotency_key for r in keyed],
                )
                used = {(s, k): (f, la) for s, k, f, la in found}
            planned, records, new_keys = self.plan_rows(batch, heads, position, used)
            self._remember_attempt(planned)
            if records:
                await conn.copy_records_to_table(
                    "navi_events", records=records, columns=INSERT_COLUMNS
                )
            if new_keys:
                await conn.executemany(
                    "INSERT INTO navi_idempotency (stream_id, key, first_seq, last_seq) "
                    "VALUES ($1, $2, $3, $4)",
                    new_keys,
                )
            # Nothing written (stale or replayed appends): ROLLBACK drops the NOTIFY too.
            await conn.execute("COMMIT" if records or new_keys else "ROLLBACK")
            return planned
        except BaseException:
            await roll_back(conn)
            raise

    def fence(self, stream_id: str, epoch: int) -> None:
        """Write ``stream_id`` only while its owner epoch is ``epoch`` (events.pg_writes)."""
        self._fences[stream_id] = epoch

    def unfence(self, stream_id: str) -> None:
        self._fences.pop(stream_id, None)

    def _within_fences(
        self, batch: list[AppendRequest], epochs: dict[str, int | None]
    ) -> list[AppendRequest]:
        """The requests this node may still write; the others get ``FencedError``."""
        kept = []
        for request in batch:
            mine = self._fences.get(request.stream_id)
            if mine is not None and epochs[request.stream_id] != mine:
                request.error = FencedError(request.stream_id, mine, epochs[request.stream_id])
                log.warning("append.fenced", stream_id=request.stream_id, epoch=mine)
            else:
                request.error = None  # from an attempt before a reconnect
                kept.append(request)
        return kept

    def _remember_attempt(self, planned: list[Planned]) -> None:
        # If the COMMIT's answer is lost, a retry looks for these ids (_landed_before).
        for item in planned:
            self._attempted[item.request] = [rec.event_id for rec in item.records]

    async def _landed_before(self, conn: asyncpg.Connection, request: AppendRequest) -> bool:
        """Whether an earlier attempt of ``request``, whose COMMIT went unanswered, did
        commit: its planned event ids are in the log at its seqs. Then it is not written
        again, and ``result()`` reads what it wrote."""
        ids = self._attempted.get(request)
        if ids is None:
            return False
        first, last = request.expected_seq + 1, request.expected_seq + len(ids)
        rows = await conn.fetch(
            "SELECT event_id FROM navi_events WHERE stream_id = $1 AND seq BETWEEN $2 AND $3 "
            "ORDER BY seq",
            request.stream_id,
            first,
            last,
        )
        if [row[0] for row in rows] != ids:
            return False
        request.replay_range = (first, last)
        log.info("append.landed_before_reconnect", stream_id=request.stream_id, seqs=(first, last))
        return True

    async def _commit_once(self, batch: list[AppendRequest]) -> list[Planned]:
        # The committer holds one connection for as long as it works: checking one out
        # of the pool per transaction (and resetting it after) costs more than the write.
        assert self._write_engine is not None
        if self._writer is None:
            conn = await self._write_engine.connect()
            raw = await conn.get_raw_connection()
            self._writer = (conn, raw.driver_connection)
        conn, driver = self._writer
        try:
            return await self._write_batch(driver, batch)
        except Exception:
            # The connection may be broken (a database restart): the next commit opens
            # a fresh one. The failed transaction was rolled back; nothing of it stays.
            self._writer = None
            with anyio.CancelScope(shield=True):
                await conn.invalidate()
                await conn.close()
            raise

    async def _commit(self, batch: list[AppendRequest]) -> list[Planned]:
        delay = 0.05
        while True:
            try:
                planned = await self._commit_once(batch)
            except Exception as exc:
                if not is_disconnect(exc):
                    timeout = as_wait_timeout(exc, self.wait_timeout_s)
                    if timeout is not None:
                        raise timeout from exc
                    raise
                now = time.monotonic()
                if self._down_since is None:
                    self._down_since = now
                    log.warning("postgres.connection_lost", error=str(exc))
                if now - self._down_since > self.retry_for_s:
                    raise
                await anyio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if self._down_since is not None:
                log.warning(
                    "postgres.reconnected", after_s=round(time.monotonic() - self._down_since, 2)
                )
                self._down_since = None
                self.reconnects += 1
            for request in batch:
                self._attempted.pop(request, None)
                if request.replay_range is not None and request.idempotency_key is None:
                    # Committed by the lost attempt: not in this process's cache yet.
                    self.notifier.invalidate(request.stream_id)
            return planned

    async def read(
        self,
        stream_id: str,
        *,
        after_seq: int = 0,
        to_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Recorded]:
        # Only this node's own commits fill the cache: a head learnt from a read can be
        # old by the time it is stored (another node committed meanwhile, and its NOTIFY
        # came and went), and a stale head would answer every later read with nothing.
        cached = self.notifier.recent_after(stream_id, after_seq, to_seq=to_seq, limit=limit)
        if cached is not None:
            return cached
        return await self._read(stream_id, after_seq=after_seq, to_seq=to_seq, limit=limit)

    async def read_all(
        self,
        *,
        after_position: int = 0,
        limit: int | None = None,
        skip_streams: Collection[str] = (),
    ) -> list[Recorded]:
        return await read_below_horizon(
            self.engine,
            after_position=after_position,
            limit=limit,
            skip_streams=skip_streams,
            wait_s=self.held_back_wait_s,
            on_held_back=self._held_back,
        )

    def _held_back(self) -> None:
        self.held_back_reads += 1

    # ---------------------------------------------------------------- LISTEN

    async def _started(self) -> None:
        self._listen_scope = anyio.CancelScope()
        await self.task_group.start(self._listen)

    async def _listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the LISTEN connection; when it breaks, open another one (with backoff)."""
        assert self._listen_scope is not None
        started = False
        delay = 0.1
        with self._listen_scope:
            while True:
                try:
                    conn = await asyncpg.connect(asyncpg_dsn(self.url), timeout=10)
                except Exception as exc:
                    if not started or not is_disconnect(exc):
                        raise  # at start-up a wrong URL is an error, not something to wait for
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                try:
                    lost = anyio.Event()
                    conn.add_termination_listener(lambda _c, lost=lost: lost.set())
                    await conn.add_listener(CHANNEL, self._on_notify)
                    self._listener = conn
                    if started:
                        log.warning("postgres.listen_reconnected")
                        self.notifier.invalidate_all()  # what was notified meanwhile is lost
                    else:
                        started = True
                        task_status.started()
                    delay = 0.1
                    await self._until_lost(conn, lost)
                finally:
                    self._listener = None
                    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                        await conn.close()

    async def _until_lost(self, conn: asyncpg.Connection, lost: anyio.Event) -> None:
        while True:
            with anyio.move_on_after(self.listen_check_s):
                await lost.wait()
                return
            try:  # a dead peer does not always close the socket: ask
                with anyio.fail_after(self.listen_check_s):
                    await conn.fetchval("SELECT 1")
            except Exception as exc:
                if not is_disconnect(exc):
                    raise
                return

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        node, _, stream_id = payload.partition(":")
        if node != self.node_id:
            self._foreign_notifies += 1
            self.notifier.invalidate(stream_id)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._listen_scope is not None:
            self._listen_scope.cancel()  # the committer drains; the listener just ends
        await super().__aexit__(exc_type, exc, tb)

    async def _close(self) -> None:
        if self._writer is not None:
            await self._writer[0].close()
            self._writer = None
        await super()._close()
