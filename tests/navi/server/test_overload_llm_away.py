"""NAVI_MAX_LIVE_RUNS=1 and a run that waits for the model's server: the run holds no
slot while it waits, so another session's run streams without queueing; Try again puts
the waiting run in line like a new run (``run_queued``, then ``run_dequeued``) and it
answers once the slot is free. Over the WebSocket, as clients see it."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import free_port
from tests.support.navi_server import run_server

pytestmark = pytest.mark.anyio


async def frames_until(ws: ClientConnection, kind: str, limit: float = 20) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    with anyio.fail_after(limit):
        while not got or got[-1]["type"] != kind:
            got.append(json.loads(await ws.recv()))
    return got


async def test_a_waiting_run_lends_its_slot_and_queues_again_to_go_on(tmp_path: Path) -> None:
    port = free_port()
    knobs: dict[str, Any] = {"llm_retries": 0, "llm_retry_backoff_s": 60.0, "max_live_runs": 1}
    with ExitStack() as fakes:
        fake = fakes.enter_context(FakeLLMServer.in_thread(port=port))
        fake.script(Reply(text="late", delay_first=60))
        with run_server(tmp_path, fake, **knobs) as server:
            async with httpx.AsyncClient(base_url=server.url) as http:
                first, second = [
                    (await http.post("/sessions", json={"profile_id": "secretary"})).json()[
                        "session_id"
                    ]
                    for _ in range(2)
                ]
                async with (
                    connect(f"{server.ws_url}/ws/sessions/{first}") as ws1,
                    connect(f"{server.ws_url}/ws/sessions/{second}") as ws2,
                ):
                    await ws1.send(json.dumps({"type": "message", "content": "first"}))
                    with anyio.fail_after(20):
                        while not fake.requests:
                            await anyio.sleep(0.02)
                    fakes.close()  # the server goes away mid-answer
                    await frames_until(ws1, "llm_waiting")
                    with anyio.fail_after(10):
                        while (await http.get("/health")).json()["load"]["live_runs"]:
                            await anyio.sleep(0.02)
                    with FakeLLMServer.in_thread(port=port) as back:
                        back.script(Reply(text="Second.", delay_first=2.0), Reply(text="First."))
                        await ws2.send(json.dumps({"type": "message", "content": "second"}))
                        with anyio.fail_after(20):
                            while not back.requests:
                                await anyio.sleep(0.02)
                        await ws1.send(json.dumps({"type": "try_again"}))
                        queued = await frames_until(ws1, "run_queued")
                        answered = await frames_until(ws2, "stream_end")
                        went_on = await frames_until(ws1, "stream_end")
                        asked = [r["messages"][-1]["content"] for r in back.requests]
    assert queued[-1]["ahead"] == 0
    assert all(f["type"] != "run_queued" for f in answered)  # it never waited in line
    assert answered[-1]["content"] == "Second."
    kinds = [f["type"] for f in went_on]
    assert kinds.index("run_dequeued") < kinds.index("stream_retry")
    assert went_on[-1]["content"] == "First." and went_on[-1]["completed_normally"] is True
    assert asked == ["second", "first"]
