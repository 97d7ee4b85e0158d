"""The settings page's routes, the chat's model picker and the LLM's status, against a
real server and the fake LLM: what is saved is what the next run uses, and the log
says so."""

from __future__ import annotations

import httpx

from tests.support.fake_llm import Reply
from tests.support.navi_server import RunningServer


def client(server: RunningServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30)


def test_settings_start_empty_and_keep_what_is_saved(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        first = http.get("/settings").json()
        assert (first["model"], first["think"], first["tool_policy"]) == ("", "default", {})
        assert first["may_change_backend"] is True  # open access: the local user is an admin
        assert first["backend"]["name"] == "ollama" and first["backend_url"] == ""
        saved = http.patch(
            "/settings", json={"think": "off", "tool_policy": {"terminal": "ask", "todo": "auto"}}
        )
        assert saved.status_code == 200, saved.text
        assert saved.json()["tool_policy"] == {"terminal": "ask", "todo": "auto"}
        again = http.patch("/settings", json={"model": "other-model:7b"}).json()
        # Fields not given stay as they were.
        assert (again["model"], again["think"]) == ("other-model:7b", "off")
        assert http.get("/settings").json() == again


async def test_a_patched_tool_policy_is_saved(navi_server: RunningServer) -> None:
    from navi.user_settings import SettingsService

    with client(navi_server) as http:
        http.patch("/settings", json={"tool_policy": {"terminal": "deny"}})
    from events.factory import store_for_url

    async with store_for_url(navi_server.settings.database_url) as store:
        assert (await SettingsService(store).get("local")).tool_policy == {"terminal": "deny"}
        assert (await SettingsService(store).get("nobody")).tool_policy == {}


def test_the_chats_model_and_thinking_reach_the_next_llm_call(navi_server: RunningServer) -> None:
    fake = navi_server.fake_llm
    fake.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    with client(navi_server) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        assert http.get(f"/sessions/{sid}").json()["model"] == ""
        http.post(f"/sessions/{sid}/messages", json={"content": "a"})
        default_model = fake.requests[-1]["model"]
        chosen = http.patch(f"/sessions/{sid}/model", json={"model": "picked:1b"})
        assert chosen.json() == {"session_id": sid, "model": "picked:1b"}
        http.patch("/settings", json={"think": "off"})
        http.post(f"/sessions/{sid}/messages", json={"content": "b"})
        assert fake.requests[-1]["model"] == "picked:1b"
        assert fake.requests[-1].get("think") in (False, None)
        session = http.get(f"/sessions/{sid}").json()
        assert session["model"] == "picked:1b"
        events = [e for e in http.get(f"/sessions/{sid}/events").text.splitlines() if e]
        assert any('"session.model_chosen"' in e and "picked:1b" in e for e in events)
        # Back to the profile's model.
        http.patch(f"/sessions/{sid}/model", json={"model": ""})
        http.post(f"/sessions/{sid}/messages", json={"content": "c"})
        assert fake.requests[-1]["model"] == default_model


def test_a_new_chat_takes_the_settings_model(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        http.patch("/settings", json={"model": "for-new-chats:3b"})
        sid = http.post("/sessions", json={}).json()["session_id"]
        assert http.get(f"/sessions/{sid}").json()["model"] == "for-new-chats:3b"


def test_llm_status_and_models(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        status = http.get("/llm/status").json()
        assert status["reachable"] is True and "error" not in status
        models = http.get("/llm/models", params={"profile_id": "secretary"}).json()
        assert models["backend"] == "ollama" and models["default_model"]
        assert isinstance(models["models"], list) and models["models"]
        assert http.get("/llm/models", params={"profile_id": "nope"}).status_code == 404


def test_a_backend_url_where_nothing_answers_is_refused(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        before = http.get("/settings").json()
        # A closed port on this machine: not saved, and the reason is said.
        saved = http.patch("/settings", json={"backend_url": "http://127.0.0.1:9"})
        assert saved.status_code == 422, saved.text
        assert "Cannot reach the LLM server at http://127.0.0.1:9" in saved.json()["error"]
        assert http.get("/settings").json() == before
        assert http.get("/llm/status").json()["reachable"] is True
