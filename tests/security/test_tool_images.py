"""Images that tools return (an MCP tool's, ``image_view``'s), shown to the user, against
a real ``navi serve``: the blob route gives one only to the owner of the session whose
tool returned it (not to another user, not for a forged log naming its hash); such an
image counts in its user's quota, and past the quota the call fails and stores nothing;
an "image" that is not one (an SVG with a script, HTML calling itself a PNG) is never
served as something a browser would run."""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import httpx
import pytest

from tests.navi.mcp.mcp_test_server import HOSTILE_IMAGES, PIXEL
from tests.navi.mcp.support import stdio_entry, write_config
from tests.security.conftest import NaviServerProcess, StartNavi, fresh, import_forged
from tests.support.fake_llm_script import FakeToolCall, Reply

pytest.importorskip("mcp")

ALICE_TOKEN = "alice-token-tool-images-0123456789"
BOB_TOKEN = "bob-token-tool-images-0123456789"
CAROL_TOKEN = "carol-token-tool-images-0123456789"
USERS: list[dict[str, Any]] = [
    {"id": "alice", "token": ALICE_TOKEN, "role": "admin"},
    {"id": "bob", "token": BOB_TOKEN, "role": "user"},
    {"id": "carol", "token": CAROL_TOKEN, "role": "admin"},
]
PICTURE = "mcp__t__picture"
KB = 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def png_like(size: int) -> bytes:
    """PNG's magic number, then bytes that do not compress: ``image_view`` takes it."""
    return b"\x89PNG\r\n\x1a\n" + os.urandom(size - 8)


@pytest.fixture(scope="module")
def _server(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> NaviServerProcess:
    folder = tmp_path_factory.mktemp("mcp")
    config = write_config(folder / "mcp.json", {"t": stdio_entry(folder / "calls.log")})
    server = start_module_navi(
        users=USERS,
        env={"NAVI_MCP_CONFIG": str(config), "NAVI_USER_QUOTA_MB": "1"},
        canary_row=False,
    )
    deadline = time.monotonic() + 40
    with server.client() as http:
        while PICTURE not in {t["name"] for t in http.get("/agents/tools").json()}:
            assert time.monotonic() < deadline, f"the MCP tools never came:\n{server.logs()}"
            time.sleep(0.1)
    return server


@pytest.fixture
def server(_server: NaviServerProcess) -> NaviServerProcess:
    return fresh(_server)


def calls_then_done(
    server: NaviServerProcess, sid: str, calls: list[FakeToolCall], *, token: str
) -> list[dict[str, Any]]:
    """One turn making these calls, one per step; the session's tool messages after."""
    server.llm.script(*[Reply(tool_calls=[c]) for c in calls], Reply(text="done"))
    response = server.send(sid, "go", token=token)
    assert response.status_code == 200, response.text
    return server.tool_messages(sid, token=token)


def upload(http: httpx.Client, sid: str, name: str, data: bytes) -> httpx.Response:
    return http.post(f"/sessions/{sid}/files", files={"file": (name, data)})


def test_another_user_cannot_fetch_a_tools_image(server: NaviServerProcess) -> None:
    alices = server.create_session(token=ALICE_TOKEN)
    (result,) = calls_then_done(server, alices, [FakeToolCall(name=PICTURE)], token=ALICE_TOKEN)
    ref = {"sha256": sha(PIXEL), "size": len(PIXEL), "media_type": "image/png"}
    assert result["success"] and result["images"] == [ref]
    url = f"/sessions/{alices}/blobs/{sha(PIXEL)}"
    with server.client(token=ALICE_TOKEN) as alice, server.client(token=BOB_TOKEN) as bob:
        mine = alice.get(url)
        assert mine.status_code == 200 and mine.content == PIXEL
        assert mine.headers["content-type"] == "image/png"
        # Bob: not through Alice's session, nor through one of his own.
        stolen = bob.get(url)
        assert stolen.status_code == 404 and stolen.content != PIXEL
        bobs = server.create_session(token=BOB_TOKEN)
        assert bob.get(f"/sessions/{bobs}/blobs/{sha(PIXEL)}").status_code == 404
        # Nor by importing a log whose tool result names the hash: he runs image_view on
        # an image of his own, then puts Alice's hash in the export of that session.
        own = png_like(2000)
        assert upload(bob, bobs, "own.png", own).status_code == 201
        call = FakeToolCall(name="image_view", arguments={"source": "own.png"})
        (viewed,) = calls_then_done(server, bobs, [call], token=BOB_TOKEN)
        assert viewed["success"] and viewed["images"][0]["sha256"] == sha(own), viewed
        forged = import_forged(bob, bobs, {sha(own): sha(PIXEL)})
        (named,) = server.tool_messages(forged, token=BOB_TOKEN)
        assert named["images"][0]["sha256"] == sha(PIXEL)  # the log names it...
        got = bob.get(f"/sessions/{forged}/blobs/{sha(PIXEL)}")
        assert got.status_code == 404 and got.content != PIXEL  # ...he does not get it
    anonymous = httpx.get(f"{server.url}{url}")
    assert anonymous.status_code == 401 and anonymous.content != PIXEL


def test_a_tools_image_counts_in_the_quota(server: NaviServerProcess) -> None:
    """Carol's quota is 1 MB. A 450 KB upload, then image_view of it: 900 KB used (the
    file, and its image in the blob store). A 200 KB upload no longer fits; a 100 KB one
    does, but its image would not: that call fails, stores nothing, and the run goes on."""
    sid = server.create_session(token=CAROL_TOKEN)
    big, small = png_like(450 * KB), png_like(100 * KB)
    blobs = server.database.parent / "blobs"
    with server.client(token=CAROL_TOKEN) as http:
        assert upload(http, sid, "big.png", big).status_code == 201
        call = FakeToolCall(name="image_view", arguments={"source": "big.png"})
        (viewed,) = calls_then_done(server, sid, [call], token=CAROL_TOKEN)
        assert viewed["success"] and viewed["images"][0]["sha256"] == sha(big), viewed
        assert (blobs / sha(big)[:2] / sha(big)).stat().st_size == len(big)
        refused = upload(http, sid, "more.bin", os.urandom(200 * KB))
        assert refused.status_code == 413 and "quota" in refused.json()["error"], refused.text
        assert upload(http, sid, "small.png", small).status_code == 201
        call = FakeToolCall(name="image_view", arguments={"source": "small.png"})
        _, over = calls_then_done(server, sid, [call], token=CAROL_TOKEN)
        assert not over["success"] and "quota" in over["content"], over
        assert "images" not in over
        assert not (blobs / sha(small)[:2] / sha(small)).exists()
        assert http.get(f"/sessions/{sid}/blobs/{sha(small)}").status_code == 404
        assert server.session(sid, token=CAROL_TOKEN)["messages"][-1]["content"] == "done"


def test_an_image_that_is_not_one_is_never_served_to_run(server: NaviServerProcess) -> None:
    sid = server.create_session(token=ALICE_TOKEN)
    calls = [
        FakeToolCall(name="mcp__t__hostile_image", arguments={"kind": k}) for k in HOSTILE_IMAGES
    ]
    results = calls_then_done(server, sid, calls, token=ALICE_TOKEN)
    assert len(results) == len(HOSTILE_IMAGES)
    with server.client(token=ALICE_TOKEN) as http:
        for (kind, (data, claimed)), result in zip(HOSTILE_IMAGES.items(), results, strict=True):
            (ref,) = result["images"]
            # The type is sniffed from the bytes, never the one the server claimed.
            sniffed = "image/png" if data.startswith(b"\x89PNG") else "application/octet-stream"
            assert ref == {"sha256": sha(data), "size": len(data), "media_type": sniffed}, kind
            got = http.get(f"/sessions/{sid}/blobs/{sha(data)}")
            assert got.status_code == 200 and got.content == data, kind
            served = got.headers["content-type"]
            assert served == sniffed, (kind, served)
            assert "svg" not in served and "html" not in served, (kind, served)
            if claimed != sniffed:  # "svg", "html": what the server said is not believed
                assert served != claimed, kind
            assert got.headers["x-content-type-options"] == "nosniff", kind
            csp = got.headers["content-security-policy"]
            assert "sandbox" in csp and "default-src 'none'" in csp, (kind, csp)
            if sniffed == "application/octet-stream":
                assert got.headers["content-disposition"] == "attachment", kind
        # The page that shows them may run its own scripts only, never one from a blob.
        page_csp = http.get("/").headers["content-security-policy"]
        assert (
            "script-src 'self'" in page_csp
            and "unsafe-inline" not in page_csp.split("script-src")[1].split(";")[0]
        )
