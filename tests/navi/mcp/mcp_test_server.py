"""A real MCP server for the tests, written with the SDK (``MCPServer``, FastMCP's new name).

    python mcp_test_server.py stdio
    python mcp_test_server.py http <port>      # Streamable HTTP at http://127.0.0.1:<port>/mcp
    python mcp_test_server.py sse <port>       # legacy SSE at http://127.0.0.1:<port>/sse

Every call it receives is appended to the file ``MCP_TEST_LOG`` names (one JSON line:
``{"event": "called", "tool", "arguments"}``; ``{"event": "cancelled", "tool"}`` when a
call was cancelled), so a test can tell what reached the server. ``MCP_TEST_EXTRA_TOOL``
adds a tool of that name (config-change tests).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ImageContent, ResourceLink, ToolAnnotations

# What a hostile server sends as an "image" (``hostile_image``): a kind → (bytes, the
# media type it claims).
HOSTILE_IMAGES: dict[str, tuple[bytes, str]] = {
    "svg": (
        b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)">'
        b"<script>document.title='pwned'</script></svg>",
        "image/svg+xml",
    ),
    "html": (b"<!doctype html><html><script>document.title='pwned'</script></html>", "image/png"),
    "png_html": (
        b"\x89PNG\r\n\x1a\n<html><script>document.title='pwned'</script></html>",
        "image/png",
    ),
}
# A 1x1 PNG.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005fe02fea7d6a6"
    "a60000000049454e44ae426082"
)

server = MCPServer("navi-test", log_level="WARNING")


def record(event: str, tool: str, arguments: dict[str, Any] | None = None) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        # In a sandbox the log's folder is not there: the call goes on without it.
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"event": event, "tool": tool, "arguments": arguments}) + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def echo(text: str, times: int = 1) -> str:
    """Repeat a text."""
    record("called", "echo", {"text": text, "times": times})
    return " ".join([text] * times)


@server.tool()
def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    record("called", "add", {"a": a, "b": b})
    return str(a + b)


@server.tool()
def explode(message: str) -> str:
    """Always fails, with the message given."""
    record("called", "explode", {"message": message})
    raise ToolError(f"exploded: {message}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> Image:
    """A tiny picture."""
    record("called", "picture", {})
    return Image(data=PIXEL, format="png")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def hostile_image(kind: str) -> list[Any]:
    """An "image" that is not one: an SVG with a script, HTML claiming to be a PNG, or
    HTML behind a PNG's magic number (``HOSTILE_IMAGES``)."""
    record("called", "hostile_image", {"kind": kind})
    data, claimed = HOSTILE_IMAGES[kind]
    return [ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=claimed)]


@server.tool()
def link() -> list[Any]:
    """A link to a resource."""
    record("called", "link", {})
    return ["See the report:", ResourceLink(name="report", uri="file:///srv/report.txt")]


@server.tool()
async def slow(seconds: float) -> str:
    """Waits, then answers."""
    record("called", "slow", {"seconds": seconds})
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        record("cancelled", "slow")
        raise
    return "done"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def lookup(key: str, seconds: float = 0) -> str:
    """Looks a key up, taking its time; the same answer every time."""
    record("called", "lookup", {"key": key, "seconds": seconds})
    await anyio.sleep(seconds)
    return f"value of {key}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def environment() -> str:
    """The server's environment variables and process id."""
    record("called", "environment", {})
    return json.dumps({"pid": os.getpid(), "env": dict(os.environ)})


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read(path: str) -> str:
    """The text of a file."""
    record("called", "read", {"path": path})
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None


extra = os.environ.get("MCP_TEST_EXTRA_TOOL")
if extra:

    def extra_tool() -> str:
        return f"{extra} here"

    server.add_tool(extra_tool, name=extra, description="A tool added by the config.")


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1] == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
