"""The live socket's way in trusts the sessions list for a session's owner (an owner never
changes) and its log for a deletion, so that opening a socket under load reads no news
of the whole log: a session deleted a moment ago, another user's, one made a moment ago
and a subagent's stream each get what they should."""

from __future__ import annotations

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.navi_server import RunningServer

pytestmark = pytest.mark.anyio


async def close_code(url: str) -> int | None:
    """The code the server closed with, or None when it served the socket."""
    async with connect(url) as ws:
        try:
            await ws.send('{"type": "ping"}')
            while True:
                if '"pong"' in str(await ws.recv()):
                    return None
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else 1006


async def made(http: httpx.AsyncClient) -> str:
    response = await http.post("/sessions", json={"profile_id": "secretary"})
    return str(response.json()["session_id"])


async def test_a_session_deleted_a_moment_ago_is_not_found(navi_server: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=navi_server.url) as http:
        sid = await made(http)
        (await http.get(f"/sessions/{sid}")).raise_for_status()  # the list holds it
        assert await close_code(f"{navi_server.ws_url}/ws/sessions/{sid}") is None
        (await http.delete(f"/sessions/{sid}")).raise_for_status()
        assert await close_code(f"{navi_server.ws_url}/ws/sessions/{sid}") == 4004
        assert (await http.get(f"/sessions/{sid}")).status_code == 404


async def test_a_session_made_a_moment_ago_is_served(navi_server: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=navi_server.url) as http:
        for _ in range(5):  # not in the list yet: read again for it
            sid = await made(http)
            assert await close_code(f"{navi_server.ws_url}/ws/sessions/{sid}") is None


async def test_ids_that_are_no_session_are_not_found(navi_server: RunningServer) -> None:
    for sid in ("not-a-uuid", "00000000-0000-4000-8000-000000000000"):
        assert await close_code(f"{navi_server.ws_url}/ws/sessions/{sid}") == 4004
