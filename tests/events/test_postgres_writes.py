"""The PostgreSQL store's write transaction: the streams' locks, the heads read under
them, positions from transaction ids, the bound on every wait, and the NOTIFY that wakes
other processes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import pytest
from sqlalchemy import text

from events.envelope import Recorded
from events.errors import ConcurrencyError
from events.factory import store_for_url
from events.pg_writes import POSITION_SHIFT, DatabaseWaitTimeout, stream_lock_key, wait_settings
from events.postgres import PostgresEventStore, asyncpg_dsn
from navi.config import Settings
from tests.chaos.pg import fresh_database
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
async def other_writer(
    url: str, *streams: str, timeout_s: float | None = None
) -> AsyncIterator[asyncpg.Connection]:
    """Another process's write transaction, holding the locks of ``streams`` (and, with
    ``timeout_s``, the store's bounds on its waits)."""
    settings = wait_settings(timeout_s) if timeout_s is not None else {}
    conn = await asyncpg.connect(asyncpg_dsn(url), server_settings=settings)
    try:
        tx = conn.transaction()
        await tx.start()
        for stream in streams:
            await conn.execute("SELECT pg_advisory_xact_lock($1)", stream_lock_key(stream))
        yield conn
        if not conn.is_closed() and conn.is_in_transaction():
            await tx.commit()
    finally:
        await conn.close()


async def insert_other(conn: asyncpg.Connection, stream: str, seq: int) -> int:
    """A row written as the store writes it (its position from the transaction's id)."""
    return int(
        await conn.fetchval(
            "INSERT INTO navi_events (position, stream_id, seq, event_id, type, version, "
            "timestamp, payload) VALUES ((pg_current_xact_id()::text::bigint << $3) + 1, "
            """$1, $2, 'e', 'llm.text', 1, 0, '{"text": "x"}') RETURNING position""",
            stream,
            seq,
            POSITION_SHIFT,
        )
    )


async def test_writers_of_other_streams_do_not_wait_for_each_other(url: str) -> None:
    """No lock is shared by all writers: a transaction still open on stream "t" holds
    up no append to "s"."""
    async with PostgresEventStore(url) as store, other_writer(url, "t") as other:
        await insert_other(other, "t", 1)
        with anyio.fail_after(10):
            got = await store.append("s", [chunk(1)], expected_seq=0)
        assert [r.seq for r in got] == [1]
        assert other.is_in_transaction()


async def test_a_writer_that_waited_for_a_stream_sees_what_its_holder_wrote(url: str) -> None:
    """The heads are read after the stream's lock is granted: an append that waited for
    another process's transaction on its stream lands after its rows, at the first try,
    instead of colliding with them; and its position comes after theirs."""
    async with PostgresEventStore(url) as store:
        await store.append("s", [chunk(1)], expected_seq=0)
        got: list[Recorded] = []

        async def append() -> None:
            got.extend(await store.append("s", [chunk(3)], expected_seq=2))

        commits = store.commit_count
        async with anyio.create_task_group() as tg, other_writer(url, "s") as other:
            theirs = await insert_other(other, "s", 2)
            tg.start_soon(append)
            with anyio.fail_after(20):  # until PostgreSQL shows it waiting for the lock
                while not await other.fetchval(WAITING_FOR_A_LOCK):
                    await anyio.sleep(0.01)
            assert not got
        assert [r.seq for r in got] == [3]
        assert got[0].position > theirs
        assert store.commit_count == commits + 1  # not failed, then retried
        assert [(r.stream_id, r.seq) for r in await store.read_all()] == [
            ("s", 1),
            ("s", 2),
            ("s", 3),
        ]


async def test_read_all_never_passes_a_transaction_still_running(url: str) -> None:
    """A transaction that began first and commits last has the lower positions: a reader
    by position stops before it while it runs, and so misses nothing once it commits."""
    async with PostgresEventStore(url) as store:
        store.held_back_wait_s = 0.05
        async with other_writer(url, "late") as other:
            await insert_other(other, "late", 1)
            await store.append("early", [chunk(1)], expected_seq=0)
            assert await store.read_all() == []  # "early" is held back behind "late"
            assert [r.seq for r in await store.read("early")] == [1]  # per stream: at once
        everything = await store.read_all()
        assert [r.stream_id for r in everything] == ["late", "early"]
        # A reader that had read up to some position finds the late commit after it.
        assert [r.stream_id for r in await store.read_all(after_position=0, limit=1)] == ["late"]


async def test_read_all_waits_briefly_for_a_peer_to_commit(url: str) -> None:
    """A node reads its own commit in the global log even while another node's
    transaction, begun before it, is still running: the read waits for that one."""
    async with PostgresEventStore(url) as store:
        store.held_back_wait_s = 20.0
        async with anyio.create_task_group() as tg, other_writer(url, "peer") as other:
            await insert_other(other, "peer", 1)
            await store.append("mine", [chunk(1)], expected_seq=0)
            seen: list[str] = []

            async def read() -> None:
                seen.extend(r.stream_id for r in await store.read_all())

            tg.start_soon(read)
            with anyio.fail_after(10):  # the read found "mine" held back, and waits
                while not store.held_back_reads:
                    await anyio.sleep(0.001)
            assert not seen
            await other.execute("COMMIT")
        assert seen == ["peer", "mine"]


async def test_a_transaction_in_another_database_holds_no_reader_back(
    url: str, postgres_server_url: str
) -> None:
    """Other applications' transactions on the same server never write this log: a
    long one does not hold the global log back."""
    async with fresh_database(postgres_server_url, "navi_elsewhere") as elsewhere:
        conn = await asyncpg.connect(asyncpg_dsn(elsewhere))
        try:
            async with conn.transaction(), PostgresEventStore(url) as store:
                await conn.fetchval("SELECT pg_current_xact_id()")  # running, with an id
                store.held_back_wait_s = 20.0
                await store.append("s", [chunk(1)], expected_seq=0)
                with anyio.fail_after(10):
                    assert [r.stream_id for r in await store.read_all()] == ["s"]
                assert store.held_back_reads == 0
        finally:
            await conn.close()


async def test_a_lock_wait_ends_with_a_clear_error_and_writes_nothing(url: str) -> None:
    async with PostgresEventStore(url, wait_timeout_s=0.3) as store:
        async with other_writer(url, "s"):
            with (
                anyio.fail_after(10),
                pytest.raises(DatabaseWaitTimeout, match="nothing was written"),
            ):
                await store.append("s", [chunk(1)], expected_seq=0)
            # The store goes on: other streams are written meanwhile.
            assert [r.seq for r in await store.append("t", [chunk(1)], expected_seq=0)] == [1]
        assert await store.read("s") == []
        assert [r.seq for r in await store.append("s", [chunk(1)], expected_seq=0)] == [1]


async def test_a_frozen_writers_transaction_is_ended_by_the_server(url: str) -> None:
    """A node that stops inside a write transaction (SIGSTOP: its connection idles in
    the transaction) holds its streams for no longer than its bound: then PostgreSQL
    ends it, its rows are gone, and the others' appends go through."""
    async with PostgresEventStore(url, wait_timeout_s=10) as store:
        async with other_writer(url, "s", timeout_s=0.5) as frozen:
            await insert_other(frozen, "s", 1)
            with anyio.fail_after(10):
                got = await store.append("s", [chunk(1)], expected_seq=0)
            assert [r.seq for r in got] == [1]
            # The frozen node, woken: its transaction is gone. (asyncpg may find its
            # connection mid-operation after the server ended it: InternalClientError.)
            gone = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError)
            with pytest.raises(gone):
                await frozen.execute("COMMIT")
        assert [r.event_id for r in await store.read("s")] == [got[0].event_id]


async def test_the_streams_lock_is_free_once_the_store_is_idle(url: str) -> None:
    async with PostgresEventStore(url) as store:
        for i in range(10):
            await store.append("s", [chunk(i)], expected_seq=i)
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            async with conn.transaction():
                key = stream_lock_key("s")
                assert await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", key)
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


async def test_the_bound_is_the_db_timeout_setting(url: str) -> None:
    settings = Settings.from_env({**os.environ, "NAVI_DB_TIMEOUT_S": "2.5"})
    assert settings.db_timeout_s == 2.5
    store = store_for_url(url, db_timeout_s=settings.db_timeout_s)
    assert isinstance(store, PostgresEventStore)
    async with store, store.engine.connect() as conn:
        for name in ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout"):
            assert (await conn.execute(text(f"SHOW {name}"))).scalar() == "2500ms"


async def test_a_stream_id_never_reaches_the_sql_of_the_locks(url: str) -> None:
    """The BEGIN with the streams' locks is one text message: only integer keys made
    from the ids are in it, so an id written as SQL is just a name."""
    hostile = "x'}'::bigint[]); DROP TABLE navi_events; --"
    async with PostgresEventStore(url) as store:
        await store.append(hostile, [chunk(1)], expected_seq=0)
        await store.append("s", [chunk(1)], expected_seq=0)
        assert [r.stream_id for r in await store.read_all()] == [hostile, "s"]
