from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import text

from events.postgres import PostgresEventStore
from events.store import EventStore
from tests.events.store_contract import DurableStoreContract
from tests.events.writer_contract import WriterContract

pytestmark = pytest.mark.postgres


class TestPostgresEventStore(DurableStoreContract, WriterContract):
    @pytest.fixture(autouse=True)
    def _url(self, postgres_url: str) -> None:
        self.url = postgres_url

    @asynccontextmanager
    async def open_store(self, *, reopen: bool = False, **kw: Any) -> AsyncIterator[EventStore]:
        async with PostgresEventStore(self.url, **kw) as store:
            if not reopen:
                async with store.engine.begin() as conn:
                    await conn.execute(text("TRUNCATE navi_events, navi_idempotency"))
            yield store
