from __future__ import annotations

import dataclasses

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from msgspec.structs import replace

from events.envelope import Recorded
from events.store import EventStore
from navi.replay import snapshots
from navi.replay.fork import fork
from navi.replay.projection_set import ALL, PROJECTIONS, initial_states
from navi.replay.snapshot_codec import CODECS, BrokenSnapshotError, StateCodec
from navi.replay.snapshot_store import snapshots_for
from navi.replay.snapshots import (
    catch_up_snapshots,
    latest_snapshot,
    load_messages,
    states_at,
)
from projections.context import CONTEXT
from projections.fold import fold, fold_until
from projections.messages import MESSAGES, MessagesState
from projections.types import Message
from projections.vec import Vec
from tests.navi.replay.support import load_context, long_session, turn
from tests.projections.logs import recorded_logs

pytestmark = pytest.mark.anyio


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recorded_logs())
def test_every_state_survives_the_snapshot_codec(log: list[Recorded]) -> None:
    states = initial_states()
    for record in log:
        before = states
        states = {name: PROJECTIONS[name].evolve(s, record) for name, s in states.items()}
        for name, state in states.items():
            codec = CODECS[name]
            assert codec.decode(codec.encode(state)) == state
            assert codec.read(codec.full_payload(state)).state == state
            old, new = codec.log_items(before[name]), codec.log_items(state)
            if old is not None and new is not None:
                prefix = snapshots._common_prefix(old, new)
                delta = codec.read(codec.delta_payload(state, 7, prefix))
                assert delta.base_seq == 7 and codec.rebase(delta, before[name]) == state


def test_the_schema_version_follows_the_code() -> None:
    messages = CODECS["messages"]
    assert messages.schema_version >> 32 == messages.version
    other_code = StateCodec("messages", MessagesState, 1, ("projections.context",))
    assert other_code.schema_version != messages.schema_version
    bumped = StateCodec("messages", MessagesState, 2, messages.modules)
    assert bumped.schema_version & 0xFFFFFFFF == messages.schema_version & 0xFFFFFFFF
    assert bumped.schema_version != messages.schema_version


async def test_folding_stores_a_snapshot_every_n_events(store: EventStore) -> None:
    head = await long_session(store, "s", 6)  # 55 events
    folded = await catch_up_snapshots(store, "s", every=10)
    assert folded.seq == head and folded.from_seq == 0
    rows = await snapshots_for(store).rows("s")
    assert sorted({r.seq for r in rows}) == [10, 20, 30, 40, 50]
    assert {r.projection for r in rows} == set(ALL)
    log = await store.read("s")
    for seq in (10, 30, 50):
        found = await latest_snapshot(snapshots_for(store), "s", ALL, at_most=seq + 5)
        assert found is not None and found.seq == seq
        assert found.states["messages"] == fold_until(MESSAGES, log, seq)
        assert found.states["context"] == fold_until(CONTEXT, log, seq)
    # A second fold starts from the latest snapshot.
    again = await catch_up_snapshots(store, "s", every=10)
    assert again.from_seq == 50 and again.states == folded.states


async def test_states_at_any_seq_equal_the_fold_from_scratch(store: EventStore) -> None:
    await long_session(store, "s", 6)
    await catch_up_snapshots(store, "s", every=10)
    log = await store.read("s")
    for seq in (0, 1, 9, 10, 11, 37, 55):
        folded = await states_at(store, "s", seq, every=10)
        for name in ALL:
            assert folded.states[name] == fold_until(PROJECTIONS[name], log, seq), (name, seq)


async def test_load_messages_starts_from_the_latest_snapshot(store: EventStore) -> None:
    await long_session(store, "s", 6)
    log = await store.read("s")
    # No snapshot yet: the fold stores them on the way.
    assert await load_messages(store, "s", every=10) == fold(MESSAGES, log)
    assert await load_context(store, "s", every=10) == fold(CONTEXT, log)
    # A (doctored) snapshot at 50 is where the next load starts from.
    planted = fold_until(MESSAGES, log, 50)
    fake = Message(role="system", content="planted", created_at="x", seq=0)
    doctored = msgspec.structs.replace(planted, finished=Vec([fake, *planted.finished]))
    codec = CODECS["messages"]
    await snapshots_for(store).save(
        "s", 50, {"messages": (codec.schema_version, codec.full_payload(doctored))}
    )
    loaded = await load_messages(store, "s", every=10)
    assert loaded.messages()[0] == fake
    assert loaded.messages()[1:] == fold(MESSAGES, log).messages()


async def test_snapshots_of_another_schema_version_are_ignored_and_rebuilt(
    store: EventStore,
) -> None:
    await long_session(store, "s", 2)  # 19 events
    storage = snapshots_for(store)
    stale = {name: (1, b"\x00 not a state") for name in ALL}
    await storage.save("s", 10, stale)
    assert await latest_snapshot(storage, "s", ALL, at_most=19) is None
    folded = await catch_up_snapshots(store, "s", every=10)
    assert folded.from_seq == 0
    current = {name: CODECS[name].schema_version for name in ALL}
    assert {r.projection: r.schema_version for r in await storage.rows("s")} == current


async def test_a_fork_has_its_own_snapshots(store: EventStore) -> None:
    await long_session(store, "o", 4)  # 37 events
    await catch_up_snapshots(store, "o", every=10)
    await fork(store, "o", 28, "f")
    await store.append("f", turn("more"), expected_seq=28)
    history = await store.read("f")
    assert await load_messages(store, "f", every=10) == fold(MESSAGES, history)
    assert sorted({r.seq for r in await snapshots_for(store).rows("f")}) == [10, 20, 30]


async def test_snapshots_can_be_deleted_and_are_rebuilt(store: EventStore) -> None:
    await long_session(store, "s", 2)
    await catch_up_snapshots(store, "s", every=10)
    storage = snapshots_for(store)
    await storage.delete(["s"])
    assert await storage.rows("s") == []
    assert (await catch_up_snapshots(store, "s", every=10)).from_seq == 0
    assert len(await storage.rows("s")) == len(ALL)


async def test_growing_states_are_stored_as_deltas(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshots, "MAX_CHAIN", 2)
    await long_session(store, "s", 6)  # 55 events
    await catch_up_snapshots(store, "s", every=10)
    storage = snapshots_for(store)
    seqs = [10, 20, 30, 40, 50]
    payloads = await storage.payloads("s", seqs, ALL)
    kinds = {name: "".join(chr(payloads[(name, s)][1][0]) for s in seqs) for name in ALL}
    # Full, two deltas, full again...; the small states are always stored in full.
    assert kinds["messages"] == kinds["context"] == kinds["llm_requests"] == "FDDFD"
    assert kinds["todo"] == kinds["run_state"] == "FFFFF"
    full, delta = payloads[("messages", 40)][1], payloads[("messages", 50)][1]
    assert len(delta) < len(full) / 2
    log = await store.read("s")
    found = await latest_snapshot(storage, "s", ALL, at_most=55)
    assert found is not None and found.seq == 50 and found.depths["messages"] == 1
    assert found.states["messages"] == fold_until(MESSAGES, log, 50)
    # A delta whose base is gone is skipped: the load falls back to an older snapshot.
    await storage.save("s", 40, {"messages": (1, b"stale")})
    found = await latest_snapshot(storage, "s", ALL, at_most=55)
    assert found is not None and found.seq == 30
    assert found.states["context"] == fold_until(CONTEXT, log, 30)
    assert await load_messages(store, "s", every=10) == fold(MESSAGES, log)


def test_a_delta_of_a_state_that_was_rewritten_keeps_only_the_common_prefix() -> None:
    codec = CODECS["context"]
    one, two, three = (
        Message(role="user", content=c, created_at="x", seq=i)
        for i, c in enumerate(["a", "b", "c"], start=1)
    )
    base = replace(CONTEXT.initial, messages=Vec([one, two]))
    after = replace(CONTEXT.initial, messages=Vec([one, three]), token_count=5)
    stored = codec.read(codec.delta_payload(after, base_seq=10, prefix=1))
    assert (stored.base_seq, stored.prefix) == (10, 1)
    assert codec.rebase(stored, base) == after
    with pytest.raises(BrokenSnapshotError):
        codec.rebase(dataclasses.replace(stored, prefix=5), base)
    with pytest.raises(BrokenSnapshotError):
        codec.read(b"X")
