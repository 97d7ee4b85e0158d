"""Open the event store a URL names."""

from __future__ import annotations

import time

from events.batch import Clock, IdFactory, new_uuid
from events.store import EventStore


def store_for_url(
    url: str,
    *,
    clock: Clock = time.time,
    new_id: IdFactory = new_uuid,
    db_timeout_s: float | None = None,
) -> EventStore:
    """``sqlite:///navi.db`` (or ``sqlite+aiosqlite://``), ``postgresql://…`` (or
    ``postgresql+asyncpg://``), or ``memory://``. Use the result as ``async with``.
    ``db_timeout_s``: the bound of every PostgreSQL wait (default: the store's)."""
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        from events.in_memory import InMemoryEventStore

        return InMemoryEventStore(clock=clock, new_id=new_id)
    if scheme in {"sqlite", "sqlite+aiosqlite"}:
        from events.sqlite import SqliteEventStore

        path = url.split(":///", 1)[1] if ":///" in url else ""
        if not path:
            raise ValueError(f"a SQLite URL needs a path, like sqlite:///navi.db (got {url!r})")
        return SqliteEventStore(path, clock=clock, new_id=new_id)
    if scheme in {"postgresql", "postgres", "postgresql+asyncpg"}:
        from events.postgres import DB_TIMEOUT_S, PostgresEventStore

        timeout = DB_TIMEOUT_S if db_timeout_s is None else db_timeout_s
        return PostgresEventStore(url, clock=clock, new_id=new_id, wait_timeout_s=timeout)
    raise ValueError(
        f"unknown database URL {url!r}: use sqlite:///PATH, postgresql://USER@HOST/DB or memory://"
    )
