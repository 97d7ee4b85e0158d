"""How ``navi chat`` talks to a running ``navi serve``: its REST routes for sessions,
its WebSocket for a turn. The chat is a client, not a second Navi on the same
database: a stop reaches the server that runs the turn, and what it records is what
the browser shows too.

Every failure becomes a :class:`CliError`, one line for the terminal.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus, WebSocketException

from navi.cli.common import CliError, pick_session
from navi.config import Settings

__all__ = ["CliError", "NaviClient", "receive_frame", "send_frame", "server_url"]

# Hosts a server binds to that a client cannot connect to as such.
_ANY_ADDRESS = frozenset({"", "0.0.0.0", "::", "[::]"})


def server_url(settings: Settings, env: dict[str, str], url: str | None = None) -> str:
    """``--url``, else ``NAVI_URL``, else the address ``navi serve`` would bind with the
    same settings."""
    chosen = (url or env.get("NAVI_URL", "")).strip().rstrip("/")
    if chosen:
        return chosen if "://" in chosen else f"http://{chosen}"
    host = "127.0.0.1" if settings.host in _ANY_ADDRESS else settings.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


class NaviClient:
    """A client of one Navi server. ``token``: sent as ``Authorization: Bearer``."""

    def __init__(self, url: str, token: str = "") -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(base_url=url, headers=self.headers, timeout=30)

    async def aclose(self) -> None:
        await self.http.aclose()

    def unreachable(self) -> CliError:
        return CliError(f"cannot reach Navi at {self.url}: start it with `navi serve`")

    async def _request(
        self, method: str, path: str, *, plain: frozenset[int] = frozenset(), **kwargs: Any
    ) -> Any:
        """The JSON answer; an error status is a :class:`CliError` (for a status in
        ``plain``: the server's own message, without the method and path)."""
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self.unreachable() from exc
        if response.status_code == 401:
            raise CliError(f"Navi at {self.url} wants a token: set NAVI_TOKEN (or NAVI_API_TOKEN)")
        if response.status_code in plain:
            raise CliError(_error_text(response))
        if response.status_code >= 400:
            raise CliError(f"{method} {path}: {response.status_code} {_error_text(response)}")
        return response.json() if response.content else None

    async def sessions(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._request("GET", "/sessions")
        return result

    async def create_session(self, profile: str | None, *, one_shot: bool = False) -> str:
        body: dict[str, str] = {"profile_id": profile} if profile else {}
        if one_shot:
            body["origin"] = "cli"  # the web client's sidebar groups one-shots
        created = await self._request("POST", "/sessions", json=body)
        return str(created["session_id"])

    async def model_of(self, session_id: str | None) -> str:
        """The model a turn would use: the session's own pick, else the server's."""
        if session_id:
            chosen = (await self._request("GET", f"/sessions/{session_id}")).get("model")
            if chosen:
                return str(chosen)
        health = await self._request("GET", "/health")
        return str(health.get("model") or "")

    async def check_profile(self, profile: str | None) -> None:
        """That Navi answers, and knows ``profile`` (when one is given)."""
        profiles = [str(p["id"]) for p in await self._request("GET", "/agents/profiles")]
        if profile is not None and profile not in profiles:
            raise CliError(f"no profile {profile!r}: {', '.join(profiles)}")

    async def stop(self, session_id: str) -> None:
        await self._request("POST", f"/sessions/{session_id}/stop")

    async def approvals(self, session_id: str) -> list[dict[str, Any]]:
        """The calls waiting for a decision, as ``approval_required`` frames."""
        found = await self._request("GET", f"/sessions/{session_id}/approvals")
        return list(found["approvals"])

    async def decide(
        self,
        session_id: str,
        call_id: str,
        *,
        approve: bool,
        scope: str = "once",
        reason: str = "",
        stream_id: str = "",
    ) -> dict[str, Any]:
        """Record a decision on the call ``call_id`` waiting in ``stream_id`` (the
        session's, or a subagent's): the server records who took it (the token's user)."""
        body = {"decision": "approve" if approve else "deny", "scope": scope, "reason": reason}
        if stream_id:
            body["stream_id"] = stream_id
        path = f"/sessions/{session_id}/approvals/{quote(call_id, safe='')}"
        decided: dict[str, Any] = await self._request(
            "POST", path, json=body, plain=frozenset({404, 409})
        )
        return decided

    async def resolve_session(self, prefix: str) -> str:
        """The user's session whose id is ``prefix`` or starts with it (only one may)."""
        return pick_session(prefix, [str(s["session_id"]) for s in await self.sessions()])

    @asynccontextmanager
    async def socket(self, session_id: str) -> AsyncIterator[ClientConnection]:
        """The session's WebSocket, following from the log's head (no history)."""
        ws_url = "ws" + self.url.removeprefix("http") + f"/ws/sessions/{session_id}"
        try:
            async with connect(
                ws_url, additional_headers=self.headers, max_size=None, open_timeout=10
            ) as ws:
                yield ws
        except InvalidStatus as exc:
            raise CliError(f"WebSocket refused: HTTP {exc.response.status_code}") from exc
        except (OSError, TimeoutError) as exc:
            raise self.unreachable() from exc
        except WebSocketException as exc:
            raise CliError(f"the connection to Navi broke: {exc}") from exc


async def send_frame(ws: ClientConnection, frame: dict[str, Any]) -> None:
    try:
        await ws.send(json.dumps(frame))
    except WebSocketException as exc:
        raise CliError(f"the connection to Navi closed: {exc}") from exc


async def receive_frame(ws: ClientConnection) -> dict[str, Any]:
    """The next frame; a close becomes a :class:`CliError` that says why."""
    try:
        raw = await ws.recv()
    except WebSocketException as exc:
        code = getattr(getattr(exc, "rcvd", None), "code", None)
        reason = getattr(getattr(exc, "rcvd", None), "reason", "") or str(exc)
        if code == 4004:
            raise CliError("no such session") from exc
        raise CliError(f"the connection to Navi closed: {reason}") from exc
    frame: dict[str, Any] = json.loads(raw)
    return frame


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        return str(body.get("error") or body.get("detail") or body.get("message") or body)
    return str(body)[:200]
