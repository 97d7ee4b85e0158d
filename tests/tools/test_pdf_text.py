"""Reading a PDF with the filesystem tool: its text page by page, with page markers, a
page range, the output limit and a note saying how to read on, and clear errors for
PDFs that cannot be read (encrypted, not a PDF at all, too slow)."""

from __future__ import annotations

import zlib
from pathlib import Path

import msgspec
import pytest

from tests.support.pdfs import assemble, encrypt, make_pdf
from tools import ToolContext, ToolRegistry, pdf_text
from tools.base import MARKER_ROOM
from tools.pdf_text import format_pages, parse_pages

pytestmark = pytest.mark.anyio

THREE = ["First page text", "Second page\nits second line", "Third (and last)"]


async def read(registry: ToolRegistry, ctx: ToolContext, **args: object) -> tuple[bool, str]:
    result = await registry.execute("filesystem", {"action": "read", **args}, ctx)
    return result.success, result.output


def limited(ctx: ToolContext, chars: int) -> ToolContext:
    settings = msgspec.structs.replace(ctx.settings, output_max_chars=chars)
    return ToolContext.standalone(ctx.session_id, ctx.files_dir, settings=settings)


def test_pages_are_a_page_or_a_range() -> None:
    assert parse_pages(None) == (1, 0)
    assert parse_pages("3") == (3, 3)
    assert parse_pages(" 3 - 10 ") == (3, 10)
    assert parse_pages("3-") == (3, 0)
    with pytest.raises(Exception, match="ends before it starts"):
        parse_pages("5-2")


def test_a_page_over_the_limit_alone_is_cut_with_a_note() -> None:
    pages = [{"n": 1, "text": "x" * 500, "chars": 2000, "error": ""}]
    text = format_pages(pages, 4, 4, 100)
    assert text.startswith("--- page 1 of 4 ---\n" + "x" * 80)
    assert text.endswith(
        "\n[output limit reached: page 1 of 4 shown; the rest of page 1 (1920 characters)"
        ' is not shown; read on with pages="2-4"]'
    )


@pytest.mark.slow
async def test_every_page_with_its_marker(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "report.pdf").write_bytes(make_pdf(THREE))
    assert await read(registry, ctx, path="report.pdf") == (
        True,
        "--- page 1 of 3 ---\nFirst page text\n"
        "--- page 2 of 3 ---\nSecond page\nits second line\n"
        "--- page 3 of 3 ---\nThird (and last)",
    )


@pytest.mark.slow
async def test_a_page_range(registry: ToolRegistry, ctx: ToolContext, files_dir: Path) -> None:
    (files_dir / "report.pdf").write_bytes(make_pdf(THREE))
    ok, text = await read(registry, ctx, path="report.pdf", pages="2-3")
    assert ok and text.startswith("--- page 2 of 3 ---\nSecond page")
    assert "First page" not in text and text.endswith("Third (and last)")
    assert await read(registry, ctx, path="report.pdf", pages="3") == (
        True,
        "--- page 3 of 3 ---\nThird (and last)",
    )
    assert await read(registry, ctx, path="report.pdf", pages="7-") == (
        False,
        "Error: report.pdf has 3 pages: page 7 is past its end",
    )
    ok, text = await read(registry, ctx, path="report.pdf", pages="two")
    assert not ok and "pages" in text


@pytest.mark.slow
async def test_a_long_pdf_is_cut_at_the_output_limit_and_says_how_to_read_on(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    pages = [f"Page {n} says " + "words " * 20 for n in range(1, 41)]
    (files_dir / "long.pdf").write_bytes(make_pdf(pages))
    small = limited(ctx, 1000)
    ok, text = await read(registry, small, path="long.pdf")
    assert ok and text.startswith("--- page 1 of 40 ---\nPage 1 says words")
    assert len(text) <= 1000 + MARKER_ROOM
    shown = text.count("--- page ")
    assert 3 <= shown < 40 and f"--- page {shown} of 40 ---" in text
    assert text.endswith(
        f'[output limit reached: pages 1-{shown} of 40 shown; read on with pages="{shown + 1}-40"]'
    )
    ok, more = await read(registry, small, path="long.pdf", pages=f"{shown + 1}-40")
    assert ok and more.startswith(f"--- page {shown + 1} of 40 ---\nPage {shown + 1} says")
    # The default limit holds them all.
    ok, whole = await read(registry, ctx, path="long.pdf")
    assert ok and whole.count("--- page ") == 40 and "output limit" not in whole


@pytest.mark.slow
async def test_a_pdf_is_known_by_its_header_and_a_page_without_text_says_so(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "scan").write_bytes(make_pdf(["", "typed"]))
    assert await read(registry, ctx, path="scan") == (
        True,
        "--- page 1 of 2 ---\n[no text on this page: it may be a scanned image]\n"
        "--- page 2 of 2 ---\ntyped",
    )


@pytest.mark.slow
async def test_an_encrypted_pdf_is_refused_clearly_unless_its_password_is_empty(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "locked.pdf").write_bytes(encrypt(make_pdf(["secret"]), "pw"))
    assert await read(registry, ctx, path="locked.pdf") == (
        False,
        "Error: could not read locked.pdf: this PDF is encrypted with a password; "
        "ask for a copy without one",
    )
    (files_dir / "open.pdf").write_bytes(encrypt(make_pdf(["readable"]), ""))
    assert await read(registry, ctx, path="open.pdf") == (True, "--- page 1 of 1 ---\nreadable")


@pytest.mark.slow
async def test_garbage_named_pdf_is_a_clear_error(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "junk.pdf").write_bytes(bytes(range(256)) * 40)
    ok, text = await read(registry, ctx, path="junk.pdf")
    assert not ok and text.startswith("Error: could not read junk.pdf: it is not a PDF")
    (files_dir / "cut.pdf").write_bytes(make_pdf(THREE)[:200])
    ok, text = await read(registry, ctx, path="cut.pdf")
    assert not ok and text.startswith("Error: could not read cut.pdf: ")


async def test_a_text_file_that_mentions_a_pdf_header_stays_text(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "notes.md").write_text("A PDF starts with %PDF-1.7 and ends with %%EOF.")
    assert await read(registry, ctx, path="notes.md") == (
        True,
        "A PDF starts with %PDF-1.7 and ends with %%EOF.",
    )


async def test_pages_of_a_text_file_are_refused(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "notes.txt").write_text("plain")
    assert await read(registry, ctx, path="notes.txt", pages="1") == (
        False,
        "Error: 'pages' picks pages of a PDF; notes.txt is not one",
    )


@pytest.mark.slow
async def test_a_pdf_slower_than_the_time_limit_is_ended(
    registry: ToolRegistry,
    ctx: ToolContext,
    files_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A page of a million text operators: seconds of parsing, ended at the limit."""
    monkeypatch.setattr(pdf_text, "PDF_TIMEOUT_S", 1.0)
    content = zlib.compress(b"BT /F1 12 Tf (x) Tj ET\n" * 1_000_000, 1)
    (files_dir / "slow.pdf").write_bytes(one_page(content))
    ok, text = await read(registry, ctx, path="slow.pdf")
    assert (ok, text) == (
        False,
        "Error: could not read slow.pdf: reading it took longer than 1 s "
        "(a very large PDF, or one built to be slow)",
    )


def one_page(flate_content: bytes) -> bytes:
    """A one-page PDF whose content stream is ``flate_content`` (Flate-compressed)."""
    return assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(flate_content)
            + flate_content
            + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )
