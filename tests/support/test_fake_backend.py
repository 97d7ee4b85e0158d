"""The in-process fake LLM answers as the HTTP fake does through the Ollama backend: the
same chunks, the same errors, the same record of what was asked."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import pytest

from navi.llm.base import LLMBackend
from navi.llm.errors import (
    IncompleteStream,
    LLMError,
    LLMServerError,
    LLMTimeout,
    ModelNotFound,
    StreamError,
)
from navi.llm.ollama import OllamaBackend
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, FinalChunk, LLMOptions, StreamChunk, TextPiece, ToolSpec
from tests.support.fake_backend import NOWHERE, FakeLLM
from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply, ScriptedLLM
from tests.support.helpers import drain

pytestmark = pytest.mark.anyio

SETTINGS = LLMSettings(first_chunk_timeout=5.0, chunk_timeout=5.0, connect_timeout=5.0)
HELLO = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="hi")]
TOOLS = [ToolSpec(name="get_time", description="The time.")]
WEATHER = FakeToolCall(name="get_weather", arguments={"city": "Paris"})

SCRIPTS = {
    "text": [Reply(text="Hello there, friend.", prompt_tokens=12)],
    "thinking and tools": [Reply(thinking="Let me see.", tool_calls=[WEATHER, WEATHER])],
    "old server ids": [Reply(tool_calls=[WEATHER], tool_call_ids="none")],
    "delays": [Reply(text="a b c", delay_first=0.01, delay=0.005)],
    "thinking refused": [Reply.no_thinking(), Reply(text="without thinking")],
}
ERRORS: dict[str, tuple[Reply, type[Exception]]] = {
    "model not found": (Reply.model_not_found(), ModelNotFound),
    "server error": (Reply(error_before="overloaded", error_status=503), LLMServerError),
    "error mid-stream": (Reply(text="a b", error_during="runner died"), StreamError),
    "dropped": (Reply(text="a b c", drop_after=1), IncompleteStream),
    "no final line": (Reply(text="a b c", end_after=2), IncompleteStream),
    "empty body": (Reply(empty_body=True), IncompleteStream),
}


async def over_http(
    script: list[Reply], run: Any, settings: LLMSettings = SETTINGS
) -> tuple[Any, ScriptedLLM]:
    async with FakeLLMServer(script) as fake:
        backend = OllamaBackend(settings, url=fake.url)
        try:
            return await run(backend), fake
        finally:
            await backend.aclose()


async def in_process(
    script: list[Reply], run: Any, settings: LLMSettings = SETTINGS
) -> tuple[Any, ScriptedLLM]:
    async with FakeLLM(script) as fake:
        backend = fake.backend(settings)
        try:
            return await run(backend), fake
        finally:
            await backend.aclose()


async def stream(backend: LLMBackend) -> list[StreamChunk]:
    return await drain(backend.stream_complete(HELLO, TOOLS, LLMOptions(temperature=0.2)))


@pytest.mark.parametrize("case", list(SCRIPTS))
async def test_the_same_chunks_and_requests_as_over_http(case: str) -> None:
    think = LLMSettings(first_chunk_timeout=5.0, chunk_timeout=5.0, think=True)
    http_chunks, http = await over_http(SCRIPTS[case], stream, think)
    chunks, fake = await in_process(SCRIPTS[case], stream, think)
    assert chunks == http_chunks
    assert fake.requests == http.requests and len(fake.requests) == len(SCRIPTS[case])
    assert (fake.completed, fake.disconnects) == (http.completed, http.disconnects)


async def failure(backend: LLMBackend) -> LLMError:
    with pytest.raises(LLMError) as caught:
        await stream(backend)
    return caught.value


@pytest.mark.parametrize("case", list(ERRORS))
async def test_the_same_errors_as_over_http(case: str) -> None:
    reply, expected = ERRORS[case]
    over_the_wire, _ = await over_http([reply], failure)
    here, _ = await in_process([reply], failure)
    assert type(here) is type(over_the_wire) is expected
    if case != "dropped":  # (over HTTP, the message names the transport's own error)
        wire_url = over_the_wire.message.split(" at ")[1].split(" ")[0].rstrip(".:")
        assert here.message == over_the_wire.message.replace(wire_url, NOWHERE)


async def test_a_stop_in_a_stall_ends_the_stream_and_counts_a_disconnect() -> None:
    stop = StopSignal()

    async def stopped(backend: LLMBackend) -> list[StreamChunk]:
        got: list[StreamChunk] = []
        async with aclosing(backend.stream_complete(HELLO, stop=stop)) as chunks:
            async for chunk in chunks:
                got.append(chunk)
                if chunk == TextPiece("a "):
                    stop.set()
        return got

    chunks, fake = await in_process([Reply(text="a b c", stall_after=1, delay=0.001)], stopped)
    assert chunks == [TextPiece("a "), FinalChunk(finish_reason="stopped")]
    assert fake.disconnects == 1 and fake.completed == 0


async def test_a_silent_model_times_out() -> None:
    quick = LLMSettings(first_chunk_timeout=0.05, chunk_timeout=5.0)
    with pytest.raises(LLMTimeout):
        await in_process([Reply(text="late", delay_first=30)], stream, quick)


async def test_nothing_scripted_is_a_server_error_that_says_so() -> None:
    with pytest.raises(LLMServerError, match="no scripted reply left"):
        await in_process([], stream)


async def test_the_responder_sees_the_request_and_waiters_wake() -> None:
    async with FakeLLM(responder=lambda r: Reply(text=r.body["messages"][-1]["content"])) as fake:
        backend = fake.backend(SETTINGS, model="m:1b")

        async def wait_then_count() -> None:
            await fake.wait_for_requests(1)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_then_count)
                completion = await backend.complete(HELLO)
        assert completion.content == "hi" and completion.model == "m:1b"
        assert fake.received[0].path == "/api/chat" and fake.requests[0]["model"] == "m:1b"


async def test_models_and_windows_as_the_http_fake_shows_them() -> None:
    async def facts(backend: LLMBackend) -> tuple[list[str], int, int]:
        models = [m.name for m in await backend.list_models()]
        known = await backend.context_window("fake-model:latest", 65536)
        unknown = await backend.context_window("other", 4096)
        return models, known, unknown

    assert (await in_process([], facts))[0] == (await over_http([], facts))[0]
