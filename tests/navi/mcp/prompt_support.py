"""The prompt-and-progress test server (mcp_prompt_server.py) as a config entry."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.security.conftest import NaviServerProcess

PROMPT_SCRIPT = Path(__file__).with_name("mcp_prompt_server.py")


def prompt_entry(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(PROMPT_SCRIPT), "stdio"], **extra}


def wait_for_prompts(server: NaviServerProcess, token: str | None = None) -> list[dict[str, Any]]:
    """The prompt menu, once the server's prompts are in it."""
    deadline = time.monotonic() + 40
    while True:
        with server.client(token=token) as http:
            listed: list[dict[str, Any]] = http.get("/mcp/prompts").json()
        if listed:
            return listed
        assert time.monotonic() < deadline, f"no prompts listed:\n{server.logs()}"
        time.sleep(0.1)


def events(server: NaviServerProcess, session_id: str) -> list[dict[str, Any]]:
    """The session's raw log (``GET /sessions/{id}/events``), one dict per event."""
    with server.client() as http:
        response = http.get(f"/sessions/{session_id}/events")
        assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]
