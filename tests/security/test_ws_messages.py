"""Client messages the protocol does not have (navi/server/protocol.py), against a real
``navi serve``: each is answered by one ``error`` frame that says what to send, without
echoing the message back; the connection stays open, nothing is decided or written, and
a real message then runs.
"""

from __future__ import annotations

import json
from typing import Any

from websockets.sync.client import connect

from tests.security.conftest import NaviServerProcess
from tests.support.fake_llm import Reply

HUGE = "x" * 1_000_000

ABUSE: list[Any] = [
    {"type": "dance"},
    {"type": HUGE},
    {"type": {"nested": ["message"]}},
    {"type": None},
    {"content": "no type at all"},
    {"type": "Message", "content": "case matters"},
    {"type": "approve"},  # no call
    {"type": "approve", "call_id": ["c1"]},
    {"type": "deny", "call_id": "no-such-call", "stream_id": "../../etc"},
    {"type": "approve", "call_id": "no-such-call", "scope": "forever"},
    {"type": "message", "content": "x", "files": [{"name": "a"}]},
    {"type": "message", "content": "x", "queue": "yes"},
    {"type": "pause"},  # the replay socket's, not this one's
    [{"type": "message", "content": "in a list"}],
    "message",
    7,
]


def _one_frame(ws: Any) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(ws.recv(timeout=20))
    return frame


def test_unknown_and_bad_messages_get_one_error_and_the_socket_lives_on(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    session = server.create_session()
    before = server.session(session)
    with connect(f"{server.ws_url}/ws/sessions/{session}", open_timeout=10) as ws:
        for bad in ABUSE:
            ws.send(json.dumps(bad))
            frame = _one_frame(ws)
            assert frame["type"] == "error", (bad, frame)
            assert "seq" not in frame and "fatal" not in frame, frame
            assert len(frame["message"]) < 300, "the message is not echoed back"
        ws.send(json.dumps({"type": "ping"}))
        assert _one_frame(ws) == {"type": "pong"}
        assert server.session(session)["last_seq"] == before["last_seq"]  # nothing written
        server.llm.script(Reply(text="still here"))
        ws.send(json.dumps({"type": "message", "content": "a real one"}))
        while (frame := _one_frame(ws))["type"] != "stream_end":
            assert frame["type"] != "error", frame
        assert frame["content"] == "still here"


def test_an_unknown_type_says_which_types_there_are(shared_navi: NaviServerProcess) -> None:
    session = shared_navi.create_session()
    with connect(f"{shared_navi.ws_url}/ws/sessions/{session}", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "dance"}))
        message = _one_frame(ws)["message"]
    assert message == (
        "unknown message type 'dance': send 'message', 'stop', 'try_again', 'approve', 'deny' "
        "or 'ping'"
    )
