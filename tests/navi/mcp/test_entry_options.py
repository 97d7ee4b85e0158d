"""An entry's options as other clients write them, against the real test server:
``${VAR}``s, a ``tools`` filter, a ``timeout``, and the legacy SSE transport."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from navi.mcp.client import ServerConnection
from navi.mcp.config import parse_config
from tests.navi.mcp.support import calls, http_server, stdio_entry
from tests.navi.mcp.test_connection import connected, ctx
from tests.support.helpers import wait_until
from tools import ToolRegistry

pytest.importorskip("mcp")

# A "server" that reads its stdin and never answers.
SILENT = [sys.executable, "-c", "import sys, time\nsys.stdin.read()\ntime.sleep(60)"]


async def test_variables_reach_a_stdio_servers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAVI_TEST_MCP_VALUE", "from-navis-environment")
    entry = stdio_entry(tmp_path / "log", env={"GIVEN": "${NAVI_TEST_MCP_VALUE}"})
    entry["env"]["DEFAULTED"] = "${NAVI_TEST_MCP_UNSET:-the-default}"
    registry = ToolRegistry()
    async with connected(entry, registry) as connection:
        assert connection.state == "running", connection.error
        result = await registry.execute("mcp__t__environment", {}, ctx(tmp_path))
        env = json.loads(result.output)["env"]
        assert env["GIVEN"] == "from-navis-environment"
        assert env["DEFAULTED"] == "the-default"
        assert "NAVI_TEST_MCP_VALUE" not in env


async def test_a_tools_filter_leaves_tools_out(tmp_path: Path) -> None:
    registry, log = ToolRegistry(), tmp_path / "log"
    entry = stdio_entry(log, tools={"allow": ["echo", "add", "explode"], "deny": ["explode"]})
    async with connected(entry, registry) as connection:
        assert connection.state == "running", connection.error
        assert set(registry.external_names) == {"mcp__t__echo", "mcp__t__add"}
        status = connection.status()
        assert status.tools == 2 and "explode" in status.dropped and "slow" in status.dropped
        assert 'left out by its "tools" filter: ' in status.describe()
        refused = await registry.execute("mcp__t__explode", {"message": "x"}, ctx(tmp_path))
        assert not refused.success
    assert not any(c["tool"] == "explode" for c in calls(log))


async def test_a_servers_timeout_ends_its_calls(tmp_path: Path) -> None:
    registry, log = ToolRegistry(), tmp_path / "log"
    async with connected(stdio_entry(log, timeout=1), registry) as connection:
        assert connection.timeout_s == 1
        result = await registry.execute("mcp__t__slow", {"seconds": 20}, ctx(tmp_path))
        assert result.failure_reason == "timeout", result
        assert "1s" in (result.error or "")


@pytest.mark.slow  # waits for a timeout
async def test_a_server_that_does_not_answer_is_reported_with_its_timeout() -> None:
    raw: dict[str, Any] = {"command": SILENT[0], "args": SILENT[1:], "timeout": 1.5}
    config = parse_config(json.dumps({"mcpServers": {"mute": raw}}))
    connection = ServerConnection(config.servers["mute"], ToolRegistry(), timeout_s=60)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        with anyio.fail_after(20):
            await connection.first_attempt.wait()
        tg.cancel_scope.cancel()
    assert "did not answer in 1.5 s" in connection.error, connection.error


async def test_a_legacy_sse_server(tmp_path: Path) -> None:
    registry, log = ToolRegistry(), tmp_path / "log"
    with http_server(log, transport="sse") as url:
        raw = {"type": "sse", "url": url, "headers": {"X-Test": "1"}, "tools": {"deny": ["add"]}}
        async with connected(raw, registry) as connection:
            assert connection.state == "running", connection.error
            assert connection.status().transport == "sse"
            assert "mcp__t__add" not in registry.external_names
            result = await registry.execute("mcp__t__echo", {"text": "old"}, ctx(tmp_path))
            assert result.output == "old", result
            await wait_until(lambda: any(c["tool"] == "echo" for c in calls(log)))
