"""Through a real server and a fake Ollama that has llama3.2:3b and qwen3:8b only (404
for any other model, as Ollama answers): the first message works, /health and
/llm/status say which model and why, and Regenerate keeps the chat's chosen model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from navi.llm.settings import LLMSettings
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.navi_server import RunningServer, run_server

MODELS = ("llama3.2:3b", "qwen3:8b")
REASON = "llama3.1 is not installed; using llama3.2:3b, an installed model that supports tools"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    caps = {m: ["completion", "tools"] for m in MODELS}
    with FakeLLMServer.in_thread(
        models=MODELS, capabilities=caps, only_listed=True, default=Reply(text="Hi there.")
    ) as fake:
        llm = LLMSettings(
            backend="auto",
            ollama_host=fake.url,
            default_model="llama3.1",  # the built-in default, not pinned, not installed
            num_ctx=8192,
            first_chunk_timeout=10.0,
            chunk_timeout=10.0,
        )
        with run_server(tmp_path, fake, llm=llm) as running:
            yield running


def wait_for_answer(http: httpx.Client, session_id: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        session = http.get(f"/sessions/{session_id}").json()
        messages = session.get("messages", [])
        if messages and messages[-1]["role"] == "assistant" and not session.get("run_active"):
            return
        time.sleep(0.05)
    raise AssertionError(f"no answer in {session_id}")


def test_health_and_status_say_which_model_and_why(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        health = http.get("/health")
        body = health.json()
        assert body["model"] == "llama3.2:3b"
        assert body["model_reason"] == REASON and body["model_missing"] is False
        assert server.fake_llm.url not in health.text and "127.0.0.1" not in health.text
        status = http.get("/llm/status").json()
        assert status["model"] == "llama3.2:3b" and status["model_reason"] == REASON


def test_the_first_message_works_and_regenerate_keeps_the_chosen_model(
    server: RunningServer,
) -> None:
    fake = server.fake_llm
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid = http.post("/sessions", json={}).json()["session_id"]
        sent = http.post(f"/sessions/{sid}/messages", json={"content": "hello"})
        assert sent.status_code < 300, sent.text
        wait_for_answer(http, sid)
        assert [r["model"] for r in fake.requests] == ["llama3.2:3b"]
        # The user picks another model for this chat, then regenerates the answer: a
        # fork just before the message, where it is sent again (as the web client does).
        assert http.patch(f"/sessions/{sid}/model", json={"model": "qwen3:8b"}).status_code == 200
        user_seq = next(m["seq"] for m in http.get(f"/sessions/{sid}").json()["messages"])
        fork = http.post(f"/sessions/{sid}/fork", json={"at": user_seq - 1})
        assert fork.status_code == 201, fork.text
        forked = fork.json()["session_id"]
        assert http.get(f"/sessions/{forked}").json()["model"] == "qwen3:8b"
        http.post(f"/sessions/{forked}/messages", json={"content": "hello"})
        wait_for_answer(http, forked)
        assert [r["model"] for r in fake.requests] == ["llama3.2:3b", "qwen3:8b"]
