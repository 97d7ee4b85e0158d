"""The PostgreSQL store's write transaction: the lock, the heads read under it, batches
planned ahead and written before they are checked, the transaction begun by the commit
before, and the NOTIFY that wakes other processes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import pytest
from sqlalchemy import text

from events.base import AppendRequest
from events.envelope import NewEvent
from events.errors import ConcurrencyError
from events.pg_writes import PLANNED_AHEAD_HELD, WRITE_LOCK_KEY
from events.postgres import PostgresEventStore, asyncpg_dsn
from tests.events.store_contract import chunk

pytestmark = pytest.mark.postgres


@pytest.fixture
async def url(postgres_url: str) -> AsyncIterator[str]:
    async with PostgresEventStore(postgres_url) as store, store.engine.begin() as conn:
        await conn.execute(text("TRUNCATE navi_events, navi_idempotency"))
    yield postgres_url


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


async def submit_all(store: PostgresEventStore, appends: list[tuple[str, object, int]]) -> list:
    """Submitted together, before the committer runs: one batch per append (the test
    sets max_batch_events), each planned ahead on the ones before it when it can be."""
    return [
        await store.submit(stream, [event], expected_seq=seq)  # type: ignore[list-item]
        for stream, event, seq in appends
    ]


def positions_are_gap_free(records: list) -> bool:
    return [r.position for r in records] == list(range(1, len(records) + 1))


async def test_a_writer_that_waited_for_the_lock_sees_what_its_holder_wrote(url: str) -> None:
    """The heads and the last position are read after the write lock is granted: an
    append that waited for another process's transaction lands after its rows (planned
    ahead or not), at the first try, instead of colliding with them."""
    async with PostgresEventStore(url) as store:
        await store.append("s", [chunk(1)], expected_seq=0)  # position 1
        # "s" is planned ahead (the store knows its head), "u" is not.
        for position, stream, expected in ((2, "s", 1), (4, "u", 0)):
            async with holding_the_lock(url) as other:
                await insert_other(other, position, "t", position // 2)
                commits = store.commit_count
                request = await store.submit(stream, [chunk(2)], expected_seq=expected)
                await anyio.sleep(0.2)  # it waits for the lock
                assert not request.done.is_set()
            [got] = await store.result(request)
            assert got.position == position + 1
            assert store.commit_count == commits + 1  # not failed, then retried
        assert [r.stream_id for r in await store.read_all()] == ["s", "t", "s", "t", "u"]


async def test_a_batch_planned_after_one_that_failed_is_planned_again(url: str) -> None:
    """A batch planned ahead on one that then fails in the database is written in the
    transaction the commit before it began, checked, rolled back and planned again:
    no gap in positions or seqs."""
    async with PostgresEventStore(url) as store:
        store.max_batch_events = 2
        await store.append("a", [chunk(0)], expected_seq=0)
        await store.append("b", [chunk(0)], expected_seq=0)
        too_long = NewEvent(event=chunk(9), run_id="r" * 100)  # fails in the COPY
        requests = await submit_all(
            store,
            [("b", too_long, 1), ("a", chunk(1), 1)]  # one batch: fails, then one by one
            + [("a", chunk(2), 2), ("b", chunk(2), 1)]  # planned on the batch above
            + [(f"more-{i}", chunk(i), 0) for i in range(4)],  # queued: lock ahead
        )
        outcomes = []
        for request in requests:
            try:
                outcomes.append([r.seq for r in await store.result(request)])
            except Exception as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == "StringDataRightTruncationError"
        assert outcomes[1:4] == [[2], [3], [2]]
        everything = await store.read_all()
        assert positions_are_gap_free(everything)
        assert [r.seq for r in everything if r.stream_id == "b"] == [1, 2]


async def test_a_batch_planned_before_another_process_wrote_is_planned_again(url: str) -> None:
    """Another process writes while the store waits for the lock: the batch in flight
    is planned again under the lock, and the batch planned ahead on it, written in the
    transaction begun by its commit, collides with the other rows and is planned again."""
    async with PostgresEventStore(url) as store:
        store.max_batch_events = 1
        await store.append("s", [chunk(0)], expected_seq=0)
        async with holding_the_lock(url) as other:
            await insert_other(other, 2, "t", 1)
            requests = await submit_all(
                store, [("s", chunk(i), i) for i in range(1, 4)] + [("u", chunk(0), 0)]
            )
            await anyio.sleep(0.1)
        results = [await store.result(r) for r in requests]
        assert [[r.seq for r in got] for got in results] == [[2], [3], [4], [1]]
        everything = await store.read_all()
        assert positions_are_gap_free(everything)
        assert [r.stream_id for r in everything] == ["s", "t", "s", "s", "s", "u"]


async def test_the_check_of_a_plan_made_ahead(url: str) -> None:
    """``PLANNED_AHEAD_HELD``, once the batch's rows are in: true only if the log held
    exactly the planned position and heads before them."""
    async with PostgresEventStore(url):
        pass
    conn = await asyncpg.connect(asyncpg_dsn(url))

    async def held(
        log: list[tuple[str, int]],
        planned: int,
        heads: dict[str, int],
        ours: list[tuple[str, int]],
    ) -> bool:
        await conn.execute("TRUNCATE navi_events")
        for position, (stream, seq) in enumerate(log, start=1):
            await insert_other(conn, position, stream, seq)
        last = dict(heads)
        for position, (stream, seq) in enumerate(ours, start=planned + 1):
            await insert_other(conn, position, stream, seq)
            last[stream] = seq
        streams = list(last)
        return bool(
            await conn.fetchval(
                PLANNED_AHEAD_HELD,
                planned,
                planned + len(ours),
                streams,
                [heads[s] for s in streams],
                [last[s] for s in streams],
                "navi_test",
                "x:",
            )
        )

    log = [("a", 1), ("a", 2), ("b", 1)]
    try:
        assert await held(log, 3, {"a": 2, "b": 1, "new": 0}, [("a", 3), ("a", 4)])
        assert await held(log, 3, {"a": 2, "new": 0}, [("new", 1)])
        assert await held(log, 3, {"b": 1}, [])
        # The plan counted on a batch that failed: a gap in the positions...
        assert not await held(log[:2], 3, {"a": 2}, [("a", 3)])
        # ... or in the seqs (a stream the batch writes nothing to).
        assert not await held(log[:2], 2, {"a": 2, "b": 1}, [("a", 3)])
        # The log went on past the plan, where the batch's rows cannot collide with it.
        assert not await held(log, 2, {"c": 0}, [])
        assert not await held(log, 3, {"a": 1}, [])
        assert not await held(log, 3, {"b": 0, "a": 2}, [("a", 3)])
    finally:
        await conn.close()


async def test_the_lock_is_taken_ahead_only_while_appends_are_queued(url: str) -> None:
    async with PostgresEventStore(url) as store:
        store.max_batch_events = 1
        requests = await submit_all(store, [("s", chunk(i), i) for i in range(10)])
        for request in requests:
            await store.result(request)
        # The last commit found nothing queued: the lock is free, the store idle.
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            async with conn.transaction():
                assert await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", WRITE_LOCK_KEY)
        finally:
            await conn.close()
        assert await store.last_seq("s") == 10


async def test_a_commit_whose_next_transaction_fails_to_begin_is_still_a_commit(
    url: str,
) -> None:
    """The COMMIT and the next transaction's BEGIN and lock go in one message: if only
    the second part fails (a lock_timeout, say), the commit stands and is not retried."""
    async with PostgresEventStore(url) as store:
        store.max_batch_events = 1
        store._begin_next = "BEGIN; SELECT 1/0"
        requests: list[AppendRequest] = await submit_all(
            store, [("s", chunk(i), i) for i in range(5)]
        )
        results = [await store.result(r) for r in requests]
        assert [[r.seq for r in got] for got in results] == [[1], [2], [3], [4], [5]]
        assert [r.seq for r in await store.read("s")] == [1, 2, 3, 4, 5]
        assert store.commit_count == 5


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
        await anyio.sleep(0.05)
        assert reader._foreign_notifies == 3
