"""``read_all`` on PostgreSQL: the global log by position, up to the oldest running
transaction (``events.pg_writes`` explains positions)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

import anyio
from sqlalchemy import and_, literal_column, select
from sqlalchemy.ext.asyncio import AsyncEngine

from events.envelope import Recorded
from events.pg_writes import HORIZON
from events.schema import events_table
from events.sql import READ_COLUMNS, row_to_recorded

_E = events_table
# How long a read waits for running transactions to end when committed rows are held
# back behind them (so that a node reads its own commit at once while a peer is
# writing); a frozen peer's transaction would hold them longer: then the rows before
# it are returned, and the rest by a later read.
HELD_BACK_WAIT_S = 1.0


async def read_below_horizon(
    engine: AsyncEngine,
    *,
    after_position: int,
    limit: int | None,
    skip_streams: Collection[str],
    wait_s: float = HELD_BACK_WAIT_S,
    on_held_back: Callable[[], None] = lambda: None,
) -> list[Recorded]:
    """Events after ``after_position`` in position order, only those below the horizon of
    the statement's own snapshot: a caller that goes on from the last one misses nothing."""
    cond = _E.c.position > after_position
    if skip_streams:
        cond = and_(cond, _E.c.stream_id.not_in(list(skip_streams)))
    query = (
        select(*READ_COLUMNS, literal_column(HORIZON).label("horizon"))
        .where(cond)
        .order_by(_E.c.position)
    )
    if limit is not None:
        query = query.limit(limit)
    deadline = time.monotonic() + wait_s
    pause = 0.002
    while True:
        async with engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        if not rows:
            return []
        horizon = rows[0][-1]
        safe = [row for row in rows if row[2] < horizon]
        if len(safe) == len(rows) or time.monotonic() >= deadline:
            return [row_to_recorded(row[:-1], lenient=True) for row in safe]
        on_held_back()
        await anyio.sleep(pause)
        pause = min(pause * 2, 0.05)
