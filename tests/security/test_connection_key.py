"""The settings page's LLM connection as an attacker meets it: a non-admin may neither
verify nor save one, a verify is held to the same outbound checks as a save, a key
with control characters or of any length is refused, and a saved API key is in no
answer, log line, event or export — only in a file of the data folder (mode 0600),
from which a restarted server takes it."""

from __future__ import annotations

import os
import stat

import pytest

from tests.security.conftest import NaviServerProcess, StartNavi
from tests.support.fake_llm import FakeLLMServer

ALICE = "alice-token-" + "a" * 20
BOB = "bob-token-" + "b" * 20
KEY = "sk-never-shown-7f3a9c1e5b"
USERS = [
    {"id": "alice", "token": ALICE, "role": "admin"},
    {"id": "bob", "token": BOB, "role": "user"},
]


@pytest.fixture
def server(start_navi: StartNavi) -> NaviServerProcess:
    return start_navi(users=USERS, token=ALICE, canary_row=False, env={"LOG_LEVEL": "DEBUG"})


def test_the_connection_is_an_admins_and_its_key_stays_in_its_file(
    server: NaviServerProcess,
) -> None:
    with FakeLLMServer.in_thread(models=("gpt-fake",), api_key=KEY) as openai:
        wanted = {"backend_type": "openai", "backend_url": f"{openai.url}/v1", "api_key": KEY}
        with server.client(token=ALICE) as alice, server.client(token=BOB) as bob:
            for method, path in (("POST", "/settings/connection/verify"), ("PATCH", "/settings")):
                refused = bob.request(method, path, json=wanted)
                assert refused.status_code == 403, refused.text
            bad_urls = ("http://169.254.169.254/v1", f"http://127.0.0.1:{server.port}/v1")
            for url in bad_urls:
                checked = alice.post(
                    "/settings/connection/verify", json={**wanted, "backend_url": url}
                )
                assert checked.status_code == 422, (url, checked.text)
            for key in ("sk-with\nnewline", "sk-with space", "k" * 5000):
                bad = alice.patch("/settings", json={**wanted, "api_key": key})
                assert 400 <= bad.status_code < 500, bad.text
            saved = alice.patch("/settings", json=wanted)
            assert saved.status_code == 200, saved.text
            session = alice.post("/sessions", json={}).json()["session_id"]
            answers = [
                saved.text,
                alice.get("/settings").text,
                bob.get("/settings").text,
                alice.get(f"/sessions/{session}/events").text,
                alice.get("/llm/status").text,
                alice.get("/health").text,
            ]
            for answer in answers:
                assert KEY not in answer
            assert "url" not in bob.get("/settings").json()["backend"]
            assert "api_key_hint" not in bob.get("/settings").json()
        [key_file] = server.root.rglob("secrets/llm_api_key")  # in the data folder
        assert key_file.read_text() == KEY
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        server.restart()  # the saved connection and its key are used again
        with server.client(token=ALICE) as alice:
            assert alice.get("/settings").json()["backend"]["name"] == "openai"
            verified = alice.post(
                "/settings/connection/verify",
                json={"backend_type": "openai", "backend_url": f"{openai.url}/v1"},
            )
            assert verified.status_code == 200, verified.text  # with the saved key
        server.stop()
    assert KEY not in server.logs()
    databases = list(server.root.rglob("*.db*"))
    assert databases  # the event log, and its write-ahead log if any
    for stored in databases:
        assert KEY.encode() not in stored.read_bytes(), stored
