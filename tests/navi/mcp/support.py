"""The tests' MCP server (mcp_test_server.py) as a config entry, over stdio or HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.helpers import SERVER_START_S, free_port

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")
BOX_SCRIPT = Path(__file__).with_name("mcp_box_server.py")


def stdio_entry(log: Path, **extra: Any) -> dict[str, Any]:
    env = {"MCP_TEST_LOG": str(log), **extra.pop("env", {})}
    return {"command": sys.executable, "args": [str(SERVER_SCRIPT), "stdio"], "env": env, **extra}


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def calls(log: Path) -> list[dict[str, Any]]:
    """What reached the test server, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@contextmanager
def http_server(log: Path, transport: str = "http", script: Path = SERVER_SCRIPT) -> Iterator[str]:
    """The test server (or ``script``) on Streamable HTTP (or legacy SSE:
    ``transport="sse"``) at 127.0.0.1 (a subprocess); yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), transport, str(port)],
        env={"MCP_TEST_LOG": str(log), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            # uvicorn waits for open requests: a client's listen stream (Navi still
            # running) is one that never ends.
            process.kill()
            process.wait(10)


def box_entry(**extra: Any) -> dict[str, Any]:
    """The sandbox tests' server (mcp_box_server.py), sandboxed, as a config entry."""
    return {"command": sys.executable, "args": [str(BOX_SCRIPT)], "sandbox": True, **extra}
