"""A PostgreSQL database of its own for a test (or a test session), dropped after."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg
from sqlalchemy.engine import make_url


@contextmanager
def fresh_database(server_url: str, prefix: str = "navi_test") -> Iterator[str]:
    """The URL of a new database on the server ``server_url`` names, dropped on exit, so
    that concurrent test runs on one server never see each other's events."""
    base = make_url(server_url).set(drivername="postgresql")
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(base.render_as_string(hide_password=False))
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
