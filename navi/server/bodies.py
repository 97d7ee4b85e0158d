"""Request bodies at the edge: the content types a route reads, and how large a body
may be.

A browser sends a cross-site POST without asking first (no CORS preflight) only when
its body is ``text/plain``, a form (``application/x-www-form-urlencoded``,
``multipart/form-data``) or has no type. So every state-changing route is wrapped in a
:class:`BodyGate` that refuses, with 415, any type the route does not read: JSON routes
take ``application/json`` (or no body at all), uploads ``multipart/form-data``, import
``application/x-ndjson`` or ``application/json``. The gate also bounds the body: a
``Content-Length`` over the route's limit is a 413 before a byte is read, and a body
that streams past it (chunked, or lying about its length) is cut off with a 413 at the
limit, never held whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from navi.server.origins import STATE_CHANGING

JSON = "application/json"
NDJSON = "application/x-ndjson"
MULTIPART = "multipart/form-data"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class BodyError(Exception):
    """A body refused at the edge: 413 (too large) or 415 (wrong type). ``close`` asks
    the server to drop the connection rather than read the rest of the body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BodyRule(msgspec.Struct, frozen=True, kw_only=True):
    """What one route reads: its content types and its size limit (None: the route
    bounds its body itself, as uploads do)."""

    accepts: frozenset[str] = frozenset({JSON})
    max_bytes: int | None = DEFAULT_MAX_BODY_BYTES


def media_type(value: str | None) -> str | None:
    """``"application/json; charset=utf-8"`` → ``"application/json"``."""
    if value is None:
        return None
    return value.partition(";")[0].strip().lower() or None


def _headers(scope: Scope) -> dict[bytes, str]:
    return {k: v.decode("latin-1") for k, v in scope.get("headers", []) if k in _WANTED}


_WANTED = {b"content-type", b"content-length", b"transfer-encoding"}


def _has_body(headers: Mapping[bytes, str]) -> bool:
    length = headers.get(b"content-length", "0").strip()
    return b"transfer-encoding" in headers or (length != "0" and length != "")


def check_type(headers: Mapping[bytes, str], accepts: Iterable[str]) -> None:
    """415 unless the body's type is one of ``accepts``; a request with no body may
    leave the type out."""
    accepts = sorted(accepts)
    kind = media_type(headers.get(b"content-type"))
    if kind is None and not _has_body(headers):
        return
    if kind not in accepts:
        named = " or ".join(accepts)
        got = kind or "no Content-Type"
        raise BodyError(
            415,
            f"unsupported content type: this endpoint reads {named}; send the body with "
            f"Content-Type: {accepts[0]} (got: {got})",
        )


def too_large(limit: int) -> BodyError:
    return BodyError(413, f"the request body is larger than the limit of {limit} bytes")


def check_length(headers: Mapping[bytes, str], limit: int) -> None:
    """413 when the declared ``Content-Length`` is over ``limit``."""
    declared = headers.get(b"content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)


def counting(receive: Receive, limit: int) -> Receive:
    """``receive`` that raises a 413 as soon as the body has passed ``limit`` bytes."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large(limit)
        return message

    return wrapped


async def read_bounded(request: Request, limit: int) -> bytes:
    """The whole body, or a 413 once it passes ``limit`` (by its declared length
    before reading, else while it streams)."""
    check_length({b"content-length": request.headers.get("content-length", "")}, limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


class BodyGate:
    """Wraps one route's ASGI app: its state-changing requests must carry a body the
    route reads (:class:`BodyRule`)."""

    def __init__(self, app: ASGIApp, rule: BodyRule) -> None:
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in STATE_CHANGING:
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        try:
            check_type(headers, self.rule.accepts)
            if self.rule.max_bytes is not None:
                check_length(headers, self.rule.max_bytes)
        except BodyError as exc:
            await error_response(exc)(scope, receive, send)
            return
        if self.rule.max_bytes is not None:
            receive = counting(receive, self.rule.max_bytes)
        await self.app(scope, receive, send)


def error_response(exc: BodyError) -> Response:
    # The rest of a body refused as too large is never read: the connection cannot be
    # reused, and closing it stops the client from sending the rest.
    headers = {"connection": "close"} if exc.status == 413 else None
    return Response(
        msgspec.json.encode({"error": exc.message}),
        status_code=exc.status,
        headers=headers,
        media_type="application/json",
    )


async def _body_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BodyError)
    return error_response(exc)


EXCEPTION_HANDLERS = {BodyError: _body_error}


def guard_bodies(
    routes: Iterable[BaseRoute], default: BodyRule, special: Mapping[Any, BodyRule]
) -> None:
    """Put a :class:`BodyGate` in front of every route with a state-changing method:
    ``special[endpoint]``'s rule, else ``default``. A route added later is covered
    without being named here."""
    for route in routes:
        if isinstance(route, Route) and route.methods and route.methods & STATE_CHANGING:
            route.app = BodyGate(route.app, special.get(route.endpoint, default))
