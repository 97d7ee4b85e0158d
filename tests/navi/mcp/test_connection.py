"""A ServerConnection against the real test server (mcp_test_server.py) over stdio and
Streamable HTTP: tools listed and called through the registry, results mapped."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from navi.mcp.client import ServerConnection
from navi.mcp.config import parse_config
from navi.mcp.tools import McpTool
from tests.navi.mcp.support import calls, http_server, stdio_entry
from tests.support.helpers import wait_until
from tools import ToolContext, ToolRegistry

pytest.importorskip("mcp")


def entry_of(raw: dict[str, Any], name: str = "t") -> Any:
    config = parse_config(json.dumps({"mcpServers": {name: raw}}))
    assert not config.errors, config.errors
    return config.servers[name]


@asynccontextmanager
async def connected(raw: dict[str, Any], registry: ToolRegistry) -> AsyncIterator[ServerConnection]:
    connection = ServerConnection(entry_of(raw), registry, timeout_s=30)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await wait_until(lambda: connection.state != "starting")
        yield connection
        tg.cancel_scope.cancel()


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext.standalone("s", tmp_path)


async def test_stdio_tools_are_listed_with_schema_source_and_hints(tmp_path: Path) -> None:
    registry = ToolRegistry()
    async with connected(stdio_entry(tmp_path / "log"), registry) as connection:
        assert connection.state == "running", connection.error
        names = set(registry.external_names)
        assert {"mcp__t__echo", "mcp__t__add", "mcp__t__slow"} <= names
        echo = registry.get("mcp__t__echo")
        assert isinstance(echo, McpTool)
        assert registry.source_of("mcp__t__echo") == "mcp:t"
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert echo.parameters["required"] == ["text"]
        assert "Repeat a text." in echo.description
        # readOnlyHint → approval auto; idempotentHint → re-run on resume.
        assert echo.approval == "auto" and echo.idempotent
        add = registry.get("mcp__t__add")
        assert isinstance(add, McpTool) and add.approval == "ask" and not add.idempotent
        result = await registry.execute("mcp__t__echo", {"text": "hi", "times": 2}, ctx(tmp_path))
        assert result.success and result.output == "hi hi"
    # Stopped: its tools leave the registry.
    assert registry.external_names == ()


async def test_a_wrong_type_never_reaches_the_server(tmp_path: Path) -> None:
    registry, log = ToolRegistry(), tmp_path / "log"
    async with connected(stdio_entry(log), registry):
        result = await registry.execute("mcp__t__add", {"a": "one", "b": 2}, ctx(tmp_path))
        assert not result.success
        assert "invalid arguments for 'mcp__t__add'" in (result.error or "")
        good = await registry.execute("mcp__t__add", {"a": 1, "b": 2}, ctx(tmp_path))
        assert good.output == "3"
    assert [c["arguments"] for c in calls(log) if c["tool"] == "add"] == [{"a": 1, "b": 2}]


async def test_results_errors_images_and_links(tmp_path: Path) -> None:
    registry = ToolRegistry()
    async with connected(stdio_entry(tmp_path / "log"), registry):
        failed = await registry.execute("mcp__t__explode", {"message": "boom"}, ctx(tmp_path))
        assert not failed.success and "exploded: boom" in (failed.error or "")
        image = await registry.execute("mcp__t__picture", {}, ctx(tmp_path))
        assert image.success and image.metadata["is_image"] is True
        assert image.metadata["mime_type"] == "image/png" and image.metadata["base64"]
        link = await registry.execute("mcp__t__link", {}, ctx(tmp_path))
        assert "file:///srv/report.txt" in link.output and "See the report:" in link.output


async def test_http_server_tools_are_called(tmp_path: Path) -> None:
    registry, log = ToolRegistry(), tmp_path / "log"
    with http_server(log) as url:
        async with connected({"url": url, "headers": {"X-Test": "1"}}, registry) as connection:
            assert connection.state == "running", connection.error
            assert registry.source_of("mcp__t__echo") == "mcp:t"
            result = await registry.execute("mcp__t__echo", {"text": "web"}, ctx(tmp_path))
            assert result.output == "web"
    assert any(c["tool"] == "echo" for c in calls(log))


async def test_a_killed_server_is_restarted_and_a_call_meanwhile_fails_clearly(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry()
    async with connected(stdio_entry(tmp_path / "log"), registry) as connection:
        first = await registry.execute("mcp__t__environment", {}, ctx(tmp_path))
        pid = json.loads(first.output)["pid"]
        os.kill(pid, signal.SIGKILL)
        down = await registry.execute("mcp__t__echo", {"text": "x"}, ctx(tmp_path))
        assert not down.success and "MCP server 't'" in (down.error or "")
        await wait_until(lambda: connection.restarts >= 1 and connection.state == "running")
        again = await registry.execute("mcp__t__environment", {}, ctx(tmp_path))
        assert json.loads(again.output)["pid"] != pid


async def test_a_stop_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    registry, log = ToolRegistry(), tmp_path / "log"
    async with connected(stdio_entry(log), registry):
        stop = anyio.Event()
        context = ToolContext.standalone("s", tmp_path, stop=stop)

        async def stop_soon(stop: anyio.Event = stop) -> None:
            await wait_until(lambda: any(c["tool"] == "slow" for c in calls(log)))
            stop.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_soon)
            began = anyio.current_time()
            result = await registry.execute("mcp__t__slow", {"seconds": 60}, context)
        assert result.failure_reason == "stopped"
        assert anyio.current_time() - began < 10
        await wait_until(lambda: any(c["event"] == "cancelled" for c in calls(log)), limit_s=10)


@pytest.mark.slow  # tries to start a process
async def test_a_server_that_cannot_start_is_reported(tmp_path: Path) -> None:
    registry = ToolRegistry()
    async with connected({"command": str(tmp_path / "no-such-server")}, registry) as connection:
        assert connection.state == "failed"
        assert "no-such-server" in connection.error
        assert "failed" in connection.status().describe()
        assert registry.external_names == ()
