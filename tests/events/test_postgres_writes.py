"""The PostgreSQL store's write transaction: the lock, the heads read under it, and the
NOTIFY that wakes other processes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import pytest
from sqlalchemy import text

from events.envelope import Recorded
from events.errors import ConcurrencyError
from events.pg_writes import WRITE_LOCK_KEY
from events.postgres import PostgresEventStore, asyncpg_dsn
from tests.events.store_contract import chunk

pytestmark = pytest.mark.postgres


@pytest.fixture
async def url(postgres_url: str) -> AsyncIterator[str]:
    async with PostgresEventStore(postgres_url) as store, store.engine.begin() as conn:
        await conn.execute(text("TRUNCATE navi_events, navi_idempotency"))
    yield postgres_url


# An advisory lock asked for in this database and not granted yet (the server's other
# databases are other test workers').
WAITING_FOR_A_LOCK = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


@asynccontextmanager
async def holding_the_lock(url: str) -> AsyncIterator[asyncpg.Connection]:
    """Another process's write transaction, holding the write lock."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", WRITE_LOCK_KEY)
            yield conn
    finally:
        await conn.close()


async def insert_other(conn: asyncpg.Connection, position: int, stream: str, seq: int) -> None:
    await conn.execute(
        "INSERT INTO navi_events (position, stream_id, seq, event_id, type, version, "
        """timestamp, payload) VALUES ($1, $2, $3, 'e', 'llm.text', 1, 0, '{"text": "x"}')""",
        position,
        stream,
        seq,
    )


async def test_a_writer_that_waited_for_the_lock_sees_what_its_holder_wrote(url: str) -> None:
    """The heads and the last position are read after the write lock is granted: an
    append that waited for another process's transaction lands after its rows, at the
    first try, instead of colliding with them."""
    async with PostgresEventStore(url) as store:
        await store.append("s", [chunk(1)], expected_seq=0)  # position 1
        for position, stream, expected in ((2, "s", 1), (4, "u", 0)):
            got: list[Recorded] = []

            async def append(stream: str, expected: int, got: list[Recorded]) -> None:
                got.extend(await store.append(stream, [chunk(2)], expected_seq=expected))

            commits = store.commit_count
            async with anyio.create_task_group() as tg, holding_the_lock(url) as other:
                await insert_other(other, position, "t", position // 2)
                tg.start_soon(append, stream, expected, got)
                with anyio.fail_after(20):  # until PostgreSQL shows it waiting for the lock
                    while not await other.fetchval(WAITING_FOR_A_LOCK):
                        await anyio.sleep(0.01)
                assert not got
            assert [r.position for r in got] == [position + 1]
            assert store.commit_count == commits + 1  # not failed, then retried
        assert [r.stream_id for r in await store.read_all()] == ["s", "t", "s", "t", "u"]


async def test_the_lock_is_free_once_the_store_is_idle(url: str) -> None:
    async with PostgresEventStore(url) as store:
        for i in range(10):
            await store.append("s", [chunk(i)], expected_seq=i)
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            async with conn.transaction():
                assert await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", WRITE_LOCK_KEY)
        finally:
            await conn.close()
        assert await store.last_seq("s") == 10


async def test_a_commit_wakes_a_subscriber_in_another_process(url: str) -> None:
    async with PostgresEventStore(url) as writer, PostgresEventStore(url) as reader:
        await writer.append("s", [chunk(1)], expected_seq=0)
        seen: list[int] = []

        async def follow() -> None:
            async for record in reader.subscribe("s"):
                seen.append(record.seq)
                if record.seq == 3:
                    return

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                while not seen:
                    await anyio.sleep(0.01)
                # The subscriber now waits for a wake-up: only the NOTIFY brings it.
                await writer.append("s", [chunk(2), chunk(3)], expected_seq=1)
        assert seen == [1, 2, 3]


async def test_a_transaction_that_writes_nothing_notifies_no_one(url: str) -> None:
    async with PostgresEventStore(url) as writer, PostgresEventStore(url) as reader:
        await writer.append("s", [chunk(1)], expected_seq=0)
        await writer.append("s", [chunk(2)], expected_seq=1, idempotency_key="k")
        with anyio.fail_after(5):
            while reader._foreign_notifies < 2:
                await anyio.sleep(0.01)
        with pytest.raises(ConcurrencyError):
            await writer.append("s", [chunk(9)], expected_seq=0)
        replay = await writer.append("s", [chunk(2)], expected_seq=1, idempotency_key="k")
        assert [r.seq for r in replay] == [2]
        await writer.append("marker", [chunk(1)], expected_seq=0)
        with anyio.fail_after(5):  # notifications arrive in commit order
            while reader._foreign_notifies < 3:
                await anyio.sleep(0.01)
        # The marker's came last: one from the transactions before it would be here.
        assert reader._foreign_notifies == 3
