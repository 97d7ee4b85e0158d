"""A real MCP server (the SDK's ``MCPServer``) with prompts, some hostile, and tools that
report progress while they run.

    python mcp_prompt_server.py stdio

Prompts: ``review(path, focus="")``, ``summarize()``, and the hostile ones: ``huge``
(a text longer than Navi takes), ``blank`` (white space only), ``broken`` (refused).
Tools: ``slow_work(steps, delay)`` reports a progress per step (its message names
``PROGRESS_SECRET``, in a URL too), ``flood_progress(count, size)`` sends ``count`` progress notifications of
``size`` characters as fast as it can, ``stray_progress()`` sends progress under a
token nobody asked for.
"""

from __future__ import annotations

import os
import sys
import warnings

import anyio
from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")

server = MCPServer("navi-prompts", log_level="WARNING")
SECRET = "hunter2-very-secret"


@server.prompt(description="Review a file of the project.")
def review(path: str, focus: str = "") -> str:
    """Review a file of the project."""
    extra = f" Look closely at {focus}." if focus else ""
    return f"Please review the file {path}.{extra}"


@server.prompt()
def summarize() -> str:
    """Summarize the chat so far."""
    return "Summarize what we said so far."


@server.prompt()
def huge() -> str:
    """A prompt far longer than a message box."""
    return "x" * 200_000


@server.prompt()
def blank() -> str:
    """A prompt whose text is only white space."""
    return "  \n\t "


@server.prompt()
def broken() -> str:
    """A prompt that always fails."""
    raise ValueError("the template store is gone")


@server.tool()
async def slow_work(steps: int, delay: float, ctx: Context) -> str:
    """Reports a progress per step, ``delay`` seconds apart."""
    secret = os.environ.get("PROGRESS_SECRET", SECRET)
    for step in range(steps):
        said = f"step {step + 1} via https://bot:{secret}@example.test/run?key={secret} as {secret}"
        await ctx.report_progress(step + 1, steps, said)
        await anyio.sleep(delay)
    return f"worked {steps} steps"


@server.tool()
async def flood_progress(count: int, size: int, ctx: Context) -> str:
    """Sends ``count`` progress notifications of ``size`` characters, at once."""
    for n in range(count):
        await ctx.report_progress(n + 1, count, f"{n + 1} " + "m" * size)
    return "flooded"


@server.tool()
async def stray_progress(ctx: Context) -> str:
    """Sends progress under a token that no call asked for, then answers."""
    session = ctx.request_context.session
    for n in range(3):
        await session.send_progress_notification("not-a-token", n + 1, 3, "stray")
    await anyio.sleep(0.2)
    return "strayed"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] != "stdio":
        raise SystemExit("stdio only")
    server.run("stdio")
