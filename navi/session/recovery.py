"""How a session actor recovers: its state is a fold of the session's *history*, and its
writer appends to the session's own stream.

A plain session's history is its stream. A fork's (navi/replay/history.py) is its
origin's history up to the fork point, then its own events, numbered ``k+1, k+2, …``
(``k`` = ``forked_at_seq``); its own stream holds only those, after the link
(``session.created(forked_from=…)`` at stored seq 1). So the actor of a fork folds the
history, and appends through a writer with an ``offset``, which writes at the stream's
stored seqs and speaks history seqs to the actor: the state, the seqs of the messages the context
builder sees, the call ids named after seqs — all are history seqs, as every client sees
them.
"""

from __future__ import annotations

from events.store import EventStore
from events.types import SessionCreated
from events.writer import StreamWriter
from navi.replay.history import load_history
from navi.session.state import SessionState


async def recover(
    store: EventStore, session_id: str, state: SessionState, *, page: int
) -> StreamWriter:
    """Fold the session's history into ``state`` (page by page) and return the writer
    that appends after it (not yet running)."""
    first = await store.read(session_id, to_seq=1)
    link = first[0].event if first else None
    if not isinstance(link, SessionCreated) or link.forked_from is None:
        after = 0
        while True:
            records = await store.read(session_id, after_seq=after, limit=page)
            for record in records:
                state.apply(record)
            if len(records) < page:
                break
            after = records[-1].seq
        return StreamWriter(store, session_id, last_seq=state.last_seq)
    history = await load_history(store, session_id)
    fork_point = link.forked_at_seq or 0
    async for records in history.pages(size=page):
        for record in records:
            state.apply(record)
            if record.seq == fork_point:
                # Pins belong to a session, not to its history (the session list folds
                # the fork's own stream): the fork starts unpinned.
                state.pinned = False
    # What this session is (its link) rather than its origin's session.created.
    state.created = link
    return StreamWriter(store, session_id, last_seq=history.head, offset=history.offset)
