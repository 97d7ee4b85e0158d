"""SessionLock: free → no loop turn; contended → first come first served; a cancelled
waiter neither keeps nor loses the lock for the others."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from navi.session.lock import SessionLock

pytestmark = pytest.mark.anyio


async def test_a_free_lock_is_taken_without_a_loop_turn() -> None:
    lock = SessionLock()
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await anyio.lowlevel.checkpoint()
        before = turns
        for _ in range(10):
            async with lock:
                assert lock.locked()
        assert turns == before
        assert not lock.locked()
        tg.cancel_scope.cancel()


async def test_waiters_get_the_lock_in_the_order_they_came() -> None:
    lock = SessionLock()
    order: list[int] = []

    async def take(n: int) -> None:
        async with lock:
            order.append(n)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        await lock.__aenter__()
        for n in range(5):
            tg.start_soon(take, n)
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        assert order == []
        await lock.__aexit__(None, None, None)
        # A newcomer while the lock is handed over does not barge in.
        tg.start_soon(take, 99)
    assert order == [0, 1, 2, 3, 4, 99]
    assert not lock.locked()


async def test_only_one_holder_at_a_time() -> None:
    lock = SessionLock()
    inside = 0
    most = 0

    async def work() -> None:
        nonlocal inside, most
        for _ in range(20):
            async with lock:
                inside += 1
                most = max(most, inside)
                await anyio.lowlevel.checkpoint()
                inside -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(work)
    assert most == 1
    assert not lock.locked()


async def test_a_waiter_cancelled_before_its_turn_leaves_the_queue() -> None:
    lock = SessionLock()
    got: list[str] = []
    scope = anyio.CancelScope()

    async def take(name: str) -> None:
        async with lock:
            got.append(name)

    async def cancelled_waiter() -> None:
        with scope:
            await take("cancelled")

    async with anyio.create_task_group() as tg:
        await lock.__aenter__()
        tg.start_soon(take, "first")
        tg.start_soon(cancelled_waiter)
        tg.start_soon(take, "last")
        await anyio.lowlevel.checkpoint()
        scope.cancel()
        await anyio.lowlevel.checkpoint()
        await lock.__aexit__(None, None, None)
    assert got == ["first", "last"]
    assert not lock.locked()


async def test_a_waiter_cancelled_as_the_lock_reaches_it_passes_it_on() -> None:
    lock = SessionLock()
    got: list[str] = []
    scope = anyio.CancelScope()

    async def unlucky() -> None:
        with scope:
            async with lock:
                got.append("unlucky")

    async def next_one() -> None:
        async with lock:
            got.append("next")

    async with anyio.create_task_group() as tg:
        await lock.__aenter__()
        tg.start_soon(unlucky)
        await anyio.lowlevel.checkpoint()
        tg.start_soon(next_one)
        await anyio.lowlevel.checkpoint()
        # The first waiter is cancelled, and before it runs again the lock is handed to
        # it: it must pass the lock on, not keep it or drop it.
        scope.cancel()
        await lock.__aexit__(None, None, None)
    assert got == ["next"]
    assert not lock.locked()


async def test_an_error_inside_releases_the_lock() -> None:
    lock = SessionLock()
    with pytest.raises(ValueError):
        async with lock:
            raise ValueError("boom")
    assert not lock.locked()
