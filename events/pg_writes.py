"""The statements of the PostgreSQL store's write transaction (``events.postgres``)."""

from __future__ import annotations

import anyio
import asyncpg
import structlog

log = structlog.get_logger(__name__)

CHANNEL = "navi_events"
# pg_advisory_xact_lock key held by every event writer ("navi" in ASCII).
WRITE_LOCK_KEY = 0x6E617669

# A write transaction takes the write lock first, in the same message as its BEGIN. Read
# committed, so that each statement after the lock sees every transaction that held it
# before. The NOTIFY of every stream of the batch is queued by a statement of the
# transaction: PostgreSQL sends it only at COMMIT (and a stream whose append turns out
# stale gets a needless wake-up: its listeners re-read).
BEGIN_LOCKED = (
    f"BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})"
)
# Planning in the transaction: each stream's head and the last position.
HEADS_AND_POSITION = (
    "SELECT s, coalesce((SELECT seq FROM navi_events WHERE stream_id = s "
    "ORDER BY seq DESC LIMIT 1), 0), (SELECT coalesce(max(position), 0) FROM navi_events), "
    "pg_notify($2, $3 || s)::text FROM unnest($1::text[]) AS s"
)


async def roll_back(conn: asyncpg.Connection) -> None:
    """End a failed write transaction if the connection still works (the store then
    discards the connection anyway: closing it would roll back too, later)."""
    if conn.is_closed() or not conn.is_in_transaction():
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await conn.execute("ROLLBACK")
        except Exception as exc:  # the connection broke: the server rolls back
            log.debug("postgres.rollback_failed", error=str(exc))
