"""The SQL event store shared by SQLite and PostgreSQL (SQLAlchemy Core, async).

Dialect differences live in the subclasses: how a write transaction takes the
store's write lock, and how other processes are woken.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio
import structlog
from sqlalchemy import Row, and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from events.base import AppendRequest, BaseEventStore, Clock, IdFactory, Planned, new_uuid
from events.codec import decode
from events.envelope import Recorded
from events.errors import EventDecodeError
from events.planning import ROW_COLUMNS, Guess, NewKey
from events.planning import Row as LogRow
from events.schema import SCHEMA_VERSION, events_table, metadata, schema_version_table
from events.types import Unreadable

log = structlog.get_logger(__name__)

_E = events_table
# Streams whose head the planner keeps; past that it starts again from what it needs.
MAX_HEADS_AHEAD = 10_000
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


class SqlEventStore(BaseEventStore):
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
        self._writer: tuple[AsyncConnection, Any] | None = None
        # Planning ahead (``_plan_ahead``): each stream's last seq and the last position
        # as they will be once the batches planned so far commit; ``None`` while unknown
        # (before a first commit, after a guess failed), until the next commit says.
        self._heads_ahead: dict[str, int] = {}
        self._position_ahead: int | None = None
        # What the last transaction left: (heads of its streams, position), and whether
        # it used its guess.
        self._left: tuple[dict[str, int], int] = ({}, 0)
        self._used_guess = False

    # ---------------------------------------------------------------- to implement

    def _make_engines(self) -> tuple[AsyncEngine, AsyncEngine]:
        raise NotImplementedError

    async def _lock_for_write(self, conn: AsyncConnection) -> None:
        """Serialise writers (schema creation goes through it too)."""

    async def _write_batch(
        self, driver: Any, batch: list[AppendRequest], guess: Guess | None
    ) -> list[Planned]:
        """One write transaction on the raw driver connection: the hot path, so it skips
        SQLAlchemy's per-statement overhead (several thread hops per statement on SQLite)."""
        raise NotImplementedError

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
        if self._writer is not None:
            await self._writer[0].close()
            self._writer = None
        for engine in (self._write_engine, self._read_engine):
            if engine is not None:
                await engine.dispose()
        self._write_engine = self._read_engine = None

    # ---------------------------------------------------------------- write

    async def _commit(self, batch: list[AppendRequest], guess: Guess | None) -> list[Planned]:
        # The committer holds one connection for as long as it works: checking one out
        # of the pool per transaction (and resetting it after) costs more than the write.
        assert self._write_engine is not None
        if self._writer is None:
            conn = await self._write_engine.connect()
            raw = await conn.get_raw_connection()
            self._writer = (conn, raw.driver_connection)
        conn, driver = self._writer
        try:
            planned = await self._write_batch(driver, batch, guess)
        except Exception:
            self._position_ahead = None
            # The connection may be broken (a database restart): the next commit opens
            # a fresh one. The failed transaction was rolled back; nothing of it stays.
            self._writer = None
            with anyio.CancelScope(shield=True):
                await conn.invalidate()
                await conn.close()
            raise
        self._committed(guess)
        return planned

    def _plan_ahead(self, batch: list[AppendRequest]) -> Guess | None:
        position = self._position_ahead
        heads: dict[str, int] = {}
        for request in batch:
            head = self._heads_ahead.get(request.stream_id)
            if head is None or request.idempotency_key is not None:
                position = None  # the log must be asked
                break
            heads[request.stream_id] = head
        if position is None:
            self._position_ahead = None  # until this batch commits
            return None
        planned, rows, new_keys = self.plan_rows(batch, dict(heads), position, {})
        outcomes = [(request.error, request.replay_range) for request in batch]
        for request in batch:
            request.error = request.replay_range = None
        for item in planned:
            self._heads_ahead[item.request.stream_id] = item.records[-1].seq
        if rows:
            self._position_ahead = rows[-1][0]
        return Guess(heads, position, planned, new_keys, rows, outcomes)

    def plan_in_transaction(
        self,
        batch: list[AppendRequest],
        guess: Guess | None,
        heads: dict[str, int],
        position: int,
        used_keys: dict[tuple[str, str], tuple[int, int]],
    ) -> tuple[list[Planned], list[tuple[Any, ...]], list[NewKey]]:
        """The plan of ``batch``, under the write lock: its guess if the log holds what
        the guess was planned on (``heads`` has every stream of the batch, 0 for an
        empty one), else a new plan. Call with ``used_keys`` read only when needed."""
        if guess is not None and guess.holds(heads, position):
            guess.accept(batch)
            self._used_guess = True
            planned, rows, new_keys = guess.planned, guess.rows, guess.new_keys
        else:
            for request in batch:
                request.error = request.replay_range = None
            self._used_guess = False
            planned, rows, new_keys = self.plan_rows(batch, dict(heads), position, used_keys)
        left = dict(heads)
        for item in planned:
            left[item.request.stream_id] = item.records[-1].seq
        self._left = (left, rows[-1][0] if rows else position)
        return planned, rows, new_keys

    def _committed(self, guess: Guess | None) -> None:
        """After a commit: tell the planner what the log holds when it could not know."""
        if guess is None:  # the planner waits for this commit: no batch is planned past it
            heads, position = self._left
            self._heads_ahead.update(heads)
            self._position_ahead = position
            if len(self._heads_ahead) > MAX_HEADS_AHEAD:
                self._heads_ahead = dict(heads)
        elif not self._used_guess:
            self._position_ahead = None  # the batches planned after it are wrong too

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
        self, *, after_position: int = 0, limit: int | None = None
    ) -> list[Recorded]:
        query = select(*READ_COLUMNS).where(_E.c.position > after_position).order_by(_E.c.position)
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
