"""JSON in and out: request bodies decoded by msgspec, errors as ``{"error": …}``."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from navi.server.auth import User
from navi.server.bodies import DEFAULT_MAX_BODY_BYTES, JSON, check_type, read_bounded

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_BODY_HEADERS = ("content-type", "content-length", "transfer-encoding")


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_response(data: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(data), status_code=status, media_type="application/json")


def json_error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


async def body_as(
    request: Request, kind: type[T], *, empty_ok: bool = False, max_bytes: int | None = None
) -> T:
    """The body as ``kind``: ``application/json`` only (415), at most ``max_bytes`` or
    the app's ``max_body_bytes`` (413, before it is read whole), valid UTF-8 and JSON
    (400) of the right shape (422). ``empty_ok``: no body at all reads as ``{}``."""
    headers = {k.encode(): v for k, v in request.headers.items() if k in _BODY_HEADERS}
    check_type(headers, (JSON,))
    limit: int = (
        max_bytes
        if max_bytes is not None
        else getattr(request.app.state, "max_body_bytes", DEFAULT_MAX_BODY_BYTES)
    )
    raw = await read_bounded(request, limit)
    if not raw.strip():
        if empty_ok:
            raw = b"{}"
        else:
            raise HTTPError(400, "the request body is empty: send a JSON object")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPError(400, "the request body is not valid UTF-8") from None
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise HTTPError(422, f"invalid request body: {exc}") from None
    except msgspec.DecodeError as exc:  # msgspec says where: "JSON is malformed: … (byte 7)"
        raise HTTPError(400, f"the request body is not valid JSON ({exc})") from None


def user_of(request: Request) -> User:
    """The request's user (AuthMiddleware put it there). None there is a 401, never a
    default user: a route that forgot its check must not run as anyone."""
    user = request.scope.get("navi_user")
    if not isinstance(user, User):
        raise HTTPError(401, "unauthorized: send a valid token")
    return user
