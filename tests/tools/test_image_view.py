from __future__ import annotations

import base64
from pathlib import Path

import msgspec
import pytest

from tests.support.local_servers import LocalHTTPServer, tiny_png
from tools import InMemoryToolState, ToolContext, ToolRegistry, ToolSettings
from tools.image_types import sniff_image_type

pytestmark = pytest.mark.anyio


@pytest.fixture
def ctx(files_dir: Path, settings: ToolSettings, state: InMemoryToolState) -> ToolContext:
    """The local test server is on 127.0.0.1: loopback opened as an operator would, with
    NAVI_ALLOW_PRIVATE_URLS (tests/security/test_outbound.py checks the default refuses)."""
    opened = msgspec.structs.replace(settings, allow_private_urls=True)
    return ToolContext.standalone("s1", files_dir, settings=opened, state=state)


async def test_image_from_a_file(registry: ToolRegistry, ctx: ToolContext, files_dir: Path) -> None:
    (files_dir / "pic.png").write_bytes(tiny_png())
    result = await registry.execute("image_view", {"source": "pic.png"}, ctx)
    assert result.success
    assert result.metadata["is_image"] is True
    assert result.metadata["mime_type"] == "image/png"
    assert base64.b64decode(result.metadata["base64"]) == tiny_png()
    # The picture goes to the model's context through metadata, never as text.
    assert result.metadata["base64"] not in result.output
    assert result.output.startswith("Image loaded: pic.png (image/png, ")


async def test_image_from_a_url(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    result = await registry.execute("image_view", {"source": http_server.url("/image.png")}, ctx)
    assert result.success
    assert base64.b64decode(result.metadata["base64"]) == tiny_png()
    fake = await registry.execute("image_view", {"source": http_server.url("/not-an-image")}, ctx)
    assert "is not a supported image" in (fake.error or "")
    missing = await registry.execute("image_view", {"source": http_server.url("/status/404")}, ctx)
    assert "HTTP 404" in (missing.error or "")


async def test_image_errors_and_limits(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path, http_server: LocalHTTPServer
) -> None:
    (files_dir / "notes.txt").write_text("hello")
    not_image = await registry.execute("image_view", {"source": "notes.txt"}, ctx)
    assert not_image.error == "notes.txt is not a supported image (PNG, JPEG, GIF, WEBP or BMP)"
    missing = await registry.execute("image_view", {"source": "nope.png"}, ctx)
    assert missing.error == "no such file: nope.png"
    escape = await registry.execute("image_view", {"source": "../../../etc/passwd"}, ctx)
    assert "access denied" in (escape.error or "")
    settings = msgspec.structs.replace(ctx.settings, image_max_bytes=20)
    small = ToolContext.standalone("s1", files_dir, settings=settings)
    (files_dir / "pic.png").write_bytes(tiny_png())
    too_big = await registry.execute("image_view", {"source": "pic.png"}, small)
    assert "over the 20-byte limit" in (too_big.error or "")
    too_big_url = await registry.execute(
        "image_view", {"source": http_server.url("/image.png")}, small
    )
    assert "larger than 20 bytes" in (too_big_url.error or "")


def test_sniffing() -> None:
    assert sniff_image_type(tiny_png()) == "image/png"
    assert sniff_image_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_image_type(b"GIF89a...") == "image/gif"
    assert sniff_image_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image_type(b"<svg>") is None
