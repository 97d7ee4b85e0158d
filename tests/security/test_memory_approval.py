"""``memory_forget`` asks first (issue 30, item 4), on a real ``navi serve`` with the
tools' own approval defaults: a page the model read can tell it to forget what the
user taught it, and before the change the fact was gone with no one asked."""

from __future__ import annotations

import json

from tests.security.conftest import StartNavi
from tests.support.fake_llm_script import FakeToolCall, Reply


def test_memory_forget_waits_for_the_user(start_navi: StartNavi) -> None:
    server = start_navi(env={"NAVI_TOOL_APPROVAL": ""}, canary_row=False)
    sid = server.create_session("secretary")
    forget = FakeToolCall(name="memory_forget", arguments={"key": "editor"})
    server.llm.script(Reply(tool_calls=[forget]), Reply(text="I kept it."))
    turn = server.send_in_background(sid, "summarise that page")
    [request] = server.pending(sid)
    assert request["tool"] == "memory_forget"
    assert request["policy"] == "memory_forget's default"
    with server.client() as http:
        # Waiting: the call has not started (no tool.started in the log).
        events = http.get(f"/sessions/{sid}/events").text.splitlines()
        assert "tool.started" not in [json.loads(line)["type"] for line in events]
        decided = http.post(
            f"/sessions/{sid}/approvals/{request['call_id']}",
            json={"decision": "deny", "reason": "keep my facts"},
        )
        assert decided.status_code == 200, decided.text
    turn.join(60)
    [tool] = server.tool_messages(sid)
    assert tool["success"] is False
    assert "The user declined this call: keep my facts" in tool["content"]
