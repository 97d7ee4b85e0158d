"""What a server says on its own (list_changed, log lines, progress), its resources and
prompts, and the proxy/CA variables a stdio server gets: against the real notice server
(mcp_notice_server.py) over stdio."""

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
from navi.mcp.environment import passed_through
from navi.mcp.notices import ServerNotices
from navi.mcp.tools import MESSAGES_HEAD
from tests.navi.mcp.support import SERVER_SCRIPT, calls, http_server
from tests.support.helpers import wait_until
from tools import ToolContext, ToolRegistry

pytest.importorskip("mcp")

NOTICE_SCRIPT = Path(__file__).with_name("mcp_notice_server.py")


def notice_entry(log: Path, **extra: Any) -> dict[str, Any]:
    env = {"MCP_TEST_LOG": str(log), **extra.pop("env", {})}
    return {"command": sys.executable, "args": [str(NOTICE_SCRIPT), "stdio"], "env": env, **extra}


@asynccontextmanager
async def connected(raw: dict[str, Any], registry: ToolRegistry) -> AsyncIterator[ServerConnection]:
    config = parse_config(json.dumps({"mcpServers": {"n": raw}}))
    assert not config.errors, config.errors
    connection = ServerConnection(config.servers["n"], registry, timeout_s=30)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await wait_until(lambda: connection.state != "starting")
        assert connection.state == "running", connection.error
        yield connection
        tg.cancel_scope.cancel()


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext.standalone("s", tmp_path)


@pytest.fixture
def no_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The periodic check never comes during a test: only a notification re-lists."""
    monkeypatch.setattr(client_module, "CHECK_INTERVAL_STDIO_S", 3600.0)


async def test_a_tool_the_server_adds_is_offered_once_it_says_so(
    tmp_path: Path, no_polling: None
) -> None:
    registry = ToolRegistry()
    async with connected(notice_entry(tmp_path / "log"), registry):
        assert "mcp__n__fresh" not in registry.external_names
        grown = await registry.execute("mcp__n__grow", {"name": "fresh"}, ctx(tmp_path))
        assert grown.success, grown.error
        await wait_until(lambda: "mcp__n__fresh" in registry.external_names, limit_s=10)
        fresh = await registry.execute("mcp__n__fresh", {}, ctx(tmp_path))
        assert fresh.output == "fresh here"


async def test_over_legacy_sse_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "CHECK_INTERVAL_HTTP_S", 3600.0)
    registry = ToolRegistry()
    with http_server(tmp_path / "log", "sse", script=NOTICE_SCRIPT) as url:
        async with connected({"type": "sse", "url": url}, registry):
            worked = await registry.execute("mcp__n__work", {"steps": 1}, ctx(tmp_path))
            assert worked.metadata["server_messages"] == [
                "progress 1/1: step 1",
                "info: did step 1",
            ]
            await registry.execute("mcp__n__grow", {"name": "fresh"}, ctx(tmp_path))
            await wait_until(lambda: "mcp__n__fresh" in registry.external_names, limit_s=10)


async def test_a_list_changed_sent_unasked_wakes_the_connection() -> None:
    """What a 2025-era server does (no subscriptions/listen there)."""
    from mcp_types import PromptListChangedNotification, ToolListChangedNotification

    notices = ServerNotices("old")
    await notices.on_message(ToolListChangedNotification())
    await notices.on_message(PromptListChangedNotification())
    await notices.on_message(RuntimeError("a transport's error is no change"))
    assert notices.wake.is_set()
    assert notices.take_changes() == {"tools", "others"}
    assert not notices.wake.is_set() and notices.take_changes() == set()


async def test_progress_and_log_lines_come_back_with_the_result(tmp_path: Path) -> None:
    registry = ToolRegistry()
    with structlog.testing.capture_logs() as logged:
        async with connected(notice_entry(tmp_path / "log"), registry):
            result = await registry.execute("mcp__n__work", {"steps": 3}, ctx(tmp_path))
    assert result.success, result.error
    assert result.output.startswith("worked")
    said = result.metadata["server_messages"]
    assert "progress 1/3: step 1" in said and "progress 3/3: step 3" in said
    assert "info: did step 2" in said
    assert MESSAGES_HEAD in result.output and "progress 2/3: step 2" in result.output
    # And into Navi's log, at the server's level.
    lines = [e for e in logged if e["event"] == "mcp.server_log"]
    assert {"did step 1", "did step 3"} <= {e["line"] for e in lines}
    assert all(e["log_level"] == "info" and e["server"] == "n" for e in lines)


async def test_a_failed_call_keeps_what_the_server_said(tmp_path: Path) -> None:
    registry = ToolRegistry()
    async with connected(notice_entry(tmp_path / "log"), registry):
        failed = await registry.execute("mcp__n__failing_work", {}, ctx(tmp_path))
    assert not failed.success
    assert "broke at half way" in (failed.error or "")
    assert "progress 1/2: half way" in (failed.error or "")


async def test_resources_are_listed_and_read(tmp_path: Path) -> None:
    registry, log = ToolRegistry(), tmp_path / "log"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "intro.txt").write_text("Intro text.")
    async with connected(notice_entry(log, env={"MCP_TEST_DOCS": str(docs)}), registry) as c:
        reader = registry.get("mcp__n__read_resource")
        assert reader is not None and reader.approval == "auto"
        assert "mem://readme" in reader.description and "docs://{name}" in reader.description
        readme = await registry.execute(
            "mcp__n__read_resource", {"uri": "mem://readme"}, ctx(tmp_path)
        )
        assert readme.output == "Welcome to the notice server."
        intro = await registry.execute(
            "mcp__n__read_resource", {"uri": "docs://intro.txt"}, ctx(tmp_path)
        )
        assert intro.output == "Intro text."
        assert c.status().resources == 3
        assert "prompts: greet, summarize" in c.status().describe()
    assert [e["uri"] for e in calls(log) if e["event"] == "read"] == [
        "mem://readme",
        "docs://intro.txt",
    ]


async def test_a_resource_link_of_a_tool_result_can_be_read(tmp_path: Path) -> None:
    registry = ToolRegistry()
    async with connected(notice_entry(tmp_path / "log"), registry):
        linked = await registry.execute("mcp__n__link", {}, ctx(tmp_path))
        assert "report://latest" in linked.output
        report = await registry.execute(
            "mcp__n__read_resource", {"uri": "report://latest"}, ctx(tmp_path)
        )
        assert report.output == "the latest report"


async def test_the_entry_approval_covers_reading_resources(tmp_path: Path) -> None:
    registry = ToolRegistry()
    async with connected(notice_entry(tmp_path / "log", approval="ask"), registry):
        reader = registry.get("mcp__n__read_resource")
        assert reader is not None and reader.approval == "ask"


async def test_a_prompt_is_filled_in(tmp_path: Path) -> None:
    registry = ToolRegistry()
    async with connected(notice_entry(tmp_path / "log"), registry) as connection:
        prompt = await connection.get_prompt("greet", {"who": "Ada"})
    assert [m.content.text for m in prompt.messages] == ["Say hello to Ada."]  # type: ignore[union-attr]


async def test_proxy_and_ca_variables_reach_a_stdio_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/navi-test.pem")
    monkeypatch.setenv("NO_PROXY", "localhost")
    registry = ToolRegistry()
    entry = {
        "command": sys.executable,
        "args": [str(SERVER_SCRIPT), "stdio"],
        "env": {"NO_PROXY": "entry.example"},
    }
    async with connected(entry, registry):
        result = await registry.execute("mcp__n__environment", {}, ctx(tmp_path))
    env = json.loads(result.output)["env"]
    assert env["HTTPS_PROXY"] == "http://proxy.example:3128"
    assert env["SSL_CERT_FILE"] == "/etc/ssl/navi-test.pem"
    # The entry's own value wins.
    assert env["NO_PROXY"] == "entry.example"


def test_only_the_listed_variables_pass() -> None:
    environ = {"HTTPS_PROXY": "http://p:1", "NAVI_SECRET_KEY": "s3cret", "SSL_CERT_DIR": ""}
    assert passed_through(environ) == {"HTTPS_PROXY": "http://p:1"}


async def test_the_manager_names_and_fills_in_prompts(tmp_path: Path) -> None:
    from navi.mcp.manager import McpManager
    from tests.navi.mcp.support import write_config

    config = write_config(tmp_path / "mcp.json", {"n": notice_entry(tmp_path / "log")})
    manager = McpManager(ToolRegistry(), config)
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        await manager.wait_started(30)
        assert manager.prompts() == {"n": ("greet", "summarize")}
        assert await manager.prompt_text("n", "greet", {"who": "Ada"}) == "Say hello to Ada."
        tg.cancel_scope.cancel()


async def test_the_tools_filter_covers_reading_resources(tmp_path: Path) -> None:
    registry = ToolRegistry()
    entry = notice_entry(tmp_path / "log", tools={"allow": ["work"]})
    async with connected(entry, registry):
        assert registry.external_names == ("mcp__n__work",)
    entry = notice_entry(tmp_path / "log", tools={"deny": ["grow"]})
    async with connected(entry, registry):
        assert "mcp__n__read_resource" in registry.external_names
        assert "mcp__n__grow" not in registry.external_names
