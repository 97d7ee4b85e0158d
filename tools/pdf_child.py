"""The process that parses a PDF with pypdf: never the server (tools/pdf_text.py runs it).

    python -I -X utf8 tools/pdf_child.py FD FIRST LAST BUDGET MEMORY_BYTES CPU_S

A hostile PDF (a page tree of millions of pages, a stream that inflates to gigabytes, a
loop of references) can make a parser slow or hungry, so it is parsed here: memory
(``RLIMIT_AS``) and processor time (``RLIMIT_CPU``) are limited before pypdf is imported,
and the server ends the process at its time limit. The file comes in as the descriptor
``FD``, opened by the server (no link followed). Pages FIRST to LAST (0: the last page)
are extracted until BUDGET characters are held. The answer is one line on stdout:
``pdf-answer {json}``, with ``total`` (the page count) and ``pages`` (``n``, ``text``,
at most BUDGET characters of it, ``chars``, the page's whole length, and ``error``), or
``error`` alone when the file cannot be read at all.

Run as a file, never imported by the server: it imports only the standard library and
pypdf.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
import warnings
from typing import Any, BinaryIO

ANSWER_PREFIX = "pdf-answer "


def _limit(memory_bytes: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # it writes no file
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _why(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "it needs more memory than reading a PDF may take"
    if isinstance(exc, RecursionError):
        return "its objects are nested too deeply"
    return f"{type(exc).__name__}: {exc}"[:300]


def _open(handle: BinaryIO) -> Any:
    """The reader, decrypted if it opens with the empty password; a str says why not."""
    from pypdf import PdfReader

    reader = PdfReader(handle, strict=False)
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")
        except Exception as exc:
            return f"this PDF is encrypted, and could not be opened ({_why(exc)})"
        if not opened:
            return "this PDF is encrypted with a password; ask for a copy without one"
    return reader


def extract(handle: BinaryIO, first: int, last: int, budget: int) -> dict[str, Any]:
    try:
        reader = _open(handle)
    except ImportError:
        return {"error": "reading PDFs needs the pypdf package, which is not installed"}
    if isinstance(reader, str):
        return {"error": reader}
    total = len(reader.pages)
    end = min(last or total, total)
    pages: list[dict[str, Any]] = []
    held = 0
    for number in range(first, end + 1):
        if held >= budget:
            break
        try:
            text, error = reader.pages[number - 1].extract_text() or "", ""
        except Exception as exc:  # one bad page: the others are still read
            text, error = "", _why(exc)
        kept = text[: budget - held]
        held += len(kept) + 30  # its page marker counts too
        pages.append({"n": number, "text": kept, "chars": len(text), "error": error})
    return {"total": total, "pages": pages}


def main(argv: list[str]) -> int:
    fd, first, last, budget, memory_bytes, cpu_s = (int(value) for value in argv)
    _limit(memory_bytes, cpu_s)
    # pypdf warns of every oddity it repairs; the answer line is all that is read.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    sys.setrecursionlimit(2000)
    try:
        with os.fdopen(fd, "rb") as handle:
            answer = extract(handle, first, last, budget)
    except Exception as exc:
        answer = {"error": f"it is not a PDF that can be read ({_why(exc)})"}
    sys.stdout.write(ANSWER_PREFIX + json.dumps(answer, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
