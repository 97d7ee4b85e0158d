"""The blob route and forks: a live fork keeps its origin's images after the origin is
deleted; deleting the fork too frees them."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import httpx

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
