"""The socket is read while a message is being handled: a client's pongs (and its next
messages) are not left unread behind a slow ``send``. uvicorn stops reading a socket
until the app asks for the next message, so a handler that waits used to leave the
keep-alive's pong unread, and the server closed busy clients with 1011 "keepalive ping
timeout" (seen at 1,000 live sessions, bench/live_sessions.py)."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import connect

from navi.server import protocol as p
from navi.server.ws import REQUEST_QUEUE, Connection
from tests.support.navi_server import RunningServer

pytestmark = pytest.mark.anyio


def new_session(server: RunningServer) -> str:
    response = httpx.post(f"{server.url}/sessions", json={"profile_id": "secretary"})
    response.raise_for_status()
    return str(response.json()["session_id"])


@pytest.fixture
def slow_send(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Messages are handled only once the returned event is set (a busy session)."""
    release = threading.Event()

    async def slow(connection: Connection, request: Any) -> None:
        while not release.is_set():
            await anyio.sleep(0.02)
        await connection.push([p.ErrorFrame(message=f"handled {request.content}")])

    monkeypatch.setitem(Connection._HANDLERS, p.SendMessage, slow)
    return release


async def test_pongs_are_read_while_a_message_is_handled(
    navi_server: RunningServer, slow_send: threading.Event
) -> None:
    sid = new_session(navi_server)
    async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}") as ws:
        # Each in its own read: uvicorn reads no more once a message waits for the app.
        await ws.send(json.dumps({"type": "message", "content": "one"}))
        await anyio.sleep(0.3)
        await ws.send(json.dumps({"type": "message", "content": "two"}))
        await anyio.sleep(0.3)
        with anyio.fail_after(5):
            await (await ws.ping())  # answered although "one" is still being handled
        slow_send.set()
        handled = []
        with anyio.fail_after(10):
            while len(handled) < 2:
                frame = json.loads(await ws.recv())
                if frame["type"] == "error":
                    handled.append(frame["message"])
        assert handled == ["handled one", "handled two"]  # in the order sent


async def test_too_many_waiting_messages_get_an_error_and_the_socket_stays(
    navi_server: RunningServer, slow_send: threading.Event
) -> None:
    sid = new_session(navi_server)
    async with connect(f"{navi_server.ws_url}/ws/sessions/{sid}") as ws:
        sent = REQUEST_QUEUE + 8
        for i in range(sent):
            await ws.send(json.dumps({"type": "message", "content": str(i)}))
        errors: list[str] = []
        with anyio.fail_after(10):
            while not any("messages wait" in e for e in errors):
                frame = json.loads(await ws.recv())
                if frame["type"] == "error":
                    errors.append(frame["message"])
        slow_send.set()
        with anyio.fail_after(10):
            while (
                sum(e.startswith("handled") for e in errors)
                + sum("messages wait" in e for e in errors)
                < sent
            ):
                frame = json.loads(await ws.recv())
                if frame["type"] == "error":
                    errors.append(frame["message"])
        handled = [int(e.split()[1]) for e in errors if e.startswith("handled")]
        assert handled == sorted(handled) and handled[0] == 0  # the first ones, in order
        with anyio.fail_after(5):
            await (await ws.ping())  # the connection lives on
