"""Images and files in a real browser: thumbnails, upload with progress, both sent with
the message and seen by the LLM."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "tests.support.navi_server",
    reason="the browser tests need the navi_server fixture (tests/support/navi_server.py)",
)
pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.web.conftest import LLMScript, NaviPage


def _png(width: int = 8, height: int = 8) -> bytes:
    """A small valid PNG (a teal square), made here."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + b"\x10\xa3\x7f" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _images_sent(llm: LLMScript) -> list[Any]:
    found: list[Any] = []
    for request in llm.loop_requests:
        for message in request.get("messages", []):
            found.extend(message.get("images") or [])
            content = message.get("content")
            if isinstance(content, list):  # OpenAI-style parts
                found.extend(p for p in content if p.get("type") == "image_url")
    return found


def test_an_image_is_previewed_and_sent(
    navi_page: NaviPage, llm: LLMScript, tmp_path: Path
) -> None:
    image = tmp_path / "square.png"
    image.write_bytes(_png())
    llm(Reply(text="A teal square."))
    ui = navi_page.open()
    page = ui.page
    page.set_input_files("#file-input", str(image))
    expect(page.locator('[data-testid="image-attachment"] img')).to_be_visible()
    ui.shot("image-attached")
    ui.send("What is in this image?")
    ui.wait_idle()
    expect(page.locator(".message.user img.thumb")).to_be_visible()
    expect(page.locator(".message.assistant")).to_contain_text("A teal square.")
    expect(page.locator('[data-testid="image-attachment"]')).to_have_count(0)
    assert _images_sent(llm), "the LLM got the image"
    # After a reload the image is still in the history: fetched from the server's
    # blob store (the log keeps only its hash), and drawn.
    ui.open(ui.session_id)
    page.reload()  # a change of the hash alone keeps the page
    thumb = page.locator(".message.user img.thumb")
    expect(thumb).to_be_visible()
    expect(thumb).to_have_attribute("src", re.compile(r"^blob:"))
    page.wait_for_function(
        "img => img.complete && img.naturalWidth === 8", arg=thumb.element_handle()
    )


def test_a_file_is_uploaded_with_progress_and_referenced(
    navi_page: NaviPage, llm: LLMScript, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Line one.\n" * 20000)  # ~200 kB: the progress bar has something to show
    llm(Reply(text="I read your notes."))
    ui = navi_page.open()
    page = ui.page
    page.set_input_files("#file-input", str(notes))
    attachment = page.locator('[data-testid="file-attachment"]')
    expect(attachment).to_contain_text("notes.txt")
    expect(attachment).to_have_class("attachment file done")
    assert ui.session_id, "uploading made the session"
    ui.shot("file-attached")
    ui.send("Summarise the attached notes")
    ui.wait_idle()
    expect(page.locator(".message.user .file-chip")).to_contain_text("notes.txt")
    prompt = " ".join(
        str(m.get("content")) for r in llm.loop_requests for m in r.get("messages", [])
    )
    assert "notes.txt" in prompt, "the LLM was told where the file is"


def test_a_too_big_image_is_refused_in_place(
    navi_page: NaviPage, llm: LLMScript, tmp_path: Path
) -> None:
    big = tmp_path / "big.png"
    big.write_bytes(_png() + b"\x00" * (5 * 1024 * 1024 + 1))
    ui = navi_page.open()
    page = ui.page
    page.set_input_files("#file-input", str(big))
    expect(page.locator("#composer-error")).to_contain_text("at most 5 MB")
    expect(page.locator('[data-testid="image-attachment"]')).to_have_count(0)
