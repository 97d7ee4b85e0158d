"""How a session actor recovers: its state is a fold of the session's *history*, and its
writer appends to the session's own stream.

A plain session's history is its stream. A fork's (navi/replay/history.py) is its
origin's history up to the fork point, then its own events, numbered ``k+1, k+2, …``
(``k`` = ``forked_at_seq``); its own stream holds only those, after the link
(``session.created(forked_from=…)`` at stored seq 1). So the actor of a fork folds the
history, and appends through a ``ForkWriter``, which writes at the stream's stored seqs
and speaks history seqs to the actor: the state, the seqs of the messages the context
builder sees, the call ids named after seqs — all are history seqs, as every client sees
them.
"""

from __future__ import annotations

from msgspec.structs import replace

from events.base import BaseEventStore
from events.envelope import NewEvent, Recorded
from events.types import Event, SessionCreated
from events.writer import StreamWriter
from navi.replay.history import load_history
from navi.session.state import SessionState

# How a session's writer batches a stream's chunks (events.writer.StreamWriter): it
# sends them to the store once the oldest is WRITER_MAX_DELAY old or once there are
# WRITER_MAX_BATCH of them. Every chunk of a batch waits for the whole batch's commit
# before a client can see it, so a flat-out stream goes in small batches (SQLite commits
# 256 chunks in one or two milliseconds on the loop); WRITER_MAX_IN_FLIGHT keeps as many
# chunks on their way to the store as 8 batches of 512 did. The session actor's stager
# lets each batch through once the writer has sent it (SessionActor.stage).
WRITER_MAX_DELAY = 0.005
WRITER_MAX_BATCH = 256
WRITER_MAX_IN_FLIGHT = 16


class ForkWriter(StreamWriter):
    """A ``StreamWriter`` of a fork's own stream that takes and gives history seqs
    (``history seq = stored seq + offset``)."""

    def __init__(
        self, store: BaseEventStore, stream_id: str, *, last_seq: int, offset: int
    ) -> None:
        super().__init__(
            store,
            stream_id,
            last_seq=last_seq - offset,
            max_batch=WRITER_MAX_BATCH,
            max_delay=WRITER_MAX_DELAY,
            max_in_flight=WRITER_MAX_IN_FLIGHT,
        )
        self.offset = offset

    @property
    def last_seq(self) -> int:
        return super().last_seq + self.offset

    # ``stage`` returns what ``stage_nowait`` does, and every committed record goes out
    # through ``_given``: shifting these two shifts every seq the writer gives out.
    def stage_nowait(self, *events: Event | NewEvent) -> int:
        return super().stage_nowait(*events) + self.offset

    def _given(self, records: list[Recorded]) -> list[Recorded]:
        return [replace(r, seq=r.seq + self.offset) for r in records]


async def recover(
    store: BaseEventStore, session_id: str, state: SessionState, *, page: int
) -> StreamWriter:
    """Fold the session's history into ``state`` (page by page) and return the writer
    that appends after it."""
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
        return StreamWriter(
            store,
            session_id,
            last_seq=state.last_seq,
            max_batch=WRITER_MAX_BATCH,
            max_delay=WRITER_MAX_DELAY,
            max_in_flight=WRITER_MAX_IN_FLIGHT,
        )
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
    return ForkWriter(store, session_id, last_seq=history.head, offset=history.offset)
