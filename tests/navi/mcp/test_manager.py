"""The manager follows mcp.json: servers added, removed and restarted when their entry
changes, a failing one reported while the others run; and ``navi doctor``'s probe."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from navi.mcp import McpManager, load_config, probe
from navi.mcp.config import config_stamp
from tests.navi.mcp.support import stdio_entry, write_config
from tests.support.helpers import wait_until
from tools import ToolContext, ToolRegistry

pytest.importorskip("mcp")


async def test_servers_follow_the_config_file(tmp_path: Path) -> None:
    log, path = tmp_path / "log", tmp_path / "mcp.json"
    write_config(path, {"a": stdio_entry(log), "bad": {"command": str(tmp_path / "nope")}})
    registry = ToolRegistry()
    manager = McpManager(registry, path, poll_s=0.1)
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        await wait_until(lambda: "mcp__a__echo" in registry.names())
        states = {s.name: s for s in manager.statuses()}
        assert states["a"].state == "running" and states["a"].tools >= 7
        assert states["bad"].state in ("failed", "restarting")
        assert "command not found" in states["bad"].error

        # Added, and a changed entry restarted (its new environment shows).
        write_config(
            path,
            {
                "a": stdio_entry(log, env={"MCP_TEST_EXTRA_TOOL": "fresh"}),
                "b": stdio_entry(log),
            },
        )
        await wait_until(lambda: {"mcp__a__fresh", "mcp__b__echo"} <= set(registry.names()))
        assert {s.name for s in manager.statuses()} == {"a", "b"}
        ctx = ToolContext.standalone("s", tmp_path)
        result = await registry.execute("mcp__a__fresh", {}, ctx)
        assert result.output == "fresh here"

        # Removed: its tools go.
        write_config(path, {"b": stdio_entry(log)})
        await wait_until(lambda: "mcp__a__echo" not in registry.names())
        assert "mcp__b__echo" in registry.names()

        # A file that no longer parses (half-saved) leaves the servers running.
        path.write_text("{broken")
        # Once the manager has read the broken file (its stamp is the file's), not later.
        await wait_until(lambda: manager._stamp == config_stamp(path))
        assert "mcp__b__echo" in registry.names()
        # An empty list stops them all.
        write_config(path, {})
        await wait_until(lambda: not registry.external_names)
        tg.cancel_scope.cancel()


async def test_doctor_probe_says_started_or_why_not(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "mcp.json",
        {"ok": stdio_entry(tmp_path / "log"), "missing": {"command": "/no/such/mcp"}},
    )
    statuses = {s.name: s for s in await probe(load_config(path), ToolRegistry())}
    assert statuses["ok"].describe().startswith("MCP server ok (stdio): running, ")
    assert statuses["missing"].state == "failed"
    assert "command not found: /no/such/mcp" in statuses["missing"].describe()
    assert json.loads(path.read_text())  # untouched
