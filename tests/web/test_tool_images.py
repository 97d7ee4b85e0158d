"""What a tool returns to look at, the user sees too: an MCP tool's image (the test MCP
server's ``picture``, over stdio) is a thumbnail in its tool card, fetched from the
owner-checked blob route; a click opens it full size; it is there again after a reload
(history) and in the Replay view (the state at the cursor, and played back)."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.navi.mcp.mcp_test_server import PIXEL
from tests.navi.mcp.support import stdio_entry, write_config
from tests.support.fake_llm import FakeToolCall, Reply
from tests.web.conftest import LLMScript, NaviPage

TOOL = "mcp__t__picture"
SHA = hashlib.sha256(PIXEL).hexdigest()


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    """The usual server, with the test MCP server configured (its tools listed)."""
    from tests.support.navi_server import navi_server_for

    config = write_config(tmp_path / "mcp.json", {"t": stdio_entry(tmp_path / "mcp.log")})
    with navi_server_for(tmp_path / "navi", mcp_config=str(config)) as running:
        deadline = time.monotonic() + 30
        while TOOL not in {t["name"] for t in httpx.get(f"{running.url}/agents/tools").json()}:
            assert time.monotonic() < deadline, "the MCP server's tools never came"
            time.sleep(0.1)
        yield running


def loaded_thumbnail(scope: Any) -> Any:
    """The image in the picture tool's card, once it has loaded (1x1, from a blob URL)."""
    card = scope.locator(f'.tool-card[data-tool="{TOOL}"]')
    expect(card).to_have_class(re.compile(r"\bok\b"))
    image = card.locator('[data-testid="tool-images"] img')
    expect(image).to_have_count(1)
    expect(image).to_have_attribute("src", re.compile(r"^blob:"))
    expect(image).to_have_attribute("alt", f"image returned by {TOOL}")
    image.evaluate("img => img.decode()")  # rejects if the bytes are not an image
    assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [1, 1]
    return image


def test_an_mcp_tools_image_is_shown_live_after_a_reload_and_in_replay(
    navi_page: NaviPage, llm: LLMScript, navi_server: Any
) -> None:
    llm(Reply(tool_calls=[FakeToolCall(name=TOOL)]), Reply(text="A tiny picture."))
    ui = navi_page.open()
    page = ui.page
    fetched: list[str] = []
    page.on("response", lambda r: fetched.append(r.url) if "/blobs/" in r.url else None)
    ui.send("Show me the picture")
    ui.wait_idle()

    # Live: the thumbnail is in the card, whether the card is folded or not.
    image = loaded_thumbnail(page.locator("#conversation"))
    sid = ui.session_id
    assert fetched == [f"{navi_server.url}/sessions/{sid}/blobs/{SHA}"]
    expect(page.locator(".tool-body").first).to_be_hidden()
    # A click opens it full size; a click closes it.
    image.click()
    lightbox = page.locator(".lightbox img")
    expect(lightbox).to_be_visible()
    assert lightbox.evaluate("img => img.naturalWidth") == 1
    page.locator(".lightbox").click()
    expect(page.locator(".lightbox")).to_have_count(0)
    ui.shot("live")

    # History: a fresh load of the chat draws the card with its image.
    ui.open(sid)
    expect(page.locator(".message.assistant").last).to_contain_text("A tiny picture.")
    loaded_thumbnail(page.locator("#conversation"))

    # Replay: the state at the cursor (the end), then the chat played back.
    page.goto(f"{ui.url}/#replay/{sid}")
    conversation = page.locator("#replay-conversation")
    loaded_thumbnail(conversation)
    page.select_option("#replay-speed", "max")
    page.locator("#replay-play").click()
    expect(page.locator("#replay-play")).to_have_attribute("data-state", "paused", timeout=15_000)
    loaded_thumbnail(conversation)
    ui.shot("replay")
