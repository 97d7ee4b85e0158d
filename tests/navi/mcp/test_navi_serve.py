"""MCP servers in a real ``navi serve``, called by the (fake, scripted) LLM through the
agent loop: the tools are listed and called, their failures, images and links reach the
LLM, a server that cannot start leaves the rest working, a changed config is followed
without a restart, and a stop ends a slow call on the server too."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.navi.mcp.support import calls, http_server, stdio_entry, write_config
from tests.security.conftest import NaviServerProcess
from tests.support.fake_llm_script import FakeToolCall, Reply

pytest.importorskip("mcp")


def listed(server: NaviServerProcess, query: str = "") -> dict[str, dict[str, Any]]:
    with server.client() as http:
        return {t["name"]: t for t in http.get("/agents/tools" + query).json()}


def wait_until(check: Callable[[], bool], limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def turn(server: NaviServerProcess, sid: str, *calls_: FakeToolCall) -> list[dict[str, Any]]:
    """One turn calling these tools one by one; the LLM requests it made."""
    server.llm.script(*[Reply(tool_calls=[c]) for c in calls_], Reply(text="done"))
    before = len(server.llm.requests)
    response = server.send(sid, "go")
    assert response.status_code == 200, response.text
    return server.llm.requests[before:]


def test_mcp_tools_through_the_agent_loop(tmp_path: Path, start_navi: Any) -> None:
    log, web_log = tmp_path / "stdio.log", tmp_path / "http.log"
    with http_server(web_log) as url:
        config = write_config(
            tmp_path / "mcp.json",
            {
                "t": stdio_entry(log),
                "web": {"url": url},
                "broken": {"command": str(tmp_path / "no-such-server")},
            },
        )
        server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
        wait_until(lambda: {"mcp__t__echo", "mcp__web__echo"} <= set(listed(server)))
        tools = listed(server)
        assert tools["mcp__t__echo"]["source"] == "mcp:t"
        assert tools["mcp__web__add"]["source"] == "mcp:web"
        assert tools["mcp__t__add"]["parameters"]["properties"]["a"]["type"] == "integer"
        assert tools["todo"]["source"] == "builtin"
        assert not [n for n in tools if n.startswith("mcp__broken__")]
        assert "broken" in server.logs() and "no-such-server" in server.logs()

        sid = server.create_session("secretary")
        asked = turn(
            server,
            sid,
            FakeToolCall(name="mcp__t__echo", arguments={"text": "hi", "times": 2}),
            FakeToolCall(name="mcp__t__add", arguments={"a": "one", "b": 2}),
            FakeToolCall(name="mcp__t__explode", arguments={"message": "boom"}),
            FakeToolCall(name="mcp__t__picture"),
            FakeToolCall(name="mcp__t__link"),
            FakeToolCall(name="mcp__web__echo", arguments={"text": "over http"}),
            FakeToolCall(name="list_tools"),
            FakeToolCall(name="tool_manual", arguments={"name": "mcp__t__add"}),
        )
    offered = {t["function"]["name"] for t in asked[0].get("tools") or ()}
    assert {"mcp__t__echo", "mcp__web__echo"} <= offered
    echo, add, explode, picture, link, web, listing, manual = server.tool_messages(sid)
    assert echo["success"] and "hi hi" in echo["content"]
    assert not add["success"] and "invalid arguments for 'mcp__t__add'" in add["content"]
    assert not explode["success"] and "exploded: boom" in explode["content"]
    assert picture["success"]
    # The image reaches the LLM after the result, as image_view's do.
    assert [m for m in asked[4]["messages"] if m.get("images")]
    assert "file:///srv/report.txt" in link["content"]
    assert web["success"] and "over http" in web["content"]
    assert "mcp__t__echo (mcp:t)" in listing["content"]
    assert "# mcp__t__add" in manual["content"] and "`a` (integer, required)" in manual["content"]
    # The wrong type never reached the server.
    assert [c["arguments"] for c in calls(log) if c["tool"] == "add"] == []
    assert [c["tool"] for c in calls(web_log)] == ["echo"]


def test_a_changed_config_is_followed_without_a_restart(tmp_path: Path, start_navi: Any) -> None:
    log = tmp_path / "log"
    config = write_config(tmp_path / "mcp.json", {"t": stdio_entry(log)})
    server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
    wait_until(lambda: "mcp__t__echo" in listed(server))
    pid = server.pid
    write_config(
        config,
        {"u": stdio_entry(log, env={"MCP_TEST_EXTRA_TOOL": "weather"}, profiles=["smart_home"])},
    )
    wait_until(lambda: "mcp__u__weather" in listed(server) and "mcp__t__echo" not in listed(server))
    assert server.pid == pid and server.process is not None and server.process.poll() is None
    assert "mcp__u__weather" in listed(server, "?profile_id=smart_home")
    assert "mcp__u__weather" not in listed(server, "?profile_id=secretary")
    sid = server.create_session("smart_home")
    turn(server, sid, FakeToolCall(name="mcp__u__weather"))
    [result] = server.tool_messages(sid)
    assert result["success"] and "weather here" in result["content"]


def test_a_stop_ends_a_slow_mcp_call_on_the_server(tmp_path: Path, start_navi: Any) -> None:
    log = tmp_path / "log"
    config = write_config(tmp_path / "mcp.json", {"t": stdio_entry(log)})
    server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
    wait_until(lambda: "mcp__t__slow" in listed(server))
    sid = server.create_session("secretary")
    server.llm.script(
        Reply(tool_calls=[FakeToolCall(name="mcp__t__slow", arguments={"seconds": 120})]),
        Reply(text="done"),
    )
    done: list[httpx.Response] = []
    sender = threading.Thread(target=lambda: done.append(server.send(sid, "go")))
    sender.start()
    wait_until(lambda: any(c["tool"] == "slow" for c in calls(log)))
    began = time.monotonic()
    with server.client() as http:
        assert http.post(f"/sessions/{sid}/stop").json()["stopped"] is True
    sender.join(30)
    assert done and time.monotonic() - began < 10
    [result] = server.tool_messages(sid)
    assert not result["success"]
    # The server was told (notifications/cancelled) and stopped working on it.
    wait_until(lambda: any(c["event"] == "cancelled" for c in calls(log)), limit_s=10)


def test_an_idempotent_mcp_call_cut_by_a_crash_is_run_again(
    tmp_path: Path, start_navi: Any
) -> None:
    log = tmp_path / "log"
    config = write_config(tmp_path / "mcp.json", {"t": stdio_entry(log)})
    server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
    wait_until(lambda: "mcp__t__lookup" in listed(server))
    sid = server.create_session("secretary")
    call = FakeToolCall(name="mcp__t__lookup", arguments={"key": "k", "seconds": 3})
    server.llm.script(Reply(tool_calls=[call]), Reply(text="done"))

    def send() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server is killed under it
            server.send(sid, "go")

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    wait_until(lambda: any(c["tool"] == "lookup" for c in calls(log)))
    server.stop(signal.SIGKILL)
    server.start()
    # idempotentHint: resumed, the call runs again (the servers are up before resume).
    wait_until(lambda: len([c for c in calls(log) if c["tool"] == "lookup"]) == 2)
    wait_until(lambda: len(server.tool_messages(sid)) == 1)
    [result] = server.tool_messages(sid)
    assert result["success"] and "value of k" in result["content"]
    sender.join(10)
