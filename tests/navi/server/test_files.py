"""Uploaded files are cleaned SESSION_FILES_TTL_HOURS after the session's last activity;
an uploaded PDF is read by the agent."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from events.in_memory import InMemoryEventStore
from events.types import SessionCreated, UserMessage
from navi.blobs import BlobStore
from navi.server.files import FileStore, safe_name
from navi.server.views import SessionsView
from tests.support.fake_llm_script import FakeToolCall, Reply
from tests.support.pdfs import make_pdf

# Session ids are UUIDs (a folder is never made for anything else); sorted as named.
BUSY = "00000000-0000-4000-8000-000000000001"
GONE = "00000000-0000-4000-8000-000000000002"
IDLE = "00000000-0000-4000-8000-000000000003"


async def test_files_of_idle_sessions_are_removed_after_the_ttl(tmp_path: Path) -> None:
    async with InMemoryEventStore() as store:
        await store.append(
            BUSY, [SessionCreated(profile_id="p"), UserMessage(text="hi")], expected_seq=0
        )
        await store.append(IDLE, [SessionCreated(profile_id="p")], expected_seq=0)
        files = FileStore(tmp_path, ttl_hours=1)
        for sid in (BUSY, IDLE, GONE):
            with files.create(sid, "a.txt")[1] as out:
                out.write(b"x")
        view = SessionsView(store)
        # Nothing is old yet.
        assert await files.clean(view) == []
        # Two hours later everything is past the TTL.
        later = time.time() + 2 * 3600
        assert sorted(await files.clean(view, now=later)) == [BUSY, GONE, IDLE]
        assert not any(tmp_path.iterdir())


def test_upload_names_cannot_escape_or_collide(tmp_path: Path) -> None:
    files = FileStore(tmp_path, ttl_hours=1)
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("..\\..\\x.txt") == "x.txt"
    assert safe_name("") == "upload"
    first, out = files.create(BUSY, "a.txt")
    with out:
        out.write(b"1")
    second, out = files.create(BUSY, "a.txt")
    out.close()
    assert second.name == "a-1.txt" and second.parent == first.parent
    assert first.read_bytes() == b"1" and second.read_bytes() == b""


async def test_cleaned_uploads_no_longer_count_against_the_quota(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs", quota_bytes=1000)
    try:
        async with InMemoryEventStore() as store:
            await store.append(IDLE, [SessionCreated(profile_id="p")], expected_seq=0)
            files = FileStore(tmp_path / "files", ttl_hours=1, blobs=blobs)
            upload, out = files.create(IDLE, "a.bin")
            with out:
                out.write(b"x" * 800)
            blobs.add_upload(upload, user_id="local", session_id=IDLE, sha256="0" * 64)
            assert blobs.usage("local") == 800
            await files.clean(SessionsView(store), now=time.time() + 2 * 3600)
            assert blobs.usage("local") == 0
    finally:
        blobs.close()


def test_an_uploaded_pdf_is_read_by_the_agent(navi_server: Any) -> None:
    """Uploaded over HTTP, read by the model's filesystem call: the tool result the model
    receives holds the PDF's text, page by page."""
    pdf = make_pdf(["Quarterly report", "Revenue grew by 12 percent"])
    navi_server.fake_llm.script(
        Reply(
            tool_calls=[
                FakeToolCall(name="filesystem", arguments={"action": "read", "path": "report.pdf"})
            ]
        ),
        Reply(text="Revenue grew by 12%."),
    )
    with httpx.Client(base_url=navi_server.url, timeout=60) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        upload = http.post(
            f"/sessions/{sid}/files", files={"file": ("report.pdf", pdf, "application/pdf")}
        )
        assert upload.status_code == 201, upload.text
        assert upload.json()["path"] == "report.pdf"
        reply = http.post(f"/sessions/{sid}/messages", json={"content": "sum up report.pdf"})
        assert reply.json()["status"] == "completed", reply.text
    messages = navi_server.fake_llm.requests[-1]["messages"]
    (result,) = [m["content"] for m in messages if m["role"] == "tool"]
    # After Navi's line saying tool output is data, not instructions.
    assert result.endswith(
        "\n--- page 1 of 2 ---\nQuarterly report\n--- page 2 of 2 ---\nRevenue grew by 12 percent"
    )
