"""The settings page's LLM connection against a real server, the fake Ollama it starts
with and a fake OpenAI-compatible server that wants an API key: Verify lists the models
or says exactly why not, a save that cannot be used is refused and changes nothing, and
the key is kept server-side, shown back masked only."""

from __future__ import annotations

import os
import stat

import httpx

from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.navi_server import RunningServer

KEY = "sk-test-0123456789abcdef"


def client(server: RunningServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30)


def test_verify_lists_the_models_or_says_why_not(navi_server: RunningServer) -> None:
    with (
        client(navi_server) as http,
        FakeLLMServer.in_thread(models=("gpt-fake-1", "gpt-fake-2"), api_key=KEY) as openai,
    ):
        ollama = http.post(
            "/settings/connection/verify",
            json={"backend_type": "ollama", "backend_url": navi_server.fake_llm.url},
        )
        assert ollama.status_code == 200, ollama.text
        assert ollama.json() == {"ok": True, "backend": "ollama", "models": ["fake-model:latest"]}
        wanted = {"backend_type": "openai", "backend_url": f"{openai.url}/v1"}
        no_key = http.post("/settings/connection/verify", json=wanted)
        assert no_key.status_code == 422
        assert "401" in no_key.json()["error"], no_key.text
        ok = http.post("/settings/connection/verify", json={**wanted, "api_key": KEY})
        assert ok.status_code == 200, ok.text
        assert ok.json()["models"] == ["gpt-fake-1", "gpt-fake-2"]
        assert openai.received[-1].headers["authorization"] == f"Bearer {KEY}"
        refused = http.post(
            "/settings/connection/verify",
            json={"backend_type": "openai", "backend_url": "http://127.0.0.1:9/v1"},
        )
        assert refused.status_code == 422
        assert "127.0.0.1:9" in refused.json()["error"], refused.text
        # Verifying saved nothing.
        assert http.get("/settings").json()["backend"]["name"] == "ollama"


def test_an_unusable_connection_is_not_saved(navi_server: RunningServer) -> None:
    with client(navi_server) as http, FakeLLMServer.in_thread(api_key=KEY) as openai:
        before = http.get("/settings").json()
        for change in (
            {"backend_url": "http://127.0.0.1:9"},
            {"backend_type": "openai", "backend_url": f"{openai.url}/v1"},  # no key: 401
        ):
            saved = http.patch("/settings", json=change)
            assert saved.status_code == 422, saved.text
            assert saved.json()["error"].startswith("not saved: "), saved.text
            assert http.get("/settings").json() == before
        assert not navi_server.settings.llm_key_path.exists()


def test_a_saved_openai_connection_is_used_and_its_key_kept_masked(
    navi_server: RunningServer,
) -> None:
    with (
        client(navi_server) as http,
        FakeLLMServer.in_thread(models=("gpt-fake-1",), api_key=KEY) as openai,
    ):
        saved = http.patch(
            "/settings",
            json={"backend_type": "openai", "backend_url": f"{openai.url}/v1", "api_key": KEY},
        )
        assert saved.status_code == 200, saved.text
        shown = http.get("/settings")
        assert KEY not in shown.text
        body = shown.json()
        assert (body["backend_type"], body["api_key_hint"]) == ("openai", "sk-…cdef")
        assert body["backend"]["name"] == "openai" and body["backend"]["model"] == "gpt-fake-1"
        key_file = navi_server.settings.llm_key_path
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        openai.script(Reply(text="from the OpenAI-compatible server"))
        sid = http.post("/sessions", json={}).json()["session_id"]
        http.post(f"/sessions/{sid}/messages", json={"content": "hi"})
        assert openai.requests[-1]["model"] == "gpt-fake-1"
        assert openai.received[-1].headers["authorization"] == f"Bearer {KEY}"
        # Saved again without the key: the saved one is kept.
        again = http.patch("/settings", json={"backend_url": f"{openai.url}/v1/"})
        assert again.status_code == 200, again.text
        assert again.json()["api_key_hint"] == "sk-…cdef"
        # Back to Ollama: the key goes.
        back = http.patch("/settings", json={"backend_type": "", "backend_url": ""})
        assert back.status_code == 200, back.text
        assert back.json()["backend"]["name"] == "ollama" and back.json()["api_key_hint"] == ""
        assert not key_file.exists()
