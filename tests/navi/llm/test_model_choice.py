"""The first message works with the models the user has: a configured model Ollama does
not have is replaced by an installed one that supports tools, unless it was pinned."""

from __future__ import annotations

import pytest

from navi.llm.auto import AutoBackend, model_choice_of
from navi.llm.missing import MissingBackend
from navi.llm.model_choice import is_installed
from navi.llm.selection import select_backend
from navi.llm.settings import LLMSettings
from tests.support.fake_llm import FakeLLMServer

MODELS = ("llama3.2:3b", "qwen3:8b")
TOOLS = {m: ["completion", "tools"] for m in MODELS}

pytestmark = pytest.mark.anyio


def fake_ollama(**kw: object) -> FakeLLMServer:
    kw.setdefault("capabilities", TOOLS)
    return FakeLLMServer(models=MODELS, only_listed=True, **kw)  # type: ignore[arg-type]


def test_names_match_as_ollama_matches_them() -> None:
    assert is_installed("qwen3:8b", ["llama3.2:3b", "qwen3:8b"])
    assert is_installed("llama3.1", ["llama3.1:latest"])
    assert not is_installed("llama3.1", ["llama3.1:8b"])
    assert not is_installed("qwen3", ["qwen3:8b"])


@pytest.mark.parametrize("backend", ["auto", "ollama"])
async def test_an_unpinned_default_that_is_missing_gives_way_to_an_installed_tool_model(
    backend: str,
) -> None:
    async with fake_ollama() as fake:
        settings = LLMSettings(backend=backend, ollama_host=fake.url, default_model="llama3.1")  # type: ignore[arg-type]
        chosen = await select_backend(settings)
        try:
            choice = model_choice_of(chosen)
            assert chosen.model == "llama3.2:3b"  # the first listed that supports tools
            assert choice is not None and not choice.missing
            assert choice.reason == (
                "llama3.1 is not installed; using llama3.2:3b, an installed model that "
                "supports tools"
            )
            assert fake.url not in choice.reason and "127.0.0.1" not in choice.reason
        finally:
            await chosen.aclose()


async def test_models_without_tools_are_passed_over() -> None:
    caps = {"llama3.2:3b": ["completion"], "qwen3:8b": ["completion", "tools", "thinking"]}
    async with fake_ollama(capabilities=caps) as fake:
        chosen = await select_backend(LLMSettings(ollama_host=fake.url, default_model="x:1b"))
        try:
            assert chosen.model == "qwen3:8b"
        finally:
            await chosen.aclose()


async def test_no_installed_tool_model_keeps_the_default_and_says_it_is_missing() -> None:
    async with fake_ollama(capabilities={}) as fake:
        chosen = await select_backend(LLMSettings(ollama_host=fake.url, default_model="x:1b"))
        try:
            choice = model_choice_of(chosen)
            assert chosen.model == "x:1b"
            assert choice is not None and choice.missing
            assert choice.reason == (
                "x:1b is not installed and none of the installed models (llama3.2:3b, "
                "qwen3:8b) supports tools: `ollama pull x:1b`"
            )
        finally:
            await chosen.aclose()


async def test_a_pinned_model_stays_and_is_reported_missing() -> None:
    async with fake_ollama() as fake:
        settings = LLMSettings.from_env(
            {"OLLAMA_HOST": fake.url, "OLLAMA_DEFAULT_MODEL": "llama3.1:70b"}
        )
        assert settings.model_pinned
        chosen = await select_backend(settings)
        try:
            choice = model_choice_of(chosen)
            assert chosen.model == "llama3.1:70b"
            assert choice is not None and choice.missing
            assert "llama3.1:70b is not installed in Ollama" in choice.reason
            assert "ollama pull llama3.1:70b" in choice.reason
        finally:
            await chosen.aclose()


async def test_a_profiles_model_is_pinned_too() -> None:
    async with fake_ollama() as fake:
        settings = LLMSettings(ollama_host=fake.url, default_model="llama3.1")
        chosen = await select_backend(settings, backend="ollama", model="mistral:7b")
        try:
            assert chosen.model == "mistral:7b"
            choice = model_choice_of(chosen)
            assert choice is not None and choice.missing
        finally:
            await chosen.aclose()


async def test_an_installed_default_is_used_without_a_reason() -> None:
    async with fake_ollama() as fake:
        chosen = await select_backend(LLMSettings(ollama_host=fake.url, default_model="qwen3:8b"))
        try:
            choice = model_choice_of(chosen)
            assert chosen.model == "qwen3:8b"
            assert choice is not None and choice.reason == "" and not choice.missing
        finally:
            await chosen.aclose()


async def test_ollama_found_by_a_later_probe_gets_a_model_it_has() -> None:
    async with fake_ollama() as fake:
        settings = LLMSettings(ollama_host=fake.url, default_model="llama3.1")
        auto = AutoBackend(MissingBackend("none", num_ctx=8192), settings, probe_timeout=2.0)
        try:
            assert model_choice_of(auto) is None
            assert await auto.before_turn(now=True)
            assert auto.model == "llama3.2:3b"
            choice = model_choice_of(auto)
            assert choice is not None and "using llama3.2:3b" in choice.reason
        finally:
            await auto.aclose()
