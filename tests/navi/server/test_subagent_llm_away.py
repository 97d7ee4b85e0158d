"""A subagent whose run waits for the model's server (``llm.waiting`` in its own log):
its parent's WebSocket says so (``llm_waiting`` marked as the subagent's, again to a
client that connects meanwhile), and ``try_again`` sent to the parent goes on with the
subagent's run (its ``stream_retry`` then tells the banner to go)."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
from tests.support.helpers import free_port
from tests.support.navi_server import RunningServer, run_server

pytestmark = pytest.mark.anyio

SPAWN = FakeToolCall(name="spawn_agent", arguments={"task": "Read the todo list."})


async def frames_until(ws: ClientConnection, done: Any, limit: float = 20) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    with anyio.fail_after(limit):
        while not got or not done(got[-1]):
            got.append(json.loads(await ws.recv()))
    return got


def away(frame: dict[str, Any]) -> bool:
    return frame["type"] == "llm_waiting"


def child_of(server: RunningServer, sid: str) -> str:
    with httpx.Client(base_url=server.url) as http:
        lines = http.get(f"/sessions/{sid}/events").text.splitlines()
    spawned = [json.loads(line) for line in lines]
    (child,) = [e["event"]["child_stream_id"] for e in spawned if e["type"] == "subagent.spawned"]
    return str(child)


async def test_the_parent_sees_its_subagent_wait_and_try_again_goes_on(tmp_path: Path) -> None:
    port = free_port()
    with ExitStack() as fakes:
        fake = fakes.enter_context(FakeLLMServer.in_thread(port=port))
        # The subagent's answer never comes: the server goes away while it is asked.
        fake.script(Reply(tool_calls=[SPAWN]), Reply(text="late", delay_first=60))
        with run_server(tmp_path, fake, llm_retries=0, llm_retry_backoff_s=60.0) as server:
            async with httpx.AsyncClient(base_url=server.url) as http:
                created = await http.post("/sessions", json={"profile_id": "secretary"})
                sid = created.json()["session_id"]
            async with connect(f"{server.ws_url}/ws/sessions/{sid}") as ws:
                await ws.send(json.dumps({"type": "message", "content": "Delegate it."}))
                with anyio.fail_after(20):
                    while len(fake.requests) < 2:
                        await anyio.sleep(0.02)
                fakes.close()  # away for good
                frames = await frames_until(ws, away)
                child = child_of(server, sid)
                assert frames[-1]["is_subagent"] is True and frames[-1]["subagent_id"] == child
                assert "127.0.0.1" in frames[-1]["error"]
                # A client that connects meanwhile is told too: from the subagent's log,
                # or (already past it there) again with the calls that wait.
                for query in ("", f"?sub_after={child}:1000000"):
                    async with connect(f"{server.ws_url}/ws/sessions/{sid}{query}") as late:
                        seen = (await frames_until(late, away))[-1]
                        assert seen["subagent_id"] == child and seen["error"] == frames[-1]["error"]
                with FakeLLMServer.in_thread(port=port) as back:
                    back.script(Reply(text="The list is empty."), Reply(text="It is empty."))
                    await ws.send(json.dumps({"type": "try_again"}))
                    rest = await frames_until(ws, lambda f: f["type"] == "stream_end")
    kinds = [(f["type"], f.get("is_subagent", False)) for f in rest]
    assert kinds.index(("stream_retry", True)) < kinds.index(("tool_call", False))
    assert ("error", False) not in kinds and ("llm_waiting", True) not in kinds
    retry = next(f for f in rest if f["type"] == "stream_retry")
    assert retry["subagent_id"] == child
    assert rest[-1]["content"] == "It is empty." and rest[-1]["completed_normally"] is True
