"""The settings routes as an attacker meets them: another user's settings are never
read nor written, a non-admin cannot point the server at another LLM URL, an admin
cannot point it at cloud metadata or Navi itself, garbage and oversized bodies get a
clear 4xx (and change nothing), and a page of another origin is refused."""

from __future__ import annotations

import httpx
import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, fresh

ALICE = "alice-token-" + "a" * 20
BOB = "bob-token-" + "b" * 20
USERS = [
    {"id": "alice", "token": ALICE, "role": "admin"},
    {"id": "bob", "token": BOB, "role": "user"},
]


@pytest.fixture(scope="module")
def _server(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(users=USERS, token=ALICE, canary_row=False)


@pytest.fixture
def server(_server: NaviServerProcess) -> NaviServerProcess:
    """Alice (admin) and Bob: one server for the module. A test that changes a user's
    settings compares with what it found, not with the defaults."""
    return fresh(_server)


def test_each_user_reads_and_writes_only_their_own_settings(server: NaviServerProcess) -> None:
    with server.client(token=ALICE) as alice, server.client(token=BOB) as bob:
        saved = alice.patch(
            "/settings", json={"model": "alice-model", "tool_policy": {"terminal": "auto"}}
        )
        assert saved.status_code == 200, saved.text
        mine = bob.get("/settings").json()
        assert (mine["model"], mine["tool_policy"]) == ("", {})
        assert bob.patch("/settings", json={"tool_policy": {"terminal": "deny"}}).status_code == 200
        assert alice.get("/settings").json()["tool_policy"] == {"terminal": "auto"}
        # No path names a user: these are not routes at all.
        for path in ("/settings/alice", "/settings?user=alice", "/settings/../settings/alice"):
            response = bob.get(path)
            assert response.status_code in (200, 404), path
            if response.status_code == 200:
                assert response.json()["model"] == "", path  # still bob's own
        # Bob may not pick the model of Alice's chat, nor learn that it exists.
        chat = server.create_session(token=ALICE)
        refused = bob.patch(f"/sessions/{chat}/model", json={"model": "x"})
        assert refused.status_code == 404
        assert alice.get(f"/sessions/{chat}").json()["model"] == "alice-model"  # her default
    with httpx.Client(base_url=server.url) as anonymous:
        assert anonymous.get("/settings").status_code == 401
        assert anonymous.patch("/settings", json={"think": "off"}).status_code == 401
        assert anonymous.get("/llm/status").status_code == 401


def test_only_an_admin_may_change_the_backend_url_and_only_to_an_llm_address(
    server: NaviServerProcess,
) -> None:
    with server.client(token=ALICE) as alice, server.client(token=BOB) as bob:
        before = alice.get("/settings").json()
        assert "url" not in bob.get("/settings").json()["backend"]  # not even shown
        assert "backend_url" not in bob.get("/settings").json()
        refused = bob.patch("/settings", json={"backend_url": "http://127.0.0.1:1"})
        assert refused.status_code == 403 and "admin" in refused.json()["error"]
        bad = [
            "http://169.254.169.254/latest/meta-data",  # cloud metadata
            "http://metadata.google.internal/",
            "http://[fe80::1]:11434",  # link-local
            f"http://127.0.0.1:{server.port}",  # Navi itself
            "file:///etc/passwd",
            "gopher://127.0.0.1:70",
            "http://user:secret@127.0.0.1:11434",
            "http://",
            "http://[::1",
        ]
        for url in bad:
            response = alice.patch("/settings", json={"backend_url": url})
            assert response.status_code == 422, (url, response.text)
            assert response.json()["error"], url
        after = alice.get("/settings").json()
        assert after["backend"] == before["backend"] and after["backend_url"] == ""


def test_garbage_and_oversized_bodies_get_a_clear_4xx(server: NaviServerProcess) -> None:
    json_headers = {"content-type": "application/json"}
    with server.client(token=BOB) as bob:
        before = bob.get("/settings").json()
        cases: list[tuple[bytes, dict[str, str], int]] = [
            (b"{not json", json_headers, 400),
            (b"\xff\xfe", json_headers, 400),
            (b"", json_headers, 400),
            (b"[]", json_headers, 422),
            (b'{"think": "maybe"}', json_headers, 422),
            (b'{"tool_policy": {"terminal": "yolo"}}', json_headers, 422),
            (b'{"tool_policy": {"bad name!": "ask"}}', json_headers, 422),
            (b'{"tool_policy": ["terminal"]}', json_headers, 422),
            (b'{"model": "a\\nb"}', json_headers, 422),
            (b'{"model": "' + b"m" * 201 + b'"}', json_headers, 422),
            (b'{"role": "admin"}', json_headers, 422),  # unknown fields are refused
            (b'{"think": "off"}', {"content-type": "text/plain"}, 415),
        ]
        many = ",".join(f'"tool{i}": "ask"' for i in range(501))
        cases.append((('{"tool_policy": {' + many + "}}").encode(), json_headers, 422))
        cases.append((b'{"model": "' + b"x" * 3_000_000 + b'"}', json_headers, 413))
        for body, headers, status in cases:
            response = bob.patch("/settings", content=body, headers=headers)
            assert response.status_code == status, (body[:60], response.text[:200])
            assert "error" in response.json()
        assert bob.get("/settings").json() == before  # nothing changed
        chat = server.create_session(token=BOB)
        assert bob.patch(f"/sessions/{chat}/model", json={"model": "a b"}).status_code == 422
        assert bob.patch(f"/sessions/{chat}/model", json={}).status_code == 422


def test_a_page_of_another_origin_cannot_change_settings(server: NaviServerProcess) -> None:
    with server.client(token=ALICE) as alice:
        before = alice.get("/settings").json()
        for path, body in (
            ("/settings", {"think": "off"}),
            ("/settings", {"backend_url": "http://127.0.0.1:1"}),
        ):
            response = alice.patch(path, json=body, headers={"origin": "http://evil.example"})
            assert response.status_code == 403, response.text
        settings = alice.get("/settings").json()
        assert settings == before and settings["backend_url"] == ""
