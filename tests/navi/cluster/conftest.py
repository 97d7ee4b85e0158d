from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.chaos.pg import fresh_database


@pytest.fixture
async def cluster_db(postgres_server_url: str) -> AsyncIterator[str]:
    """A fresh database for the nodes of one test."""
    async with fresh_database(postgres_server_url, "navi_cluster") as url:
        yield url
