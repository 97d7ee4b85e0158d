"""The replay WebSocket (and the live one of a fork) against a real server: the frames
of a replay are the live frames, paused, resumed, sought and sped up on request."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.frames import coalesce
from tests.support.navi_server import RunningServer

pytestmark = pytest.mark.anyio


def record_session(server: RunningServer, turns: int = 2) -> str:
    server.fake_llm.script(
        Reply(
            tool_calls=[
                FakeToolCall(name="todo", arguments={"action": "set", "items": [{"text": "one"}]})
            ]
        ),
        Reply(thinking="Done thinking.", text="First answer, in a few words.", delay=0.002),
        Reply(text="Second answer."),
    )
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid: str = http.post("/sessions", json={}).json()["session_id"]
        for n in range(turns):
            assert http.post(f"/sessions/{sid}/messages", json={"content": f"q{n}"}).is_success
    return sid


async def frames_until(ws: ClientConnection, last: str, limit: float = 20) -> list[dict[str, Any]]:
    got = []
    with anyio.fail_after(limit):
        while True:
            frame = json.loads(await ws.recv())
            got.append(frame)
            if frame["type"] == last:
                return got


async def live_frames(server: RunningServer, sid: str, after: int = 0) -> list[dict[str, Any]]:
    """Everything the live socket sends for the log after ``after`` (it then waits)."""
    got: list[dict[str, Any]] = []
    async with connect(f"{server.ws_url}/ws/sessions/{sid}?after={after}") as ws:
        while True:
            with anyio.move_on_after(0.5) as timer:
                got.append(json.loads(await ws.recv()))
            if timer.cancelled_caught:
                return got


def played(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if not f["type"].startswith("replay_")]


async def test_a_replay_sends_the_live_frames(navi_server: RunningServer) -> None:
    sid = record_session(navi_server)
    live = await live_frames(navi_server, sid)
    assert [f["type"] for f in live].count("stream_end") == 2
    url = f"{navi_server.ws_url}/ws/sessions/{sid}/replay?speed=max"
    async with connect(url) as ws:
        frames = await frames_until(ws, "replay_end")
    assert frames[0]["type"] == "replay_status" and frames[0]["state"] == "playing"
    # The live socket merges runs of deltas for a client that lags (a replay of the
    # whole log at once does); the text and the seqs are the same.
    assert coalesce(played(frames)) == coalesce(live)
    end = frames[-1]
    assert end["to"] == end["head"] == end["seq"] and end["from"] == 1

    # from / to: only that part, the translator primed with what came before.
    second = next(f["seq"] for f in live if f["type"] == "user_message" and f["content"] == "q1")
    url = f"{navi_server.ws_url}/ws/sessions/{sid}/replay?speed=max&from={second}"
    async with connect(url) as ws:
        tail = await frames_until(ws, "replay_end")
    assert coalesce(played(tail)) == coalesce([f for f in live if f["seq"] >= second])
    url = f"{navi_server.ws_url}/ws/sessions/{sid}/replay?speed=max&from=1&to={second - 1}"
    async with connect(url) as ws:
        head = await frames_until(ws, "replay_end")
    assert coalesce(played(head)) == coalesce([f for f in live if f["seq"] < second])


async def test_pause_seek_speed_and_resume(navi_server: RunningServer) -> None:
    sid = record_session(navi_server)
    live = await live_frames(navi_server, sid)
    second = next(f["seq"] for f in live if f["type"] == "user_message" and f["content"] == "q1")
    # So slow that nothing after the first gap would arrive during the test.
    url = f"{navi_server.ws_url}/ws/sessions/{sid}/replay?speed=0.0001"
    async with connect(url) as ws:
        assert json.loads(await ws.recv())["state"] == "playing"
        await ws.send(json.dumps({"type": "pause"}))
        status = await frames_until(ws, "replay_status")
        assert status[-1]["state"] == "paused"
        await ws.send(json.dumps({"type": "seek", "seq": second}))
        status = await frames_until(ws, "replay_status")
        assert status[-1]["next_seq"] == second and status[-1]["state"] == "paused"
        await ws.send(json.dumps({"type": "speed", "speed": "max"}))
        status = await frames_until(ws, "replay_status")
        assert status[-1]["speed"] == "max"
        with anyio.move_on_after(0.3):  # paused: nothing comes
            unexpected = await ws.recv()
            pytest.fail(f"a paused replay sent {unexpected!r}")
        await ws.send(json.dumps({"type": "resume"}))
        rest = await frames_until(ws, "replay_end")
        assert coalesce(played(rest)) == coalesce([f for f in live if f["seq"] >= second])
        # After the end the socket stays: a seek plays again.
        await ws.send(json.dumps({"type": "seek", "seq": 1}))
        again = await frames_until(ws, "replay_end")
        assert coalesce(played(again)) == coalesce(live)


def one_turn(server: RunningServer, *replies: Reply) -> str:
    server.fake_llm.script(*replies)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid: str = http.post("/sessions", json={}).json()["session_id"]
        assert http.post(f"/sessions/{sid}/messages", json={"content": "go"}).is_success
    return sid


def fork_before_second_question(server: RunningServer, sid: str) -> tuple[str, int]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        events = [
            json.loads(line) for line in http.get(f"/sessions/{sid}/events").text.splitlines()
        ]
        q1 = next(e["seq"] for e in events if e["type"] == "user.message" and e["seq"] > 5)
        fork: str = http.post(f"/sessions/{sid}/fork", json={"at": q1 - 1}).json()["session_id"]
    return fork, q1


def has_tool(server: RunningServer, name: str) -> bool:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        return name in {t["name"] for t in http.get("/agents/tools").json()}


def timeline_of(server: RunningServer, sid: str) -> dict[str, Any]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        timeline: dict[str, Any] = http.get(f"/sessions/{sid}/timeline").json()
        return timeline


async def test_pacing_follows_the_recorded_times(navi_server: RunningServer) -> None:
    sid = one_turn(navi_server, Reply(text=["a", "b", "c", "d"], delay=0.15))
    url = f"{navi_server.ws_url}/ws/sessions/{sid}/replay?speed=0.5"
    async with connect(url) as ws:
        await ws.recv()  # status
        started = anyio.current_time()
        await frames_until(ws, "replay_end")
        # Four chunks 0.15 s apart at half speed: at least ~0.9 s (a lower bound only).
        assert anyio.current_time() - started >= 0.8


async def test_bad_messages_get_errors_and_the_replay_goes_on(navi_server: RunningServer) -> None:
    sid = record_session(navi_server, turns=1)
    url = f"{navi_server.ws_url}/ws/sessions/{sid}/replay?speed=0.0001"
    async with connect(url) as ws:
        await ws.recv()
        for bad, says in [
            ("{nope", "not valid JSON"),
            (json.dumps({"type": "rewind"}), "unknown message type"),
            (json.dumps({"type": "seek"}), "needs 'seq'"),
            (json.dumps({"type": "seek", "seq": 10_000}), "needs 'seq'"),
            (json.dumps({"type": "speed", "speed": -2}), "above 0"),
            (json.dumps({"type": "speed", "speed": "fast"}), "number or 'max'"),
            (json.dumps({"type": "speed"}), "needs 'speed'"),
            (json.dumps({"seq": 3}), "malformed"),
        ]:
            await ws.send(bad)
            frames = await frames_until(ws, "error")
            assert says in frames[-1]["message"], (bad, frames[-1])
        await ws.send(json.dumps({"type": "speed", "speed": "max"}))
        frames = await frames_until(ws, "replay_end")
        assert any(f["type"] == "stream_end" for f in frames)


async def test_unknown_sessions_and_bad_parameters_close(navi_server: RunningServer) -> None:
    sid = record_session(navi_server, turns=1)
    async with connect(f"{navi_server.ws_url}/ws/sessions/nope/replay") as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4004
    for query, says in [
        ("from=abc", "whole number"),
        ("speed=0", "above 0"),
        ("from=5&to=2", "from <= to"),
        ("to=100000", "from <= to"),
    ]:
        async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}/replay?{query}") as ws:
            error = json.loads(await ws.recv())
            assert error["type"] == "error" and says in error["message"], (query, error)
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400


async def test_a_forks_live_socket_numbers_frames_as_its_history(
    navi_server: RunningServer,
) -> None:
    sid = record_session(navi_server)
    fork, q1 = fork_before_second_question(navi_server, sid)
    origin_part = [f for f in await live_frames(navi_server, sid) if f["seq"] < q1]
    assert coalesce(await live_frames(navi_server, fork)) == coalesce(origin_part)

    navi_server.fake_llm.script(Reply(text="A new ending."))
    async with connect(f"{navi_server.ws_url}/ws/sessions/{fork}") as ws:
        await ws.send(json.dumps({"type": "message", "content": "different"}))
        frames = await frames_until(ws, "stream_end")
    assert frames[0]["type"] == "user_message" and frames[0]["seq"] == q1
    assert [f["seq"] for f in frames] == sorted(f["seq"] for f in frames)
    everything = await live_frames(navi_server, fork)
    assert coalesce(everything) == coalesce(origin_part + frames)
    tail = await live_frames(navi_server, fork, after=q1 - 2)
    assert coalesce(tail) == coalesce([f for f in everything if f["seq"] > q1 - 2])
    # The replay of a fork is its history too.
    async with connect(f"{navi_server.ws_url}/ws/sessions/{fork}/replay?speed=max") as ws:
        assert coalesce(played(await frames_until(ws, "replay_end"))) == coalesce(everything)


async def test_a_replay_nests_subagent_frames_as_live(navi_server: RunningServer) -> None:
    if not has_tool(navi_server, "spawn_agent"):
        pytest.skip("this server has no spawn_agent tool")
    sid = one_turn(
        navi_server,
        Reply(tool_calls=[FakeToolCall(name="spawn_agent", arguments={"task": "Find otters"})]),
        Reply(
            tool_calls=[
                FakeToolCall(
                    name="scratchpad",
                    arguments={"action": "write", "section": "s", "content": "Otters."},
                )
            ]
        ),
        Reply(text="Otters hold hands."),
        Reply(text="They hold hands."),
    )
    live = await live_frames(navi_server, sid)
    async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}/replay?speed=max") as ws:
        frames = played(await frames_until(ws, "replay_end"))
    key = json.dumps
    assert sorted(map(key, coalesce(frames))) == sorted(map(key, coalesce(live)))
    spawn = [i for i, f in enumerate(frames) if f.get("tool") == "spawn_agent"]
    nested = [i for i, f in enumerate(frames) if f.get("is_subagent")]
    assert nested and spawn[0] < min(nested) and max(nested) < spawn[-1]
    assert any(f["type"] == "tool_call" and f["tool"] == "scratchpad" for f in frames)
    # The timeline gives the subagent its own lane, nested under the session's.
    timeline = timeline_of(navi_server, sid)
    main, child = timeline["lanes"]
    assert child["depth"] == 1 and child["parent"] == sid and child["label"] == "Find otters"
    assert len(child["at"]) == len(child["t"]) and all(
        1 <= s <= timeline["head"] for s in child["at"]
    )
    assert any(s["kind"] == "subagent" and s["lane"] == child["id"] for s in main["spans"])
