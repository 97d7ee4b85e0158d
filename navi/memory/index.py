"""The ranked keyword index of facts: a projection of the memory stream kept in the
event store's own database (SQLite FTS5, or PostgreSQL full-text with a GIN index).

Like any projection it can be rebuilt from the log: it records, per user, the memory
seq it has applied (``navi_memory_index_state``) and catches up from the ``memory``
projection's state: the facts changed after that seq are re-indexed (forgotten ones
removed), and after a reset the user's rows are rebuilt. Search results are always
checked against the projection by the caller, so the index can only ever narrow what
is found, never bring back a forgotten fact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import anyio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from events.store import EventStore
from navi.memory.search import fts5_query, indexed_text, rank, terms, tsquery
from projections.memory import Fact, MemoryState

EngineGetter = Callable[[], AsyncEngine]
# pg_advisory_xact_lock key for creating the index tables ("nmem" in ASCII).
SCHEMA_LOCK_KEY = 0x6E6D656D


class MemoryIndex(Protocol):
    async def sync(self, user_id: str, state: MemoryState) -> None:
        """Bring the user's index up to ``state`` (a no-op when it already is)."""
        ...

    async def search(self, user_id: str, state: MemoryState, query: str, limit: int) -> list[str]:
        """Ids of the facts matching ``query``, best first."""
        ...


class InMemoryIndex:
    """For the in-memory store: ranks the projection's facts in Python."""

    async def sync(self, user_id: str, state: MemoryState) -> None:
        return None

    async def search(self, user_id: str, state: MemoryState, query: str, limit: int) -> list[str]:
        return [fact.fact_id for fact in rank(state.active(), query, limit)]


class SqlMemoryIndex:
    """What the SQLite and PostgreSQL indexes share: the catch-up from the projection."""

    schema: tuple[str, ...] = ()

    def __init__(self, engine: EngineGetter) -> None:
        self._engine = engine
        self._ready = False
        self._synced: dict[str, int] = {}  # user → seq this process last synced to
        self._lock = anyio.Lock()

    @property
    def engine(self) -> AsyncEngine:
        return self._engine()

    async def ensure_schema(self) -> None:
        if self._ready:
            return
        async with self.engine.begin() as conn:
            await self._lock_schema(conn)
            for statement in self.schema:
                await conn.execute(text(statement))
        self._ready = True

    async def _lock_schema(self, conn: AsyncConnection) -> None:
        """Serialise schema creation between processes, where the database needs it."""

    async def sync(self, user_id: str, state: MemoryState) -> None:
        if self._synced.get(user_id) == state.seq:
            return
        async with self._lock:
            await self.ensure_schema()
            async with self.engine.begin() as conn:
                last = await self._claim(conn, user_id)
                if last < state.seq:
                    if state.reset_seq > last:
                        await self._clear(conn, user_id)
                        changed: Iterable[Fact] = state.facts.values()
                    else:
                        changed = [f for f in state.facts.values() if f.updated_seq > last]
                    for fact in changed:
                        await self._remove(conn, user_id, fact.fact_id)
                        if not fact.forgotten:
                            await self._insert(conn, user_id, fact)
                    await conn.execute(
                        text(
                            "UPDATE navi_memory_index_state SET last_seq = :seq "
                            "WHERE user_id = :user"
                        ),
                        {"seq": state.seq, "user": user_id},
                    )
            self._synced[user_id] = state.seq

    async def search(self, user_id: str, state: MemoryState, query: str, limit: int) -> list[str]:
        query_terms = terms(query)
        if not query_terms:
            return []
        await self.sync(user_id, state)
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                text(self.search_sql), self._search_params(user_id, query_terms, limit)
            )
            return [str(row[0]) for row in rows]

    # ------------------------------------------------------------ per database

    search_sql = ""

    def _search_params(self, user_id: str, query_terms: list[str], limit: int) -> dict[str, Any]:
        raise NotImplementedError

    async def _claim(self, conn: AsyncConnection, user_id: str) -> int:
        """Take the user's index for writing (until the transaction ends); its last seq."""
        raise NotImplementedError

    async def _clear(self, conn: AsyncConnection, user_id: str) -> None:
        raise NotImplementedError

    async def _remove(self, conn: AsyncConnection, user_id: str, fact_id: str) -> None:
        raise NotImplementedError

    async def _insert(self, conn: AsyncConnection, user_id: str, fact: Fact) -> None:
        raise NotImplementedError


class SqliteMemoryIndex(SqlMemoryIndex):
    """An FTS5 table whose rowids are those of ``navi_memory_index`` (one row per fact)."""

    schema = (
        "CREATE TABLE IF NOT EXISTS navi_memory_index ("
        "id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, fact_id TEXT NOT NULL, "
        "UNIQUE (user_id, fact_id))",
        "CREATE VIRTUAL TABLE IF NOT EXISTS navi_memory_fts USING fts5("
        "category, key, value, tokenize = 'unicode61 remove_diacritics 2')",
        "CREATE TABLE IF NOT EXISTS navi_memory_index_state ("
        "user_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL)",
    )
    # bm25: lower is better; the weights are those of the columns category, key, value.
    search_sql = (
        "SELECT i.fact_id FROM navi_memory_fts JOIN navi_memory_index i "
        "ON i.id = navi_memory_fts.rowid "
        "WHERE navi_memory_fts MATCH :match AND i.user_id = :user "
        "ORDER BY bm25(navi_memory_fts, 0.5, 2.0, 1.0), i.fact_id LIMIT :limit"
    )

    def _search_params(self, user_id: str, query_terms: list[str], limit: int) -> dict[str, Any]:
        return {"match": fts5_query(query_terms), "user": user_id, "limit": limit}

    async def _claim(self, conn: AsyncConnection, user_id: str) -> int:
        # A write first, so the transaction holds SQLite's write lock from its start
        # (a read-then-write transaction could fail to upgrade under a concurrent writer).
        await conn.execute(
            text(
                "INSERT INTO navi_memory_index_state (user_id, last_seq) VALUES (:user, 0) "
                "ON CONFLICT (user_id) DO UPDATE SET last_seq = last_seq"
            ),
            {"user": user_id},
        )
        last = await conn.scalar(
            text("SELECT last_seq FROM navi_memory_index_state WHERE user_id = :user"),
            {"user": user_id},
        )
        return int(last or 0)

    async def _clear(self, conn: AsyncConnection, user_id: str) -> None:
        params = {"user": user_id}
        await conn.execute(
            text(
                "DELETE FROM navi_memory_fts WHERE rowid IN "
                "(SELECT id FROM navi_memory_index WHERE user_id = :user)"
            ),
            params,
        )
        await conn.execute(text("DELETE FROM navi_memory_index WHERE user_id = :user"), params)

    async def _remove(self, conn: AsyncConnection, user_id: str, fact_id: str) -> None:
        row_id = await conn.scalar(
            text(
                "DELETE FROM navi_memory_index WHERE user_id = :user AND fact_id = :fact "
                "RETURNING id"
            ),
            {"user": user_id, "fact": fact_id},
        )
        if row_id is not None:
            await conn.execute(
                text("DELETE FROM navi_memory_fts WHERE rowid = :id"), {"id": row_id}
            )

    async def _insert(self, conn: AsyncConnection, user_id: str, fact: Fact) -> None:
        row_id = await conn.scalar(
            text(
                "INSERT INTO navi_memory_index (user_id, fact_id) VALUES (:user, :fact) "
                "RETURNING id"
            ),
            {"user": user_id, "fact": fact.fact_id},
        )
        await conn.execute(
            text(
                "INSERT INTO navi_memory_fts (rowid, category, key, value) "
                "VALUES (:id, :category, :key, :value)"
            ),
            {
                "id": row_id,
                "category": indexed_text(fact.category),
                "key": indexed_text(fact.key),
                "value": indexed_text(fact.value),
            },
        )


class PostgresMemoryIndex(SqlMemoryIndex):
    """A ``tsvector`` per fact (key weighted A, value B, category C) under a GIN index.

    The ``simple`` configuration: no stemming and no stop words, so it treats every
    language alike; prefix matching stands in for stemming. Text is folded (lower case,
    no accents) in Python before it is indexed or queried, as SQLite's tokenizer does."""

    schema = (
        "CREATE TABLE IF NOT EXISTS navi_memory_index ("
        "user_id TEXT NOT NULL, fact_id TEXT NOT NULL, category TEXT NOT NULL, "
        "key TEXT NOT NULL, value TEXT NOT NULL, document TSVECTOR NOT NULL, "
        "PRIMARY KEY (user_id, fact_id))",
        "CREATE INDEX IF NOT EXISTS ix_navi_memory_index_document "
        "ON navi_memory_index USING GIN (document)",
        "CREATE TABLE IF NOT EXISTS navi_memory_index_state ("
        "user_id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)",
    )
    search_sql = (
        "SELECT fact_id FROM navi_memory_index, to_tsquery('simple', :query) AS q "
        "WHERE user_id = :user AND document @@ q "
        # Normalization 1: divided by 1 + log(length), so a short, focused fact ranks first.
        "ORDER BY ts_rank(document, q, 1) DESC, fact_id LIMIT :limit"
    )

    async def _lock_schema(self, conn: AsyncConnection) -> None:
        # CREATE ... IF NOT EXISTS is not safe against a concurrent CREATE on PostgreSQL.
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})

    def _search_params(self, user_id: str, query_terms: list[str], limit: int) -> dict[str, Any]:
        return {"query": tsquery(query_terms), "user": user_id, "limit": limit}

    async def _claim(self, conn: AsyncConnection, user_id: str) -> int:
        await conn.execute(
            text(
                "INSERT INTO navi_memory_index_state (user_id, last_seq) VALUES (:user, 0) "
                "ON CONFLICT (user_id) DO NOTHING"
            ),
            {"user": user_id},
        )
        last = await conn.scalar(
            text("SELECT last_seq FROM navi_memory_index_state WHERE user_id = :user FOR UPDATE"),
            {"user": user_id},
        )
        return int(last or 0)

    async def _clear(self, conn: AsyncConnection, user_id: str) -> None:
        await conn.execute(
            text("DELETE FROM navi_memory_index WHERE user_id = :user"), {"user": user_id}
        )

    async def _remove(self, conn: AsyncConnection, user_id: str, fact_id: str) -> None:
        await conn.execute(
            text("DELETE FROM navi_memory_index WHERE user_id = :user AND fact_id = :fact"),
            {"user": user_id, "fact": fact_id},
        )

    async def _insert(self, conn: AsyncConnection, user_id: str, fact: Fact) -> None:
        await conn.execute(
            text(
                "INSERT INTO navi_memory_index "
                "(user_id, fact_id, category, key, value, document) VALUES "
                "(:user, :fact, :category, :key, :value, "
                "setweight(to_tsvector('simple', :key_words), 'A') || "
                "setweight(to_tsvector('simple', :value_words), 'B') || "
                "setweight(to_tsvector('simple', :category_words), 'C'))"
            ),
            {
                "user": user_id,
                "fact": fact.fact_id,
                "category": fact.category,
                "key": fact.key,
                "value": fact.value,
                "key_words": indexed_text(fact.key),
                "value_words": indexed_text(fact.value),
                "category_words": indexed_text(fact.category),
            },
        )


def memory_index_for(store: EventStore) -> MemoryIndex:
    """The index that lives beside ``store``'s events."""
    from events.postgres import PostgresEventStore
    from events.sqlite import SqliteEventStore

    if isinstance(store, SqliteEventStore):
        return SqliteMemoryIndex(lambda: store.engine)
    if isinstance(store, PostgresEventStore):
        return PostgresMemoryIndex(lambda: store.engine)
    return InMemoryIndex()
