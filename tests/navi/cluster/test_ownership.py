"""Session ownership: PostgreSQL advisory locks held on one connection per node."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import pytest

from navi.cluster.ownership import (
    ClusterUnavailable,
    PostgresOwnership,
    lock_key,
)

pytestmark = pytest.mark.postgres


@asynccontextmanager
async def node(
    url: str, name: str, lost: list[set[str]] | None = None
) -> AsyncIterator[PostgresOwnership]:
    async def on_lost(sessions: set[str]) -> None:
        if lost is not None:
            lost.append(sessions)

    ownership = PostgresOwnership(
        url, node_id=name, on_lost=on_lost, on_notify=lambda payload: None, check_s=0.1
    )
    async with anyio.create_task_group() as tg:
        await tg.start(ownership.run)
        yield ownership
        tg.cancel_scope.cancel()


def test_lock_keys_are_stable_signed_64_bit_numbers() -> None:
    keys = {lock_key(f"session-{i}") for i in range(2000)}
    assert len(keys) == 2000
    assert all(-(2**63) <= k < 2**63 for k in keys)
    assert any(k < 0 for k in keys) and any(k > 0 for k in keys)
    assert lock_key("abc") == lock_key("abc")


async def test_one_node_owns_a_session_until_it_lets_go(cluster_db: str) -> None:
    async with node(cluster_db, "a") as a, node(cluster_db, "b") as b:
        assert await a.claim(["s1", "s2"]) == {"s1", "s2"}
        assert await b.claim(["s1", "s3"]) == {"s3"}
        assert await a.claim(["s1"]) == {"s1"}  # again: still its own, and only once
        assert await b.locked(["s1", "s2", "s3", "s4"]) == {"s1", "s2", "s3"}
        await a.release("s1")
        assert await b.claim(["s1"]) == {"s1"}
        assert a.held == {"s2"} and b.held == {"s1", "s3"}


async def test_locks_with_negative_keys_are_seen(cluster_db: str) -> None:
    negative = next(f"s{i}" for i in range(100) if lock_key(f"s{i}") < 0)
    async with node(cluster_db, "a") as a, node(cluster_db, "b") as b:
        await a.claim([negative])
        assert await b.locked([negative]) == {negative}


async def test_a_node_that_goes_away_lets_go_of_its_sessions(cluster_db: str) -> None:
    async with node(cluster_db, "b") as b:
        async with node(cluster_db, "a") as a:
            await a.claim(["s1"])
            assert await b.claim(["s1"]) == set()
        assert await b.claim(["s1"]) == {"s1"}


async def test_a_broken_connection_is_reopened_and_the_sessions_taken_back(cluster_db: str) -> None:
    lost: list[set[str]] = []
    async with node(cluster_db, "a", lost) as a, node(cluster_db, "b") as b:
        await a.claim(["s1", "s2"])
        await _kill_connections(cluster_db, "navi-node-a")
        with anyio.fail_after(10):
            while a.reconnects == 0:
                await anyio.sleep(0.02)
        assert a.held == {"s1", "s2"} and lost == []
        assert await b.claim(["s1", "s2"]) == set()


async def test_sessions_taken_meanwhile_are_reported_lost(cluster_db: str) -> None:
    lost: list[set[str]] = []
    async with node(cluster_db, "a", lost) as a, node(cluster_db, "b") as b:
        await a.claim(["s1", "s2"])
        a._check_s = 0.5  # b gets its chance while a has not noticed yet
        await _kill_connections(cluster_db, "navi-node-a")
        assert await b.claim(["s1"]) == {"s1"}
        with anyio.fail_after(10):
            while not lost:
                await anyio.sleep(0.02)
        assert lost == [{"s1"}]
        assert a.held == {"s2"}


async def test_claims_while_disconnected_are_refused_clearly(cluster_db: str) -> None:
    async with node(cluster_db, "a") as a:
        a._conn, conn = None, a._conn
        with pytest.raises(ClusterUnavailable, match="unreachable"):
            await a.claim(["s1"])
        a._conn = conn


async def _kill_connections(url: str, application_name: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            application_name,
        )
    finally:
        await conn.close()
