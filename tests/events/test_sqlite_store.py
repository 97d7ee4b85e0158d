from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from events.base import BaseEventStore
from events.sqlite import SqliteEventStore
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
