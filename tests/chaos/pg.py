"""A database of its own for a test (dropped after), on the server of
``NAVI_TEST_POSTGRES_URL``: several nodes of one test share it, and no other test sees
its sessions."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.engine import make_url


@asynccontextmanager
async def fresh_database(server_url: str, prefix: str = "navi_chaos") -> AsyncIterator[str]:
    base = make_url(server_url).set(drivername="postgresql")
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin_dsn = base.render_as_string(hide_password=False)
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        conn = await asyncpg.connect(admin_dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
