"""MCP servers at Navi's trust boundaries, in a real ``navi serve``: a stdio server's
environment holds only what its entry names (never the server's secrets); with
``"sandbox": true`` it cannot read the server's files either; its tools reach only
the profiles its entry names, whatever the LLM calls."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.navi.mcp.support import calls, stdio_entry, write_config
from tests.security.conftest import CANARY_ENV, NaviServerProcess, StartNavi
from tests.support.fake_llm_script import FakeToolCall, Reply
from tools.sandbox import sandbox_status

pytest.importorskip("mcp")


def _listed(server: NaviServerProcess, query: str = "") -> set[str]:
    with server.client() as http:
        response = http.get("/agents/tools" + query)
        return {t["name"] for t in response.json()}


def _wait_for_tools(server: NaviServerProcess, *names: str) -> None:
    deadline = time.monotonic() + 40
    while not set(names) <= _listed(server):
        assert time.monotonic() < deadline, f"{names} never listed:\n{server.logs()}"
        time.sleep(0.05)


def _call(server: NaviServerProcess, sid: str, name: str, **arguments: Any) -> dict[str, Any]:
    server.llm.script(
        Reply(tool_calls=[FakeToolCall(name=name, arguments=arguments)]), Reply(text="done")
    )
    response: httpx.Response = server.send(sid, "go")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = server.tool_messages(sid)[-1]
    return result


def _environment(result: dict[str, Any]) -> dict[str, str]:
    text = result["content"]
    env: dict[str, str] = json.loads(text[text.index("{") : text.rindex("}") + 1])["env"]
    return env


def test_a_stdio_server_sees_only_its_entrys_environment(
    tmp_path: Path, start_navi: StartNavi
) -> None:
    entry = stdio_entry(tmp_path / "log", env={"MCP_SETTING": "given-by-the-entry"})
    config = write_config(tmp_path / "mcp.json", {"plain": entry})
    server = start_navi(env={"NAVI_MCP_CONFIG": str(config)})
    _wait_for_tools(server, "mcp__plain__environment")
    sid = server.create_session("secretary")
    result = _call(server, sid, "mcp__plain__environment")
    assert result["success"], result
    env = _environment(result)
    assert env["MCP_SETTING"] == "given-by-the-entry"
    assert not set(CANARY_ENV) & set(env)
    assert server.leaked(result["content"]) == []
    allowed = {"MCP_SETTING", "MCP_TEST_LOG", "PATH", "HOME", "LANG", "LOGNAME", "SHELL", "TERM"}
    assert set(env) - {"USER", "LC_CTYPE"} <= allowed


def test_a_sandboxed_server_cannot_read_the_servers_files(
    tmp_path: Path, start_navi: StartNavi
) -> None:
    if not sandbox_status().available:
        pytest.skip(sandbox_status().reason)
    entry = stdio_entry(tmp_path / "log", sandbox=True)
    config = write_config(tmp_path / "mcp.json", {"boxed": entry})
    server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
    _wait_for_tools(server, "mcp__boxed__read")
    sid = server.create_session("secretary")
    for secret in (server.canary_file, server.home / ".ssh" / "id_ed25519", server.database):
        result = _call(server, sid, "mcp__boxed__read", path=str(secret))
        assert not result["success"] and "cannot read" in result["content"], result
        assert server.leaked(result["content"]) == []
    env = _environment(_call(server, sid, "mcp__boxed__environment"))
    assert not set(CANARY_ENV) & set(env)


def test_mcp_tools_reach_only_the_profiles_their_entry_names(
    tmp_path: Path, start_navi: StartNavi
) -> None:
    log = tmp_path / "log"
    entry = stdio_entry(log, profiles=["smart_home"])
    config = write_config(tmp_path / "mcp.json", {"home": entry})
    server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
    _wait_for_tools(server, "mcp__home__echo")
    assert "mcp__home__echo" in _listed(server, "?profile_id=smart_home")
    assert "mcp__home__echo" not in _listed(server, "?profile_id=secretary")

    sid = server.create_session("secretary")
    before = len(server.llm.requests)
    refused = _call(server, sid, "mcp__home__echo", text="from-secretary-4d1e")
    offered = {t["function"]["name"] for t in server.llm.requests[before].get("tools") or ()}
    assert "mcp__home__echo" not in offered
    assert not refused["success"]
    assert "tool mcp__home__echo is not enabled in profile secretary" in refused["content"]
    assert not [c for c in calls(log) if c["tool"] == "echo"]

    home = server.create_session("smart_home")
    done = _call(server, home, "mcp__home__echo", text="from-smart-home")
    assert done["success"] and "from-smart-home" in done["content"]
