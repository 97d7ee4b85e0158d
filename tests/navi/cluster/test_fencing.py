"""Ownership as a lease with a fencing token: a node that stops answering loses its
sessions within its lease, and its late writes are refused by the store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from events.pg_writes import FencedError
from events.postgres import PostgresEventStore
from navi.cluster.ownership import PostgresOwnership
from tests.events.store_contract import chunk

pytestmark = pytest.mark.postgres


async def _nothing_lost(sessions: set[str]) -> None:
    pass


def ownership(url: str, name: str, store: PostgresEventStore, lease_s: float) -> PostgresOwnership:
    return PostgresOwnership(
        url,
        node_id=name,
        on_lost=_nothing_lost,
        on_notify=lambda payload: None,
        check_s=0.1,
        db_timeout_s=lease_s,
        fences=store,
    )


@asynccontextmanager
async def running(node: PostgresOwnership) -> AsyncIterator[PostgresOwnership]:
    async with anyio.create_task_group() as tg:
        await tg.start(node.run)
        yield node
        tg.cancel_scope.cancel()


async def test_a_frozen_owner_is_replaced_and_its_late_append_refused(cluster_db: str) -> None:
    async with PostgresEventStore(cluster_db) as store_a, PostgresEventStore(cluster_db) as store_b:
        frozen = ownership(cluster_db, "a", store_a, lease_s=1.0)
        # Connected, but never asking again: what a node stopped by SIGSTOP looks like
        # to the database (its heartbeat, ``run``, does not run).
        await frozen._connect()
        try:
            assert await frozen.claim(["s"]) == {"s"}
            await store_a.append("s", [chunk(1)], expected_seq=0)
            async with running(ownership(cluster_db, "b", store_b, lease_s=10.0)) as b:
                with anyio.fail_after(15):  # the lease runs out: the server drops "a"
                    while not await b.claim(["s"]):
                        await anyio.sleep(0.1)
                # "a" wakes and appends at the head it knows, which is still the log's
                # head ("b" has written nothing yet): refused all the same.
                with pytest.raises(FencedError, match="taken over"):
                    await store_a.append("s", [chunk(2)], expected_seq=1)
                await store_b.append("s", [chunk(3)], expected_seq=1)
                # Once it releases, any node may take it again, with a newer epoch.
                await b.release("s")
                assert await b.claim(["s"]) == {"s"}
                await store_b.append("s", [chunk(4)], expected_seq=2)
        finally:
            await frozen._disconnect()
        texts = [r.event.text for r in await store_b.read("s")]  # type: ignore[attr-defined]
        assert texts == ["chunk 1", "chunk 3", "chunk 4"]


async def test_a_session_kept_across_a_reconnect_is_still_written(cluster_db: str) -> None:
    """Taking a session back after the connection broke moves its epoch on, and this
    node's own store follows: its writes go on."""
    store = PostgresEventStore(cluster_db)
    async with store, running(ownership(cluster_db, "a", store, lease_s=10.0)) as a:
        assert await a.claim(["s"]) == {"s"}
        await store.append("s", [chunk(1)], expected_seq=0)
        assert a._conn is not None
        a._conn.terminate()
        with anyio.fail_after(15):
            while a.reconnects < 1:
                await anyio.sleep(0.05)
        assert a.held == {"s"}
        await store.append("s", [chunk(2)], expected_seq=1)
