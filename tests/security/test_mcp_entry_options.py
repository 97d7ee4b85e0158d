"""An mcp.json entry's ``${VAR}``s and ``tools`` filter, in a real ``navi serve``: what a
variable took from Navi's environment never shows in a log line or an error a user sees
(even when the URL it went into is logged, or quoted in a failure), and a tool the filter
leaves out is never offered to the LLM nor run, even when the LLM names it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.navi.mcp.support import calls, http_server, stdio_entry, write_config
from tests.security.conftest import CANARY_ENV, NaviServerProcess, StartNavi, fresh
from tests.security.test_mcp import _call, _log_events, _wait_for_tools

pytest.importorskip("mcp")


@dataclass(frozen=True)
class _Shared:
    server: NaviServerProcess
    root: Path


# One `navi serve` (a start costs seconds) with both tests' entries: the variables' ones
# (web, cmd, unset, t) and the filtered one (f); each test looks only at its own.
@pytest.fixture(scope="module")
def shared(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Shared]:
    root = tmp_path_factory.mktemp("mcp-entry-options")
    with http_server(root / "web.log") as url:
        base = url.removesuffix("/mcp")
        config = write_config(
            root / "mcp.json",
            {
                # Its URL (the secret in the path) is requested, logged by httpx, 404s.
                "web": {
                    "url": base + "/${NAVI_CANARY_SECRET}/mcp",
                    "headers": {"Authorization": "Bearer ${OPENAI_API_KEY}"},
                },
                "cmd": {"command": str(root / "${NAVI_CANARY_SECRET}")},
                "unset": {"command": "x", "env": {"KEY": "${NAVI_TEST_NEVER_SET}"}},
                "t": stdio_entry(root / "log-t", env={"KEY": "${NAVI_CANARY_SECRET}"}),
                "f": stdio_entry(root / "log-f", tools={"allow": ["echo", "add"], "deny": ["add"]}),
            },
        )
        server = start_module_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
        yield _Shared(server, root)


def test_a_variables_value_never_reaches_a_log_or_an_error(shared: _Shared) -> None:
    secret = CANARY_ENV["NAVI_CANARY_SECRET"]
    server = fresh(shared.server)
    _wait_for_tools(server, "mcp__t__echo")
    deadline = time.monotonic() + 40
    while {"web", "cmd"} - set(_log_events(server, "mcp.server_down")):
        assert time.monotonic() < deadline, server.logs()
        time.sleep(0.1)
    down = _log_events(server, "mcp.server_down")
    assert "${NAVI_CANARY_SECRET}" in down["cmd"], down
    problems = " ".join(_log_events(server, "mcp.config_invalid"))
    assert "${NAVI_TEST_NEVER_SET}, which is not set" in problems
    # A server's error, quoted to the user, in the tool result and the events.
    sid = server.create_session("secretary")
    result = _call(server, sid, "mcp__t__explode", message="the key")
    assert not result["success"]
    assert secret not in json.dumps(server.session(sid))
    logs = server.logs()
    assert secret not in logs and CANARY_ENV["OPENAI_API_KEY"] not in logs
    assert server.leaked(logs) == []


def test_a_tool_the_filter_leaves_out_is_never_offered_nor_run(shared: _Shared) -> None:
    log = shared.root / "log-f"
    server = fresh(shared.server)
    _wait_for_tools(server, "mcp__f__echo")
    sid = server.create_session("secretary")
    for name, arguments in [("mcp__f__add", {"a": 1, "b": 2}), ("mcp__f__explode", {})]:
        before = len(server.llm.requests)
        refused = _call(server, sid, name, **arguments)
        offered = {t["function"]["name"] for t in server.llm.requests[before].get("tools") or ()}
        assert {n for n in offered if n.startswith("mcp__f__")} == {"mcp__f__echo"}, offered
        assert not refused["success"], refused
    done = _call(server, sid, "mcp__f__echo", text="allowed")
    assert done["success"] and "allowed" in done["content"]
    assert [c["tool"] for c in calls(log)] == ["echo"]
