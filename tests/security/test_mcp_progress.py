"""A hostile MCP server's progress notifications, in a real ``navi serve`` with a real MCP
server (tests/navi/mcp/mcp_prompt_server.py): a flood of 10 000 costs a bounded number
of ``tool.progress`` events; huge messages are cut short; a secret of the entry (and
URL passwords and query values) never reaches the log or a client; progress under a
token no call asked for records nothing. The call's result, the session and its log
stay intact (each call started, progressed and ended in order)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from websockets.sync.client import connect

from events.types import TOOL_PROGRESS_MESSAGE_MAX
from tests.navi.mcp.prompt_support import events, prompt_entry
from tests.navi.mcp.support import write_config
from tests.security.conftest import NaviServerProcess, StartNavi
from tests.support.fake_llm_script import FakeToolCall, Reply

pytest.importorskip("mcp")

SECRET = "progress-secret-7f3a-c0ffee"


@pytest.fixture(scope="module")
def served(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> NaviServerProcess:
    entry = prompt_entry(env={"PROGRESS_SECRET": "${NAVI_TEST_PROGRESS_SECRET}"})
    config = write_config(tmp_path_factory.mktemp("mcp") / "mcp.json", {"pr": entry})
    server = start_module_navi(
        env={"NAVI_MCP_CONFIG": str(config), "NAVI_TEST_PROGRESS_SECRET": SECRET},
        canary_row=False,
    )
    deadline = time.monotonic() + 40
    while True:
        with server.client() as http:
            names = {t["name"] for t in http.get("/agents/tools").json()}
        if "mcp__pr__flood_progress" in names:
            return server
        assert time.monotonic() < deadline, server.logs()
        time.sleep(0.1)


def _turn(server: NaviServerProcess, tool: str, **arguments: Any) -> tuple[str, float]:
    """A session whose one turn calls ``tool``; how long the turn took."""
    sid = server.create_session()
    call = FakeToolCall(name=f"mcp__pr__{tool}", arguments=arguments)
    server.llm.script(Reply(tool_calls=[call]), Reply(text="done"))
    began = time.monotonic()
    response = server.send(sid, "go")
    assert response.status_code == 200, response.text
    return sid, time.monotonic() - began


def _progress(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["event"] for e in log if e["type"] == "tool.progress"]


def _intact(server: NaviServerProcess, sid: str) -> None:
    """The call ended with its result, every progress between its start and its end,
    and the session takes the next turn."""
    log = events(server, sid)
    types = [e["type"] for e in log]
    assert types.count("tool.started") == 1 and types.count("tool.completed") == 1, types
    started, ended = types.index("tool.started"), types.index("tool.completed")
    assert all(started < i < ended for i, t in enumerate(types) if t == "tool.progress")
    assert types[-1] == "run.completed"
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    server.llm.script(Reply(text="still here"))
    assert server.send(sid, "again").status_code == 200
    assert events(server, sid)[-1]["type"] == "run.completed"


def test_a_flood_of_progress_costs_about_one_event_a_second(served: NaviServerProcess) -> None:
    sid, took = _turn(served, "flood_progress", count=10_000, size=20)
    progress = _progress(events(served, sid))
    assert 1 <= len(progress) <= took + 2, (len(progress), took)
    assert progress[-1]["progress"] == 10_000  # the last one is kept
    result = served.tool_messages(sid)[-1]
    assert result["success"] and result["content"].startswith("flooded")
    _intact(served, sid)


def test_huge_progress_messages_are_cut_short(served: NaviServerProcess) -> None:
    sid, _ = _turn(served, "flood_progress", count=5, size=200_000)
    progress = _progress(events(served, sid))
    assert progress
    for event in progress:
        assert len(event["message"]) <= TOOL_PROGRESS_MESSAGE_MAX
        assert event["message"].endswith("…")
    _intact(served, sid)


def test_secrets_in_progress_reach_neither_the_log_nor_a_client(
    served: NaviServerProcess,
) -> None:
    sid = served.create_session()
    call = FakeToolCall(name="mcp__pr__slow_work", arguments={"steps": 3, "delay": 0.6})
    served.llm.script(Reply(tool_calls=[call]), Reply(text="done"))
    frames: list[dict[str, Any]] = []
    with connect(f"{served.ws_url}/ws/sessions/{sid}", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "message", "content": "go"}))
        while (frame := json.loads(ws.recv(timeout=60)))["type"] != "stream_end":
            frames.append(frame)
    shown = [f for f in frames if f["type"] == "tool_progress"]
    assert shown
    assert "https://bot:[redacted]@example.test/run?key=[redacted]" in shown[0]["message"]
    assert "${NAVI_TEST_PROGRESS_SECRET}" in shown[0]["message"]
    with served.client() as http:
        raw = http.get(f"/sessions/{sid}/events").text
    assert "tool.progress" in raw
    assert SECRET not in raw
    assert SECRET not in json.dumps(frames)
    _intact(served, sid)


def test_progress_under_a_token_no_call_asked_for_records_nothing(
    served: NaviServerProcess,
) -> None:
    sid, _ = _turn(served, "stray_progress")
    assert _progress(events(served, sid)) == []
    result = served.tool_messages(sid)[-1]
    assert result["success"] and result["content"] == "strayed"
    _intact(served, sid)
