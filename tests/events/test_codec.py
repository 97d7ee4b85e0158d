from __future__ import annotations

import msgspec
import pytest

from events.codec import decode, encode, encode_stored, version_of
from events.errors import EventDecodeError
from events.types import (
    EVENT_TYPES,
    Event,
    FileRef,
    LLMText,
    SessionDeleted,
    ToolCall,
    ToolCompleted,
    UserMessage,
    tag_of,
)
from events.upcasting import upcast

# Tags are stored in every log ever written: renaming one breaks old logs. Adding is fine.
STABLE_TAGS = {
    "session.created", "session.pinned", "session.renamed", "session.deleted", "user.message",
    "run.started", "plan.status", "plan.ready", "context.injected", "llm.requested",
    "llm.thinking", "llm.text", "llm.tool_calls", "llm.completed", "llm.failed",
    "tool.requested", "tool.started", "tool.completed", "tool.failed", "context.compressed",
    "profile.switched", "subagent.spawned", "subagent.finished", "stop.requested",
    "run.stopped", "run.completed", "run.failed", "todo.updated", "scratchpad.updated",
    "note.saved", "note.deleted",
}  # fmt: skip


def test_no_stable_tag_ever_disappears() -> None:
    assert set(EVENT_TYPES) >= STABLE_TAGS


@pytest.mark.parametrize("tag", sorted(EVENT_TYPES))
def test_every_event_type_is_frozen_and_kw_only(tag: str) -> None:
    cls = EVENT_TYPES[tag]
    config = cls.__struct_config__
    assert config.frozen and config.tag == tag
    if msgspec.structs.fields(cls):
        with pytest.raises(TypeError):
            cls("positional")  # kw_only: fields are named, so adding one never shifts others


def test_round_trip_keeps_nested_values() -> None:
    event = UserMessage(
        text="look", images=("aGk=",), files=(FileRef(name="a.txt", path="/tmp/a.txt"),)
    )
    assert decode("user.message", 2, encode(event)) == event
    assert msgspec.json.decode(encode(event))["type"] == "user.message"


def test_tool_calls_round_trip() -> None:
    from events.types import LLMCompleted

    event = LLMCompleted(tool_calls=(ToolCall(id="c1", name="t", arguments={"a": [1, {"b": 2}]}),))
    assert decode("llm.completed", 1, encode(event)) == event


def test_upcaster_turns_the_original_navi_message_into_v2() -> None:
    assert version_of("user.message") == 2
    v1 = b'{"type": "user.message", "content": "hello", "images": ["aGk="]}'
    assert decode("user.message", 1, v1) == UserMessage(text="hello", images=("aGk=",))


def test_upcast_refuses_a_newer_schema_than_it_knows() -> None:
    with pytest.raises(LookupError, match="newer than this Navi"):
        upcast("user.message", 3, 2, {})
    with pytest.raises(EventDecodeError, match="newer than this Navi"):
        decode("user.message", 3, b'{"type": "user.message", "text": "x"}', stream_id="s", seq=4)


def test_a_missing_upcaster_is_named() -> None:
    with pytest.raises(EventDecodeError, match=r"no upcaster for llm\.text v0"):
        decode("llm.text", 0, b'{"type": "llm.text", "text": "x"}', stream_id="s", seq=1)


@pytest.mark.parametrize(
    ("type_", "payload", "reason"),
    [
        ("llm.text", b"{not json", "corrupt llm.text payload"),
        ("llm.text", b'{"type": "llm.text", "text": 5}', "corrupt llm.text payload"),
        ("llm.text", b'{"type": "llm.thinking", "text": "x"}', "Invalid value 'llm.thinking'"),
        ("no.such", b"{}", "unknown event type 'no.such'"),
    ],
)
def test_bad_payloads_name_stream_and_seq(type_: str, payload: bytes, reason: str) -> None:
    with pytest.raises(EventDecodeError) as err:
        decode(type_, 1, payload, stream_id="sess-1", seq=42)
    assert (err.value.stream_id, err.value.seq) == ("sess-1", 42)
    assert reason in str(err.value) and "'sess-1'#42" in str(err.value)


def test_chunks_are_not_boundaries_but_decisions_are() -> None:
    from events.types import LLMCompleted, ToolRequested

    assert LLMText.boundary is False
    assert LLMCompleted.boundary and ToolRequested.boundary


@pytest.mark.parametrize(
    "event",
    [
        LLMText(text="hi"),
        SessionDeleted(),
        ToolCompleted(call_id="c", name="t", output="o", metadata={"type": "not a tag"}),
    ],
)
def test_the_log_stores_payloads_without_their_tag(event: Event) -> None:
    stored = encode_stored(event)
    assert msgspec.json.decode(stored) == {
        k: v for k, v in msgspec.json.decode(encode(event)).items() if k != "type"
    }
    tag = tag_of(event)
    assert decode(tag, version_of(tag), stored) == event
    assert decode(tag, version_of(tag), encode(event)) == event  # a v1 row, tag and all
