"""The SQL event store shared by SQLite and PostgreSQL (SQLAlchemy Core, async).

Dialect differences live in the subclasses: how a write transaction takes the
store's write lock, and how other processes are woken.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

import structlog
from sqlalchemy import Row, and_, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from events.batch import ROW_COLUMNS, AppendRequest, Clock, IdFactory, NewKey, Planned, new_uuid
from events.batch import Row as LogRow
from events.codec import decode
from events.envelope import NewEvent, Recorded
from events.errors import ConcurrencyError, EventDecodeError
from events.schema import (
    SCHEMA_VERSION,
    events_table,
    idempotency_table,
    metadata,
    schema_version_table,
)
from events.store import EventStore
from events.types import Unreadable

log = structlog.get_logger(__name__)

_E = events_table
READ_COLUMNS = (
    _E.c.stream_id,
    _E.c.seq,
    _E.c.position,
    _E.c.event_id,
    _E.c.timestamp,
    _E.c.run_id,
    _E.c.causation_id,
    _E.c.type,
    _E.c.version,
    _E.c.payload,
)


def row_to_recorded(row: Row[Any] | Sequence[Any], *, lenient: bool = False) -> Recorded:
    """The row as a record; a payload that cannot be decoded raises ``EventDecodeError``,
    or with ``lenient`` (readers of the whole log) comes as an ``Unreadable`` event."""
    stream_id, seq, position, event_id, timestamp, run_id, causation_id, type_, version, payload = (
        tuple(row)
    )
    try:
        event = decode(type_, version, bytes(payload), stream_id=stream_id, seq=seq)
    except EventDecodeError as exc:
        if not lenient:
            raise
        event = Unreadable(stored_type=type_, stored_version=version, reason=exc.reason)
    return Recorded(
        stream_id=stream_id,
        seq=seq,
        position=position,
        event_id=event_id,
        timestamp=timestamp,
        event=event,
        run_id=run_id,
        causation_id=causation_id,
    )


INSERT_COLUMNS = ROW_COLUMNS


class SqlEventStore(EventStore):
    def __init__(
        self,
        url: str,
        *,
        clock: Clock = time.time,
        new_id: IdFactory = new_uuid,
    ) -> None:
        super().__init__(clock=clock, new_id=new_id)
        self.url = url
        self._write_engine: AsyncEngine | None = None
        self._read_engine: AsyncEngine | None = None

    # ---------------------------------------------------------------- to implement

    def _make_engines(self) -> tuple[AsyncEngine, AsyncEngine]:
        raise NotImplementedError

    async def _lock_for_write(self, conn: AsyncConnection) -> None:
        """Serialise writers (schema creation goes through it too)."""

    # ---------------------------------------------------------------- lifecycle

    @property
    def engine(self) -> AsyncEngine:
        assert self._read_engine is not None, "store not open"
        return self._read_engine

    async def _open(self) -> None:
        self._write_engine, self._read_engine = self._make_engines()
        async with self._write_engine.begin() as conn:
            await self._lock_for_write(conn)
            await conn.run_sync(metadata.create_all)
            current = await conn.scalar(
                select(schema_version_table.c.version).where(
                    schema_version_table.c.component == "events"
                )
            )
            if current is None:
                await conn.execute(
                    schema_version_table.insert().values(component="events", version=SCHEMA_VERSION)
                )
            elif current > SCHEMA_VERSION:
                raise RuntimeError(
                    f"the database {self.url!r} has event schema v{current}, "
                    f"newer than this Navi (v{SCHEMA_VERSION}); upgrade Navi"
                )
            elif current < SCHEMA_VERSION:
                await conn.execute(
                    schema_version_table.update()
                    .where(schema_version_table.c.component == "events")
                    .values(version=SCHEMA_VERSION)
                )

    async def _close(self) -> None:
        for engine in (self._write_engine, self._read_engine):
            if engine is not None:
                await engine.dispose()
        self._write_engine = self._read_engine = None

    # ---------------------------------------------------------------- write

    def plan_rows(
        self,
        batch: list[AppendRequest],
        heads: dict[str, int],
        position: int,
        used_keys: dict[tuple[str, str], tuple[int, int]],
    ) -> tuple[list[Planned], list[tuple[Any, ...]], list[NewKey]]:
        rows: list[LogRow] = []
        planned, new_keys = self.plan(batch, heads, position, used_keys, rows=rows)
        return planned, rows, new_keys

    async def _locked_for_rewrite(self, conn: AsyncConnection, stream_id: str) -> int:
        """In a rewrite's transaction: hold off the stream's other writers; returns the
        position the rewritten events go after."""
        raise NotImplementedError

    def _rewrite_engine(self) -> AsyncEngine:
        assert self._write_engine is not None, "store not open"
        return self._write_engine

    async def _rewrite(
        self,
        stream_id: str,
        events: list[NewEvent],
        expected_seq: int,
        keys_after: int,
        keys_moved_by: int,
    ) -> None:
        async with self._rewrite_engine().begin() as conn:
            position = await self._locked_for_rewrite(conn, stream_id)
            head = await conn.scalar(
                select(func.coalesce(func.max(_E.c.seq), 0)).where(_E.c.stream_id == stream_id)
            )
            if head != expected_seq:
                raise ConcurrencyError(stream_id, expected_seq, int(head or 0))
            rows: list[LogRow] = []
            self.plan_stream(stream_id, events, position, rows)
            await conn.execute(delete(_E).where(_E.c.stream_id == stream_id))
            await conn.execute(
                insert(_E), [dict(zip(INSERT_COLUMNS, row, strict=True)) for row in rows]
            )
            if keys_moved_by:
                keys = idempotency_table.c
                await conn.execute(
                    update(idempotency_table)
                    .where(keys.stream_id == stream_id, keys.first_seq > keys_after)
                    .values(
                        first_seq=keys.first_seq + keys_moved_by,
                        last_seq=keys.last_seq + keys_moved_by,
                    )
                )

    # ---------------------------------------------------------------- read

    async def _read(
        self, stream_id: str, *, after_seq: int, to_seq: int | None, limit: int | None
    ) -> list[Recorded]:
        cond = and_(_E.c.stream_id == stream_id, _E.c.seq > after_seq)
        if to_seq is not None:
            cond = and_(cond, _E.c.seq <= to_seq)
        query = select(*READ_COLUMNS).where(cond).order_by(_E.c.seq)
        if limit is not None:
            query = query.limit(limit)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [row_to_recorded(row) for row in rows]

    async def read_all(
        self,
        *,
        after_position: int = 0,
        limit: int | None = None,
        skip_streams: Collection[str] = (),
    ) -> list[Recorded]:
        cond = _E.c.position > after_position
        if skip_streams:
            cond = and_(cond, _E.c.stream_id.not_in(list(skip_streams)))
        query = select(*READ_COLUMNS).where(cond).order_by(_E.c.position)
        if limit is not None:
            query = query.limit(limit)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [row_to_recorded(row, lenient=True) for row in rows]

    async def last_seq(self, stream_id: str) -> int:
        async with self.engine.connect() as conn:
            value = await conn.scalar(
                select(func.coalesce(func.max(_E.c.seq), 0)).where(_E.c.stream_id == stream_id)
            )
        return int(value or 0)

    async def stream_heads(self) -> dict[str, Recorded]:
        heads = (
            select(_E.c.stream_id.label("sid"), func.max(_E.c.seq).label("head"))
            .group_by(_E.c.stream_id)
            .subquery()
        )
        query = select(*READ_COLUMNS).join(
            heads, and_(_E.c.stream_id == heads.c.sid, _E.c.seq == heads.c.head)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {row[0]: row_to_recorded(row, lenient=True) for row in rows}
