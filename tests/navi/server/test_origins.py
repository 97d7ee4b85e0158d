"""Host and Origin checks (navi/server/origins.py) on a small inline app, served by
uvicorn on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from navi.server.origins import (
    AllowedHosts,
    HostCheckMiddleware,
    OriginCheckMiddleware,
    SiteOrigin,
    host_name,
)
from tests.support.asgi_server import connect_to, serve_asgi


async def hello(request: Request) -> Response:
    return PlainTextResponse("hello")


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("hello")
    await websocket.close()


LOOPBACK = AllowedHosts.configure(bound_host="127.0.0.1")


@contextmanager
def served(hosts: AllowedHosts = LOOPBACK, origins: Sequence[str] = ()) -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/", hello, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
            WebSocketRoute("/ws", echo),
        ]
    )
    allowed = [SiteOrigin.parse(o) for o in origins]
    app.add_middleware(OriginCheckMiddleware, allowed=[o for o in allowed if o is not None])
    app.add_middleware(HostCheckMiddleware, hosts=hosts)
    with serve_asgi(app) as url:
        yield url


def ws_status(url: str, *, host: str | None = None, origin: str | None = None) -> int:
    """The status of a WebSocket upgrade to ``/ws``: 101 when it is accepted."""
    port = url.rpartition(":")[2]
    try:
        with connect(
            f"ws://{host or '127.0.0.1'}:{port}/ws",
            sock=connect_to(url),
            origin=Origin(origin) if origin else None,
            proxy=None,
        ) as ws:
            assert ws.recv() == "hello"
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost.:8000", "localhost"),
        ("127.0.0.1:80", "127.0.0.1"),
        ("[::1]:8000", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("::1", "::1"),
        ("navi.example.org", "navi.example.org"),
    ],
)
def test_host_name_drops_the_port_and_normalises(host: str, name: str) -> None:
    assert host_name(host) == name


def test_loopback_and_the_bound_host_are_allowed_by_default() -> None:
    hosts = AllowedHosts.configure(bound_host="192.168.1.5")
    for host in ("localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000", "192.168.1.5:80"):
        assert hosts.allows(host), host
    for host in ("evil.example", "127.0.0.2", "localhost.evil.example", "", "192.168.1.6"):
        assert not hosts.allows(host), host


def test_a_host_header_that_is_not_a_plain_name_is_refused() -> None:
    hosts = AllowedHosts.configure(bound_host="127.0.0.1")
    for host in ("127.0.0.1@evil.example", "127.0.0.1/x", "127.0.0.1:80:80", "local host"):
        assert not hosts.allows(host), host


def test_binding_every_interface_allows_no_extra_name() -> None:
    hosts = AllowedHosts.configure(bound_host="0.0.0.0")
    assert not hosts.allows("0.0.0.0:8000")
    assert hosts.allows("localhost:8000")


def test_more_hosts_wildcards_and_everything() -> None:
    hosts = AllowedHosts.configure(bound_host="127.0.0.1", extra=["navi.lan", "*.example.org"])
    assert hosts.allows("navi.lan:8000") and hosts.allows("a.b.example.org")
    assert not hosts.allows("example.org") and not hosts.allows("evilexample.org")
    assert AllowedHosts.configure(bound_host="127.0.0.1", extra=["*"]).allows("any.where")


def test_a_request_for_another_host_is_refused_before_any_route() -> None:
    with served() as url:
        assert httpx.get(url).text == "hello"
        refused = httpx.get(url, headers={"host": "evil.example"})
        assert refused.status_code == 400
        assert "NAVI_ALLOWED_HOSTS" in refused.json()["error"]
        assert ws_status(url) == 101
        assert ws_status(url, host="evil.example") == 400


@pytest.mark.parametrize(
    ("text", "origin"),
    [
        ("http://localhost:8000", SiteOrigin("http", "localhost", 8000)),
        ("https://Navi.Example.org", SiteOrigin("https", "navi.example.org", 443)),
        ("http://[::1]", SiteOrigin("http", "::1", 80)),
        ("null", None),
        ("file://", None),
        ("chrome-extension://abc", None),
        ("http://x.org/path", None),
        ("http://user@x.org", None),
        ("http://x.org:99999", None),
    ],
)
def test_origins_are_parsed_as_browsers_compare_them(text: str, origin: SiteOrigin | None) -> None:
    assert SiteOrigin.parse(text) == origin


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_state_changing_request_from_another_origin_is_refused(method: str) -> None:
    with served() as url, httpx.Client(base_url=url) as client:
        port = url.rpartition(":")[2]
        others = ("http://evil.example", "null", f"https://127.0.0.1:{port}", "http://127.0.0.1")
        for origin in others:
            refused = client.request(method, "/", headers={"origin": origin})
            assert refused.status_code == 403, origin
            assert "NAVI_ALLOWED_ORIGINS" in refused.json()["error"]
        # Its own origin, and no Origin at all (the CLI, scripts), pass.
        assert client.request(method, "/", headers={"origin": url}).text == "hello"
        assert client.request(method, "/").text == "hello"


def test_own_origin_follows_the_host_the_request_names() -> None:
    hosts = AllowedHosts.configure(bound_host="127.0.0.1", extra=["navi.lan"])
    with served(hosts) as url, httpx.Client(base_url=url) as client:
        port = url.rpartition(":")[2]
        lan = {"host": f"navi.lan:{port}"}
        ok = client.post("/", headers={**lan, "origin": f"http://navi.lan:{port}"})
        assert ok.status_code == 200
        assert client.post("/", headers={**lan, "origin": url}).status_code == 403


def test_reading_is_not_checked_for_origin() -> None:
    with served() as url:
        assert httpx.get(url, headers={"origin": "http://evil.example"}).status_code == 200


def test_a_listed_origin_is_allowed() -> None:
    with served(origins=["https://navi.example.org"]) as url:
        ok = httpx.post(url, headers={"origin": "https://navi.example.org:443"})
        assert ok.status_code == 200
        assert httpx.post(url, headers={"origin": "http://navi.example.org"}).status_code == 403


def test_a_websocket_from_another_origin_is_refused_before_accept() -> None:
    with served() as url:
        assert ws_status(url, origin="http://evil.example") == 403
        assert ws_status(url, origin="null") == 403
        assert ws_status(url, origin=url) == 101
        assert ws_status(url) == 101


def test_listening_on_every_interface_without_names_is_warned_about() -> None:
    from structlog.testing import capture_logs

    from navi.config import Settings
    from navi.server.app import create_app

    token = "t" * 20
    with capture_logs() as logs:
        create_app(Settings(host="0.0.0.0", api_token=token))
        create_app(Settings(host="0.0.0.0", api_token=token, allowed_hosts=("navi.lan",)))
        create_app(Settings(host="127.0.0.1"))
    warned = [entry for entry in logs if entry["event"] == "server.hosts_not_listed"]
    assert len(warned) == 1 and "NAVI_ALLOWED_HOSTS" in warned[0]["message"]
