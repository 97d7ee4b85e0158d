"""The WebSocket protocol against a real server: frames, order, reconnect, bad input."""

from __future__ import annotations

import base64
import json
import os
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.frames import coalesce
from tests.support.navi_server import RunningServer, navi_server_for

pytestmark = pytest.mark.anyio


def new_session(server: RunningServer, profile: str = "secretary") -> str:
    with httpx.Client(base_url=server.url) as http:
        sid: str = http.post("/sessions", json={"profile_id": profile}).json()["session_id"]
        return sid


async def frames_until(ws: ClientConnection, last: str, limit: float = 20) -> list[dict[str, Any]]:
    got = []
    with anyio.fail_after(limit):
        while True:
            frame = json.loads(await ws.recv())
            got.append(frame)
            if frame["type"] == last:
                return got


async def test_a_simple_question_in_the_seeds_order(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(Reply(thinking="Hmm, easy.", text="Four."))
    sid = new_session(navi_server)
    async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}") as ws:
        await ws.send(json.dumps({"type": "message", "content": "2+2?"}))
        frames = await frames_until(ws, "stream_end")
    kinds = [f["type"] for f in frames]
    assert kinds[0] == "user_message" and kinds[1] == "stream_start"
    core = [k for k in kinds[2:] if k not in ("thinking_delta", "stream_delta")]
    assert core == ["thinking_end", "stream_end"]
    assert kinds.index("thinking_delta") < kinds.index("thinking_end") < kinds.index("stream_delta")
    text = "".join(f["delta"] for f in frames if f["type"] == "stream_delta")
    assert text == "Four."
    end = frames[-1]
    assert end["content"] == "Four." and end["max_context_tokens"] == 8192
    assert {"context_tokens", "elapsed_seconds", "tool_call_count", "token_count"} <= set(end)
    seqs = [f["seq"] for f in frames]
    assert seqs == sorted(seqs)


async def test_tools_and_a_profile_switch_in_order(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(
        Reply(
            tool_calls=[
                FakeToolCall(
                    name="todo",
                    arguments={"action": "set", "items": [{"text": "look"}, {"text": "answer"}]},
                ),
                FakeToolCall(name="switch_profile", arguments={"profile_id": "smart_home"}),
            ]
        ),
        Reply(text="Done."),
    )
    sid = new_session(navi_server)
    async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}") as ws:
        await ws.send(json.dumps({"type": "message", "content": "plan and switch"}))
        frames = await frames_until(ws, "stream_end")
    kinds = [f["type"] for f in frames if f["type"] not in ("stream_delta", "user_message")]
    assert kinds == [
        "stream_start",
        "tool_started",
        "tool_started",
        "todo_updated",
        "tool_call",
        "profile_switched",
        "tool_call",
        "stream_end",
    ]
    started = [f for f in frames if f["type"] == "tool_started"]
    assert started[0]["tool"] == "todo" and started[0]["args"]["action"] == "set"
    calls = [f for f in frames if f["type"] == "tool_call"]
    assert all(c["success"] for c in calls) and calls[0]["args"] == started[0]["args"]
    switched = next(f for f in frames if f["type"] == "profile_switched")
    assert switched["profile_id"] == "smart_home" and switched["profile_name"]
    assert frames[-1]["tool_call_count"] == 2


async def test_reconnect_with_after_gets_exactly_what_was_missed(tmp_path: Path) -> None:
    with navi_server_for(tmp_path) as server:
        server.fake_llm.script(Reply(text="one two three four five six", delay=0.01))
        sid = new_session(server)
        async with connect(f"{server.ws_url}/ws/sessions/{sid}") as ws:
            await ws.send(json.dumps({"type": "message", "content": "count"}))
            first = [json.loads(await ws.recv()) for _ in range(4)]
        last_seq = first[-1]["seq"]
        async with connect(f"{server.ws_url}/ws/sessions/{sid}?after={last_seq}") as ws:
            rest = await frames_until(ws, "stream_end")
        async with connect(f"{server.ws_url}/ws/sessions/{sid}?after=0") as ws:
            everything = await frames_until(ws, "stream_end")
    # A client that lags (a replay from 0 sends everything at once) may get runs of
    # deltas merged; what it gets is the same text with the same seqs.
    assert coalesce(first + rest) == coalesce(everything)


async def test_reconnect_inside_an_event_gets_the_rest_of_its_frames(
    navi_server: RunningServer,
) -> None:
    # The first text after the thinking gives two frames with one seq: thinking_end and
    # stream_delta. A client cut off between them (a server killed there) has the seq.
    navi_server.fake_llm.script(Reply(thinking="Hmm, easy.", text="Four."))
    sid = new_session(navi_server)
    url = f"{navi_server.ws_url}/ws/sessions/{sid}"
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "message", "content": "2+2?"}))
        first = await frames_until(ws, "thinking_end")
    cut = first[-1]["seq"]
    async with connect(f"{url}?after={cut}&seen=1") as ws:
        rest = await frames_until(ws, "stream_end")
    async with connect(f"{url}?after=0") as ws:
        everything = await frames_until(ws, "stream_end")
    assert rest[0] == {"type": "stream_delta", "delta": "Four.", "seq": cut}
    assert coalesce(first + rest) == coalesce(everything)


async def test_reconnect_after_a_server_restart_loses_nothing(tmp_path: Path) -> None:
    with navi_server_for(tmp_path) as server:
        server.fake_llm.script(Reply(text="before the restart"))
        sid = new_session(server)
        async with connect(f"{server.ws_url}/ws/sessions/{sid}") as ws:
            await ws.send(json.dumps({"type": "message", "content": "hi"}))
            before = await frames_until(ws, "stream_end")
        port = int(server.url.rsplit(":", 1)[1])
    from tests.support.fake_llm import FakeLLMServer
    from tests.support.navi_server import run_server

    with FakeLLMServer.in_thread() as fake, run_server(tmp_path, fake, port=port) as again:
        fake.script(Reply(text="after the restart"))
        async with connect(f"{again.ws_url}/ws/sessions/{sid}?after={before[2]['seq']}") as ws:
            replayed = await frames_until(ws, "stream_end")
            assert coalesce(replayed) == coalesce(before[3:])
            await ws.send(json.dumps({"type": "message", "content": "again"}))
            after = await frames_until(ws, "stream_end")
    assert after[-1]["content"] == "after the restart"
    assert after[0]["seq"] == before[-1]["seq"] + 1


async def test_two_clients_both_get_every_frame(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(Reply(text="shared answer"))
    sid = new_session(navi_server)
    url = f"{navi_server.ws_url}/ws/sessions/{sid}"
    async with connect(url) as a, connect(url) as b:
        await anyio.sleep(0.1)
        await a.send(json.dumps({"type": "message", "content": "hello both"}))
        got_a = await frames_until(a, "stream_end")
        got_b = await frames_until(b, "stream_end")
    assert got_a == got_b and got_b[0]["type"] == "user_message"


async def test_bad_frames_get_errors_and_the_connection_lives_on(
    navi_server: RunningServer,
) -> None:
    navi_server.fake_llm.script(Reply(text="still here"))
    sid = new_session(navi_server)
    async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}") as ws:
        for bad in [
            "{not json",
            json.dumps({"no": "type"}),
            json.dumps({"type": "dance"}),
            json.dumps({"type": "message", "content": ""}),
            json.dumps({"type": "message", "content": "x", "images": ["%%%"]}),
            json.dumps({"type": "message", "content": 5}),
        ]:
            await ws.send(bad)
            frame = json.loads(await ws.recv())
            assert frame["type"] == "error" and frame["message"], bad
        await ws.send(b"\x00\x01binary")
        assert json.loads(await ws.recv())["type"] == "error"
        await ws.send(json.dumps({"type": "message", "content": "now a real one"}))
        frames = await frames_until(ws, "stream_end")
        assert frames[-1]["content"] == "still here"


async def test_unknown_session_closes_with_4004(navi_server: RunningServer) -> None:
    async with connect(f"{navi_server.ws_url}/ws/sessions/no-such-session") as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4004


async def test_stop_over_the_websocket(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(Reply(text="word " * 400, delay=0.01))
    sid = new_session(navi_server)
    async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}") as ws:
        await ws.send(json.dumps({"type": "message", "content": "ramble"}))
        with anyio.fail_after(10):
            while json.loads(await ws.recv())["type"] != "stream_delta":
                pass
        await ws.send(json.dumps({"type": "stop"}))
        frames = await frames_until(ws, "stream_stopped")
    assert frames[-1]["type"] == "stream_stopped"


def stalled_client(url: str, path: str) -> socket.socket:
    """A WebSocket client that completes the handshake and then never reads, with a
    tiny receive buffer so the server feels it at once."""
    host, port = url.removeprefix("ws://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert b" 101 " in head.split(b"\r\n")[0]
    return sock


async def test_a_client_that_stops_reading_is_dropped_and_the_run_goes_on(
    navi_server: RunningServer,
) -> None:
    import navi.server.ws as ws_module

    # Megabytes of frames: more than the sockets' buffers can hide.
    navi_server.fake_llm.script(Reply(text=["y" * 4000] * 3000))
    sid = new_session(navi_server)
    old = ws_module.SEND_QUEUE, ws_module.SEND_TIMEOUT
    ws_module.SEND_QUEUE, ws_module.SEND_TIMEOUT = 16, 1.0
    try:
        slow = stalled_client(navi_server.ws_url, f"/ws/sessions/{sid}")
        async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}", max_size=None) as good:
            await good.send(json.dumps({"type": "message", "content": "flood"}))
            frames = await frames_until(good, "stream_end", limit=30)
        assert frames[-1]["type"] == "stream_end"
        state = navi_server.server.config.app.state.navi_server  # type: ignore[attr-defined]
        with slow, anyio.fail_after(15):
            # The server gives up on it (its close frame may never get through a full
            # buffer, so the drop is read on the server's side).
            while state.slow_clients_dropped < 1:
                await anyio.sleep(0.05)
    finally:
        ws_module.SEND_QUEUE, ws_module.SEND_TIMEOUT = old


async def test_a_fork_is_followed_live_with_its_own_seqs(navi_server: RunningServer) -> None:
    """A fork's stream holds a copy of its origin's part: the live WebSocket follows that
    one stream, the seqs of its frames are those of ``/events``, and ``?after=`` works
    from inside the copy and after it."""
    navi_server.fake_llm.script(Reply(text="One."), Reply(text="one two three four", delay=0.01))
    sid = new_session(navi_server)
    async with httpx.AsyncClient(base_url=navi_server.url, timeout=30) as http:
        sent = await http.post(f"/sessions/{sid}/messages", json={"content": "first"})
        assert sent.status_code == 200
        head = len((await http.get(f"/sessions/{sid}/events")).text.splitlines())
        forked = (await http.post(f"/sessions/{sid}/fork", json={"at": head})).json()
    fork, fork_head = forked["session_id"], forked["head"]
    url = f"{navi_server.ws_url}/ws/sessions/{fork}"
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "message", "content": "second"}))
        first = [json.loads(await ws.recv()) for _ in range(3)]
    assert first[0]["type"] == "user_message" and first[0]["seq"] == fork_head + 1
    async with connect(f"{url}?after={first[-1]['seq']}") as ws:
        rest = await frames_until(ws, "stream_end")
    async with connect(f"{url}?after={fork_head}") as ws:
        since_fork = await frames_until(ws, "stream_end")
    assert coalesce(first + rest) == coalesce(since_fork)
    async with connect(f"{url}?after=2") as ws:  # from inside the copied part
        whole = await frames_until(ws, "stream_end")
        whole += await frames_until(ws, "stream_end")
    assert [f["content"] for f in whole if f["type"] == "stream_end"] == [
        "One.",
        "one two three four",
    ]
    async with httpx.AsyncClient(base_url=navi_server.url, timeout=30) as http:
        lines = (await http.get(f"/sessions/{fork}/events")).text.splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    by_seq = {e["seq"]: e["type"] for e in events}
    assert by_seq[first[0]["seq"]] == "user.message"
    assert by_seq[since_fork[-1]["seq"]] in {"run.completed", "llm.completed"}
