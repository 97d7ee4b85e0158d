"""How a session actor recovers: its state is a fold of the session's stream, page by
page, and its writer appends after the last event. A fork's stream holds a copy of its
origin's events up to the fork point (navi/replay/fork.py), so a fork recovers as any
session does: the seqs it speaks are those of its own stream, as every client sees them.
"""

from __future__ import annotations

from events.store import EventStore
from events.writer import StreamWriter
from navi.session.state import SessionState


async def recover(
    store: EventStore, session_id: str, state: SessionState, *, page: int
) -> StreamWriter:
    """Fold the session's stream into ``state`` and return the writer that appends after
    it (not yet running)."""
    after = 0
    while True:
        records = await store.read(session_id, after_seq=after, limit=page)
        for record in records:
            state.apply(record)
        if len(records) < page:
            break
        after = records[-1].seq
    return StreamWriter(store, session_id, last_seq=state.last_seq)
