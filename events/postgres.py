"""The PostgreSQL event store (asyncpg through SQLAlchemy Core).

Writers serialise on a transaction-scoped advisory lock, so positions are assigned
in commit order and a global reader never skips an event committed late. After a
commit, ``NOTIFY navi_events`` wakes subscribers in other processes; its payload only
says which stream to re-read (and which node wrote, so a node ignores its own).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio
import asyncpg
import structlog
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from events.base import AppendRequest, Clock, IdFactory, Planned, new_uuid
from events.sql import INSERT_COLUMNS, SqlEventStore

log = structlog.get_logger(__name__)

CHANNEL = "navi_events"
# pg_advisory_xact_lock key held by every event writer ("navi" in ASCII).
WRITE_LOCK_KEY = 0x6E617669


def asyncpg_dsn(url: str) -> str:
    """``postgresql+asyncpg://...`` (SQLAlchemy) → ``postgresql://...`` (asyncpg)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def sqlalchemy_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


class PostgresEventStore(SqlEventStore):
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        clock: Clock = time.time,
        new_id: IdFactory = new_uuid,
    ) -> None:
        super().__init__(sqlalchemy_url(url), clock=clock, new_id=new_id)
        self.node_id = uuid.uuid4().hex[:12]
        self._pool_size = pool_size
        self._listener: asyncpg.Connection | None = None

    def _make_engines(self) -> tuple[AsyncEngine, AsyncEngine]:
        writer = create_async_engine(self.url, pool_size=1, max_overflow=0, pool_pre_ping=True)
        reader = create_async_engine(self.url, pool_size=self._pool_size, pool_pre_ping=True)
        return writer, reader

    async def _lock_for_write(self, conn: AsyncConnection) -> None:
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITE_LOCK_KEY})

    async def _write_batch(self, driver: Any, batch: list[AppendRequest]) -> list[Planned]:
        conn: asyncpg.Connection = driver
        streams = sorted({r.stream_id for r in batch})
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", WRITE_LOCK_KEY)
            rows = await conn.fetch(
                "SELECT s, (SELECT seq FROM navi_events WHERE stream_id = s "
                "ORDER BY seq DESC LIMIT 1) FROM unnest($1::text[]) AS s",
                streams,
            )
            heads = {sid: int(seq) for sid, seq in rows if seq is not None}
            position = await conn.fetchval("SELECT coalesce(max(position), 0) FROM navi_events")
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
            planned, records, new_keys = self.plan_rows(batch, heads, int(position), used)
            if records:
                # COPY: the fastest bulk path PostgreSQL has, inside the transaction.
                await conn.copy_records_to_table(
                    "navi_events", records=records, columns=INSERT_COLUMNS
                )
            if new_keys:
                await conn.executemany(
                    "INSERT INTO navi_idempotency (stream_id, key, first_seq, last_seq) "
                    "VALUES ($1, $2, $3, $4)",
                    new_keys,
                )
            for stream_id in {item.request.stream_id for item in planned}:
                await conn.execute(
                    "SELECT pg_notify($1, $2)", CHANNEL, f"{self.node_id}:{stream_id}"
                )
        return planned

    async def _started(self) -> None:
        self._listener = await asyncpg.connect(asyncpg_dsn(self.url))
        await self._listener.add_listener(CHANNEL, self._on_notify)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        node, _, stream_id = payload.partition(":")
        if node != self.node_id:
            self.notifier.invalidate(stream_id)

    async def _close(self) -> None:
        if self._listener is not None:
            with anyio.CancelScope(shield=True):
                await self._listener.close()
            self._listener = None
        await super()._close()
