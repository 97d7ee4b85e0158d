from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from events.in_memory import InMemoryEventStore
from events.store import EventStore
from tests.events.store_contract import StoreContract
from tests.events.writer_contract import WriterContract


class TestInMemoryEventStore(StoreContract, WriterContract):
    @asynccontextmanager
    async def open_store(self, *, reopen: bool = False, **kw: Any) -> AsyncIterator[EventStore]:
        async with InMemoryEventStore(**kw) as store:
            yield store
