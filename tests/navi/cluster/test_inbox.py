"""The durable inbox and what the log says about runs (PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import asyncpg
import pytest

from events.envelope import NewEvent
from events.postgres import PostgresEventStore
from events.types import RunCompleted, RunStarted, UserMessage
from navi.cluster.inbox import Inbox, RunIndex
from navi.cluster.ownership import PostgresOwnership

pytestmark = pytest.mark.postgres


@pytest.fixture
async def pool(cluster_db: str) -> AsyncIterator[asyncpg.Pool]:
    async with PostgresEventStore(cluster_db):  # the events table the index is on
        pass
    pool = await asyncpg.create_pool(cluster_db, min_size=1, max_size=2)
    try:
        await Inbox(pool, node_id="t").create_schema()
        yield pool
    finally:
        await pool.close()


async def test_a_row_goes_from_pending_to_accepted_to_done_and_each_step_is_notified(
    cluster_db: str, pool: asyncpg.Pool
) -> None:
    heard: list[str] = []

    async def on_lost(_: set[str]) -> None:
        pass

    listener = PostgresOwnership(cluster_db, node_id="l", on_lost=on_lost, on_notify=heard.append)
    inbox = Inbox(pool, node_id="t")
    async with anyio.create_task_group() as tg:
        await tg.start(listener.run)
        await inbox.put("r1", "s1", "send", {"text": "hi", "queue": True})
        await inbox.put("r2", "s2", "stop", {"reason": "user", "run_id": "x"})
        pending = await inbox.pending(["s1"])
        assert [(r.id, r.kind, r.payload["text"]) for r in pending] == [("r1", "send", "hi")]
        await inbox.accept("r1", {"after_seq": 3, "queued": True})
        row = await inbox.get("r1")
        assert row is not None and row.accepted_at is not None and row.done_at is None
        assert row.result == {"after_seq": 3, "queued": True}
        await inbox.finish("r1", None)  # keeps the answer it had
        row = await inbox.get("r1")
        assert row is not None and row.done_at is not None and row.result["after_seq"] == 3
        assert await inbox.pending(["s1", "s2"]) == [r for r in await inbox.pending(["s2"])]
        await inbox.finish("r2", {"error": "no", "status": 409})
        refused = await inbox.get("r2")
        assert refused is not None and refused.error == {"error": "no", "status": 409}
        with anyio.fail_after(5):
            while len(heard) < 5:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert heard == ["new:s1", "new:s2", "done:r1", "done:r1", "done:r2"]
    assert await inbox.get("missing") is None
    assert await inbox.prune(keep_s=0) == 2


async def test_rows_left_waiting_are_found(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool, node_id="t")
    await inbox.put("r1", "s1", "send", {"text": "hi"})
    assert await inbox.waiting_sessions(older_than_s=60) == set()
    assert await inbox.waiting_sessions(older_than_s=-1) == {"s1"}


async def test_the_run_index_answers_from_the_log(cluster_db: str, pool: asyncpg.Pool) -> None:
    runs = RunIndex(pool)
    started = RunStarted(profile_id="p", profile_hash="h", max_iterations=5, backend="b", model="m")
    async with PostgresEventStore(cluster_db) as store:
        await store.append(
            "open",
            [
                NewEvent(event=UserMessage(text="x"), run_id="r1"),
                NewEvent(event=started, run_id="r1"),
            ],
            expected_seq=0,
        )
        await store.append(
            "done",
            [
                NewEvent(event=UserMessage(text="x"), run_id="r2"),
                NewEvent(event=started, run_id="r2"),
                NewEvent(event=RunCompleted(content="ok"), run_id="r2"),
            ],
            expected_seq=0,
        )
        await store.append("memory:local", [NewEvent(event=started, run_id="r3")], expected_seq=0)
    assert await runs.open_runs() == {"open": "r1"}
    assert await runs.active_run("open") == "r1"
    assert await runs.active_run("done") is None
    assert await runs.first_seq_of_run("done", "r2") == 1
    assert await runs.first_seq_of_run("done", "r9") is None
    assert await runs.run_ended("done", "r2") and not await runs.run_ended("open", "r1")
    assert await runs.last_seq("done") == 3 and await runs.last_seq("nothing") == 0
