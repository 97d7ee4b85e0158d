"""The model Navi chooses is told on public surfaces (``GET /health`` needs no login):
the words name models, never the LLM server's address; and the models an Ollama lists
(its names are its own) are offered only as the names they are, never run or followed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from navi.llm.settings import LLMSettings
from navi.server.auth import User, Users
from tests.support.fake_llm import FakeLLMServer
from tests.support.navi_server import RunningServer, run_server

ODD = "<img src=x onerror=alert(1)>:latest"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    caps = {ODD: ["completion", "tools"]}
    with FakeLLMServer.in_thread(models=(ODD,), capabilities=caps, only_listed=True) as fake:
        llm = LLMSettings(ollama_host=fake.url, default_model="llama3.1", num_ctx=8192)
        alice = User(id="alice", role="user", token="secret-token")
        users = Users([alice], open_access=False)
        with run_server(tmp_path, fake, llm=llm, users=users) as running:
            yield running


def test_health_says_why_without_the_servers_address(server: RunningServer) -> None:
    answer = httpx.get(server.url + "/health", timeout=30)  # no token: public
    assert answer.status_code == 200
    body = answer.json()
    assert body["model"] == ODD and body["model_reason"].startswith("llama3.1 is not installed")
    port = str(httpx.URL(server.fake_llm.url).port)
    for secret in ("127.0.0.1", port, "http", "localhost"):
        assert secret not in answer.text
    # The reason and the names stay data (JSON strings) for the page to show as text.
    assert answer.headers["content-type"].startswith("application/json")


def test_llm_status_needs_a_login(server: RunningServer) -> None:
    assert httpx.get(server.url + "/llm/status", timeout=30).status_code == 401
    ok = httpx.get(
        server.url + "/llm/status", headers={"Authorization": "Bearer secret-token"}, timeout=30
    )
    assert ok.status_code == 200 and ok.json()["model"] == ODD
