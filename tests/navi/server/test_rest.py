"""The REST API against a real server on 127.0.0.1 (uvicorn) and the fake LLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fake_llm import Reply
from tests.support.navi_server import RunningServer, navi_server_for


def client(server: RunningServer, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def test_health_profiles_and_tools(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        health = http.get("/health").json()
        assert health["status"] == "ok" and health["backend"] == "ollama"
        profiles = http.get("/agents/profiles").json()
        assert {p["id"] for p in profiles} == {"secretary", "server_admin", "smart_home"}
        assert set(profiles[0]) >= {
            "id",
            "name",
            "description",
            "enabled_tools",
            "llm_backend",
            "model",
        }
        tools = http.get("/agents/tools").json()
        names = {t["name"] for t in tools}
        assert {"filesystem", "terminal", "todo", "switch_profile"} <= names
        assert all("parameters" in t for t in tools)
        # The test rig's NAVI_TOOL_APPROVAL=auto is every tool's default.
        assert {t["default_approval"] for t in tools} == {"auto"}


def test_each_tool_says_its_own_default(tmp_path: Path) -> None:
    """What a tool does when no profile, user setting nor operator names it."""
    with navi_server_for(tmp_path, tool_approval="") as server, client(server) as http:
        defaults = {t["name"]: t["default_approval"] for t in http.get("/agents/tools").json()}
    assert (defaults["terminal"], defaults["todo"]) == ("ask", "auto")
    assert defaults["filesystem"] == "varies"  # reads run, writes ask


def test_session_lifecycle(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(Reply(text="Hi! How can I help?"))
    with client(navi_server) as http:
        created = http.post("/sessions", json={"profile_id": "secretary"})
        assert created.status_code == 201
        body = created.json()
        assert set(body) == {"session_id", "profile_id", "created_at"}
        sid = body["session_id"]
        assert body["created_at"].endswith("+00:00")

        reply = http.post(f"/sessions/{sid}/messages", json={"content": "Hello"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["content"] == "Hi! How can I help?"

        session = http.get(f"/sessions/{sid}").json()
        assert [(m["role"], m["content"]) for m in session["messages"]] == [
            ("user", "Hello"),
            ("assistant", "Hi! How can I help?"),
        ]
        assert session["max_context_tokens"] == 8192 and session["last_seq"] > 0
        assert set(session) >= {
            "session_id", "profile_id", "created_at", "last_active", "context_token_count",
            "max_context_tokens", "messages",
        }  # fmt: skip

        listing = http.get("/sessions").json()
        assert listing[0]["session_id"] == sid
        assert listing[0]["preview"].endswith("How can I help?")
        assert listing[0]["message_count"] == 2

        assert http.patch(f"/sessions/{sid}/pin", json={"pinned": True}).json()["pinned"]
        assert http.get("/sessions").json()[0]["pinned"] is True
        assert http.patch(f"/sessions/{sid}/pin").json()["pinned"] is False  # toggles

        context = http.get(f"/sessions/{sid}/context").json()
        assert [m["role"] for m in context["messages"]] == ["user", "assistant"]

        events = http.get(f"/sessions/{sid}/events", params={"after": 2}).text.splitlines()
        assert events and all('"seq"' in line for line in events)

        assert http.delete(f"/sessions/{sid}").status_code == 200
        assert http.get(f"/sessions/{sid}").status_code == 404
        assert all(s["session_id"] != sid for s in http.get("/sessions").json())


def test_search_finds_titles_and_previews(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(Reply(text="Paris is lovely in spring."), Reply(text="Sure."))
    with client(navi_server) as http:
        a = http.post("/sessions", json={}).json()["session_id"]
        http.post(f"/sessions/{a}/messages", json={"content": "Trip ideas for France"})
        b = http.post("/sessions", json={}).json()["session_id"]
        http.post(f"/sessions/{b}/messages", json={"content": "Fix my printer"})
        assert [s["session_id"] for s in http.get("/sessions", params={"q": "france"}).json()] == [
            a
        ]
        assert [s["session_id"] for s in http.get("/sessions", params={"q": "spring"}).json()] == [
            a
        ]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/sessions", {"profile_id": "pirate"}, 404),
        ("POST", "/sessions", b"{not json", 400),
        ("POST", "/sessions", {"profile_id": 5}, 422),
        ("GET", "/sessions/nope", None, 404),
        ("GET", "/sessions/nope/context", None, 404),
        ("POST", "/sessions/nope/stop", None, 404),
        ("POST", "/sessions/{sid}/messages", {"content": ""}, 422),
        ("POST", "/sessions/{sid}/messages", {}, 422),
        ("POST", "/sessions/{sid}/messages", None, 400),
        ("PATCH", "/sessions/{sid}/pin", {"pinned": "yes"}, 422),
        ("GET", "/sessions/{sid}/events?after=x", None, 400),
        ("GET", "/no/such/route", None, 404),
        ("DELETE", "/agents/profiles", None, 405),
    ],
)
def test_bad_requests_get_clear_json_errors(
    navi_server: RunningServer, method: str, path: str, body: Any, status: int
) -> None:
    with client(navi_server) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        kwargs: dict[str, Any] = {}
        if isinstance(body, bytes):
            kwargs.update(content=body, headers={"content-type": "application/json"})
        elif body is not None:
            kwargs["json"] = body
        response = http.request(method, path.replace("{sid}", sid), **kwargs)
        assert response.status_code == status, response.text
        assert isinstance(response.json()["error"], str)
        # The session is intact after every bad request.
        assert http.get(f"/sessions/{sid}").status_code == 200


def test_a_second_message_while_running_is_409(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(Reply(text="slow " * 50, delay=0.02))
    with client(navi_server) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        import threading

        first: dict[str, Any] = {}
        worker = threading.Thread(
            target=lambda: first.update(
                http.post(f"/sessions/{sid}/messages", json={"content": "one"}).json()
            )
        )
        worker.start()
        import time

        deadline = time.monotonic() + 10
        while not http.get(f"/sessions/{sid}").json()["run_active"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        second = http.post(f"/sessions/{sid}/messages", json={"content": "two"})
        assert second.status_code == 409 and "already active" in second.json()["error"]
        assert http.post(f"/sessions/{sid}/stop").json()["stopped"] is True
        worker.join(10)
        assert first["status"] == "stopped"


def test_file_upload_and_its_limit(tmp_path: Path) -> None:
    with navi_server_for(tmp_path, session_files_max_size_mb=1) as server, client(server) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        ok = http.post(
            f"/sessions/{sid}/files",
            files={"file": ("../../evil name.txt", b"hello", "text/plain")},
        )
        assert ok.status_code == 201, ok.text
        info = ok.json()
        assert info["name"] == "evil name.txt" and info["size"] == 5
        # The path is relative to the session's folder (no server path is shown).
        assert info["path"] == "evil name.txt"
        assert (tmp_path / "files" / sid / info["path"]).read_bytes() == b"hello"
        big = http.post(
            f"/sessions/{sid}/files", files={"file": ("big.bin", b"x" * (2 * 1024 * 1024))}
        )
        assert big.status_code == 413 and "limit" in big.json()["error"]
        assert http.post(f"/sessions/{sid}/files", data={"x": "1"}).status_code == 415
        http.delete(f"/sessions/{sid}")
        assert not (tmp_path / "files" / sid).exists()


def test_tokens_and_users_keep_sessions_apart(tmp_path: Path) -> None:
    from navi.server.auth import User, Users

    users = Users(
        [User(id="alice", token="a" * 20, role="admin"), User(id="bob", token="b" * 20)],
        open_access=False,
    )
    with navi_server_for(tmp_path, users=users) as server:
        with client(server) as anonymous:
            assert anonymous.get("/sessions").status_code == 401
            assert anonymous.get("/health").status_code == 200
        with client(server, "a" * 20) as alice, client(server, "b" * 20) as bob:
            sid = alice.post("/sessions", json={}).json()["session_id"]
            assert [s["session_id"] for s in alice.get("/sessions").json()] == [sid]
            assert bob.get("/sessions").json() == []
            assert bob.get(f"/sessions/{sid}").status_code == 404
            assert bob.post(f"/sessions/{sid}/stop").status_code == 404
            assert bob.delete(f"/sessions/{sid}").status_code == 404
            assert alice.get(f"/sessions/{sid}").status_code == 200
        with client(server, "wrong-token-wrong") as intruder:
            assert intruder.get("/sessions").status_code == 401


def test_refuses_to_start_on_a_public_address_without_a_token() -> None:
    from navi.server.auth import AuthConfigError, Users

    with pytest.raises(AuthConfigError, match="NAVI_API_TOKEN"):
        Users.configure(host="0.0.0.0", api_token="", users_file="")
    assert Users.configure(host="0.0.0.0", api_token="t" * 20, users_file="").users
    assert Users.configure(host="127.0.0.1", api_token="", users_file="").open_access
