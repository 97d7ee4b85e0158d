"""The start-up upgrade that copies forks made before forks were copies (linked forks),
on every store (tests/navi/replay/conftest.py)."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from events.envelope import Recorded
from events.store import EventStore
from events.types import SessionCreated, SessionPinned, SessionRenamed, UserMessage
from navi.replay.fork_upgrade import copy_linked_forks
from navi.replay.snapshot_store import snapshots_for
from navi.replay.snapshots import catch_up_snapshots, load_messages
from projections.fold import fold
from projections.runner import LogProjectionRunner
from projections.sessions import SESSIONS
from tests.navi.replay.support import make_session, turn

pytestmark = pytest.mark.anyio


async def linked(store: EventStore, fork: str, origin: str, at: int, *texts: str) -> None:
    """A fork as Navi wrote them before: its link, then its own events only."""
    created = SessionCreated(profile_id="secretary", forked_from=origin, forked_at_seq=at)
    own = [UserMessage(text=t) for t in texts]
    await store.append(fork, [created, *own], expected_seq=0)


def shape(records: list[Recorded]) -> list[tuple[int, object, str, float]]:
    return [(r.seq, r.event, r.event_id, r.timestamp) for r in records]


async def test_a_linked_fork_becomes_a_copy_numbered_as_its_history_was(
    store: EventStore,
) -> None:
    await make_session(store, "o", turn("one"), turn("two"))
    await linked(store, "f", "o", 9, "mine", "more")
    own = await store.read("f")
    await catch_up_snapshots(store, "f", every=2)  # of the linked stream: now stale

    with capture_logs() as logs:
        report = await copy_linked_forks(store)
    assert report.copied == ("f",) and report.broken == {}
    assert any(e["event"] == "fork_upgrade.copied" and e["session_id"] == "f" for e in logs)

    records = await store.read("f")
    origin = await store.read("o")
    assert [r.seq for r in records] == list(range(1, 12))
    assert records[0].event == SessionCreated(
        profile_id="secretary", forked_from="o", forked_at_seq=9, history_copied=True
    )
    assert records[0].event_id == own[0].event_id
    assert shape(records[1:9]) == shape(origin[1:9])
    # Its own events keep their ids and times, at the seqs its history gave them.
    assert [(r.event, r.event_id) for r in records[9:]] == [(r.event, r.event_id) for r in own[1:]]
    assert [r.seq for r in records[9:]] == [10, 11]
    positions = [r.position for r in records]
    assert positions == sorted(positions)
    assert await snapshots_for(store).rows("f") == []
    messages = (await load_messages(store, "f", every=2)).messages()
    assert [m.content for m in messages] == ["one", "answer to one", "mine", "more"]
    # The global log reads by position without a gap in any stream (the session list).
    runner = LogProjectionRunner(store, SESSIONS)
    listed = (await runner.catch_up()).get("f")
    assert listed is not None and listed.message_count == 4

    # Idempotent: nothing is linked any more.
    again = await copy_linked_forks(store)
    assert again.copied == () and again.broken == {}
    assert shape(await store.read("f")) == shape(records)


async def test_a_fork_of_a_fork_is_copied_after_its_origin(store: EventStore) -> None:
    await make_session(store, "o", turn("one"), turn("two"))
    # "a" sorts before "b": the upgrade must still copy "b" (the origin) first.
    await linked(store, "b", "o", 9, "b1", "b2")  # history: o 1..9, b1=10, b2=11
    await linked(store, "a", "b", 10, "a1")  # history: o 1..9, b1=10, a1=11
    report = await copy_linked_forks(store)
    assert report.copied == ("b", "a")
    texts = [getattr(r.event, "text", r.type) for r in await store.read("a")]
    assert texts[-2:] == ["b1", "a1"] and len(texts) == 11
    first = (await store.read("a", to_seq=1))[0].event
    assert isinstance(first, SessionCreated) and first.forked_from == "b"
    assert (await copy_linked_forks(store)).copied == ()


async def test_the_origins_pins_and_names_are_not_the_forks(store: EventStore) -> None:
    await make_session(store, "o", [SessionPinned(pinned=True), SessionRenamed(title="O")])
    await linked(store, "f", "o", 3, "mine")
    await copy_linked_forks(store)
    summary = fold(SESSIONS, await store.read_all()).get("f")
    assert summary is not None
    assert summary.pinned is False and summary.title == "mine"


async def test_broken_links_are_logged_and_left_readable(store: EventStore) -> None:
    await make_session(store, "o", turn("one"))
    await linked(store, "gone", "missing", 2, "x")
    await linked(store, "far", "o", 50, "x")
    await linked(store, "c1", "c2", 1, "x")
    await linked(store, "c2", "c1", 1, "x")
    await linked(store, "child", "c1", 1, "x")  # a fork of a fork in a cycle
    await linked(store, "ok", "o", 2, "x")
    before = {sid: shape(await store.read(sid)) for sid in ("gone", "far", "c1", "c2", "child")}
    with capture_logs() as logs:
        report = await copy_linked_forks(store)
    assert report.copied == ("ok",)
    assert "does not exist" in report.broken["gone"]
    assert "forked at seq 50" in report.broken["far"]
    assert "cycle" in report.broken["c1"] and "cycle" in report.broken["c2"]
    assert "cannot be copied" in report.broken["child"]
    warned = {e["session_id"] for e in logs if e["event"] == "fork_upgrade.left_linked"}
    assert warned == set(before)
    for sid, records in before.items():
        assert shape(await store.read(sid)) == records
