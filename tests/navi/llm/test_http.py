"""Line splitting and error-body reading shared by the HTTP backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from navi.llm.http import error_detail, line_blocks

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
