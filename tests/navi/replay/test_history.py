from __future__ import annotations

import pytest

from events.store import EventStore
from events.types import SessionCreated, UserMessage
from navi.replay.errors import BrokenForkError, SessionNotFoundError
from navi.replay.history import load_history, read_history
from tests.navi.replay.support import make_session, turn

pytestmark = pytest.mark.anyio


async def test_a_plain_session_is_its_stream(store: EventStore) -> None:
    head = await make_session(store, "s", turn("hi"))
    history = await load_history(store, "s")
    assert not history.is_fork and history.offset == 0 and history.head == head
    assert await read_history(store, "s") == await store.read("s")
    assert [r.seq for r in await history.read(after_seq=2, to_seq=4)] == [3, 4]
    pages = [[r.seq for r in page] async for page in history.pages(size=4)]
    assert pages == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]


async def test_a_fork_reads_its_origin_then_its_own_events(store: EventStore) -> None:
    await make_session(store, "o", turn("one"), turn("two"))
    await store.append(
        "f", [SessionCreated(profile_id="p", forked_from="o", forked_at_seq=9)], expected_seq=0
    )
    await store.append("f", [UserMessage(text="other")], expected_seq=1)
    history = await load_history(store, "f")
    assert history.is_fork and history.streams == ["o", "f"]
    assert history.offset == 8 and history.head == 10
    assert history.to_history_seq(2) == 10 and history.to_stored_seq(10) == 2
    records = await history.read()
    assert [r.seq for r in records] == list(range(1, 11))
    assert {r.stream_id for r in records} == {"f"}
    origin = await store.read("o", to_seq=9)
    assert [(r.event, r.event_id, r.timestamp) for r in records[:9]] == [
        (r.event, r.event_id, r.timestamp) for r in origin
    ]
    assert records[9].event == UserMessage(text="other")
    assert [r.seq for r in await history.read(after_seq=8, to_seq=10)] == [9, 10]


async def test_forks_of_forks_resolve_recursively(store: EventStore) -> None:
    await make_session(store, "o", turn("one"), turn("two"))
    await store.append(
        "f1", [SessionCreated(profile_id="p", forked_from="o", forked_at_seq=3)], expected_seq=0
    )
    await store.append("f1", [UserMessage(text=f"f1-{i}") for i in range(4)], expected_seq=1)
    # f1's history: o 1..3, then f1's own 2..5 as 4..7. Fork it at 5 (f1's stored seq 3).
    await store.append(
        "f2", [SessionCreated(profile_id="p", forked_from="f1", forked_at_seq=5)], expected_seq=0
    )
    await store.append("f2", [UserMessage(text="f2")], expected_seq=1)
    history = await load_history(store, "f2")
    assert history.streams == ["o", "f1", "f2"]
    texts = [getattr(r.event, "text", r.type) for r in await history.read()]
    assert texts == ["session.created", "one", "run.started", "f1-0", "f1-1", "f2"]
    assert history.head == 6


async def test_a_missing_session_or_origin_is_reported(store: EventStore) -> None:
    with pytest.raises(SessionNotFoundError, match="'nope'"):
        await load_history(store, "nope")
    await store.append(
        "f", [SessionCreated(profile_id="p", forked_from="gone", forked_at_seq=1)], expected_seq=0
    )
    with pytest.raises(BrokenForkError, match="origin 'gone' does not exist"):
        await load_history(store, "f")


async def test_a_fork_point_past_the_origin_is_reported(store: EventStore) -> None:
    await make_session(store, "o")
    await store.append(
        "f", [SessionCreated(profile_id="p", forked_from="o", forked_at_seq=5)], expected_seq=0
    )
    with pytest.raises(BrokenForkError, match="forked at seq 5, but its origin 'o' has 1"):
        await load_history(store, "f")


async def test_a_fork_cycle_is_reported(store: EventStore) -> None:
    await store.append(
        "a", [SessionCreated(profile_id="p", forked_from="b", forked_at_seq=1)], expected_seq=0
    )
    await store.append(
        "b", [SessionCreated(profile_id="p", forked_from="a", forked_at_seq=1)], expected_seq=0
    )
    with pytest.raises(BrokenForkError, match="cycle"):
        await load_history(store, "a")
