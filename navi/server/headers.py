"""Security headers on every HTTP response.

The web client is one origin's scripts, styles and sockets, nothing else: its
Content-Security-Policy lets a page load only from Navi itself (images also from
``data:`` and ``blob:`` URLs, which attachments use), never be framed by another site,
and never send a form or a ``<base>`` elsewhere. So a model's answer that smuggled
markup past the sanitiser still could not run a script or call out to another
server when it is shown. ``nosniff`` keeps browsers from reading a JSON or text answer
as a script; ``no-referrer`` keeps session ids in URLs from leaking to sites a link
opens.

A response that must never act as a page (a blob: bytes a user or a tool gave) sets
``STRICT_POLICY`` itself, and keeps it: nothing loads, no script runs, even opened on
its own. Any other policy a route sets is replaced by the page's.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
    "connect-src 'self'"
)
STRICT_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"
_STRICT = STRICT_POLICY.encode()
# The Host is checked before this runs; this only keeps anything else out of a header.
_PLAIN_HOST = re.compile(r"[A-Za-z0-9.:\[\]_-]+")
_FIXED = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
_OURS = {b"content-security-policy", *(name for name, _ in _FIXED)}


def content_security_policy(host: str | None) -> str:
    """The policy for a page served under ``host``: its own WebSocket URLs are named
    as well, for browsers whose ``'self'`` does not cover ``ws:``."""
    if host and _PLAIN_HOST.fullmatch(host):
        return f"{_POLICY} ws://{host} wss://{host}"
    return _POLICY


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = None
        for name, value in scope.get("headers", []):
            if name == b"host":
                host = value.decode("latin-1")
                break
        policy = content_security_policy(host).encode()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                own = message.get("headers", [])
                strict = (b"content-security-policy", _STRICT) in own
                headers = [(k, v) for k, v in own if k.lower() not in _OURS]
                headers.append((b"content-security-policy", _STRICT if strict else policy))
                headers.extend(_FIXED)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
