"""Uploaded files are cleaned SESSION_FILES_TTL_HOURS after the session's last activity."""

from __future__ import annotations

import time
from pathlib import Path

from events.memory import InMemoryEventStore
from events.types import SessionCreated, UserMessage
from navi.blobs import BlobStore
from navi.server.files import FileStore, safe_name
from navi.server.views import SessionsView

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
