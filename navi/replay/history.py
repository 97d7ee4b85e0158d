"""A session's history is its own stream: seq for seq, what ``store.read`` gives.

A fork's stream holds a copy of its origin's events up to the fork point (fork.py), so
no reader resolves links and every follower subscribes to one stream. These helpers
are what readers of a history share: its head (an unknown session says so), its first
event, and its events a page at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from events.envelope import Recorded
from events.store import EventStore
from navi.replay.errors import SessionNotFoundError


async def first_event(store: EventStore, stream_id: str) -> Recorded | None:
    records = await store.read(stream_id, to_seq=1)
    return records[0] if records else None


async def session_head(store: EventStore, session_id: str) -> int:
    """The session's last seq; raises ``SessionNotFoundError`` if it has none."""
    head = await store.last_seq(session_id)
    if head == 0:
        raise SessionNotFoundError(session_id)
    return head


async def pages(
    store: EventStore, session_id: str, *, after_seq: int = 0, to_seq: int, size: int = 1000
) -> AsyncIterator[list[Recorded]]:
    """The events ``after_seq < seq <= to_seq`` in pages of at most ``size``, so a long
    log is never all in memory."""
    start = after_seq
    while start < to_seq:
        end = min(start + size, to_seq)
        page = await store.read(session_id, after_seq=start, to_seq=end)
        if page:
            yield page
        start = end
