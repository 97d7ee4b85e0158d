"""A PDF's text, page by page, for the filesystem tool's ``read``.

pypdf parses the file in a process of its own (tools/pdf_child.py) with limits on its
memory and time: a hostile PDF ends that process, never the server, and the call says
why. The text comes with page markers (``--- page 3 of 40 ---``), as much as the tool
output limit holds; when pages are left out, the last line says which were shown and
what ``pages`` value reads on.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from tools.base import ToolError
from tools.context import StopSignal
from tools.pdf_child import ANSWER_PREFIX
from tools.processes import minimal_env, run_process_tree

_CHILD = Path(__file__).with_name("pdf_child.py")
# What one PDF read may take. The filesystem tool's own limit (30 s) is above the time.
PDF_TIMEOUT_S = 20.0
PDF_MEMORY_BYTES = 512 * 1024 * 1024
# "3", "3-10", "3-" (to the end).
PAGES_PATTERN = r"^\s*[1-9][0-9]{0,8}\s*(-\s*([1-9][0-9]{0,8})?\s*)?$"
_PAGES = re.compile(PAGES_PATTERN)


def looks_like_pdf(name: str, head: bytes) -> bool:
    """A ``.pdf`` name, or a PDF header at the start (a text file that mentions one
    further on stays text)."""
    return name.lower().endswith(".pdf") or head[:1024].lstrip().startswith(b"%PDF-")


def parse_pages(raw: str | None) -> tuple[int, int]:
    """``pages`` as (first, last); last 0 is the end of the document."""
    if raw is None:
        return 1, 0
    match = _PAGES.match(raw)
    if match is None:
        raise ToolError(f"pages {raw!r} is not a page or range: use '3', '3-10' or '3-'")
    first, dash, last = raw.replace(" ", "").partition("-")
    start = int(first)
    end = int(last) if last else (0 if dash else start)
    if end and end < start:
        raise ToolError(f"pages {raw!r} ends before it starts")
    return start, end


async def read_pdf(
    fd: int, shown: str, pages: tuple[int, int], *, limit: int, stop: StopSignal
) -> str:
    """The text of the PDF open at ``fd``, pages ``pages``, in at most ``limit``
    characters and a closing line."""
    first, last = pages
    limits = (PDF_MEMORY_BYTES, int(PDF_TIMEOUT_S))
    argv = [sys.executable, "-I", "-X", "utf8", str(_CHILD), str(fd), str(first), str(last)]
    argv += [str(limit), *map(str, limits)]
    outcome = await run_process_tree(
        argv,
        cwd=Path("/"),
        env=minimal_env(),
        timeout_s=PDF_TIMEOUT_S,
        stop=stop,
        output_limit_bytes=8 * limit + 65536,
        pass_fds=(fd,),
    )
    if outcome.ended_by == "stop":
        raise ToolError(f"reading {shown} was stopped")
    if outcome.ended_by == "timeout":
        raise ToolError(
            f"could not read {shown}: reading it took longer than {PDF_TIMEOUT_S:g} s "
            "(a very large PDF, or one built to be slow)"
        )
    answer = _answer(outcome.output)
    if answer is None:
        raise ToolError(
            f"could not read {shown}: the PDF reader ended without an answer (exit code "
            f"{outcome.exit_code}); the PDF may need more than "
            f"{PDF_MEMORY_BYTES // 2**20} MB of memory, or be malformed"
        )
    if "error" in answer:
        raise ToolError(f"could not read {shown}: {answer['error']}")
    total: int = answer["total"]
    if total == 0:
        return f"{shown} is a PDF without pages"
    if first > total:
        counted = f"{total} page{'s' if total > 1 else ''}"
        raise ToolError(f"{shown} has {counted}: page {first} is past its end")
    return format_pages(answer["pages"], total, last or total, limit)


def _answer(output: str) -> dict[str, Any] | None:
    for line in reversed(output.splitlines()):
        if line.startswith(ANSWER_PREFIX):
            try:
                answer: dict[str, Any] = json.loads(line[len(ANSWER_PREFIX) :])
            except ValueError:
                return None
            return answer
    return None


def format_pages(pages: list[dict[str, Any]], total: int, last: int, limit: int) -> str:
    """The pages with their markers, cut to ``limit`` characters, and what was left out."""
    out: list[str] = []
    used = 0
    shown_to = 0  # the last page shown
    cut = ""
    for page in pages:
        number = page["n"]
        marker = f"--- page {number} of {total} ---\n"
        block = marker + (page["text"] or _empty(page, number)) + "\n"
        whole = len(page["text"]) == page["chars"]
        if whole and used + len(block) <= limit:
            out.append(block)
            used += len(block)
            shown_to = number
            continue
        if shown_to == 0:  # the first page alone is over the limit: as much as fits
            out.append(block[:limit])
            left = page["chars"] - max(0, limit - len(marker))
            cut = f"; the rest of page {number} ({left} characters) is not shown"
            shown_to = number
        break
    last = min(last, total)
    if shown_to == last and not cut:
        return "".join(out).rstrip("\n")
    first = pages[0]["n"]
    note = f"[output limit reached: page{'s' if shown_to > first else ''} "
    note += f"{first}-{shown_to}" if shown_to > first else f"{first}"
    note += f" of {total} shown{cut}"
    if shown_to < last:
        rest = f"{shown_to + 1}-{last}" if last > shown_to + 1 else f"{last}"
        note += f'; read on with pages="{rest}"'
    return "".join(out).rstrip("\n") + "\n" + note + "]"


def _empty(page: dict[str, Any], number: int) -> str:
    if page["error"]:
        return f"[could not read page {number}: {page['error']}]"
    return "[no text on this page: it may be a scanned image]"
