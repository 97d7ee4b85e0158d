"""Where snapshots are kept: the table ``navi_snapshots`` beside the events (SQL stores),
or a dict beside an in-memory store.

A row is ``(stream_id, projection, seq, schema_version, payload)``: the state of one
projection of one session's history right after ``seq``. Snapshots are a cache: they
can be deleted at any time, and a row whose ``schema_version`` is not the current one
is ignored (and overwritten when the fold passes its seq again).
"""

from __future__ import annotations

import weakref

import anyio
import msgspec
from sqlalchemy import BigInteger, Column, LargeBinary, MetaData, String, Table, and_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from events.sql import SqlEventStore
from events.store import EventStore

metadata = MetaData()

snapshots_table = Table(
    "navi_snapshots",
    metadata,
    Column("stream_id", String(200), primary_key=True),
    Column("projection", String(64), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("schema_version", BigInteger, nullable=False),
    Column("payload", LargeBinary, nullable=False),
)

_S = snapshots_table


class SnapshotRow(msgspec.Struct, frozen=True):
    projection: str
    seq: int
    schema_version: int


# projection name → (schema version, payload): the rows of one seq
Payloads = dict[str, tuple[int, bytes]]
# (projection name, seq) → (schema version, payload)
PayloadsAt = dict[tuple[str, int], tuple[int, bytes]]


class MemorySnapshots:
    def __init__(self) -> None:
        self._rows: dict[str, dict[tuple[str, int], tuple[int, bytes]]] = {}

    async def rows(
        self,
        stream_id: str,
        *,
        at_most: int | None = None,
        names: tuple[str, ...] | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRow]:
        """The rows of ``stream_id`` (without payloads), newest seq first."""
        stored = self._rows.get(stream_id, {})
        rows = [
            SnapshotRow(name, seq, version)
            for (name, seq), (version, _) in stored.items()
            if (at_most is None or seq <= at_most) and (names is None or name in names)
        ]
        rows.sort(key=lambda r: (-r.seq, r.projection))
        return rows if limit is None else rows[:limit]

    async def payloads(self, stream_id: str, seqs: list[int], names: tuple[str, ...]) -> PayloadsAt:
        stored = self._rows.get(stream_id, {})
        return {(n, s): stored[(n, s)] for n in names for s in seqs if (n, s) in stored}

    async def save(self, stream_id: str, seq: int, payloads: Payloads) -> None:
        """Insert or replace the rows of ``seq``."""
        stored = self._rows.setdefault(stream_id, {})
        for name, row in payloads.items():
            stored[(name, seq)] = row

    async def delete(self, stream_ids: list[str]) -> None:
        for stream_id in stream_ids:
            self._rows.pop(stream_id, None)


class SqlSnapshots:
    """Uses the store's (read) engine; the table is created on first use."""

    def __init__(self, store: SqlEventStore) -> None:
        self._store = store
        self._ready: AsyncEngine | None = None
        self._lock = anyio.Lock()

    async def _engine(self) -> AsyncEngine:
        engine = self._store.engine
        if self._ready is not engine:
            async with self._lock:
                if self._ready is not engine:
                    async with engine.begin() as conn:
                        await conn.run_sync(metadata.create_all)
                    self._ready = engine
        return engine

    async def rows(
        self,
        stream_id: str,
        *,
        at_most: int | None = None,
        names: tuple[str, ...] | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRow]:
        cond = _S.c.stream_id == stream_id
        if at_most is not None:
            cond = and_(cond, _S.c.seq <= at_most)
        if names is not None:
            cond = and_(cond, _S.c.projection.in_(names))
        query = (
            select(_S.c.projection, _S.c.seq, _S.c.schema_version)
            .where(cond)
            .order_by(_S.c.seq.desc(), _S.c.projection)
        )
        if limit is not None:
            query = query.limit(limit)
        async with (await self._engine()).connect() as conn:
            result = (await conn.execute(query)).all()
        return [SnapshotRow(name, int(seq), int(version)) for name, seq, version in result]

    async def payloads(self, stream_id: str, seqs: list[int], names: tuple[str, ...]) -> PayloadsAt:
        query = select(_S.c.projection, _S.c.seq, _S.c.schema_version, _S.c.payload).where(
            and_(_S.c.stream_id == stream_id, _S.c.seq.in_(seqs), _S.c.projection.in_(names))
        )
        async with (await self._engine()).connect() as conn:
            result = (await conn.execute(query)).all()
        return {
            (name, int(seq)): (int(version), bytes(payload))
            for name, seq, version, payload in result
        }

    async def save(self, stream_id: str, seq: int, payloads: Payloads) -> None:
        if not payloads:
            return
        engine = await self._engine()
        values = [
            {
                "stream_id": stream_id,
                "projection": name,
                "seq": seq,
                "schema_version": version,
                "payload": payload,
            }
            for name, (version, payload) in payloads.items()
        ]
        insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
        statement = insert(_S).values(values)
        statement = statement.on_conflict_do_update(
            index_elements=[_S.c.stream_id, _S.c.projection, _S.c.seq],
            set_={
                "schema_version": statement.excluded.schema_version,
                "payload": statement.excluded.payload,
            },
        )
        # A write-only transaction: on SQLite it never has to upgrade a read lock.
        async with engine.begin() as conn:
            await conn.execute(statement)

    async def delete(self, stream_ids: list[str]) -> None:
        if not stream_ids:
            return
        async with (await self._engine()).begin() as conn:
            await conn.execute(_S.delete().where(_S.c.stream_id.in_(stream_ids)))


# Both keep the same methods; a session's snapshots go to the one beside its events.
SnapshotStorage = MemorySnapshots | SqlSnapshots

_storages: weakref.WeakKeyDictionary[EventStore, SnapshotStorage] = weakref.WeakKeyDictionary()


def snapshots_for(store: EventStore) -> SnapshotStorage:
    """The snapshot storage of ``store`` (one per store object)."""
    storage = _storages.get(store)
    if storage is None:
        storage = SqlSnapshots(store) if isinstance(store, SqlEventStore) else MemorySnapshots()
        _storages[store] = storage
    return storage
