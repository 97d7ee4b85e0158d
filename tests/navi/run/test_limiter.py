"""The node's limit on live runs: first come, first served; leaving the line loses nothing."""

from __future__ import annotations

import anyio
import pytest

from navi.run.limiter import RunLimiter

pytestmark = pytest.mark.anyio


async def test_waiters_get_slots_in_arrival_order_and_see_their_place() -> None:
    limiter = RunLimiter(1)
    await limiter.acquire("a")
    order: list[str] = []

    async def run(key: str) -> None:
        await limiter.acquire(key)
        order.append(key)

    async with anyio.create_task_group() as tg:
        for key in ("b", "c", "d"):
            tg.start_soon(run, key)
            await anyio.wait_all_tasks_blocked()
        assert [limiter.ahead(k) for k in ("a", "b", "c", "d")] == [None, 0, 1, 2]
        assert limiter.load() == {"live_runs": 1, "queued": 3, "max_live_runs": 1}
        for _ in range(3):
            limiter.release()
            await anyio.wait_all_tasks_blocked()
    assert order == ["b", "c", "d"]
    limiter.release()
    assert limiter.load() == {"live_runs": 0, "queued": 0, "max_live_runs": 1}


async def test_cancel_while_waiting_removes_the_waiter_and_a_release_frees_the_slot() -> None:
    limiter = RunLimiter(1)
    await limiter.acquire("a")
    seen: list[int | None] = []

    async def watch() -> None:
        async for ahead in limiter.watch("c"):
            seen.append(ahead)

    async def wait(key: str, scope: anyio.CancelScope) -> None:
        with scope:
            await limiter.acquire(key)

    b, c = anyio.CancelScope(), anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        tg.start_soon(wait, "b", b)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(wait, "c", c)
        await anyio.wait_all_tasks_blocked()
        b.cancel()
        await anyio.wait_all_tasks_blocked()
        assert limiter.ahead("c") == 0 and limiter.queued == 1
        c.cancel()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert seen == [None, 1, 0, None]
    limiter.release()
    assert limiter.load()["live_runs"] == 0


async def test_no_limit_counts_the_live_runs_only() -> None:
    limiter = RunLimiter(0)
    for key in "abc":
        await limiter.acquire(key)
    assert limiter.load() == {"live_runs": 3, "queued": 0, "max_live_runs": 0}
