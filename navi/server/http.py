"""JSON in and out: request bodies decoded by msgspec, errors as ``{"error": …}``."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from navi.server.auth import LOCAL_USER, User

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_response(data: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(data), status_code=status, media_type="application/json")


def json_error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


async def body_as(request: Request, kind: type[T], *, empty_ok: bool = False) -> T:
    raw = await request.body()
    if not raw.strip():
        if empty_ok:
            raw = b"{}"
        else:
            raise HTTPError(400, "the request body is empty: send a JSON object")
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise HTTPError(422, f"invalid request body: {exc}") from None
    except msgspec.DecodeError as exc:
        raise HTTPError(400, f"the request body is not valid JSON: {exc}") from None


def user_of(request: Request) -> User:
    user = request.scope.get("navi_user")
    return user if isinstance(user, User) else LOCAL_USER
