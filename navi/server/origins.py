"""Where a request comes from: the ``Host`` it names and the ``Origin`` of the page
that sent it.

Navi acts on its user's machine, and any web page the user visits can make the browser
send requests to ``127.0.0.1``. Two checks keep those pages out (docs/deployment.md,
"Security model"):

- **Host** (DNS rebinding: a page whose name now points at 127.0.0.1 is same-origin with
  itself, so the browser lets it read the answers). Only the loopback names, the address
  Navi is bound to and ``NAVI_ALLOWED_HOSTS`` are answered; anything else is a 400
  before any route runs.
- **Origin** (cross-site requests: a page may send, blind, a POST or open a WebSocket
  to any address). A WebSocket upgrade or a POST/PUT/PATCH/DELETE that carries an
  ``Origin`` is refused (403) unless it is Navi's own origin (the scheme and the
  ``Host`` of the request) or listed in ``NAVI_ALLOWED_ORIGINS``. ``Origin: null``
  (sandboxed frames, ``file:`` pages) is never allowed. Requests with no ``Origin``
  (the CLI, scripts, other servers) are not browsers acting for a page: they pass.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

import msgspec
from starlette.types import ASGIApp, Receive, Scope, Send

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# Binding to every interface says nothing about the names clients will use.
_ANY_ADDRESS = {"0.0.0.0", "::", ""}
# A Host header is a name or an address and maybe a port: nothing else (no "@", no "/").
_HOST_HEADER = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(:[0-9]{1,5})?")


def host_name(host: str) -> str:
    """The name in a ``Host`` value or a URL's netloc, without its port, lower case;
    IPv6 addresses without brackets, in their short form."""
    host = host.strip().lower()
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    elif host.count(":") > 1:  # a bare IPv6 address (a setting, never a header)
        name = host
    else:
        name = host.partition(":")[0]
    name = name.rstrip(".")
    try:
        return ipaddress.ip_address(name).compressed
    except ValueError:
        return name


class AllowedHosts(msgspec.Struct, frozen=True, kw_only=True):
    """The host names Navi answers to (any port). ``*.example.org`` allows every name
    under ``example.org``; ``*`` allows every name (no protection from DNS rebinding)."""

    names: frozenset[str]
    suffixes: tuple[str, ...] = ()
    any_host: bool = False

    @classmethod
    def configure(cls, *, bound_host: str, extra: Iterable[str] = ()) -> AllowedHosts:
        names = {host_name(n) for n in LOOPBACK_NAMES}
        if host_name(bound_host) not in _ANY_ADDRESS:
            names.add(host_name(bound_host))
        suffixes: list[str] = []
        any_host = False
        for entry in extra:
            if entry == "*":
                any_host = True
            elif entry.startswith("*."):
                suffixes.append(entry[1:].lower())
            else:
                names.add(host_name(entry))
        return cls(names=frozenset(names), suffixes=tuple(suffixes), any_host=any_host)

    def allows(self, host: str) -> bool:
        if not _HOST_HEADER.fullmatch(host):
            return False
        if self.any_host:
            return True
        name = host_name(host)
        return bool(name) and (name in self.names or name.endswith(self.suffixes))


class SiteOrigin(msgspec.Struct, frozen=True):
    """An origin as browsers compare them: scheme, host and port (the default port
    filled in)."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> SiteOrigin | None:
        """``scheme://host[:port]`` → the origin; anything else (``null``, a path,
        another scheme) → None."""
        try:
            parts = urlsplit(text.strip())
            port = parts.port
        except ValueError:
            return None
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            return None
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            return None
        return cls(scheme, host_name(parts.hostname), port or _DEFAULT_PORTS[scheme])

    @classmethod
    def of_request(cls, scope: Scope, host: str) -> SiteOrigin | None:
        """The origin a page served by this request would have: its scheme (``ws`` as
        ``http``) and its ``Host``."""
        scheme = _SCHEMES.get(str(scope.get("scheme", "http")), "http")
        return cls.parse(f"{scheme}://{host}")


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


async def refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """Answer with ``{"error": message}``; a WebSocket is refused before it is accepted
    (with an HTTP response where the server supports it, else closed: 403)."""
    body = json.dumps({"error": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff"),
    ]
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            await send(
                {"type": "websocket.http.response.start", "status": status, "headers": headers}
            )
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 4403, "reason": message[:120]})
        return
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class HostCheckMiddleware:
    """Answers 400 to a request (HTTP or WebSocket) whose ``Host`` is not allowed."""

    def __init__(self, app: ASGIApp, hosts: AllowedHosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = header(scope, b"host")
            if host is None or not self.hosts.allows(host):
                await refuse(
                    scope,
                    receive,
                    send,
                    400,
                    f"host {(host or '')[:100]!r} is not allowed: add its name to "
                    "NAVI_ALLOWED_HOSTS if Navi should answer to it",
                )
                return
        await self.app(scope, receive, send)


class OriginCheckMiddleware:
    """Answers 403 to a WebSocket upgrade or a state-changing request sent by a page of
    another origin (``Origin`` present, not Navi's own, not listed)."""

    def __init__(self, app: ASGIApp, allowed: Iterable[SiteOrigin] = ()) -> None:
        self.app = app
        self.allowed = frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        checked = scope["type"] == "websocket" or (
            scope["type"] == "http" and scope.get("method") in STATE_CHANGING
        )
        if checked:
            origin = header(scope, b"origin")
            if origin is not None and not self.allows(scope, origin):
                await refuse(
                    scope,
                    receive,
                    send,
                    403,
                    f"cross-origin request refused: a page of {origin[:100]!r} may not use "
                    "Navi (list that origin in NAVI_ALLOWED_ORIGINS if it should)",
                )
                return
        await self.app(scope, receive, send)

    def allows(self, scope: Scope, origin: str) -> bool:
        site = SiteOrigin.parse(origin)
        if site is None:  # "null", or not an http(s) origin at all
            return False
        if site in self.allowed:
            return True
        own = SiteOrigin.of_request(scope, header(scope, b"host") or "")
        return site == own
