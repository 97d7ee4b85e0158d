"""Users and tokens.

Bound to a loopback address with no token configured, Navi has one local user and no
login. Otherwise every request needs a token (``Authorization: Bearer …``, or
``?token=`` on the WebSocket): ``NAVI_API_TOKEN`` (one user, ``local``, admin) or the
users file (``NAVI_USERS_FILE``: a JSON list of ``{"id", "token", "role"}``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from pathlib import Path
from typing import Literal

import msgspec
from starlette.types import ASGIApp, Receive, Scope, Send

Role = Literal["admin", "user"]


class User(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    role: Role = "user"
    token: str = ""


LOCAL_USER = User(id="local", role="admin")


class AuthConfigError(ValueError):
    pass


class Users:
    def __init__(self, users: list[User], *, open_access: bool) -> None:
        self.users = users
        self.open_access = open_access

    @classmethod
    def configure(cls, *, host: str, api_token: str, users_file: str) -> Users:
        users: list[User] = []
        if users_file:
            path = Path(users_file)
            try:
                users = msgspec.json.decode(path.read_bytes(), type=list[User])
            except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise AuthConfigError(f"cannot read the users file {path}: {exc}") from exc
            for user in users:
                if len(user.token) < 16:
                    raise AuthConfigError(
                        f"{path}: user {user.id!r} needs a token of at least 16 characters"
                    )
        if api_token:
            users.append(User(id="local", role="admin", token=api_token))
        if not users and not is_loopback(host):
            raise AuthConfigError(
                f"Navi is bound to {host}, which is not a loopback address: set NAVI_API_TOKEN "
                "(or NAVI_USERS_FILE) so that nobody else on the network can use it"
            )
        return cls(users, open_access=not users)

    def authenticate(self, token: str | None) -> User | None:
        if self.open_access:
            return LOCAL_USER
        if not token:
            return None
        for user in self.users:
            if hmac.compare_digest(user.token.encode(), token.encode()):
                return user
        return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text: str = value.decode("latin-1")
            if text.lower().startswith("bearer "):
                return text[7:].strip()
    query: str = scope.get("query_string", b"").decode("latin-1")
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "token" and value:
            from urllib.parse import unquote

            token: str = unquote(value)
            return token
    return None


PUBLIC_PATHS = ("/health", "/openapi.json")


class AuthMiddleware:
    """Puts the request's ``User`` in ``scope["navi_user"]``, or refuses the request."""

    def __init__(self, app: ASGIApp, users: Users) -> None:
        self.app = app
        self.users = users

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        user = self.users.authenticate(_token(scope))
        public = path in PUBLIC_PATHS or not (
            path.startswith(("/sessions", "/agents", "/ws", "/memory"))
        )
        if user is None and not public:
            if scope["type"] == "websocket":
                await receive()  # websocket.connect
                await send({"type": "websocket.accept"})
                await send({"type": "websocket.close", "code": 4401, "reason": "unauthorized"})
                return
            body = json.dumps({"error": "unauthorized: send a valid token"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope["navi_user"] = user
        await self.app(scope, receive, send)
