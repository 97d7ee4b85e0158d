"""The edge of ``/v1`` for browsers and lost clients: CORS for the origins listed in
``NAVI_ALLOWED_ORIGINS`` (Starlette's ``CORSMiddleware``, on ``/v1`` only), and a 404 in
OpenAI's shape for a ``/v1`` URL that names nothing.

CORS only lets a listed page *read* answers: the Origin check (origins.py) still
refuses a state-changing request from any unlisted page, and the page must send a
token (``Authorization: Bearer``) like any other client; no cookie is ever sent across
origins (``allow_credentials`` stays off).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from navi.server.openai.errors import OpenAIError, is_v1
from navi.server.origins import SiteOrigin

# What an OpenAI client in a browser sends (the SDK's x-stainless-* headers among them).
CORS_HEADERS = ("*",)
EXPOSED = ("x-navi-session", "x-request-id")
METHODS = ("GET", "POST", "OPTIONS")
_encode = msgspec.json.Encoder().encode


class _ListedOrigins(CORSMiddleware):
    """``CORSMiddleware`` whose origins compare as browsers compare them (scheme, host,
    port with the default filled in), as the Origin check does."""

    def __init__(self, app: ASGIApp, origins: Iterable[SiteOrigin]) -> None:
        self.origins = frozenset(origins)
        super().__init__(
            app,
            allow_origins=(),
            allow_methods=METHODS,
            allow_headers=CORS_HEADERS,
            expose_headers=EXPOSED,
            max_age=600,
        )

    def is_allowed_origin(self, origin: str) -> bool:
        return SiteOrigin.parse(origin) in self.origins


class OpenAICORS:
    """CORS for ``/v1`` paths only; every other path goes on untouched. Added outside
    the Origin check and the authentication: a preflight carries no token."""

    def __init__(self, app: ASGIApp, origins: Iterable[SiteOrigin]) -> None:
        self.app = app
        self.cors = _ListedOrigins(app, origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_v1(scope.get("path", "")) and self.cors.origins:
            await self.cors(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def unknown_url(request: Request) -> Response:
    """Any ``/v1`` URL no route takes: 404, as OpenAI answers one."""
    error = OpenAIError(
        404,
        f"Invalid URL ({request.method} {request.url.path}): the /v1 routes are "
        "GET /v1/models, GET /v1/models/{model} and POST /v1/chat/completions",
    )
    return Response(_encode(error.body()), 404, media_type="application/json")


_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# After every /v1 route: the web client's static files would answer a 404 or a 405.
CATCH_ALL = [
    Route("/v1", unknown_url, methods=_ANY, include_in_schema=False),
    Route("/v1/{rest:path}", unknown_url, methods=_ANY, include_in_schema=False),
]
