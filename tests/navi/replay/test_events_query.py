from __future__ import annotations

import msgspec
import pytest

from events.envelope import NewEvent
from events.store import EventStore
from events.types import SessionCreated, UserMessage
from navi.replay.events_query import (
    event_text,
    iter_events,
    json_lines,
    text_lines,
    type_matcher,
)
from navi.replay.fork import fork
from navi.replay.jsonl import line_decoder
from tests.navi.replay.support import make_session, turn

pytestmark = pytest.mark.anyio


def test_type_patterns() -> None:
    assert type_matcher([]) is None
    assert type_matcher(["user.message"]) == {"user.message"}
    tools = {"tool.requested", "tool.started", "tool.progress", "tool.completed", "tool.failed"}
    tools |= {"tool.approval_requested", "tool.approval_decided"}
    assert type_matcher(["tool"]) == tools
    assert type_matcher(["tool.*", "run.started"]) == tools | {"run.started"}
    with pytest.raises(ValueError, match="no event type matches 'tol'"):
        type_matcher(["tol"])


async def test_the_log_filtered_by_seq_and_type(store: EventStore) -> None:
    await make_session(store, "s", turn("one"), turn("two"))
    everything = [r async for r in iter_events(store, "s")]
    assert [r.seq for r in everything] == list(range(1, 18))
    after = [r.seq async for r in iter_events(store, "s", after=9)]
    assert after == list(range(10, 18))
    llm = [(r.seq, r.type) async for r in iter_events(store, "s", after=4, types=["llm"])]
    assert [t for _, t in llm] == ["llm.text"] * 3 + ["llm.completed", "llm.requested"] + [
        "llm.text"
    ] * 3 + ["llm.completed"]
    paged = [r.seq async for r in iter_events(store, "s", types=["run"], page=2)]
    assert paged == [3, 9, 11, 17]
    with pytest.raises(ValueError, match="after"):
        [r async for r in iter_events(store, "s", after=-1)]


async def test_json_lines_carry_the_envelope_and_the_payload(store: EventStore) -> None:
    new = NewEvent(event=UserMessage(text="hé"), run_id="run-1", causation_id="c")
    await store.append("s", [SessionCreated(profile_id="p"), new], expected_seq=0)
    lines = [line async for line in json_lines(store, "s", types=["user.message"])]
    assert len(lines) == 1 and lines[0].endswith(b"\n")
    body = msgspec.json.decode(lines[0])
    assert list(body) == [
        "stream_id",
        "seq",
        "event_id",
        "timestamp",
        "run_id",
        "causation_id",
        "type",
        "version",
        "payload",
    ]
    assert (body["seq"], body["type"], body["version"], body["run_id"]) == (
        2,
        "user.message",
        2,
        "run-1",
    )
    assert body["payload"]["text"] == "hé"
    [stored] = await store.read("s", after_seq=1)
    assert line_decoder.decode(lines[0]).to_recorded(position=stored.position) == stored


async def test_text_lines_are_short_and_readable(store: EventStore) -> None:
    await make_session(store, "s", turn("x" * 300))
    lines = [line async for line in text_lines(store, "s", types=["user.message"])]
    assert len(lines) == 1
    assert lines[0].split()[0] == "2" and "user.message" in lines[0]
    assert lines[0].endswith("…") and len(lines[0]) < 200
    [record] = await store.read("s", after_seq=1, to_seq=2)
    assert event_text(record) == lines[0]


async def test_a_forks_log_is_its_history(store: EventStore) -> None:
    await make_session(store, "o", turn("one"))
    await fork(store, "o", 2, "f")
    await store.append("f", [UserMessage(text="other")], expected_seq=2)
    seqs = [(r.seq, r.type) async for r in iter_events(store, "f", after=1)]
    assert seqs == [(2, "user.message"), (3, "user.message")]
