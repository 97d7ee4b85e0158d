"""``navi users add`` against the data folder of a server that runs open access (issue
29, point 5): the server picks the users file up live, and from then on every request
needs a token (REST and WebSocket); a users file that then breaks does not open the
server again.

Before: a server started without a users file never looked for one: after
``navi users add`` it stayed open to anyone on the machine until restarted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from websockets.sync.client import connect

from tests.security.conftest import NaviServerProcess, StartNavi

ROOT = Path(__file__).resolve().parents[2]


def users_add(server: NaviServerProcess, name: str, role: str = "user") -> str:
    """``navi users add`` as the operator runs it, with the server's environment; the
    token it prints."""
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "users", "add", name, "--role", role],
        cwd=ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def status_once_changed(url: str, from_status: int, wait_s: float = 15.0) -> int:
    """The status of ``GET url`` without a token once it is no longer ``from_status``."""
    deadline = time.monotonic() + wait_s
    while True:
        status = httpx.get(url, timeout=10).status_code
        if status != from_status or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def test_a_users_file_that_appears_ends_open_access(start_navi: StartNavi, tmp_path: Path) -> None:
    data = tmp_path / "navi-data"
    data.mkdir()
    server = start_navi(env={"NAVI_DATA_DIR": str(data)})
    assert httpx.get(f"{server.url}/sessions").status_code == 200  # open: no token
    token = users_add(server, "alice", role="admin")
    assert (data / "users.json").is_file()
    assert status_once_changed(f"{server.url}/sessions", 200) == 401
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/sessions", json={}).status_code == 401
        with_token = http.get("/sessions", headers={"authorization": f"Bearer {token}"})
        assert with_token.status_code == 200, with_token.text
    # The WebSocket too: without a token it is closed unauthorized (4401).
    with connect(f"{server.ws_url}/ws/sessions/{server.canary_session}", open_timeout=10) as ws:
        try:
            ws.recv(timeout=10)
        except Exception as exc:  # ConnectionClosed
            assert getattr(exc, "rcvd", None) is not None and exc.rcvd.code == 4401, exc  # type: ignore[attr-defined]
        else:
            raise AssertionError("the socket answered without a token")
    # A users file that breaks now refuses everyone; it never opens the server again.
    (data / "users.json").write_text("not json")
    os.utime(data / "users.json")
    with httpx.Client(base_url=server.url, timeout=30) as http:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert http.get("/sessions").status_code == 401
            time.sleep(0.2)
    assert "open_access_ended" in server.logs()
