"""Replay tests run on every store that keeps snapshots differently: in memory, SQLite,
and PostgreSQL (with the ``postgres`` marker, when NAVI_TEST_POSTGRES_URL is set)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from events.in_memory import InMemoryEventStore
from events.postgres import PostgresEventStore
from events.sqlite import SqliteEventStore
from events.store import EventStore

STORES = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    """The kind of store, and for PostgreSQL its URL (resolved here: the URL fixture is
    synchronous and cannot be set up from inside an async one)."""
    kind = str(request.param)
    url = str(request.getfixturevalue("postgres_url")) if kind == "postgres" else ""
    return kind, url


@pytest.fixture
async def store(store_kind: tuple[str, str], tmp_path: Path) -> AsyncIterator[EventStore]:
    kind, url = store_kind
    if kind == "memory":
        async with InMemoryEventStore() as memory:
            yield memory
    elif kind == "sqlite":
        async with SqliteEventStore(tmp_path / "navi.db") as sqlite:
            yield sqlite
    else:
        async with PostgresEventStore(url) as postgres:
            async with postgres.engine.begin() as conn:
                await conn.execute(text("DROP TABLE IF EXISTS navi_snapshots"))
                await conn.execute(text("TRUNCATE navi_events, navi_idempotency"))
            yield postgres
