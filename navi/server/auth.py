"""Authentication at the edge: each request gets its user, or a 401.

Fail closed: every route needs a user but the public ones (``/health``,
``/openapi.json``, the web client's static files); which route a request reaches is
asked of the router itself, so no spelling of a path (``//sessions``, dot segments,
case) can make a private route look public. Users and roles are navi/accounts.py.

How a request shows who it is:
- REST: ``Authorization: Bearer <token>`` only. A token in the URL (``?token=``) is
  refused: URLs end up in access logs, proxies and browser history.
- WebSocket: the same header (scripts, the CLI), or, from a browser, which cannot set
  headers on a WebSocket, ``?ticket=``: a single-use ticket valid for ``TICKET_TTL_S``
  seconds, got from ``POST /auth/ws-ticket`` with the header (navi/server/auth_routes.py).
- Open access (bound to loopback, no token configured): everyone is the local user.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from urllib.parse import parse_qs

import msgspec
from starlette.routing import Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from navi.accounts import LOCAL_USER, AuthConfigError, Role, User, Users, is_loopback

__all__ = [
    "LOCAL_USER",
    "AuthConfigError",
    "AuthMiddleware",
    "Role",
    "User",
    "Users",
    "WsTickets",
    "is_loopback",
]

# The MCP sign-in callback comes from a browser redirect (no Authorization header): the
# state of a waiting sign-in lets it in (navi/server/mcp_auth_routes.py).
PUBLIC_PATHS = frozenset({"/health", "/openapi.json", "/", "/mcp/oauth/callback"})
TICKET_TTL_S = 30
CLOSE_UNAUTHORIZED = 4401
TOKEN_IN_URL = (
    "unauthorized: send the token in the 'Authorization: Bearer' header, never in the "
    "URL (a browser's WebSocket uses a ticket from POST /auth/ws-ticket)"
)
NO_USER = "unauthorized: send a valid token in the 'Authorization: Bearer' header"


class _Ticket(msgspec.Struct, frozen=True):
    user: str
    expires_ms: int
    nonce: str


_encode_ticket = msgspec.json.Encoder().encode
_decode_ticket = msgspec.json.Decoder(_Ticket).decode


class WsTickets:
    """Short-lived, single-use tickets that stand for a user on a WebSocket upgrade.

    A ticket is signed (HMAC-SHA256), so any node that has the same ``secret``
    (``NAVI_WS_TICKET_SECRET``) accepts it; without one each process draws its own key.
    Used nonces are remembered until they expire: a ticket opens one socket per node."""

    def __init__(
        self,
        users: Users,
        *,
        secret: str = "",
        ttl_s: int = TICKET_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.users = users
        self.ttl_s = ttl_s
        self.clock = clock
        self._key = (
            hashlib.sha256(b"navi ws ticket\0" + secret.encode()).digest()
            if secret
            else secrets.token_bytes(32)
        )
        self._used: dict[str, int] = {}  # nonce → when it expires (ms)

    def issue(self, user: User) -> str:
        expires_ms = int((self.clock() + self.ttl_s) * 1000)
        payload = _encode_ticket(_Ticket(user.id, expires_ms, secrets.token_urlsafe(12)))
        body = _b64(payload)
        return f"{body}.{self._sign(body)}"

    def redeem(self, ticket: str) -> User | None:
        """The ticket's user, once; None when it is forged, expired or used."""
        body, _, mac = ticket.partition(".")
        if not hmac.compare_digest(mac.encode(), self._sign(body).encode()):
            return None
        try:
            found = _decode_ticket(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, msgspec.DecodeError):
            return None
        now_ms = int(self.clock() * 1000)
        if found.expires_ms <= now_ms:
            return None
        self._used = {n: e for n, e in self._used.items() if e > now_ms}
        if found.nonce in self._used:
            return None
        self._used[found.nonce] = found.expires_ms
        return self.users.get(found.user)

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text: str = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                return text[7:].strip()
    return None


def _is_public(scope: Scope) -> bool:
    """Whether the route this request reaches is public: the same matching the router
    does, so the answer is about the endpoint that would run. WebSockets never are."""
    if scope["type"] != "http":
        return False
    router = getattr(scope.get("app"), "router", None)
    for route in getattr(router, "routes", ()):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            if isinstance(route, Mount):
                return isinstance(route.app, StaticFiles)
            return isinstance(route, Route) and route.path in PUBLIC_PATHS
    return False


class AuthMiddleware:
    """Puts the request's ``User`` in ``scope["navi_user"]``, or refuses the request."""

    def __init__(self, app: ASGIApp, users: Users, tickets: WsTickets | None = None) -> None:
        self.app = app
        self.users = users
        self.tickets = tickets or WsTickets(users)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        user, why = self._user(scope)
        if user is None and not _is_public(scope):
            await _refuse(scope, receive, send, why)
            return
        scope["navi_user"] = user
        await self.app(scope, receive, send)

    def _user(self, scope: Scope) -> tuple[User | None, str]:
        if self.users.open_access:
            return LOCAL_USER, ""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            return None, TOKEN_IN_URL
        token = _bearer(scope)
        if token is not None:
            return self.users.authenticate(token), NO_USER
        tickets = query.get("ticket")
        if scope["type"] == "websocket" and tickets:
            user = self.tickets.redeem(tickets[0])
            return user, "unauthorized: the ticket is unknown, used or expired"
        return None, NO_USER


async def _refuse(scope: Scope, receive: Receive, send: Send, why: str) -> None:
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        # Accepted to be closed with a code a browser can see (a refused handshake
        # shows it only "1006").
        await send({"type": "websocket.accept"})
        reason = why if len(why) <= 120 else "unauthorized"  # a close reason is short
        await send({"type": "websocket.close", "code": CLOSE_UNAUTHORIZED, "reason": reason})
        return
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b"Bearer"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps({"error": why}).encode()})
