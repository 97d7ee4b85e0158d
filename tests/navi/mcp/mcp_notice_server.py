"""A real MCP server (the SDK's ``MCPServer``) that talks on its own: list changes, log
lines, progress; and has resources, resource templates and prompts.

    python mcp_notice_server.py stdio
    python mcp_notice_server.py sse <port>     # legacy SSE at http://127.0.0.1:<port>/sse

What reaches it is appended to ``MCP_TEST_LOG`` (one JSON line per call or read). The
resource template ``docs://{name}`` reads ``MCP_TEST_DOCS/<name>`` as a careless server
would (no check that the path stays in the folder): Navi must not send it a URI that
leaves the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ResourceLink

# The logging capability is deprecated (SEP-2577) but servers still use it.
warnings.simplefilter("ignore")

server = MCPServer("navi-notices", log_level="WARNING")


def record(event: str, **fields: Any) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"event": event, **fields}) + "\n")


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool named ``name`` and says the tool list changed."""
    record("called", tool="grow", name=name)

    def added() -> str:
        return f"{name} here"

    server.add_tool(added, name=name, description="A tool added at run time.")
    await ctx.notify_tools_changed()
    # A 2025-era connection (legacy SSE) hears it as a notification sent unasked.
    with contextlib.suppress(Exception):
        await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
async def flood_changes(count: int, ctx: Context) -> str:
    """Says the tool list changed ``count`` times (it did not)."""
    record("called", tool="flood_changes", count=count)
    for _ in range(count):
        await ctx.notify_tools_changed()
    return "flooded"


@server.tool()
async def work(steps: int, ctx: Context) -> str:
    """Reports progress and logs a line per step."""
    record("called", tool="work", steps=steps)
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        await ctx.info(f"did step {step + 1}")
    return "worked"


@server.tool()
async def shout(lines: int, size: int, ctx: Context) -> str:
    """Sends ``lines`` log lines and progress messages of ``size`` characters each."""
    record("called", tool="shout", lines=lines, size=size)
    for n in range(lines):
        await ctx.report_progress(n, lines, "p" * size)
        await ctx.warning(f"{n}:" + "w" * size)
    return "shouted"


@server.tool()
async def failing_work(ctx: Context) -> str:
    """Reports progress, then fails."""
    await ctx.report_progress(1, 2, "half way")
    raise ToolError("broke at half way")


@server.tool()
def link() -> list[Any]:
    """A link to a resource the server does not list."""
    record("called", tool="link")
    return ["The report:", ResourceLink(name="report", uri="report://latest")]


@server.resource("mem://readme", name="readme", title="Read me")
def readme() -> str:
    record("read", uri="mem://readme")
    return "Welcome to the notice server."


@server.resource("docs://{name}", name="doc")
def doc(name: str) -> str:
    record("read", uri=f"docs://{name}")
    with open(os.path.join(os.environ.get("MCP_TEST_DOCS", "/nonexistent"), name)) as f:
        return f.read()


@server.resource("report://{which}", name="report")
def report(which: str) -> str:
    record("read", uri=f"report://{which}")
    return f"the {which} report"


@server.prompt()
def greet(who: str) -> str:
    """A greeting to send."""
    return f"Say hello to {who}."


@server.prompt()
def summarize() -> str:
    """Summarize the chat."""
    return "Summarize what we said."


if __name__ == "__main__":
    if sys.argv[1] == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
