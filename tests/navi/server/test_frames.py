"""Frames: translation details not covered by the protocol tests."""

from __future__ import annotations

import copy
import random
from typing import Any

import msgspec

from events.envelope import Recorded
from events.types import ImageRef, ToolCompleted
from navi.server.frames import FrameTranslator, coalesce


def test_coalesce_merges_runs_of_one_delta_kind_only() -> None:
    frames = [
        {"type": "thinking_delta", "delta": "a", "seq": 1},
        {"type": "thinking_delta", "delta": "b", "seq": 2},
        {"type": "thinking_end", "seq": 3},
        {"type": "stream_delta", "delta": "x", "seq": 3},
        {"type": "stream_delta", "delta": "y", "seq": 4},
        {"type": "stream_delta", "delta": "z", "seq": 5, "is_subagent": True, "subagent_id": "c"},
        {"type": "stream_end", "content": "xy", "seq": 6},
    ]
    assert coalesce(frames) == [
        {"type": "thinking_delta", "delta": "ab", "seq": 2},
        {"type": "thinking_end", "seq": 3},
        {"type": "stream_delta", "delta": "xy", "seq": 4},
        {"type": "stream_delta", "delta": "z", "seq": 5, "is_subagent": True, "subagent_id": "c"},
        {"type": "stream_end", "content": "xy", "seq": 6},
    ]
    assert coalesce([]) == []


def _merged_one_by_one(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The definition of the merge, one frame at a time."""
    out: list[dict[str, Any]] = []
    for frame in frames:
        last = out[-1] if out else None
        if (
            last is not None
            and frame["type"] in ("stream_delta", "thinking_delta")
            and last["type"] == frame["type"]
            and last.get("subagent_id") == frame.get("subagent_id")
        ):
            out[-1] = {**last, "delta": last["delta"] + frame["delta"], "seq": frame["seq"]}
        else:
            out.append(frame)
    return out


def test_coalesce_is_the_one_by_one_merge_and_leaves_its_input_alone() -> None:
    rng = random.Random(6)
    for _ in range(300):
        frames: list[dict[str, Any]] = []
        for seq in range(1, rng.randint(0, 40)):
            kind = rng.choice(["stream_delta", "stream_delta", "thinking_delta", "tool_started"])
            frame: dict[str, Any] = {"type": kind, "seq": seq}
            if kind.endswith("_delta"):
                frame["delta"] = rng.choice(["a", "bc", "", "é"])
            if rng.random() < 0.2:
                frame.update(is_subagent=True, subagent_id=rng.choice(["c1", "c2"]))
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
