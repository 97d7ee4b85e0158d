from __future__ import annotations

import pytest
from msgspec.structs import replace

from events.store import EventStore
from events.types import LLMText, TodoItem
from navi.replay.projection_set import ALL
from navi.replay.snapshot_codec import CODECS
from navi.replay.snapshot_store import snapshots_for
from navi.replay.snapshots import catch_up_snapshots
from navi.replay.verify import verify_all, verify_session
from projections.fold import fold, fold_until
from projections.messages import MESSAGES
from projections.vec import Vec
from tests.navi.replay.support import long_session, make_session, tool_result, turn

pytestmark = pytest.mark.anyio


async def plant(store: EventStore, name: str, seq: int, state: object) -> None:
    codec = CODECS[name]
    payload = codec.full_payload(state)
    await snapshots_for(store).save("s", seq, {name: (codec.schema_version, payload)})


async def test_a_sound_session_verifies(store: EventStore) -> None:
    head = await long_session(store, "s", 6)
    await catch_up_snapshots(store, "s", every=10)
    report = await verify_session(store, "s", every=10)
    assert report.ok and report.head == head
    assert report.snapshots_checked == 5 * len(ALL) and report.stale_snapshots == 0
    live = {"messages": fold(MESSAGES, await store.read("s"))}
    assert (await verify_session(store, "s", live=live)).ok


async def test_a_wrong_snapshot_is_reported_with_the_first_differing_seq(
    store: EventStore,
) -> None:
    await long_session(store, "s", 6)
    await catch_up_snapshots(store, "s", every=10)
    log = await store.read("s")
    right = fold_until(MESSAGES, log, 40)
    items = right.finished.to_list()
    items[3] = replace(items[3], content="tampered")
    await plant(store, "messages", 40, replace(right, finished=Vec(items)))
    await plant(store, "todo", 20, (TodoItem(id=1, text="not in the log"),))
    report = await verify_session(store, "s", every=10)
    assert not report.ok
    diffs = {(d.projection, d.at_seq, d.first_differing_seq, d.source) for d in report.differences}
    # The snapshot at 50 is a delta of the one at 40: it reads as wrong too.
    first = items[3].seq
    assert diffs == {
        ("messages", 40, first, "snapshot"),
        ("messages", 50, first, "snapshot"),
        ("todo", 20, 20, "snapshot"),
    }


async def test_an_unreadable_or_stale_snapshot(store: EventStore) -> None:
    await long_session(store, "s", 2)
    await catch_up_snapshots(store, "s", every=10)
    codec = CODECS["context"]
    storage = snapshots_for(store)
    await storage.save("s", 10, {"context": (codec.schema_version, b"\xc1garbage")})
    await storage.save("s", 10, {"messages": (7, b"old")})
    report = await verify_session(store, "s", every=10)
    assert report.stale_snapshots == 1
    [diff] = report.differences
    assert diff.projection == "context" and "cannot be read" in diff.detail


async def test_live_states_that_differ_from_the_fold(store: EventStore) -> None:
    head = await make_session(store, "s", turn("one"))
    # Stale by two events: its last message is the answer still streaming (from seq 5),
    # where the fold has the completed answer (seq 8).
    wrong = fold_until(MESSAGES, await store.read("s"), head - 2)
    report = await verify_session(store, "s", live={"messages": wrong})
    [diff] = report.differences
    assert (diff.source, diff.at_seq, diff.first_differing_seq) == ("live", head, 5)


async def test_a_log_the_state_machine_refuses(store: EventStore) -> None:
    head = await make_session(store, "s", turn("one"))
    await store.append("s", tool_result(), expected_seq=head)
    report = await verify_session(store, "s")
    assert not report.ok and report.error_seq == head + 1
    assert report.error is not None and "tool.completed" in report.error


async def test_verify_all_covers_every_session(store: EventStore) -> None:
    await make_session(store, "a", turn("one"))
    await make_session(store, "b")
    await store.append("memory:local", [LLMText(text="not a session")], expected_seq=0)
    reports = await verify_all(store)
    assert [(r.session_id, r.ok) for r in reports] == [("a", True), ("b", True)]
