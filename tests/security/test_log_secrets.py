"""No token or ticket in a log: a real ``navi serve`` is asked with secrets in its URLs
(a client that puts a token in the query, a browser's WebSocket ``?ticket=``), and
everything the process printed is searched for them. Its access log still says what
was asked, in the one format every log line has (JSON lines off a terminal)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

from tests.security.conftest import StartNavi

ADMIN_TOKEN = "admin-token-never-logged-4f1d9a"
QUERY_TOKEN = "secret123"
QUERY_TICKET = "secret456"


def _json_lines(text: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def test_no_token_or_ticket_reaches_the_log_yet_the_access_log_says_what_was_asked(
    start_navi: StartNavi,
) -> None:
    server = start_navi(
        users=[{"id": "admin", "token": ADMIN_TOKEN, "role": "admin"}],
        env={"LOG_LEVEL": "INFO"},
        canary_row=False,
    )
    session_id = server.create_session()
    assert httpx.get(f"{server.url}/health?token={QUERY_TOKEN}").status_code == 200
    # A client that puts the real token in the URL: refused, but logged all the same.
    httpx.get(f"{server.url}/sessions?token={ADMIN_TOKEN}&after=3")
    ws_url = f"{server.ws_url}/ws/sessions/{session_id}?after=0&ticket={QUERY_TICKET}"
    try:
        with connect(ws_url, open_timeout=10, close_timeout=1):
            pass
    except (OSError, WebSocketException):
        pass  # refused (a ticket nobody issued): the attempt is what gets logged
    server.stop()
    logs = server.logs()

    for secret in (QUERY_TOKEN, QUERY_TICKET, ADMIN_TOKEN):
        assert secret not in logs, f"{secret} in the log:\n{logs}"

    lines = _json_lines(logs)
    access = [line for line in lines if line.get("logger") == "uvicorn.access"]
    events = [line["event"] for line in access]
    assert any('"GET /health?token=[redacted] HTTP/1.1" 200' in e for e in events), logs
    # Navi's own harmless parameters keep their values.
    assert any("GET /sessions?token=[redacted]&after=3 " in e for e in events), logs
    websocket = [line["event"] for line in lines if "WebSocket /ws/sessions/" in line["event"]]
    assert websocket and all("?after=0&ticket=[redacted]" in e for e in websocket), logs
    assert all(line["level"] == "info" and "timestamp" in line for line in access)
