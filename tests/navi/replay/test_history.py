from __future__ import annotations

import pytest

from events.store import EventStore
from events.types import UserMessage
from navi.replay.errors import SessionNotFoundError
from navi.replay.fork import fork
from navi.replay.history import first_event, pages, session_head
from tests.navi.replay.support import make_session, turn

pytestmark = pytest.mark.anyio


async def test_a_session_is_read_by_page_up_to_its_head(store: EventStore) -> None:
    head = await make_session(store, "s", turn("hi"))
    assert await session_head(store, "s") == head == 9
    seqs = [[r.seq for r in page] async for page in pages(store, "s", to_seq=head, size=4)]
    assert seqs == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]
    tail = [[r.seq for r in page] async for page in pages(store, "s", after_seq=6, to_seq=8)]
    assert tail == [[7, 8]]
    first = await first_event(store, "s")
    assert first is not None and first.seq == 1 and first.type == "session.created"


async def test_a_missing_session_is_reported(store: EventStore) -> None:
    with pytest.raises(SessionNotFoundError, match="'nope'"):
        await session_head(store, "nope")
    assert await first_event(store, "nope") is None


async def test_a_forks_stored_seqs_are_its_history_seqs(store: EventStore) -> None:
    """A fork is a copy: the seq a client sees is the seq the stream stores, so reading,
    paging and following the fork are those of any stream."""
    await make_session(store, "o", turn("one"), turn("two"))
    await fork(store, "o", 9, "f")
    await store.append("f", [UserMessage(text="mine")], expected_seq=9)
    records = await store.read("f")
    assert [r.seq for r in records] == list(range(1, 11))
    assert await session_head(store, "f") == 10
    origin = await store.read("o", to_seq=9)
    assert [(r.seq, r.event, r.event_id) for r in records[1:9]] == [
        (r.seq, r.event, r.event_id) for r in origin[1:]
    ]
    assert records[9].event == UserMessage(text="mine")
    positions = [r.position for r in records]
    assert positions == sorted(positions)  # a stream's positions follow its seqs
