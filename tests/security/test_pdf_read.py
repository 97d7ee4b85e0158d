"""Hostile PDFs, uploaded and read by the agent, cost the server nothing.

pypdf parses each in a process of its own with a memory and time limit
(tools/pdf_text.py): PDFs built to exhaust memory (streams that inflate to a gigabyte,
page after page of large streams kept in memory), to loop (a page tree that contains
itself), to nest a parser to death, or to count millions of pages each give a clear
error. The server's own memory stays where it was, no parsing process is left, and the
session goes on: its messages and its upload are still there and the next turn runs.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from tests.security.conftest import NaviServerProcess
from tests.support.fake_llm_script import FakeToolCall, Reply
from tests.support.pdfs import assemble, make_pdf

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _catalog(kids: bytes, count: int) -> list[bytes]:
    return [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % count,
        _FONT,
    ]


def _stream(data: bytes) -> bytes:
    packed = zlib.compress(data, 9)
    return (
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream"
    )


def _page(contents: int) -> bytes:
    return (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % contents
    )


def inflating_pages(pages: int, each: int) -> bytes:
    """``pages`` pages, each with a stream of its own that inflates to ``each`` bytes
    (under pypdf's own limit per stream; together past the reader's memory)."""
    objects = _catalog(b" ".join(b"%d 0 R" % (4 + 2 * n) for n in range(pages)), pages)
    stream = _stream(b"0" * each)
    for n in range(pages):
        objects += [_page(5 + 2 * n), stream]
    return assemble(objects)


def inflating_stream() -> bytes:
    """A page whose stream inflates to 200 MB (past pypdf's own limit)."""
    return assemble([*_catalog(b"4 0 R", 1), _page(5), _stream(b"BT (x) Tj ET\n" * (15 << 20))])


def cyclic_tree() -> bytes:
    return assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
            b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
        ]
    )


def deep_nesting() -> bytes:
    nested = b"[" * 200_000 + b"]" * 200_000
    return assemble(
        [
            *_catalog(b"4 0 R", 1),
            _page(5),
            b"<< /Length 1 /X " + nested + b" >>\nstream\nx\nendstream",
        ]
    )


def million_pages() -> bytes:
    return assemble([*_catalog(b"4 0 R " * 2_000_000, 2_000_000), _page(5), _stream(b"")])


def hostile() -> dict[str, tuple[bytes, str]]:
    """Each hostile PDF by name, and what the result of reading it says."""
    unreadable = "could not read {}: it is not a PDF that can be read"
    return {
        "pages.pdf": (
            inflating_pages(12, 60 << 20),
            "it needs more memory than reading a PDF may take",
        ),
        "bomb.pdf": (inflating_stream(), "could not read page 1: LimitReachedError"),
        "cycle.pdf": (cyclic_tree(), unreadable.format("cycle.pdf")),
        "nested.pdf": (deep_nesting(), "could not read page 1: "),
        "million.pdf": (million_pages(), unreadable.format("million.pdf")),
    }


def peak_memory_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def children(pid: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found


def test_hostile_pdfs_give_clear_errors_and_the_session_goes_on(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    sid = server.create_session()
    pdfs = hostile()
    with server.client() as http:
        for name, (data, _) in pdfs.items():
            response = http.post(f"/sessions/{sid}/files", files={"file": (name, data)})
            assert response.status_code == 201, response.text
    before = peak_memory_kb(server.pid)
    server.llm.script(
        *(
            Reply(
                tool_calls=[
                    FakeToolCall(name="filesystem", arguments={"action": "read", "path": name})
                ]
            )
            for name in pdfs
        ),
        Reply(text="Those files could not be read."),
    )
    response = server.send(sid, "read my PDFs")
    assert response.status_code == 200 and response.json()["status"] == "completed", response.text

    results = [m["content"] for m in server.tool_messages(sid)]
    assert len(results) == len(pdfs)
    for result, (name, (_, expected)) in zip(results, pdfs.items(), strict=True):
        assert expected in result, (name, result)
    # Parsed elsewhere: the server grew by far less than the gigabytes asked for.
    assert peak_memory_kb(server.pid) - before < 100 * 1024
    assert not [c for c in children(server.pid) if "pdf_child" in c]

    # The session goes on: its files and messages are there, the next turn runs.
    server.llm.script(Reply(text="Still here."))
    assert server.send(sid, "and now?").json()["status"] == "completed"
    messages = server.session(sid)["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["read my PDFs", "and now?"]
    assert messages[-1]["content"] == "Still here."
    assert sorted(os.listdir(server.root / "files" / sid)) == sorted(pdfs)


def test_an_ordinary_pdf_still_reads_after_hostile_ones(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.create_session()
    with server.client() as http:
        response = http.post(
            f"/sessions/{sid}/files", files={"file": ("fine.pdf", make_pdf(["all fine"]))}
        )
        assert response.status_code == 201, response.text
    server.llm.script(
        Reply(
            tool_calls=[
                FakeToolCall(name="filesystem", arguments={"action": "read", "path": "fine.pdf"})
            ]
        ),
        Reply(text="ok"),
    )
    assert server.send(sid, "read it").json()["status"] == "completed"
    (result,) = [m["content"] for m in server.tool_messages(sid)]
    assert result.endswith("--- page 1 of 1 ---\nall fine")
