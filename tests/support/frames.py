"""Frames as the wire has them (JSON objects), for tests that compare what a client got
with what the translator makes of the log."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from navi.server import frames as server_frames
from navi.server.protocol import Frame, ServerFrame

Wire = dict[str, Any]


def wire(frames: Iterable[Frame]) -> list[Wire]:
    """Typed frames as the JSON objects a client reads."""
    return [msgspec.json.decode(msgspec.json.encode(frame)) for frame in frames]


def typed(frames: Iterable[Wire]) -> list[Frame]:
    """JSON objects a client read, as the protocol's frames (a frame the protocol does
    not have fails the test)."""
    found: list[Frame] = msgspec.convert(list(frames), list[ServerFrame])
    return found


def coalesce(frames: list[Wire]) -> list[Wire]:
    """``navi.server.frames.coalesce`` over frames as a client read them."""
    return wire(server_frames.coalesce(typed(frames)))
