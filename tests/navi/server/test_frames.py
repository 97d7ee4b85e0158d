"""Frames: translation details not covered by the protocol tests."""

from __future__ import annotations

import copy
import random

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.types import ImageRef, ToolCompleted
from navi.server import protocol as p
from navi.server.frames import FrameTranslator, coalesce
from navi.server.protocol import Frame


def test_coalesce_merges_runs_of_one_delta_kind_only() -> None:
    frames: list[Frame] = [
        p.ThinkingDelta(delta="a", seq=1),
        p.ThinkingDelta(delta="b", seq=2),
        p.ThinkingEnd(seq=3),
        p.StreamDelta(delta="x", seq=3),
        p.StreamDelta(delta="y", seq=4),
        p.StreamDelta(delta="z", seq=5, is_subagent=True, subagent_id="c"),
        p.StreamStopped(seq=6),
    ]
    assert coalesce(frames) == [
        p.ThinkingDelta(delta="ab", seq=2),
        p.ThinkingEnd(seq=3),
        p.StreamDelta(delta="xy", seq=4),
        p.StreamDelta(delta="z", seq=5, is_subagent=True, subagent_id="c"),
        p.StreamStopped(seq=6),
    ]
    assert coalesce([]) == []


def _merged_one_by_one(frames: list[Frame]) -> list[Frame]:
    """The definition of the merge, one frame at a time."""
    out: list[Frame] = []
    for frame in frames:
        last = out[-1] if out else None
        if (
            isinstance(last, p.StreamDelta | p.ThinkingDelta)
            and type(frame) is type(last)
            and last.subagent_id == frame.subagent_id
        ):
            out[-1] = replace(last, delta=last.delta + frame.delta, seq=frame.seq)
        else:
            out.append(frame)
    return out


def test_coalesce_is_the_one_by_one_merge_and_leaves_its_input_alone() -> None:
    rng = random.Random(6)
    for _ in range(300):
        frames: list[Frame] = []
        for seq in range(1, rng.randint(0, 40)):
            kind = rng.choice(["stream_delta", "stream_delta", "thinking_delta", "tool_started"])
            frame: Frame
            if kind == "tool_started":
                frame = p.ToolStarted(tool="t", args={}, is_subagent=False, call_id="c", seq=seq)
            else:
                delta = rng.choice(["a", "bc", "", "é"])
                kind_type = p.StreamDelta if kind == "stream_delta" else p.ThinkingDelta
                frame = kind_type(delta=delta, seq=seq)
            if rng.random() < 0.2:
                frame.is_subagent, frame.subagent_id = True, rng.choice(["c1", "c2"])
            frames.append(frame)
        before = copy.deepcopy(frames)
        assert coalesce(frames) == _merged_one_by_one(copy.deepcopy(frames))
        assert frames == before


def test_a_tool_call_frame_carries_the_image_the_tool_returned() -> None:
    ref = ImageRef(sha256="a" * 64, size=67, media_type="image/png")
    kept = {"is_image": True, "mime_type": "image/png", "image": msgspec.to_builtins(ref)}
    inline = {"is_image": True, "mime_type": "image/png", "base64": "aW1n"}
    translator = FrameTranslator(max_context_tokens=8192)
    frames = []
    for seq, metadata in ((1, kept), (2, inline), (3, {})):
        event = ToolCompleted(call_id=f"c{seq}", name="picture", output="ok", metadata=metadata)
        record = Recorded(
            stream_id="s", seq=seq, position=seq, event_id=f"e{seq}", timestamp=1.0, event=event
        )
        (frame,) = translator.frames(record)
        frames.append(msgspec.json.decode(msgspec.json.encode(frame)))
    assert frames[0]["images"] == [{"sha256": "a" * 64, "size": 67, "media_type": "image/png"}]
    # An image recorded inline (no blob store) goes to the LLM, not to the page.
    assert frames[1]["is_image"] and "images" not in frames[1] and "aW1n" not in str(frames[1])
    assert "images" not in frames[2] and "is_image" not in frames[2]


def test_the_table_dispatches_on_exact_types_that_have_no_subclasses() -> None:
    # ``frames`` looks an event's exact type up in the table: a subclass of a type it
    # names would silently make no frame.
    from navi.server.frame_table import TABLE

    for event_type in TABLE:
        assert event_type.__subclasses__() == [], event_type
