"""Small PDFs written byte by byte for tests: ``make_pdf`` makes one page per string
(its lines in Helvetica, text pypdf extracts), ``encrypt`` adds a user password, and
``assemble`` writes any objects as a PDF file, for PDFs built to be hostile."""

from __future__ import annotations

import io
from collections.abc import Sequence


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _stream(text: str) -> bytes:
    shown = " T* ".join(f"({_escape(line)}) Tj" for line in text.splitlines() or [""])
    return f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET".encode("latin-1")


def make_pdf(pages: Sequence[str]) -> bytes:
    """A PDF with one page per string (latin-1 text), cross-reference table and all."""
    page_ids = [4 + 2 * index for index in range(len(pages))]
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % n for n in page_ids) + b"]"
        b" /Count %d >>" % len(pages),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for page_id, text in zip(page_ids, pages, strict=True):
        content = _stream(text)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_id + 1)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    return assemble(objects)


def assemble(objects: Sequence[bytes]) -> bytes:
    """Objects 1..n (object 1 the catalog) as a PDF file with a correct xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def encrypt(pdf: bytes, password: str) -> bytes:
    """``pdf`` encrypted with a user password, by pypdf's writer (RC4: no extra library)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
