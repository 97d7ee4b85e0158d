"""The blob store through the server: a live fork keeps its origin's images after the
origin is deleted; an image a tool returns is kept there too, and served to the page."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import httpx

from tests.support.fake_llm_script import FakeToolCall, Reply

PNG = b"\x89PNG\r\n\x1a\n" + b"\x07" * 5000
SHA = hashlib.sha256(PNG).hexdigest()


def blob_files(root: Path) -> set[str]:
    return {p.name for p in (root / "blobs").glob("??/*") if p.is_file()}


def test_a_fork_keeps_its_origins_images_until_it_is_deleted_too(navi_server: Any) -> None:
    with httpx.Client(base_url=navi_server.url, timeout=60) as http:
        origin = http.post("/sessions", json={}).json()["session_id"]
        sent = http.post(
            f"/sessions/{origin}/messages",
            json={"content": "look", "images": [base64.b64encode(PNG).decode()]},
        )
        assert sent.status_code == 200, sent.text
        fork = http.post(f"/sessions/{origin}/fork", json={"at": 2})
        assert fork.status_code == 201, fork.text
        forked = fork.json()["session_id"]
        # The fork's history holds the origin's message: its image is the fork's too.
        assert http.get(f"/sessions/{forked}/blobs/{SHA}").content == PNG
        assert http.delete(f"/sessions/{origin}").status_code == 200
        assert blob_files(navi_server.root) == {SHA}
        assert http.get(f"/sessions/{forked}/blobs/{SHA}").content == PNG
        assert http.delete(f"/sessions/{forked}").status_code == 200
        assert blob_files(navi_server.root) == set()


def test_an_image_a_tool_returns_goes_to_the_blob_store(navi_server: Any) -> None:
    navi_server.fake_llm.script(
        Reply(tool_calls=[FakeToolCall(name="image_view", arguments={"source": "pic.png"})]),
        Reply(text="A picture."),
    )
    with httpx.Client(base_url=navi_server.url, timeout=60) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        upload = http.post(f"/sessions/{sid}/files", files={"file": ("pic.png", PNG)})
        assert upload.status_code == 201, upload.text
        reply = http.post(f"/sessions/{sid}/messages", json={"content": "look at pic.png"})
        assert reply.json()["status"] == "completed", reply.text
        assert blob_files(navi_server.root) == {SHA}
        # The log keeps the reference, not the bytes; the LLM got the bytes.
        events = http.get(f"/sessions/{sid}/events").text
        assert f'"image":{{"sha256":"{SHA}"' in events
        assert base64.b64encode(PNG).decode()[:100] not in events
        last = navi_server.fake_llm.requests[-1]
        assert base64.b64encode(PNG).decode() in str(last["messages"])
        # The user sees it too: the history's tool message names it, the route serves it.
        messages = http.get(f"/sessions/{sid}").json()["messages"]
        (tool,) = [m for m in messages if m["role"] == "tool"]
        assert tool["images"] == [{"sha256": SHA, "size": len(PNG), "media_type": "image/png"}]
        served = http.get(f"/sessions/{sid}/blobs/{SHA}")
        assert served.status_code == 200 and served.content == PNG
        assert served.headers["content-type"] == "image/png"
        assert http.delete(f"/sessions/{sid}").status_code == 200
        assert blob_files(navi_server.root) == set()


def test_an_image_a_subagents_tool_returns_is_served_for_the_top_session(
    navi_server: Any,
) -> None:
    """A subagent's tools work on its top-level session's files; the image its
    image_view returns shows in that session's page, so its blob route serves it."""
    navi_server.fake_llm.script(
        Reply(tool_calls=[FakeToolCall(name="spawn_agent", arguments={"task": "look"})]),
        Reply(tool_calls=[FakeToolCall(name="image_view", arguments={"source": "pic.png"})]),
        Reply(text="It is a picture."),
        Reply(text="Done."),
    )
    with httpx.Client(base_url=navi_server.url, timeout=60) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        upload = http.post(f"/sessions/{sid}/files", files={"file": ("pic.png", PNG)})
        assert upload.status_code == 201, upload.text
        reply = http.post(f"/sessions/{sid}/messages", json={"content": "have a look"})
        assert reply.json()["status"] == "completed", reply.text
        events = http.get(f"/sessions/{sid}/events").text
        assert SHA not in events  # the reference is in the subagent's stream only
        served = http.get(f"/sessions/{sid}/blobs/{SHA}")
        assert served.status_code == 200 and served.content == PNG
        other = http.post("/sessions", json={}).json()["session_id"]
        assert http.get(f"/sessions/{other}/blobs/{SHA}").status_code == 404
