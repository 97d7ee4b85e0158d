"""WebSocket frames are bounded at the socket (issue 29, point 5), against a real
``navi serve``: a frame whose header announces more than the largest message a client
may send (ten 5 MB images in base64, ``navi.server.ws.MAX_FRAME_BYTES``) is refused as
soon as the header arrives, never read whole: the connection is closed with 1009
(message too big), and a new one works. The largest valid message still reaches Navi.

Before: uvicorn read frames up to 96 MB whole, and Navi refused them above 80 MB only
then: a client announcing 90 MB held the server reading (the first test waits for a
close that never came).
"""

from __future__ import annotations

import base64
import json
import os
import struct

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from navi.server.ws import MAX_FRAME_BYTES
from navi.session.input import MAX_IMAGE_BYTES, MAX_IMAGES
from tests.security.conftest import NaviServerProcess, StartNavi, ws_frames

ANNOUNCED = 90 * 1024 * 1024  # past the bound, under what uvicorn read before


def frame_start(length: int, payload: bytes) -> bytes:
    """A client's text frame header announcing ``length`` bytes, then ``payload`` (the
    start of them), masked as a client must."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x81, 0x80 | 127]) + struct.pack("!Q", length) + mask + masked


def until_end(ws: object) -> dict[str, object]:
    while True:
        frame = json.loads(ws.recv(timeout=60))  # type: ignore[attr-defined]
        if frame["type"] in ("stream_end", "error"):
            return frame  # type: ignore[no-any-return]


def test_a_frame_announced_past_the_bound_is_refused_unread(
    navi_process: NaviServerProcess,
) -> None:
    server = navi_process
    assert ANNOUNCED > MAX_FRAME_BYTES
    session = server.create_session()
    url = f"{server.ws_url}/ws/sessions/{session}"
    with connect(url, open_timeout=10) as ws:
        assert ws_frames(ws) == []  # the connection is up
        start = b'{"type": "message", "content": "' + b"a" * 65_536
        ws.socket.sendall(frame_start(ANNOUNCED, start))
        # Closed at once with 1009: the 90 MB were never waited for.
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=20)
        assert closed.value.rcvd is not None, closed.value
        assert closed.value.rcvd.code == 1009, closed.value
    # A new connection works, and so does the session.
    server.llm.script()
    with connect(url, open_timeout=10) as ws:
        ws.send(json.dumps({"type": "message", "content": "still here?"}))
        assert until_end(ws)["type"] == "stream_end"
    assert server.session(session)["messages"][-2]["content"] == "still here?"


def test_the_largest_valid_message_still_reaches_navi(start_navi: StartNavi) -> None:
    """Ten images of 5 MB each, in base64: read and checked by Navi (here refused by a
    1 MB quota, with an error frame, and the connection lives on)."""
    server = start_navi(env={"NAVI_USER_QUOTA_MB": "1"}, canary_row=False)
    session = server.create_session()
    image = b"\x89PNG\r\n\x1a\n" + os.urandom(MAX_IMAGE_BYTES - 8)
    encoded = "data:image/png;base64," + base64.b64encode(image).decode()
    message = {"type": "message", "content": "look", "images": [encoded] * MAX_IMAGES}
    text = json.dumps(message)
    assert len(text) <= MAX_FRAME_BYTES
    with connect(f"{server.ws_url}/ws/sessions/{session}", open_timeout=10, max_size=None) as ws:
        ws.send(text)
        frame = until_end(ws)
        assert frame["type"] == "error" and "quota" in str(frame["message"]), frame
        assert ws_frames(ws) == []  # the connection is up
