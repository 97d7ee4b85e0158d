"""A real MCP server (SDK) for the sandbox tests: what a server can do where it runs.

    python mcp_box_server.py           # stdio; also the ``main`` of a console script

Like ``npx`` or ``uvx``, it "downloads" its package into ``$HOME/.cache/navi-box`` when
that is not there yet, and notes each start there: ``cache`` says how many of each it
saw. ``write`` writes a file, ``fetch`` asks a URL.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("navi-box", log_level="WARNING")


def _cache() -> Path:
    return Path(os.environ["HOME"]) / ".cache" / "navi-box"


def _start() -> None:
    cache = _cache()
    if not (cache / "package.txt").exists():
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "package.txt").write_text("downloaded\n", encoding="utf-8")
        with open(cache / "downloads", "a", encoding="utf-8") as downloads:
            downloads.write("1\n")
    with open(cache / "starts", "a", encoding="utf-8") as starts:
        starts.write("1\n")


def _count(name: str) -> int:
    path = _cache() / name
    return len(path.read_text(encoding="utf-8").split()) if path.exists() else 0


@server.tool()
def cache() -> str:
    """Where the home is, and how many downloads and starts its cache saw."""
    counts = {"home": os.environ["HOME"], "cwd": os.getcwd()}
    return json.dumps({**counts, "downloads": _count("downloads"), "starts": _count("starts")})


@server.tool()
def write(path: str, text: str) -> str:
    """Write a text file."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror}") from None
    return f"wrote {path}"


@server.tool()
def fetch(url: str) -> str:
    """GET a URL: REACHED <status> or UNREACHABLE <why>."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return f"REACHED {response.status}"
    except OSError as exc:
        return f"UNREACHABLE {exc}"


def main() -> None:
    _start()
    server.run("stdio")


if __name__ == "__main__":
    main()
