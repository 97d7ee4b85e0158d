"""Overload degrades, never drops: with ``NAVI_MAX_LIVE_RUNS`` runs streaming, a new run
waits in a fair queue and says so (``run_queued``), then completes; no socket closes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.support.fake_llm import Reply
from tests.support.navi_server import RunningServer, navi_server_for

pytestmark = pytest.mark.anyio

LIMIT = 3
SESSIONS = 12


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[RunningServer]:
    with navi_server_for(tmp_path, max_live_runs=LIMIT) as running:
        yield running


def new_session(http: httpx.Client) -> str:
    sid: str = http.post("/sessions", json={"profile_id": "secretary"}).json()["session_id"]
    return sid


async def health(http: httpx.AsyncClient) -> dict[str, int]:
    load: dict[str, int] = (await http.get("/health")).json()["load"]
    return load


async def until_registered(http: httpx.AsyncClient, runs: int) -> None:
    """Until ``runs`` runs stream or wait (the node has taken the last message in)."""
    with anyio.fail_after(20):
        while True:
            load = await health(http)
            if load["live_runs"] + load["queued"] >= runs:
                return
            await anyio.sleep(0.02)


async def frames_until(ws: ClientConnection, last: str, limit: float = 60) -> list[dict[str, Any]]:
    got = []
    with anyio.fail_after(limit):
        while True:
            frame = json.loads(await ws.recv())
            got.append(frame)
            if frame["type"] == last:
                return got


async def still_open(ws: ClientConnection) -> None:
    await ws.send(json.dumps({"type": "ping"}))
    await frames_until(ws, "pong", limit=10)


async def test_runs_past_the_limit_wait_in_line_say_so_and_all_complete(
    limited: RunningServer,
) -> None:
    fake = limited.fake_llm
    # The first LIMIT runs take a while, so every other run is in line before one ends.
    slow = [Reply(text=f"Answer {i}.", delay_first=3.0) for i in range(LIMIT)]
    quick = [Reply(text=f"Answer {i}.", delay=0.05) for i in range(LIMIT, SESSIONS)]
    fake.script(*slow, *quick)
    with httpx.Client(base_url=limited.url) as setup:
        sids = [new_session(setup) for _ in range(SESSIONS)]
    peak = {"live_runs": 0, "streams": 0, "queued": 0}
    done = anyio.Event()

    async def sample(http: httpx.AsyncClient) -> None:
        while not done.is_set():
            load = await health(http)
            assert load["max_live_runs"] == LIMIT
            peak["live_runs"] = max(peak["live_runs"], load["live_runs"])
            peak["queued"] = max(peak["queued"], load["queued"])
            peak["streams"] = max(peak["streams"], len(fake.requests) - fake.completed)
            await anyio.sleep(0.05)

    results: dict[str, list[dict[str, Any]]] = {}

    async def follow(ws: ClientConnection, sid: str) -> None:
        results[sid] = await frames_until(ws, "stream_end")

    async with httpx.AsyncClient(base_url=limited.url) as http:
        sockets = [await connect(f"{limited.ws_url}/ws/sessions/{sid}") for sid in sids]
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample, http)
            for number, (sid, ws) in enumerate(zip(sids, sockets, strict=True)):
                tg.start_soon(follow, ws, sid)
                await ws.send(json.dumps({"type": "message", "content": f"question {number}"}))
                await until_registered(http, number + 1)
            with anyio.fail_after(90):
                while len(results) < SESSIONS:
                    await anyio.sleep(0.05)
            done.set()
        for ws in sockets:
            await still_open(ws)  # no socket was closed
            await ws.close()
        assert await health(http) == {"live_runs": 0, "queued": 0, "max_live_runs": LIMIT}

    assert peak["live_runs"] == LIMIT and peak["streams"] <= LIMIT
    assert peak["queued"] == SESSIONS - LIMIT
    for number, sid in enumerate(sids):
        frames = results[sid]
        end = frames[-1]
        assert end["completed_normally"] is True and end["content"].startswith("Answer")
        aheads = [f["ahead"] for f in frames if f["type"] == "run_queued"]
        if number < LIMIT:
            assert aheads == []
            continue
        # Its place when it came, then nearer as runs ahead started (several slots freed
        # at once move it more than one step).
        assert aheads[0] == number - LIMIT
        assert aheads == sorted(set(aheads), reverse=True) and aheads[-1] >= 0
        kinds = [f["type"] for f in frames]
        assert kinds.index("run_dequeued") < kinds.index("stream_delta")
    # First come, first served: the answers went out in the order the questions came.
    asked = [r["messages"][-1]["content"] for r in fake.requests]
    assert asked == [f"question {n}" for n in range(SESSIONS)]


async def test_a_run_stopped_in_line_ends_stopped_and_the_next_moves_up(
    tmp_path: Path,
) -> None:
    with navi_server_for(tmp_path, max_live_runs=1) as server:
        fake = server.fake_llm
        fake.script(Reply(text="First.", delay_first=2.0), Reply(text="Third."))
        with httpx.Client(base_url=server.url) as setup:
            first, second, third = (new_session(setup) for _ in range(3))
        async with (
            httpx.AsyncClient(base_url=server.url) as http,
            connect(f"{server.ws_url}/ws/sessions/{first}") as ws1,
            connect(f"{server.ws_url}/ws/sessions/{second}") as ws2,
            connect(f"{server.ws_url}/ws/sessions/{third}") as ws3,
        ):
            for number, ws in enumerate((ws1, ws2, ws3)):
                await ws.send(json.dumps({"type": "message", "content": f"q{number}"}))
                await until_registered(http, number + 1)
            assert (await frames_until(ws2, "run_queued"))[-1]["ahead"] == 0
            assert (await frames_until(ws3, "run_queued"))[-1]["ahead"] == 1
            await ws2.send(json.dumps({"type": "stop"}))
            stopped = await frames_until(ws2, "stream_stopped", limit=5)
            assert [f["type"] for f in stopped] == ["run_dequeued", "stream_stopped"]
            # The third moves up at once; the first is still streaming.
            assert (await frames_until(ws3, "run_queued", limit=5))[-1]["ahead"] == 0
            assert (await health(http))["live_runs"] == 1
            assert (await frames_until(ws1, "stream_end"))[-1]["content"] == "First."
            assert (await frames_until(ws3, "stream_end"))[-1]["content"] == "Third."
            for ws in (ws1, ws2, ws3):
                await still_open(ws)
            lines = (await http.get(f"/sessions/{second}/events")).text.splitlines()
        # The stopped run asked the LLM nothing; its log shows it started and stopped.
        assert [r["messages"][-1]["content"] for r in fake.requests] == ["q0", "q2"]
        types = [json.loads(line)["type"] for line in lines]
        assert "run.started" in types and "run.stopped" in types
