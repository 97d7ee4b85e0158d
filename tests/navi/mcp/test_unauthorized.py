"""A remote server that wants a sign-in (401): Navi says so, and what to do, instead of
"Server returned an error response". This connection has no place for an OAuth sign-in
(the manager gives one: test_oauth_connection.py), so it only says what to do."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest

from navi.mcp.client import ServerConnection
from navi.mcp.config import parse_config
from navi.mcp.oauth import OAuthPlaces
from tools import ToolRegistry

pytest.importorskip("mcp")


class _SignInFirst(BaseHTTPRequestHandler):
    def _refuse(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="mcp"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _refuse

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SignInFirst)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_a_server_that_answers_401_is_said_to_want_a_sign_in(
    refusing_url: str, kind: str
) -> None:
    config = parse_config(json.dumps({"mcpServers": {"r": {"type": kind, "url": refusing_url}}}))
    connection = ServerConnection(config.servers["r"], ToolRegistry(), timeout_s=10)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await connection.first_attempt.wait()
        status = connection.status().describe()
        tg.cancel_scope.cancel()
    assert "failed: it answered 401 Unauthorized: it wants a sign-in (OAuth)" in status
    assert '"headers"' in status


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_a_401_server_with_no_authorization_server_says_the_sign_in_failed(
    refusing_url: str, kind: str, tmp_path: Path
) -> None:
    """With a place for sign-ins, Navi tries OAuth; a server that names no authorization
    server (its metadata and registration answer 401 too) fails, saying so."""
    config = parse_config(json.dumps({"mcpServers": {"r": {"type": kind, "url": refusing_url}}}))
    places = OAuthPlaces(folder=tmp_path, base_url="http://127.0.0.1:1")
    connection = ServerConnection(config.servers["r"], ToolRegistry(), timeout_s=10, oauth=places)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await connection.first_attempt.wait()
        status = connection.status().describe()
        tg.cancel_scope.cancel()
    assert "failed: its OAuth sign-in failed: Registration failed: 401" in status
    assert '"headers"' in status
