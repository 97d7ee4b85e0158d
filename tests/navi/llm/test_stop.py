from __future__ import annotations

import anyio
import pytest

from navi.llm.stop import StopSignal

pytestmark = pytest.mark.anyio


async def test_set_cancels_open_scopes_and_wakes_waiters() -> None:
    stop = StopSignal()
    woke = []

    async def waiter() -> None:
        await stop.wait()
        woke.append(True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        with stop.scope() as scope:
            tg.start_soon(lambda: _set_soon(stop))
            await anyio.sleep(30)
    assert scope.cancelled_caught
    assert woke == [True]
    assert stop.is_set() and stop.reason == "user"


async def _set_soon(stop: StopSignal) -> None:
    await anyio.sleep(0.01)
    stop.set("user")


async def test_a_scope_opened_after_the_stop_is_already_cancelled() -> None:
    stop = StopSignal()
    stop.set("shutdown")
    with stop.scope() as scope:
        await anyio.sleep(30)
    assert scope.cancelled_caught and stop.reason == "shutdown"
    await stop.wait()  # returns at once


async def test_a_deadline_is_not_a_stop() -> None:
    stop = StopSignal()
    with stop.scope(anyio.current_time() + 0.01) as scope:
        await anyio.sleep(30)
    assert scope.cancelled_caught and not stop.is_set()


def test_can_be_made_outside_an_event_loop() -> None:
    stop = StopSignal()
    stop.set()
    stop.set("again")  # idempotent: the first reason stays
    assert stop.reason == "user"
