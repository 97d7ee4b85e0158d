"""The socket's resume parameters (``after``, ``seen``, ``sub_after``) as a hostile
client sends them: garbage, negative, enormous. Each is read as "nothing" or clamped;
the connection stays up, answers, and sends no frame twice or from elsewhere."""

from __future__ import annotations

import json

import pytest
from websockets.sync.client import connect

from tests.security.conftest import NaviServerProcess, ws_frames


@pytest.mark.parametrize(
    "query",
    [
        "after=abc&seen=xyz",
        "after=-5&seen=-5",
        "after=3&seen=99999999999",
        "after=3&seen=" + "9" * 5000,
        "after=99999999&seen=1",
        "after=3&seen=1&sub_after=../../etc:1,x:y,:",
    ],
    ids=["not-numbers", "negative", "huge", "too-many-digits", "past-the-end", "bad-sub-after"],
)
def test_bad_resume_parameters_are_harmless(shared_navi: NaviServerProcess, query: str) -> None:
    server = shared_navi
    sid = server.canary_session
    url = f"{server.ws_url}/ws/sessions/{sid}?{query}"
    with connect(url, origin=None) as ws:  # type: ignore[arg-type]
        frames = ws_frames(ws)
    # Whatever is sent is the session's own frames, each once, in order.
    seqs = [f["seq"] for f in frames if "seq" in f]
    assert seqs == sorted(seqs)
    assert all(f["type"] != "error" or "Traceback" not in f.get("message", "") for f in frames)
    encoded = [json.dumps(f, sort_keys=True) for f in frames]
    assert len(encoded) == len(set(encoded)), "a frame came twice"
    # The session is intact: the full log still replays from the start.
    with connect(f"{server.ws_url}/ws/sessions/{sid}?after=0", origin=None) as ws:  # type: ignore[arg-type]
        everything = ws_frames(ws)
    assert any(f["type"] == "stream_end" for f in everything)


def test_seen_resends_only_the_rest_of_that_one_event(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.canary_session
    with connect(f"{server.ws_url}/ws/sessions/{sid}?after=0", origin=None) as ws:  # type: ignore[arg-type]
        everything = ws_frames(ws)
    last = everything[-1]["seq"]
    of_last = [f for f in everything if f.get("seq") == last]
    for seen in range(len(of_last) + 2):
        url = f"{server.ws_url}/ws/sessions/{sid}?after={last}&seen={seen}"
        with connect(url, origin=None) as ws:  # type: ignore[arg-type]
            assert ws_frames(ws) == of_last[seen:]
