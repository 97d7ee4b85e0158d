"""Approvals over the WebSocket: the frames, live and again on reconnect, and the
client's approve / deny (a real server, the fake LLM server, the tools' own defaults)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from tests.navi.server.test_ws import frames_until, new_session
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_server import navi_server_for

pytestmark = pytest.mark.anyio

WRITE = FakeToolCall(
    name="filesystem", arguments={"action": "write", "path": "ws.txt", "content": "from ws"}
)


async def test_approve_over_the_socket_and_the_request_again_on_reconnect(
    tmp_path: Path,
) -> None:
    with navi_server_for(tmp_path, tool_approval="") as server:
        server.fake_llm.script(Reply(tool_calls=[WRITE]), Reply(text="Written."))
        sid = new_session(server)
        async with connect(f"{server.ws_url}/ws/sessions/{sid}") as ws:
            await ws.send(json.dumps({"type": "message", "content": "write it"}))
            frames = await frames_until(ws, "approval_required")
        request = frames[-1]
        assert request["tool"] == "filesystem" and request["args"]["action"] == "write"
        assert request["policy"] == "filesystem's default" and request["is_subagent"] is False
        started = next(f for f in frames if f["type"] == "tool_started")
        assert started["call_id"] == request["call_id"] and started["seq"] < request["seq"]

        # A client that connects later (a reload; after= past the request) gets it again.
        async with connect(f"{server.ws_url}/ws/sessions/{sid}?after={request['seq']}") as ws:
            again = json.loads(await ws.recv())
            assert again == request
            # Bad decisions: an error frame each; the connection and the wait go on.
            await ws.send(json.dumps({"type": "approve", "call_id": "no-such-call"}))
            error = json.loads(await ws.recv())
            assert error["type"] == "error" and "no-such-call" in error["message"]
            await ws.send(
                json.dumps({"type": "approve", "call_id": request["call_id"], "scope": "ever"})
            )
            error = json.loads(await ws.recv())
            assert error["type"] == "error" and "scope" in error["message"]
            await ws.send(json.dumps({"type": "approve", "call_id": request["call_id"]}))
            rest = await frames_until(ws, "stream_end")
        decided = next(f for f in rest if f["type"] == "approval_decided")
        assert decided["approved"] is True and decided["scope"] == "once"
        assert decided["by"] == "local" and decided["call_id"] == request["call_id"]
        result = next(f for f in rest if f["type"] == "tool_call")
        assert result["success"] is True and result["call_id"] == request["call_id"]
        assert (tmp_path / "files" / sid / "ws.txt").read_text() == "from ws"
        # Decided: no longer sent on connect; deciding again is an error frame.
        async with connect(f"{server.ws_url}/ws/sessions/{sid}") as ws:
            await ws.send(json.dumps({"type": "deny", "call_id": request["call_id"]}))
            error = json.loads(await ws.recv())
            assert error["type"] == "error" and "already decided" in error["message"]


async def test_deny_over_the_socket_with_a_reason(tmp_path: Path) -> None:
    with navi_server_for(tmp_path, tool_approval="") as server:
        server.fake_llm.script(Reply(tool_calls=[WRITE]), Reply(text="I will not."))
        sid = new_session(server)
        async with connect(f"{server.ws_url}/ws/sessions/{sid}") as ws:
            await ws.send(json.dumps({"type": "message", "content": "write it"}))
            request = (await frames_until(ws, "approval_required"))[-1]
            await ws.send(
                json.dumps({"type": "deny", "call_id": request["call_id"], "reason": "no files"})
            )
            rest = await frames_until(ws, "stream_end")
        decided = next(f for f in rest if f["type"] == "approval_decided")
        assert decided["approved"] is False and decided["reason"] == "no files"
        result = next(f for f in rest if f["type"] == "tool_call")
        assert result["success"] is False and result["reason"] == "denied"
        assert result["result"] == "The user declined this call: no files"
        assert not (tmp_path / "files" / sid / "ws.txt").exists()
