"""Frames: translation details not covered by the protocol tests."""

from __future__ import annotations

from navi.server.frames import coalesce


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
