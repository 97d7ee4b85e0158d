"""Sandboxed calls running at once (tools/sandbox_slots.py): bounded per user and in all;
a call beyond waits, within its time, and a cancelled wait leaves nothing held."""

from __future__ import annotations

import anyio
import pytest

from tools.base import ToolError
from tools.sandbox_slots import SandboxSlots, SlotBounds, server_slots

BOUNDS = SlotBounds(total=2, per_user=1)


async def test_a_users_second_call_waits_for_the_first() -> None:
    slots = SandboxSlots()
    order: list[str] = []
    first_done = anyio.Event()

    async def first() -> None:
        async with slots.slot("alice", BOUNDS, 30):
            order.append("first")
            await first_done.wait()
        order.append("first released")

    async def second() -> None:
        async with slots.slot("alice", BOUNDS, 30) as waited:
            order.append("second")
            assert waited >= 0

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        assert order == ["first"]  # the second is waiting
        first_done.set()
    assert order == ["first", "first released", "second"]
    assert slots.total == 0


async def test_the_servers_bound_holds_across_users_and_says_which_bound() -> None:
    slots = SandboxSlots()
    async with slots.slot("alice", BOUNDS, 1), slots.slot("bob", BOUNDS, 1):
        with pytest.raises(ToolError, match="2 sandboxed calls are running on this server"):
            async with slots.slot("carol", BOUNDS, 0.05):
                pass
        with pytest.raises(ToolError, match="NAVI_USER_MAX_SANDBOXES=1"):
            async with slots.slot("alice", SlotBounds(total=9, per_user=1), 0.05):
                pass
    assert slots.total == 0 and not slots.running


async def test_a_cancelled_wait_holds_nothing() -> None:
    slots = SandboxSlots()
    async with slots.slot("alice", BOUNDS, 1):
        with anyio.move_on_after(0.05):  # as Stop cancels the call's scope
            async with slots.slot("alice", BOUNDS, 30):
                raise AssertionError("ran past the bound")
        assert slots.running["alice"] == 1
    async with slots.slot("alice", BOUNDS, 1):
        assert slots.total == 1


async def test_one_servers_slots_per_event_loop() -> None:
    assert server_slots() is server_slots()
