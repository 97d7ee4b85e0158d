"""Images and quotas against a real ``navi serve``: an image is stored once, by its
hash, outside the database; deleting a session frees what nothing else refers to; a
user's images and uploads stop at ``NAVI_USER_QUOTA_MB`` with a clear 413 (REST) or
``error`` frame (WebSocket) and the session lives on; the blob route serves a session's
own images only."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.security.conftest import NaviServerProcess, StartNavi, fresh, import_forged

ALICE_TOKEN = "alice-token-blobs-0123456789"
BOB_TOKEN = "bob-token-blobs-0123456789"
USERS: list[dict[str, Any]] = [
    {"id": "alice", "token": ALICE_TOKEN, "role": "admin"},
    {"id": "bob", "token": BOB_TOKEN, "role": "user"},
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def image(size: int, seed: bytes = b"") -> bytes:
    """PNG-looking bytes of ``size`` (the magic number, then bytes that do not compress)."""
    body = os.urandom(size - len(PNG_MAGIC)) if not seed else (seed * size)[: size - 8]
    return PNG_MAGIC + body


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_files(server: NaviServerProcess) -> dict[str, int]:
    """The blobs on disk (``data/blobs`` beside the database): hash → size."""
    root = server.database.parent / "blobs"
    return {p.name: p.stat().st_size for p in root.glob("??/*") if p.is_file()}


def database_bytes(server: NaviServerProcess) -> int:
    return sum(p.stat().st_size for p in server.database.parent.glob("navi.db*"))


def ws_turn(
    server: NaviServerProcess, session_id: str, frame: dict[str, Any]
) -> list[dict[str, Any]]:
    """Send one frame; the frames answered up to the turn's end (or an error)."""
    url = f"{server.ws_url}/ws/sessions/{session_id}"
    with connect(url, open_timeout=10, max_size=None) as ws:
        ws.send(json.dumps(frame))
        frames: list[dict[str, Any]] = []
        while True:
            got = json.loads(ws.recv(timeout=60))
            frames.append(got)
            if got["type"] in ("stream_end", "error"):
                return frames


def images_of(server: NaviServerProcess, session_id: str) -> list[Any]:
    messages = server.session(session_id)["messages"]
    return [i for m in messages if m["role"] == "user" for i in m.get("images", [])]


def test_an_image_sent_twice_is_stored_once_and_served_to_its_session(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    png = image(20_000)
    blobs = blob_files(server)  # those of the module's tests before (other images)
    first, second = server.create_session(), server.create_session()
    with server.client() as http:
        for sid in (first, first, second):
            reply = http.post(
                f"/sessions/{sid}/messages", json={"content": "look", "images": [b64(png)]}
            )
            assert reply.status_code == 200, reply.text
        assert blob_files(server) == {**blobs, sha(png): len(png)}
        # The log holds a reference: hash, size and media type, no base64.
        refs = images_of(server, first)
        assert refs == [{"sha256": sha(png), "size": len(png), "media_type": "image/png"}] * 2
        events = http.get(f"/sessions/{first}/events").text
        assert b64(png)[:200] not in events
        got = http.get(f"/sessions/{first}/blobs/{sha(png)}")
        assert got.status_code == 200 and got.content == png
        assert got.headers["content-type"] == "image/png"
        assert got.headers["x-content-type-options"] == "nosniff"
    # The LLM got the bytes, read from the blob store when it was called.
    sent = json.dumps(server.llm.requests)
    assert b64(png) in sent


def test_a_large_image_does_not_grow_the_database(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    big = image(4 * 1024 * 1024)  # the largest image a message may carry is 5 MB
    blobs = blob_files(server)
    sid = server.create_session()
    before = database_bytes(server)
    frames = ws_turn(server, sid, {"type": "message", "content": "look", "images": [b64(big)]})
    assert frames[-1]["type"] == "stream_end", frames
    grown = database_bytes(server) - before
    assert grown < 512 * 1024, f"the database grew by {grown} bytes for a {len(big)}-byte image"
    assert blob_files(server) == {**blobs, sha(big): len(big)}
    # The same through REST (a message's body may carry its images: more than 1 MB).
    other = image(3 * 1024 * 1024)
    before = database_bytes(server)
    with server.client() as http:
        reply = http.post(
            f"/sessions/{sid}/messages", json={"content": "and this", "images": [b64(other)]}
        )
        assert reply.status_code == 200, reply.text
    grown = database_bytes(server) - before
    assert grown < 512 * 1024, f"the database grew by {grown} bytes for a {len(other)}-byte image"
    assert blob_files(server) == {**blobs, sha(big): len(big), sha(other): len(other)}


def test_deleting_a_session_frees_its_blobs_but_not_those_still_referenced(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    shared, own = image(10_000), image(12_000)
    blobs = blob_files(server)
    doomed, keeper = server.create_session(), server.create_session()
    for sid, images in ((doomed, [shared, own]), (keeper, [shared])):
        frames = ws_turn(
            server, sid, {"type": "message", "content": "x", "images": [b64(i) for i in images]}
        )
        assert frames[-1]["type"] == "stream_end", frames
    assert set(blob_files(server)) == {*blobs, sha(shared), sha(own)}
    with server.client() as http:
        assert http.delete(f"/sessions/{doomed}").status_code == 200
        assert set(blob_files(server)) == {*blobs, sha(shared)}
        assert http.get(f"/sessions/{keeper}/blobs/{sha(shared)}").content == shared
        assert http.delete(f"/sessions/{keeper}").status_code == 200
    assert blob_files(server) == blobs


def test_over_the_quota_is_a_clear_413_or_error_frame_and_the_session_lives_on(
    start_navi: StartNavi,
) -> None:
    server = start_navi(env={"NAVI_USER_QUOTA_MB": "1"})
    sid = server.create_session()
    first = os.urandom(300_000)
    with server.client() as http:
        upload = http.post(f"/sessions/{sid}/files", files={"file": ("a.bin", first)})
        assert upload.status_code == 201, upload.text
        # The path as the session's tools see it, never the server's own layout.
        assert upload.json()["path"] == "a.bin"
        assert str(server.root) not in upload.text
        # The same content again is kept once, and costs nothing more (else the next
        # upload would pass the quota).
        again = http.post(f"/sessions/{sid}/files", files={"file": ("copy.bin", first)})
        assert again.status_code == 201 and again.json()["name"] == "a.bin", again.text
        second = http.post(f"/sessions/{sid}/files", files={"file": ("b.bin", os.urandom(600_000))})
        assert second.status_code == 201, second.text
        over = http.post(f"/sessions/{sid}/files", files={"file": ("c.bin", os.urandom(200_000))})
        assert over.status_code == 413, over.text
        assert "quota" in over.json()["error"] and "1 MB" in over.json()["error"]
        assert sorted(p.name for p in (server.root / "files" / sid).iterdir()) == ["a.bin", "b.bin"]
        message = http.post(
            f"/sessions/{sid}/messages", json={"content": "look", "images": [b64(image(200_000))]}
        )
        assert message.status_code == 413, message.text
        assert "quota" in message.json()["error"]
    # Over the WebSocket: an error frame, and the connection and the session go on.
    with connect(f"{server.ws_url}/ws/sessions/{sid}", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "message", "content": "look", "images": [b64(image(200_000))]}))
        while (frame := json.loads(ws.recv(timeout=60)))["type"] not in ("stream_end", "error"):
            pass
        assert frame["type"] == "error" and "quota" in frame["message"], frame
        ws.send(json.dumps({"type": "message", "content": "just text"}))
        while (frame := json.loads(ws.recv(timeout=60)))["type"] not in ("stream_end", "error"):
            pass
        assert frame["type"] == "stream_end", frame
    assert blob_files(server) == {}
    messages = server.session(sid)["messages"]
    assert [m["role"] for m in messages[-2:]] == ["user", "assistant"]
    assert messages[-2]["content"] == "just text"


@pytest.fixture(scope="module")
def _two_users(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(users=USERS, token=ALICE_TOKEN)


@pytest.fixture
def two_users(_two_users: NaviServerProcess) -> NaviServerProcess:
    """Alice (admin) and Bob: one server for the module's tests, each with its sessions."""
    return fresh(_two_users)


def test_the_blob_route_serves_only_the_sessions_own_images(
    two_users: NaviServerProcess,
) -> None:
    server = two_users
    png, elsewhere = image(3000, b"a"), image(3000, b"b")
    mine, other = server.create_session(), server.create_session()
    bobs = server.create_session(token=BOB_TOKEN)
    alice = server.client()
    bob = server.client(token=BOB_TOKEN)
    with alice, bob:
        for sid, data, http in ((mine, png, alice), (other, elsewhere, alice), (bobs, png, bob)):
            reply = http.post(
                f"/sessions/{sid}/messages", json={"content": "x", "images": [b64(data)]}
            )
            assert reply.status_code == 200, reply.text
        assert alice.get(f"/sessions/{mine}/blobs/{sha(png)}").content == png
        # Another user's session: not found, even for a blob they hold themselves.
        assert bob.get(f"/sessions/{mine}/blobs/{sha(png)}").status_code == 404
        assert bob.get(f"/sessions/{bobs}/blobs/{sha(png)}").status_code == 200
        # A blob that exists but this session's log does not refer to.
        assert alice.get(f"/sessions/{mine}/blobs/{sha(elsewhere)}").status_code == 404
        assert alice.get(f"/sessions/{mine}/blobs/{'0' * 64}").status_code == 404
        # Not a hash: never a path.
        for bad in (
            sha(png).upper(),
            sha(png)[:63],
            "..%2F..%2Fnavi.db",
            "index.sqlite3",
            "a" * 65,
        ):
            response = alice.get(f"/sessions/{mine}/blobs/{bad}")
            assert response.status_code in (400, 404), (bad, response.status_code)
            assert response.content != png
        # Without a token: nothing.
        anonymous = httpx.get(f"{server.url}/sessions/{mine}/blobs/{sha(png)}")
        assert anonymous.status_code == 401


def test_an_imported_log_naming_another_users_image_does_not_get_it(
    two_users: NaviServerProcess,
) -> None:
    """Knowing the hash of Alice's image is not having it: Bob imports a session whose
    message names that hash; neither the blob route nor the LLM's context gives him
    the bytes."""
    server = two_users
    secret, bobs_own = image(4000, b"s"), image(4000, b"o")
    alices = server.create_session()
    bobs = server.create_session(token=BOB_TOKEN)
    with server.client() as alice, server.client(token=BOB_TOKEN) as bob:
        for sid, data, http in ((alices, secret, alice), (bobs, bobs_own, bob)):
            reply = http.post(
                f"/sessions/{sid}/messages", json={"content": "x", "images": [b64(data)]}
            )
            assert reply.status_code == 200, reply.text
        forged_id = import_forged(bob, bobs, {sha(bobs_own): sha(secret)})
        assert bob.get(f"/sessions/{forged_id}").status_code == 200
        stolen = bob.get(f"/sessions/{forged_id}/blobs/{sha(secret)}")
        assert stolen.status_code == 404 and stolen.content != secret
        # Nor does the LLM get it, to describe it to him, in that session's context.
        seen = len(server.llm.requests)
        reply = bob.post(f"/sessions/{forged_id}/messages", json={"content": "describe it"})
        assert reply.status_code == 200, reply.text
        asked = server.llm.requests[seen:]
        assert asked and b64(secret)[:100] not in json.dumps(asked)
        # Alice's own session still shows it to her.
        assert alice.get(f"/sessions/{alices}/blobs/{sha(secret)}").content == secret
