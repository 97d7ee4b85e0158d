from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from events.base import LONE_LEADS, PROBE_EVERY, BaseEventStore
from events.memory import InMemoryEventStore
from events.types import LLMText
from tests.events.store_contract import StoreContract


class TestInMemoryEventStore(StoreContract):
    @asynccontextmanager
    async def open_store(self, *, reopen: bool = False, **kw: Any) -> AsyncIterator[BaseEventStore]:
        async with InMemoryEventStore(**kw) as store:
            yield store


@pytest.mark.anyio
async def test_a_lone_writer_stops_gathering_until_others_append_again() -> None:
    """An append that leads its own group commit gives the loop a turn to gather others;
    after a run of leads that gathered nothing, only every few leads still do, and
    concurrent appends are group-committed again."""
    async with InMemoryEventStore() as store, anyio.create_task_group() as tg:
        spins = 0

        async def spin() -> None:  # always ready to run: every gathering turn runs it
            nonlocal spins
            while True:
                spins += 1
                await anyio.lowlevel.checkpoint()

        tg.start_soon(spin)
        await anyio.lowlevel.checkpoint()
        turns = []
        for i in range(32):
            before = spins
            await store.append("s", [LLMText(text=str(i))], expected_seq=i)
            turns.append(spins - before)
        assert sum(turns[:LONE_LEADS]) >= LONE_LEADS  # at first, each lead gathers
        assert sum(turns[2 * LONE_LEADS :]) <= 2 * LONE_LEADS // PROBE_EVERY + 1

        before = store.commit_count

        async def one(k: int) -> None:
            await store.append(f"t{k}", [LLMText(text="x")], expected_seq=0)

        async with anyio.create_task_group() as writers:
            for k in range(50):
                writers.start_soon(one, k)
        assert store.commit_count - before < 50
        assert len(await store.read_all()) == 82
        tg.cancel_scope.cancel()
