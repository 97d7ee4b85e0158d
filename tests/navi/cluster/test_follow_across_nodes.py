"""Two PostgreSQL stores on one database, as two nodes hold them: what one commits, the
other reads at once and its followers get, even when the NOTIFY never comes.

A lost NOTIFY is made real by giving the reader the writer's node id: it then takes
the writer's notifications for its own and drops them, as a node whose LISTEN
connection missed them would."""

from __future__ import annotations

import anyio
import pytest

from events.envelope import Recorded
from events.postgres import PostgresEventStore
from tests.events.store_contract import chunk

pytestmark = pytest.mark.postgres


async def test_a_read_on_another_node_is_never_answered_from_a_stale_head(
    cluster_db: str,
) -> None:
    async with PostgresEventStore(cluster_db) as a, PostgresEventStore(cluster_db) as b:
        b.node_id = a.node_id  # b hears none of a's commits
        await a.append("s", [chunk(1)], expected_seq=0)
        assert [r.seq for r in await b.read("s")] == [1]
        await a.append("s", [chunk(2)], expected_seq=1)
        # What ?after= asks: exactly what the log holds after seq 1.
        assert [r.seq for r in await b.read("s", after_seq=1)] == [2]
        assert [r.seq for r in await b.read("s", after_seq=1, limit=10)] == [2]


async def test_a_follower_gets_a_commit_whose_notify_was_lost(cluster_db: str) -> None:
    async with PostgresEventStore(cluster_db) as a, PostgresEventStore(cluster_db) as b:
        b.node_id = a.node_id
        b.recheck_s = 0.2
        await a.append("s", [chunk(1)], expected_seq=0)
        got: list[Recorded] = []
        first = anyio.Event()

        async def follow() -> None:
            async for record in b.subscribe("s"):
                got.append(record)
                first.set()
                if record.seq == 3:
                    return

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await first.wait()  # b follows from its own read of the head
                await a.append("s", [chunk(2)], expected_seq=1)
                await a.append("s", [chunk(3)], expected_seq=2)
        assert [r.seq for r in got] == [1, 2, 3]


async def test_a_follower_on_a_node_that_wrote_the_stream_before_sees_the_new_owner(
    cluster_db: str,
) -> None:
    """b committed to the stream (its cache holds it), then a took over: b's cache is
    stale once a's NOTIFY is lost, and b's follower still gets a's events."""
    async with PostgresEventStore(cluster_db) as a, PostgresEventStore(cluster_db) as b:
        await b.append("s", [chunk(1)], expected_seq=0)
        b.node_id = a.node_id
        b.recheck_s = 0.2
        got: list[int] = []

        async def follow() -> None:
            async for record in b.subscribe("s", after_seq=1):
                got.append(record.seq)
                return

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await a.append("s", [chunk(2)], expected_seq=1)
        assert got == [2]
        assert [r.seq for r in await b.read("s", after_seq=1)] == [2]
