from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from events.base import BaseEventStore
from events.sqlite import SqliteEventStore
from events.types import LLMText
from tests.events.store_contract import DurableStoreContract


class TestSqliteEventStore(DurableStoreContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = tmp_path / "navi.db"

    @asynccontextmanager
    async def open_store(self, *, reopen: bool = False, **kw: Any) -> AsyncIterator[BaseEventStore]:
        async with SqliteEventStore(self.path, **kw) as store:
            yield store


def test_unknown_synchronous_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteEventStore(tmp_path / "x.db", synchronous="sometimes")


@pytest.mark.anyio
async def test_an_append_waits_for_another_process_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    """An append that finds the write lock held by another connection (another process)
    is not committed on the loop: it waits in a worker thread, and lands after it."""
    path = tmp_path / "navi.db"
    async with SqliteEventStore(path) as store:
        await store.append("s", [LLMText(text="one")], expected_seq=0)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.005)
                ticks += 1

        async def release() -> None:
            await anyio.sleep(0.2)
            other.execute("COMMIT")

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                tg.start_soon(release)
                records = await store.append("s", [LLMText(text="two")], expected_seq=1)
                tg.cancel_scope.cancel()
        finally:
            other.close()
        assert [r.seq for r in records] == [2]
        assert ticks >= 10  # the loop ran on while the append waited for the lock
        assert [r.event.text for r in await store.read("s")] == ["one", "two"]  # type: ignore[attr-defined]
