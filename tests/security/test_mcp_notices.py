"""A hostile MCP server's own messages, and resource URIs that reach for what the server
does not serve: a flood of list_changed costs at most one listing a second; a flood of
huge log lines and progress messages comes back cut short and logged at a bounded rate;
a resource URI the server did not offer never reaches it. The connection, the session
and its log stay intact."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from navi.mcp import client as client_module
from navi.mcp.client import ServerConnection
from navi.mcp.config import parse_config
from navi.mcp.notices import CALL_LINES, LINE_MAX, LOG_LINES_PER_S
from tests.navi.mcp.support import calls, write_config
from tests.security.conftest import StartNavi
from tests.security.test_mcp import _call, _wait_for_tools
from tests.support.helpers import wait_until
from tools import ToolContext, ToolRegistry

pytest.importorskip("mcp")

NOTICE_SCRIPT = Path(__file__).parents[1] / "navi" / "mcp" / "mcp_notice_server.py"


def notice_entry(log: Path, docs: Path | None = None) -> dict[str, Any]:
    env = {"MCP_TEST_LOG": str(log)}
    if docs is not None:
        env["MCP_TEST_DOCS"] = str(docs)
    return {"command": sys.executable, "args": [str(NOTICE_SCRIPT), "stdio"], "env": env}


@asynccontextmanager
async def connected(raw: dict[str, Any], registry: ToolRegistry) -> AsyncIterator[ServerConnection]:
    config = parse_config(json.dumps({"mcpServers": {"h": raw}}))
    connection = ServerConnection(config.servers["h"], registry, timeout_s=60)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await wait_until(lambda: connection.state != "starting")
        assert connection.state == "running", connection.error
        yield connection
        tg.cancel_scope.cancel()


async def test_a_flood_of_list_changed_costs_one_listing_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "CHECK_INTERVAL_STDIO_S", 3600.0)
    listings: list[float] = []
    refresh = ServerConnection._refresh

    async def counted(self: ServerConnection, client: Any, *, force: bool = False) -> None:
        listings.append(anyio.current_time())
        await refresh(self, client, force=force)

    monkeypatch.setattr(ServerConnection, "_refresh", counted)
    registry, context = ToolRegistry(), ToolContext.standalone("s", tmp_path)
    async with connected(notice_entry(tmp_path / "log"), registry) as connection:
        began = anyio.current_time()
        flooded = await registry.execute("mcp__h__flood_changes", {"count": 2000}, context)
        assert flooded.success, flooded.error
        # Still listening after the flood: a real change is picked up.
        await registry.execute("mcp__h__grow", {"name": "after"}, context)
        await wait_until(lambda: "mcp__h__after" in registry.external_names, limit_s=20)
        elapsed = anyio.current_time() - began
        during = [t for t in listings if t >= began]
        assert len(during) <= elapsed / client_module.REFRESH_GAP_S + 2, (len(during), elapsed)
        assert connection.state == "running" and connection.restarts == 0


async def test_huge_and_many_log_lines_and_progress_messages_stay_bounded(
    tmp_path: Path,
) -> None:
    registry, context = ToolRegistry(), ToolContext.standalone("s", tmp_path)
    with structlog.testing.capture_logs() as logged:
        async with connected(notice_entry(tmp_path / "log"), registry) as connection:
            began = anyio.current_time()
            shouted = await registry.execute(
                "mcp__h__shout", {"lines": 300, "size": 40_000}, context
            )
            elapsed = anyio.current_time() - began
            after = await registry.execute("mcp__h__work", {"steps": 1}, context)
            assert after.success and connection.restarts == 0
    assert shouted.success, shouted.error
    said = shouted.metadata["server_messages"]
    assert len(said) == CALL_LINES and all(len(line) <= LINE_MAX + 20 for line in said)
    assert len(shouted.output) < CALL_LINES * (LINE_MAX + 30) + 200
    lines = [e for e in logged if e["event"] == "mcp.server_log"]
    assert lines and all(len(e["line"]) <= LINE_MAX for e in lines)
    assert len(lines) <= LOG_LINES_PER_S * (elapsed + 2)


URIS_OUTSIDE = (
    "docs://../secret.txt",
    "docs://..%2Fsecret.txt",
    "docs://%2e%2e%2fsecret.txt",
    "docs://..",
    "docs://%2E%2E",
    "file:///etc/passwd",
    "mem://readme/../../etc/passwd",
    "docs://intro.txt\n../secret.txt",
    "docs://" + "a" * 5000,
)


async def test_a_resource_uri_the_server_did_not_offer_never_reaches_it(tmp_path: Path) -> None:
    docs, log = tmp_path / "docs", tmp_path / "log"
    docs.mkdir()
    (docs / "intro.txt").write_text("Intro text.")
    (tmp_path / "secret.txt").write_text("secret-7f3a")
    registry, context = ToolRegistry(), ToolContext.standalone("s", tmp_path)
    async with connected(notice_entry(log, docs), registry):
        for uri in URIS_OUTSIDE:
            refused = await registry.execute("mcp__h__read_resource", {"uri": uri}, context)
            assert not refused.success, uri
            assert "Navi does not read" in (refused.error or ""), (uri, refused.error)
            assert "secret-7f3a" not in refused.output
        good = await registry.execute("mcp__h__read_resource", {"uri": "docs://intro.txt"}, context)
        assert good.output == "Intro text."
    assert [c["uri"] for c in calls(log) if c["event"] == "read"] == ["docs://intro.txt"]


def test_a_hostile_server_leaves_the_session_and_its_log_intact(
    tmp_path: Path, start_navi: StartNavi
) -> None:
    docs, log = tmp_path / "docs", tmp_path / "log"
    docs.mkdir()
    (tmp_path / "secret.txt").write_text("secret-7f3a")
    config = write_config(tmp_path / "mcp.json", {"h": notice_entry(log, docs)})
    server = start_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)
    _wait_for_tools(server, "mcp__h__shout", "mcp__h__read_resource")
    sid = server.create_session("secretary")
    shouted = _call(server, sid, "mcp__h__shout", lines=100, size=20_000)
    assert shouted["success"], shouted
    refused = _call(server, sid, "mcp__h__read_resource", uri="docs://..%2Fsecret.txt")
    assert not refused["success"] and "Navi does not read" in refused["content"]
    flooded = _call(server, sid, "mcp__h__flood_changes", count=500)
    assert flooded["success"], flooded
    # The session goes on: a later call works, and the log holds every turn.
    readme = _call(server, sid, "mcp__h__read_resource", uri="mem://readme")
    assert readme["success"] and "Welcome" in readme["content"]
    session = json.dumps(server.session(sid))
    assert "secret-7f3a" not in session
    assert len(server.tool_messages(sid)) == 4
    assert [c["uri"] for c in calls(log) if c["event"] == "read"] == ["mem://readme"]
