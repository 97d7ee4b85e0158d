"""A profile's tools are enforced where tools run, through the real agent loop: a real
``navi serve`` whose (scripted, fake) LLM names tools its profile does not enable. Each
call becomes a failed tool call the LLM can read, nothing runs, and the LLM is offered
only what it may call."""

from __future__ import annotations

from typing import Any

from tests.security.conftest import NaviServerProcess
from tests.support.fake_llm_script import FakeToolCall, Reply


def _offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


def _turn(server: NaviServerProcess, sid: str, *replies: Reply) -> list[dict[str, Any]]:
    """One turn with these replies; the LLM requests it made."""
    server.llm.script(*replies)
    before = len(server.llm.requests)
    response = server.send(sid, "do it")
    assert response.status_code == 200, response.text
    return server.llm.requests[before:]


def test_a_smart_home_session_cannot_run_terminal(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.create_session("smart_home")
    call = FakeToolCall(name="terminal", arguments={"command": "echo terminal-ran-8c1f"})
    asked = _turn(server, sid, Reply(tool_calls=[call]), Reply(text="done"))

    [tool] = server.tool_messages(sid)
    assert tool["success"] is False  # the UI's failed tool card
    assert "tool terminal is not enabled in profile smart_home" in tool["content"]
    assert "terminal-ran-8c1f" not in tool["content"]
    # The LLM is told, in the result it reads next, what it may call instead.
    told = [m["content"] for m in asked[1]["messages"] if m["role"] == "tool"]
    assert "not enabled in profile smart_home" in told[-1] and "http_request" in told[-1]
    # Offered: the profile's tools, the same list GET /agents/tools gives for it.
    with server.client() as http:
        listed = {t["name"] for t in http.get("/agents/tools?profile_id=smart_home").json()}
        assert http.get("/agents/tools?profile_id=no_such_profile").status_code == 404
    assert _offered(asked[0]) == listed
    assert "terminal" not in listed and "ssh_exec" not in listed and "http_request" in listed


def test_a_secretary_session_cannot_write_tools_or_ssh(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.create_session("secretary")
    module = (
        "import pathlib\npathlib.Path('written-tool-ran').write_text('x')\n"
        "name = 'evil'\ndescription = 'evil'\n"
        "parameters = {'type': 'object', 'properties': {}}\n"
        "async def call(args, ctx):\n    return 'x'\n"
    )
    calls = [
        FakeToolCall(name="write_tool", arguments={"name": "evil", "code": module}),
        FakeToolCall(name="ssh_exec", arguments={"host": "127.0.0.1", "command": "id"}),
    ]
    asked = _turn(server, sid, Reply(tool_calls=calls), Reply(text="done"))

    written, ssh = server.tool_messages(sid)
    assert "tool write_tool is not enabled in profile secretary" in written["content"]
    assert "tool ssh_exec is not enabled in profile secretary" in ssh["content"]
    assert written["success"] is False and ssh["success"] is False
    assert list((server.root / "user_tools").iterdir()) == []
    assert not list(server.root.rglob("written-tool-ran"))
    assert not {"write_tool", "ssh_exec", "terminal", "reload_tools"} & _offered(asked[0])


def test_a_subagent_may_call_only_its_subagent_tools(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.create_session("secretary")
    asked = _turn(
        server,
        sid,
        Reply(tool_calls=[FakeToolCall(name="spawn_agent", arguments={"task": "look"})]),
        # The subagent: list_tools is in secretary's enabled_tools, not its subagent_tools.
        Reply(tool_calls=[FakeToolCall(name="list_tools", arguments={})]),
        Reply(text="child done"),
        Reply(text="parent done"),
    )
    parent_first, child_first, child_second, parent_second = asked
    assert "spawn_agent" in _offered(parent_first) and "list_tools" in _offered(parent_first)
    assert _offered(child_first) == {
        "web_search",
        "web_view",
        "filesystem",
        "http_request",
        "code_exec",
        "image_view",
        "todo",
        "scratchpad",
    }
    [result] = [m for m in child_second["messages"] if m["role"] == "tool"]
    assert "tool list_tools is not enabled in profile secretary for subagents" in result["content"]
    assert "Built-in tools" not in result["content"]  # list_tools did not run
    assert (
        "child done" in [m["content"] for m in parent_second["messages"] if m["role"] == "tool"][-1]
    )
