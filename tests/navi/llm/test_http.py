"""Line splitting and error-body reading shared by the HTTP backends."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

import httpx
import pytest

from navi.llm.http import endpoint, error_detail, line_blocks, make_client

pytestmark = pytest.mark.anyio


async def blocks_of(*pieces: bytes) -> list[bytes]:
    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    response = httpx.Response(200, content=body())
    return [block async for block in line_blocks(response)]


async def test_reads_are_cut_at_line_ends() -> None:
    assert await blocks_of(b'{"a":1}\n{"b"', b":2}\n", b"{", b'"c":3}\n') == [
        b'{"a":1}\n',
        b'{"b":2}\n',
        b"",  # a read that completed no line still proves the server is alive
        b'{"c":3}\n',
    ]


async def test_many_lines_in_one_read_stay_one_block() -> None:
    assert await blocks_of(b"a\nb\nc\n") == [b"a\nb\nc\n"]


async def test_an_unterminated_last_line_is_kept() -> None:
    assert await blocks_of(b"a\nb") == [b"a\n", b"b\n"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"error":"plain"}', "plain"),
        (b'{"error":{"message":"nested","type":"x"}}', "nested"),
        (b'{"object":"error","message":"flat"}', "flat"),
        (b'{"detail":"fastapi"}', "fastapi"),
        (b"<html>oops</html>", "<html>oops</html>"),
        (b"", "(empty answer)"),
    ],
)
def test_error_detail(body: bytes, detail: str) -> None:
    assert error_detail(body) == detail


async def test_httpcore_finds_sniffio() -> None:
    # httpcore asks which event loop runs on every lock and event it sets up; without
    # sniffio each ask is a failed import that searches sys.path again (0.07 ms each).
    from httpcore._synchronization import current_async_library

    assert importlib.util.find_spec("sniffio") is not None
    assert current_async_library() == "asyncio"


@pytest.mark.parametrize(
    ("base", "path"),
    [
        ("http://127.0.0.1:11434", "/api/chat"),
        ("http://127.0.0.1:8080/v1", "/chat/completions"),
        ("https://llm.example/openai/v1/", "/chat/completions"),
    ],
)
async def test_an_endpoint_is_the_url_the_client_would_build(base: str, path: str) -> None:
    async with make_client(base, connect_timeout=1.0) as client:
        assert endpoint(client, path) == client.build_request("POST", path).url
        sent = client.build_request("POST", endpoint(client, path), content=b"{}")
        assert sent.headers["content-type"] == "application/json"
