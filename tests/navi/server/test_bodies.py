"""Request bodies at the edge (navi/server/bodies.py, ``body_as`` in navi/server/http.py)
on a small inline app served by uvicorn."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from navi.server import bodies
from navi.server.app import _http_error, _internal
from navi.server.bodies import BodyRule, guard_bodies
from navi.server.http import HTTPError, body_as
from tests.support.asgi_server import serve_asgi

LIMIT = 1000


class Item(msgspec.Struct):
    name: str


ran: list[str] = []


async def create_item(request: Request) -> Response:
    item = await body_as(request, Item)
    ran.append(f"item {item.name}")
    return JSONResponse({"name": item.name})


async def stop(request: Request) -> Response:
    ran.append("stop")
    return JSONResponse({"stopped": True})


async def raw(request: Request) -> Response:
    body = await request.body()
    ran.append("raw")
    return JSONResponse({"size": len(body)})


async def upload(request: Request) -> Response:
    form = await request.form()
    ran.append("upload")
    await form.close()
    return JSONResponse({"fields": len(form)})


async def crash(request: Request) -> Response:
    raise RuntimeError("cannot open /srv/navi/secret/path.db")


@pytest.fixture
def url() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/items", create_item, methods=["POST"]),
            Route("/stop", stop, methods=["POST", "DELETE"]),
            Route("/raw", raw, methods=["PATCH", "GET"]),
            Route("/upload", upload, methods=["POST"]),
            Route("/crash", crash, methods=["GET"]),
        ],
        exception_handlers={
            HTTPError: _http_error,
            Exception: _internal,
            **bodies.EXCEPTION_HANDLERS,
        },
    )
    app.state.max_body_bytes = LIMIT
    guard_bodies(
        app.routes,
        default=BodyRule(max_bytes=LIMIT),
        special={upload: BodyRule(accepts=frozenset({bodies.MULTIPART}), max_bytes=None)},
    )
    ran.clear()
    with serve_asgi(app) as served:
        yield served


JSON = {"content-type": "application/json"}
REFUSED_TYPES = [
    {"content-type": "text/plain"},
    {"content-type": "text/plain;charset=UTF-8"},
    {"content-type": "application/x-www-form-urlencoded"},
    {"content-type": "multipart/form-data; boundary=x"},
    {},  # a body with no type at all: a browser's Blob
]


@pytest.mark.parametrize("headers", REFUSED_TYPES)
@pytest.mark.parametrize(("method", "path"), [("POST", "/items"), ("POST", "/stop"),
                                              ("DELETE", "/stop"), ("PATCH", "/raw")])  # fmt: skip
def test_a_body_of_a_type_the_route_does_not_read_is_refused(
    url: str, method: str, path: str, headers: dict[str, str]
) -> None:
    response = httpx.request(method, url + path, content=b'{"name": "x"}', headers=headers)
    assert response.status_code == 415
    assert "application/json" in response.json()["error"]
    assert ran == []


def test_json_or_no_body_at_all_passes(url: str) -> None:
    assert httpx.post(url + "/stop").status_code == 200
    assert httpx.post(url + "/stop", headers=JSON).status_code == 200
    typed = {"content-type": "Application/JSON; charset=utf-8"}
    assert httpx.post(url + "/items", content=b'{"name": "a"}', headers=typed).json() == {
        "name": "a"
    }
    assert httpx.get(url + "/raw", headers={"content-type": "text/plain"}).status_code == 200
    assert ran == ["stop", "stop", "item a", "raw"]


def test_uploads_take_multipart_only(url: str) -> None:
    ok = httpx.post(url + "/upload", files={"file": ("a.txt", b"hello")})
    assert ok.status_code == 200
    refused = httpx.post(url + "/upload", json={"file": "x"})
    assert refused.status_code == 415 and "multipart/form-data" in refused.json()["error"]
    assert ran == ["upload"]


@pytest.mark.parametrize(("method", "path"), [("POST", "/items"), ("PATCH", "/raw")])
def test_a_body_declared_too_large_is_refused_before_it_is_read(
    url: str, method: str, path: str
) -> None:
    sent = 0

    def hundred_megabytes() -> Iterator[bytes]:
        nonlocal sent
        chunk = b" " * 65536
        for _ in range(1600):
            sent += len(chunk)
            yield chunk

    started = time.monotonic()
    headers = {**JSON, "content-length": str(1600 * 65536)}
    response = httpx.request(method, url + path, content=hundred_megabytes(), headers=headers)
    assert response.status_code == 413
    assert str(LIMIT) in response.json()["error"]
    assert response.headers["connection"] == "close"
    assert time.monotonic() - started < 10
    assert ran == []
    assert httpx.post(url + "/items", json={"name": "after"}).status_code == 200


@pytest.mark.parametrize(("method", "path"), [("POST", "/items"), ("PATCH", "/raw")])
def test_a_body_that_streams_past_the_limit_is_cut_off(url: str, method: str, path: str) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"name": "'
        for _ in range(100):
            yield b"x" * 100

    response = httpx.request(method, url + path, content=chunks(), headers=JSON)
    assert response.status_code == 413
    assert ran == []


def test_a_body_at_the_limit_is_read(url: str) -> None:
    name = "x" * (LIMIT - len('{"name": ""}'))
    assert httpx.post(url + "/items", json={"name": name}).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b'{"name": "\xff\xfe"}', 400, "the request body is not valid UTF-8"),
        (b"{not json", 400, "the request body is not valid JSON"),
        (b'{"name": 5}', 422, "invalid request body"),
        (b"", 400, "the request body is empty"),
    ],
)
def test_bad_json_gets_a_plain_message(url: str, body: bytes, status: int, message: str) -> None:
    response = httpx.post(url + "/items", content=body, headers=JSON)
    assert response.status_code == status
    assert response.json()["error"].startswith(message)
    assert ran == []


def test_an_internal_error_does_not_show_its_text(url: str) -> None:
    response = httpx.get(url + "/crash")
    assert response.status_code == 500
    assert "secret" not in response.text and "/srv" not in response.text
    assert response.json()["error"].startswith("internal error")
