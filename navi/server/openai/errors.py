"""Errors of ``/v1`` in OpenAI's shape: ``{"error": {"message", "type", "param",
"code"}}``, which OpenAI clients read (the SDKs raise them with their ``code``).

The routes raise :class:`OpenAIError`; :class:`OpenAIErrorShape` rewrites the answers
of the edge (401 of the auth middleware, 400 of the Host check, 403 of the origin check,
413/415 of the body gate, 404/405 of the router, 500) from Navi's ``{"error": "…"}``
for every ``/v1`` path, so the edge's rules stay in one place.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_encode = msgspec.json.Encoder().encode


class OpenAIError(Exception):
    """An error answered as ``{"error": {...}}`` with ``status``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        type: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or default_code(status)
        self.type = type or default_type(status)
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, code=self.code, param=self.param)


def default_type(status: int) -> str:
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


_CODES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "request_too_large",
    415: "unsupported_media_type",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}


def default_code(status: int) -> str:
    return _CODES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_body(
    message: str, *, type: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def invalid(
    message: str, *, code: str = "invalid_request_error", param: str | None = None
) -> OpenAIError:
    return OpenAIError(400, message, code=code, param=param)


def is_v1(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


class OpenAIErrorShape:
    """Rewrites ``{"error": "…"}`` answers of ``/v1`` paths (from the edge: auth, origin,
    body gate, routing) to OpenAI's error shape, so an OpenAI client shows the message.
    Added outside every other middleware; nothing else changes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_v1(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        body: list[bytes] = []

        async def reshaping_send(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] >= 400:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            status: int = held["status"]
            data = _reshaped(status, b"".join(body))
            headers = [
                (k, v)
                for k, v in held.get("headers", [])
                if k.lower() not in (b"content-length", b"content-type")
            ]
            headers += [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ]
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": data})

        await self.app(scope, receive, reshaping_send)


def _reshaped(status: int, data: bytes) -> bytes:
    try:
        found = msgspec.json.decode(data)
    except msgspec.DecodeError:
        found = None
    if isinstance(found, dict) and isinstance(found.get("error"), dict):
        return data  # already OpenAI's shape
    message = found.get("error") if isinstance(found, dict) else None
    if not isinstance(message, str):
        message = data.decode("utf-8", "replace").strip() or f"HTTP {status}"
    return _encode(error_body(message, type=default_type(status), code=default_code(status)))
