"""Security headers (navi/server/headers.py) on a small inline app."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from navi.server.headers import STRICT_POLICY, SecurityHeadersMiddleware, content_security_policy
from tests.support.asgi_server import serve_asgi


async def page(request: Request) -> Response:
    # A route's own, looser policy does not survive.
    return PlainTextResponse("page", headers={"content-security-policy": "default-src *"})


async def blob(request: Request) -> Response:
    # Bytes that must never act as a page keep their own, stricter policy.
    return PlainTextResponse("<svg/>", headers={"content-security-policy": STRICT_POLICY})


async def missing(request: Request) -> Response:
    return PlainTextResponse("no", status_code=404)


def directives(policy: str) -> dict[str, list[str]]:
    out = {}
    for part in policy.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


def test_every_response_carries_the_policy_and_the_headers() -> None:
    app = Starlette(routes=[Route("/", page), Route("/missing", missing)])
    app.add_middleware(SecurityHeadersMiddleware)
    with serve_asgi(app) as url:
        for path in ("/", "/missing", "/no/route"):
            response = httpx.get(url + path)
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["referrer-policy"] == "no-referrer"
            assert response.headers["x-frame-options"] == "DENY"
            assert len(response.headers.get_list("content-security-policy")) == 1
            policy = directives(response.headers["content-security-policy"])
            assert policy["default-src"] == ["'self'"]
            assert policy["script-src"] == ["'self'"]
            assert policy["style-src"] == ["'self'"]
            assert policy["img-src"] == ["'self'", "data:", "blob:"]
            assert policy["frame-ancestors"] == ["'none'"]
            host = url.removeprefix("http://")
            assert policy["connect-src"] == ["'self'", f"ws://{host}", f"wss://{host}"]


def test_a_host_that_is_not_plain_is_not_written_into_the_policy() -> None:
    policy = content_security_policy("evil; script-src *")
    assert "evil" not in policy and "script-src 'self'" in policy
    assert "ws://" not in content_security_policy(None)


def test_a_response_that_asks_for_the_strict_policy_keeps_it() -> None:
    app = Starlette(routes=[Route("/", page), Route("/blob", blob)])
    app.add_middleware(SecurityHeadersMiddleware)
    with serve_asgi(app) as url:
        response = httpx.get(url + "/blob")
        assert response.headers.get_list("content-security-policy") == [STRICT_POLICY]
        policy = directives(STRICT_POLICY)
        assert policy["default-src"] == ["'none'"] and "sandbox" in policy
        assert response.headers["x-content-type-options"] == "nosniff"
        # Only that one: any other policy a route sets is still the page's.
        page_policy = httpx.get(url + "/").headers["content-security-policy"]
        assert directives(page_policy)["default-src"] == ["'self'"]
