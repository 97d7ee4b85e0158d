"""Both ``/v1`` ledgers keep ledger_contract.py: in memory (one node), and in
PostgreSQL, where the two ledgers are two nodes' (each its own pool) on one table."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from navi.server.openai.ledger import Ledger, RunLedger
from navi.server.openai.ledger_pg import PostgresRunLedger
from tests.navi.server.ledger_contract import LedgerContract


class TestMemoryLedger(LedgerContract):
    @asynccontextmanager
    async def open_nodes(self) -> AsyncIterator[tuple[Ledger, Ledger]]:
        ledger = RunLedger()
        yield ledger, ledger


@pytest.mark.postgres
class TestPostgresLedger(LedgerContract):
    @pytest.fixture(autouse=True)
    def _url(self, postgres_url: str) -> None:
        self.url = postgres_url

    @asynccontextmanager
    async def open_nodes(self) -> AsyncIterator[tuple[Ledger, Ledger]]:
        async with PostgresRunLedger.open(self.url) as a, PostgresRunLedger.open(self.url) as b:
            yield a, b
