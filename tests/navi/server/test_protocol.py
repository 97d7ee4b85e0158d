"""The WebSocket protocol (navi/server/protocol.py) against its documentation and the wire.

- docs/api.md lists every frame with exactly the fields its Struct has, and every client
  message it shows reads as one of the protocol's;
- the frames the translator makes of the golden logs and of ``protocol_log`` are, as
  JSON, exactly what the untyped translator sent before (``frames.expected.json``,
  recorded from it; re-record on purpose with ``python -m tests.navi.server.test_protocol``);
- every frame type encodes to the original Navi's shape (API-SHAPES: its fields are all
  there) with what it leaves out left out.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from navi.replay.import_ import parse_export
from navi.server import protocol as p
from navi.server.frames import FrameTranslator
from tests.navi.server.protocol_log import STREAMS
from tests.support.frames import typed, wire

ROOT = Path(__file__).resolve().parents[3]
API = (ROOT / "docs" / "api.md").read_text()
EXPECTED = Path(__file__).with_name("frames.expected.json")
META = {"seq", "subagent_id"}  # on every frame, documented once in prose
FRAME_TYPES: list[type[p.Frame]] = list(get_args(p.ServerFrame))


def test_server_frame_names_every_frame_type() -> None:
    found, pending = [], list(p.Frame.__subclasses__())
    while pending:
        kind = pending.pop()
        found.append(kind)
        pending.extend(kind.__subclasses__())
    assert set(found) == set(FRAME_TYPES)


def _tag(kind: type[p.Frame] | type[p.ClientMessage]) -> str:
    return str(kind.__struct_config__.tag)


def _always_says_subagent(kind: type[p.Frame]) -> bool:
    field = next(f for f in msgspec.structs.fields(kind) if f.name == "is_subagent")
    return field.required


def _documented_frames() -> dict[str, set[str]]:
    """The frame tables of docs/api.md (the live socket's and the replay socket's):
    type → the field names of its second column."""
    live = API.split("### Server → client", 1)[1].split("### Typical sequences", 1)[0]
    replay = API.split("### Replay WebSocket", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for line in (live + replay).splitlines():
        row = re.match(r"^\| `([a-z_]+)` \|(.*?)\| .* \|$", line)
        if row is None:
            continue
        fields = row.group(2)
        while re.search(r"\([^()]*\)", fields):  # values and remarks in parentheses
            fields = re.sub(r"\([^()]*\)", "", fields)
        names = {name.split(":")[0] for name in re.findall(r"`([^`]+)`", fields)}
        found[row.group(1)] = names
    return found


def test_docs_list_every_frame_with_exactly_its_fields() -> None:
    documented = _documented_frames()
    for kind in FRAME_TYPES:
        tag = _tag(kind)
        assert tag in documented, f"docs/api.md has no row for the {tag} frame"
        fields = {f.encode_name for f in msgspec.structs.fields(kind)} - META
        if not _always_says_subagent(kind):
            fields.discard("is_subagent")
        assert documented[tag] - META == fields, tag
    assert set(documented) == {_tag(kind) for kind in FRAME_TYPES}


def test_every_client_message_the_docs_show_reads_and_all_are_shown() -> None:
    block = API.split("### Client → server", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    shown = [p.read_live_message(line) for line in block.strip().splitlines()]
    live = {p.SendMessage, p.Stop, p.Ping, p.Approve, p.Deny, p.TryAgain}
    assert {type(message) for message in shown} == live
    replay = API.split("### Replay WebSocket", 1)[1].split("\n## ", 1)[0]
    for kind in (p.Pause, p.Resume, p.Seek, p.Speed):
        assert f'{{"type": "{_tag(kind)}"' in replay, kind


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"type": "dance"}', "unknown message type 'dance': send 'message', 'stop'"),
        ('{"content": "hi"}', "malformed frame: no type: send 'message'"),
        ('{"type": 7}', "unknown message type 7"),
        ("{not json", "malformed frame: not valid JSON"),
        ('{"type": "message", "content": 5}', "malformed frame: Expected `str`, got `int`"),
        ('{"type": "approve"}', "malformed frame: Object missing required field `call_id`"),
        ("[1]", "malformed frame: Expected `object`, got `array`"),
        (json.dumps({"type": "x" * 10_000}), "unknown message type 'xxxx"),
    ],
)
def test_a_bad_client_message_is_a_clear_bad_message(text: str, said: str) -> None:
    with pytest.raises(p.BadMessage) as bad:
        p.read_live_message(text)
    assert str(bad.value).startswith(said)
    assert len(str(bad.value)) < 200  # never the client's whole message back


def test_replay_control_messages_read_and_unknown_ones_say_what_to_send() -> None:
    assert p.read_replay_message('{"type": "seek", "seq": 3}') == p.Seek(seq=3)
    assert p.read_replay_message('{"type": "speed", "speed": "max"}') == p.Speed(speed="max")
    with pytest.raises(p.BadMessage, match="send pause, resume, seek or speed"):
        p.read_replay_message('{"type": "message", "content": "hi"}')


def frames_of_logs() -> dict[str, list[dict[str, Any]]]:
    """Every golden log's frames and ``protocol_log``'s, as JSON: each stream through its
    translator (subagents' marked), then the approvals still waiting, as sent on connect."""
    logs = {
        path.stem: parse_export(path.read_bytes().splitlines()).streams
        for path in sorted((ROOT / "tests" / "golden").glob("*.jsonl"))
    }
    logs["protocol_log"] = STREAMS
    out: dict[str, list[dict[str, Any]]] = {}
    for name, streams in logs.items():
        frames: list[p.Frame] = []
        for index, records in enumerate(streams.values()):
            translator = FrameTranslator(max_context_tokens=8192, is_subagent=index > 0)
            for record in records:
                frames.extend(translator.frames(record))
            frames.extend(translator.awaiting_frames())
        out[name] = wire(frames)
    return out


def test_the_translator_sends_what_the_untyped_one_sent() -> None:
    got = frames_of_logs()
    assert got == json.loads(EXPECTED.read_text())
    kinds = {frame["type"] for frames in got.values() for frame in frames}
    from_the_log = {_tag(kind) for kind in FRAME_TYPES} - {
        "pong",
        "run_queued",
        "run_dequeued",
        "replay_status",
        "replay_end",
        "llm_waiting",  # newer than the untyped translator: tests/web/test_llm_away.py
        "tool_progress",  # newer too: tests/navi/mcp/test_progress.py
    }
    assert kinds == from_the_log  # every frame the log makes is in the comparison
    for frames in got.values():
        assert wire(typed(frames)) == frames  # and a client reads each back as sent


# The original Navi's fields (API-SHAPES.md): a client written for it reads these.
ORIGINAL: dict[type[p.Frame], set[str]] = {
    p.StreamStart: set(),
    p.ThinkingDelta: {"delta"},
    p.ThinkingEnd: set(),
    p.TurnThinking: {"thinking", "is_subagent"},
    p.PlanReadyFrame: {"plan", "is_subagent"},
    p.ToolStarted: {"tool", "args", "is_subagent"},
    p.ToolCall: {"tool", "args", "result", "success", "is_subagent"},
    p.StreamDelta: {"delta"},
    p.StreamEnd: {"content", "context_tokens", "max_context_tokens"},
    p.StreamStopped: set(),
    p.ContextCompressedFrame: {"messages_before", "messages_after"},
    p.ProfileSwitchedFrame: {"profile_id", "profile_name"},
    p.ErrorFrame: {"message"},
    p.PlanningStatus: {"phase", "label", "is_subagent"},
}


def _least(kind: type[p.Frame]) -> p.Frame:
    """The frame with its required fields only, each of a plain value of its type."""
    plain: dict[Any, Any] = {str: "", int: 1, float: 0.5, bool: False}
    values: dict[str, Any] = {}
    for field in msgspec.structs.fields(kind):
        if not field.required:
            continue
        hint = field.type
        if hint in plain:
            values[field.name] = plain[hint]
        elif getattr(hint, "__origin__", None) is list:
            values[field.name] = []
        elif getattr(hint, "__origin__", None) is dict:
            values[field.name] = {}
        else:  # a union: None where it may be, else its first member's plain value
            members = hint.__args__
            values[field.name] = None if type(None) in members else plain[members[0]]
    return kind(**values)


@pytest.mark.parametrize("kind", FRAME_TYPES, ids=_tag)
def test_each_frame_type_encodes_its_fields_and_leaves_out_what_it_lacks(
    kind: type[p.Frame],
) -> None:
    sent = json.loads(p.encode(_least(kind)))
    required = {f.encode_name for f in msgspec.structs.fields(kind) if f.required}
    assert set(sent) == {"type"} | required
    assert sent["type"] == _tag(kind)
    assert ORIGINAL.get(kind, set()) <= set(sent)
    marked = _least(kind)
    marked.seq, marked.is_subagent, marked.subagent_id = 7, True, "child"
    again = json.loads(p.encode(marked))
    assert again == {**sent, "seq": 7, "is_subagent": True, "subagent_id": "child"}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(frames_of_logs(), indent=1, sort_keys=True) + "\n")
