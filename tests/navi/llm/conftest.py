from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.settings import LLMSettings
from tests.support.fake_llm import FakeLLMServer

# Short enough that timeout tests are quick, long enough never to fire by accident.
TEST_SETTINGS = LLMSettings(first_chunk_timeout=10.0, chunk_timeout=10.0, connect_timeout=5.0)


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def ollama(fake: FakeLLMServer) -> AsyncIterator[OllamaBackend]:
    backend = OllamaBackend(TEST_SETTINGS, url=fake.url, model="qwen3:4b")
    yield backend
    await backend.aclose()


@pytest.fixture
async def openai(fake: FakeLLMServer) -> AsyncIterator[OpenAICompatibleBackend]:
    backend = OpenAICompatibleBackend(TEST_SETTINGS, url=fake.url + "/v1", model="qwen3:4b")
    yield backend
    await backend.aclose()
