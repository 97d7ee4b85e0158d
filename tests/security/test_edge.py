"""The edge of a real ``navi serve``, tried as a web page the user visits would try it:
another ``Host`` (DNS rebinding), another ``Origin`` on both sockets and on every
state-changing route, bodies browsers send without a preflight (``text/plain``, forms),
a 100 MB body, invalid UTF-8, and the headers the web client is served with.

Each test failed before the edge checks (navi/server/origins.py, bodies.py, headers.py):
the server answered any Host, accepted WebSockets from any Origin, read JSON whatever
its type, read whole bodies of any size and sent no policy.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
from starlette.routing import Route
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from navi.config import Settings
from navi.server.app import create_app
from tests.security.conftest import NaviServerProcess, StartNavi

EVIL = "http://evil.example"
STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")
TOKEN = "edge-admin-token-5b7e3f90c2"


def state_changing_routes() -> list[tuple[str, str]]:
    """Every (method, path) of the app that changes state: read from the app's own
    routes, so that a route added later is tried without being named here."""
    app = create_app(Settings())
    found = []
    for route in app.routes:
        if isinstance(route, Route) and route.methods:
            found += [(m, route.path) for m in sorted(route.methods & set(STATE_CHANGING))]
    assert ("POST", "/sessions") in found and ("POST", "/sessions/import") in found
    return found


ROUTES = state_changing_routes()


def fill(path: str, session_id: str) -> str:
    return (
        path.replace("{session_id}", session_id)
        .replace("{fact_id}", "fact-1")
        .replace("{seq}", "1")
        .replace("{sha256}", "0" * 64)
    )


def ws_status(
    server: NaviServerProcess,
    path: str,
    *,
    host: str | None = None,
    origin: str | None = None,
    token: str | None = None,
) -> int:
    """The status a WebSocket upgrade gets (101: accepted, and the socket answered)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    headers = {"authorization": f"Bearer {token}"} if token else None
    try:
        with connect(
            f"ws://{host or '127.0.0.1'}:{server.port}{path}",
            sock=sock,
            origin=Origin(origin) if origin else None,
            additional_headers=headers,
            proxy=None,
            open_timeout=10,
            close_timeout=1,
        ):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def error_message(response: httpx.Response) -> str:
    """An error's text: ``{"error": "…"}``, or on ``/v1`` OpenAI's ``{"error": {"message"}}``."""
    error = response.json()["error"]
    return str(error["message"] if isinstance(error, dict) else error)


def sockets(session_id: str) -> list[str]:
    return [f"/ws/sessions/{session_id}?after=0", f"/ws/sessions/{session_id}/replay"]


def snapshot(server: NaviServerProcess) -> tuple[Any, ...]:
    """What a successful attack would change: the sessions, the canary session's
    messages and title, how often the LLM was called."""
    with server.client() as http:
        sessions = http.get("/sessions").json()
    canary = server.session(server.canary_session)
    return (
        sorted((s["session_id"], s.get("title"), s.get("pinned")) for s in sessions),
        len(canary["messages"]),
        canary.get("profile_id"),
        len(server.llm.requests),
    )


def test_a_request_for_another_host_is_refused_before_any_route(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    with httpx.Client(base_url=server.url) as http:
        for path in ("/sessions", "/", "/health", f"/sessions/{server.canary_session}"):
            response = http.get(path, headers={"host": "evil.example"})
            assert response.status_code == 400, path
            assert server.canary_session not in response.text
        created = http.post("/sessions", json={}, headers={"host": "evil.example:80"})
        assert created.status_code == 400
        # The names Navi is reached by still work, with or without a port.
        for host in ("localhost", f"localhost:{server.port}", f"[::1]:{server.port}"):
            assert http.get("/sessions", headers={"host": host}).status_code == 200, host
    for path in sockets(server.canary_session):
        assert ws_status(server, path, host="evil.example") == 400
        assert ws_status(server, path) == 101  # the same socket from its own host


def test_navi_allowed_hosts_adds_names(start_navi: StartNavi) -> None:
    server = start_navi(env={"NAVI_ALLOWED_HOSTS": "navi.lan"}, canary_row=False)
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/sessions", headers={"host": "navi.lan"}).status_code == 200
        assert http.get("/sessions", headers={"host": "evil.example"}).status_code == 400


def test_a_websocket_from_another_origin_is_refused_on_both_sockets(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    for path in sockets(server.canary_session):
        for origin in (EVIL, "null", "https://127.0.0.1", f"http://localhost:{server.port}"):
            assert ws_status(server, path, origin=origin) == 403, (path, origin)
        assert ws_status(server, path, origin=f"http://127.0.0.1:{server.port}") == 101


def test_origins_are_refused_with_a_token_too(start_navi: StartNavi) -> None:
    server = start_navi(users=[{"id": "admin", "token": TOKEN, "role": "admin"}])
    before = snapshot(server)
    with server.client() as http:
        assert http.get("/sessions").status_code == 200  # the token works
        for origin in (EVIL, "null"):
            for method, path in ROUTES:
                response = http.request(
                    method,
                    fill(path, server.canary_session),
                    json={"content": "run id", "title": "owned", "profile_id": "pirate"},
                    headers={"origin": origin},
                )
                assert response.status_code == 403, (origin, method, path, response.text)
    for path in sockets(server.canary_session):
        assert ws_status(server, path, origin=EVIL, token=TOKEN) == 403
    assert snapshot(server) == before


def _bodies() -> Iterator[tuple[str, dict[str, str], Any]]:
    message = '{"content": "run id", "title": "owned", "pinned": true, "at": 1}'
    yield "text/plain", {"content-type": "text/plain;charset=UTF-8"}, message
    yield "form", {"content-type": "application/x-www-form-urlencoded"}, "content=run+id"
    yield "no type", {}, message.encode()  # a Blob body: no Content-Type at all


def test_browser_bodies_reach_no_state_changing_route(shared_navi: NaviServerProcess) -> None:
    """What a cross-site page can send without a preflight: refused on every route (415
    without an Origin, 403 with one), and nothing changes."""
    server = shared_navi
    before = snapshot(server)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for method, path in ROUTES:
            url = fill(path, server.canary_session)
            for kind, headers, body in _bodies():
                response = http.request(method, url, content=body, headers=headers)
                assert response.status_code == 415, (kind, method, path, response.text)
                assert "Content-Type" in error_message(response)
                response = http.request(
                    method, url, content=body, headers={**headers, "origin": EVIL}
                )
                assert response.status_code == 403, (kind, method, path)
            # A multipart form: only an upload reads one, and never from another site.
            form = {"content": (None, "run id")}
            response = http.request(method, url, files=form, headers={"origin": EVIL})
            assert response.status_code == 403, (method, path)
            if not path.endswith("/files"):
                response = http.request(method, url, files=form)
                assert response.status_code == 415, (method, path, response.text)
    assert snapshot(server) == before


def _hundred_megabytes() -> Iterator[bytes]:
    chunk = b" " * (1024 * 1024)
    for _ in range(100):
        yield chunk


def test_a_hundred_megabyte_body_is_refused_before_it_is_read(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    before = snapshot(server)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for method, path in [
            ("POST", "/sessions"),
            ("PATCH", "/sessions/{session_id}/pin"),
            ("POST", "/sessions/{session_id}/messages"),
            ("POST", "/sessions/import"),
        ]:
            kind = "application/x-ndjson" if path.endswith("/import") else "application/json"
            for declared in (True, False):  # with its Content-Length, and chunked
                headers = {"content-type": kind}
                if declared:
                    headers["content-length"] = str(100 * 1024 * 1024)
                started = time.monotonic()
                response = http.request(
                    method,
                    fill(path, server.canary_session),
                    content=_hundred_megabytes(),
                    headers=headers,
                )
                assert response.status_code == 413, (path, declared, response.text)
                assert "limit" in response.json()["error"]
                assert time.monotonic() - started < 10
        # The server is fine: it answers, and a normal body still works.
        assert http.get("/health").status_code == 200
        renamed = http.patch(f"/sessions/{server.canary_session}", json={"title": "still here"})
        assert renamed.status_code == 200
    after = snapshot(server)
    assert after[1:] == before[1:]


def test_invalid_utf8_gets_a_plain_400(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    before = snapshot(server)
    with server.client() as http:
        for method, path, body in [
            ("POST", "/sessions", b'{"title": "\xff\xfe"}'),
            ("PATCH", "/sessions/{session_id}", b'{"title": "caf\xe9"}'),
            ("POST", "/sessions/{session_id}/messages", b'{"content": "\xc3\x28"}'),
            ("POST", "/sessions/{session_id}/fork", b'{"at": 1, "title": "\xed\xa0\x80"}'),
            ("PATCH", "/memory/facts/{fact_id}", b'{"value": "\xff"}'),
        ]:
            response = http.request(
                method,
                fill(path, server.canary_session),
                content=body,
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 400, path
            assert response.json()["error"].endswith("is not valid UTF-8"), path
        # An export file: the same line as Navi writes it, with a bad byte in a string.
        export = http.get(f"/sessions/{server.canary_session}/export").content.splitlines()
        export[1] = export[1].replace(b'"secretary"', b'"secr\xff\xfeary"', 1)
        assert b"\xff" in export[1]
        response = http.post(
            "/sessions/import?as_new=true",
            content=b"\n".join(export),
            headers={"content-type": "application/x-ndjson"},
        )
        assert response.status_code == 400
        assert response.json() == {"error": "the export file is not valid UTF-8"}
        assert http.get("/sessions").status_code == 200
    assert snapshot(server) == before


def test_the_web_client_is_served_with_its_policy(shared_navi: NaviServerProcess) -> None:
    with shared_navi.client() as http:
        for path in ("/", "/index.html", "/js/main.js", "/sessions"):
            response = http.get(path)
            assert response.status_code == 200, path
            policy = {
                name: values
                for name, *values in (
                    part.split() for part in response.headers["content-security-policy"].split(";")
                )
            }
            assert policy["default-src"] == ["'self'"]
            assert policy["script-src"] == ["'self'"]
            assert policy["style-src"] == ["'self'"]
            assert policy["img-src"] == ["'self'", "data:", "blob:"]
            assert policy["frame-ancestors"] == ["'none'"]
            assert policy["connect-src"][0] == "'self'"
            assert all(
                source == "'self'" or source.endswith(f"127.0.0.1:{shared_navi.port}")
                for source in policy["connect-src"]
            )
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["referrer-policy"] == "no-referrer"
