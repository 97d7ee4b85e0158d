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
    limiter = RunLimiter(1, position_every_s=3600)  # places: only as the line is joined
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
    # b's leaving moved c to 0, which a watcher learns at its next look (not within the
    # hour); c's own leaving is told at once.
    assert seen == [None, 1, None]
    limiter.release()
    assert limiter.load()["live_runs"] == 0


async def test_no_limit_counts_the_live_runs_only() -> None:
    limiter = RunLimiter(0)
    for key in "abc":
        await limiter.acquire(key)
    assert limiter.load() == {"live_runs": 3, "queued": 0, "max_live_runs": 0}


async def test_a_place_in_the_line_is_told_at_most_once_a_period() -> None:
    limiter = RunLimiter(1, position_every_s=0.2)
    await limiter.acquire("a")
    seen: list[tuple[float, int | None]] = []

    async def watch() -> None:
        async for ahead in limiter.watch("z"):
            seen.append((anyio.current_time(), ahead))

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        for key in ("b", "c", "d", "z"):
            tg.start_soon(limiter.acquire, key)
            await anyio.wait_all_tasks_blocked()
        assert [ahead for _, ahead in seen] == [None, 3]  # joining: told at once
        for _ in range(3):
            limiter.release()  # b, c, d get slots: z moves up three times at once
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(2):
            while seen[-1][1] != 0:
                await anyio.sleep(0.02)
        assert [ahead for _, ahead in seen] == [None, 3, 0]  # one look, not three frames
        assert seen[2][0] - seen[1][0] >= 0.15
        limiter.release()  # z's turn: leaving the line is told at once
        await anyio.wait_all_tasks_blocked()
        assert seen[-1][1] is None
        tg.cancel_scope.cancel()
    assert limiter.live == 1 and limiter._moved == {}  # nothing left behind for z


async def test_a_thousand_waiting_watchers_are_not_woken_by_each_start() -> None:
    """A full node's line moving does not wake every waiting socket (it woke them all,
    each scanning the line: O(waiters²) per slot passed on)."""
    limiter = RunLimiter(1, position_every_s=3600)
    await limiter.acquire("first")
    wakes = 0

    async def watch(key: str) -> None:
        nonlocal wakes
        async for _ in limiter.watch(key):
            wakes += 1

    async with anyio.create_task_group() as tg:
        for i in range(1000):
            tg.start_soon(watch, f"s{i}")
            tg.start_soon(limiter.acquire, f"s{i}")
        await anyio.wait_all_tasks_blocked()
        before = wakes
        for _ in range(500):
            limiter.release()
        await anyio.wait_all_tasks_blocked()
        assert wakes - before == 500  # only those that left the line were told
        tg.cancel_scope.cancel()
