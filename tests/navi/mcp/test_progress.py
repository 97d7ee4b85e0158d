"""An MCP tool's progress while it runs, in a real ``navi serve`` with a real MCP server
(mcp_prompt_server.py): ``tool.progress`` events in the log between the call's
``tool.started`` and its outcome, about one a second, and ``tool_progress`` frames on
the session's WebSocket, in order, between ``tool_started`` and ``tool_call``."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from websockets.sync.client import connect

from tests.navi.mcp.prompt_support import events, prompt_entry
from tests.navi.mcp.support import write_config
from tests.security.conftest import NaviServerProcess, StartNavi
from tests.support.fake_llm_script import FakeToolCall, Reply

pytest.importorskip("mcp")


@pytest.fixture(scope="module")
def served(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> NaviServerProcess:
    config = write_config(tmp_path_factory.mktemp("mcp") / "mcp.json", {"pr": prompt_entry()})
    server = start_module_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
    deadline = time.monotonic() + 40
    while True:
        with server.client() as http:
            names = {t["name"] for t in http.get("/agents/tools").json()}
        if "mcp__pr__slow_work" in names:
            return server
        assert time.monotonic() < deadline, server.logs()
        time.sleep(0.1)


def _script(server: NaviServerProcess, **arguments: Any) -> None:
    call = FakeToolCall(name="mcp__pr__slow_work", arguments=arguments)
    server.llm.script(Reply(tool_calls=[call]), Reply(text="done"))


def test_progress_is_in_the_log_while_the_call_runs_about_once_a_second(
    served: NaviServerProcess,
) -> None:
    sid = served.create_session()
    _script(served, steps=10, delay=0.3)
    began = time.monotonic()
    response = served.send(sid, "work")
    took = time.monotonic() - began
    assert response.status_code == 200, response.text
    log = events(served, sid)
    types = [e["type"] for e in log]
    started, ended = types.index("tool.started"), types.index("tool.completed")
    progress = [e for e in log if e["type"] == "tool.progress"]
    at = [log.index(e) for e in progress]
    assert progress and all(started < i < ended for i in at)
    call_id = log[started]["event"]["call_id"]
    assert {e["event"]["call_id"] for e in progress} == {call_id}
    # Ten notifications in three seconds (or more, on a busy machine): about one a
    # second, and the last one kept.
    assert 2 <= len(progress) <= took + 2, ([e["event"]["progress"] for e in progress], took)
    assert progress[-1]["event"]["progress"] == 10 and progress[-1]["event"]["total"] == 10
    values = [e["event"]["progress"] for e in progress]
    assert values == sorted(values)
    # The tool's result is its own, with what the server said after it (as before).
    result = served.tool_messages(sid)[-1]
    assert result["success"] and result["content"].startswith("worked 10 steps")


def test_a_websocket_client_gets_tool_progress_frames_in_order(
    served: NaviServerProcess,
) -> None:
    sid = served.create_session()
    _script(served, steps=6, delay=0.4)
    frames: list[dict[str, Any]] = []
    with connect(f"{served.ws_url}/ws/sessions/{sid}", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "message", "content": "work"}))
        while True:
            frame = json.loads(ws.recv(timeout=60))
            frames.append(frame)
            if frame["type"] == "stream_end":
                break
    types = [f["type"] for f in frames]
    started, ended = types.index("tool_started"), types.index("tool_call")
    progress = [f for f in frames if f["type"] == "tool_progress"]
    assert progress, types
    assert all(started < frames.index(f) < ended for f in progress)
    call_id = frames[started]["call_id"]
    for frame in progress:
        assert frame["call_id"] == call_id and frame["total"] == 6
        assert frame["is_subagent"] is False
        assert frame["message"].startswith("step ")
    seqs = [f["seq"] for f in progress]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [f["progress"] for f in progress] == sorted(f["progress"] for f in progress)
    assert progress[-1]["progress"] == 6
