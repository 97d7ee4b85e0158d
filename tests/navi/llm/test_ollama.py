"""OllamaBackend against the fake server over real HTTP: every wire fact and error."""

from __future__ import annotations

import anyio
import pytest

from navi.llm.errors import (
    IncompleteStream,
    LLMServerError,
    ModelNotFound,
    ServerUnreachable,
    StreamError,
    ThinkingNotSupported,
    ToolsNotSupported,
)
from navi.llm.ollama import OllamaBackend
from navi.llm.settings import LLMSettings
from navi.llm.types import (
    ChatMessage,
    FinalChunk,
    LLMOptions,
    StreamChunk,
    TextPiece,
    ThinkingPiece,
    ToolCall,
    ToolCallsChunk,
    ToolSpec,
)
from tests.navi.llm.conftest import TEST_SETTINGS
from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
from tests.support.helpers import drain, free_port

pytestmark = pytest.mark.anyio

HELLO = [ChatMessage(role="user", content="hello")]
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CLOCK = ToolSpec(name="get_time", description="The time")


async def test_text_streams_piece_by_piece(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(Reply(text=["Hel", "lo", " there"], prompt_tokens=12))
    chunks = await drain(ollama.stream_complete(HELLO))
    assert chunks == [
        TextPiece("Hel"),
        TextPiece("lo"),
        TextPiece(" there"),
        FinalChunk(finish_reason="stop", prompt_tokens=12, completion_tokens=3),
    ]


async def test_thinking_then_text(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(Reply(thinking=["Let me ", "think."], text="Done."))
    chunks = await drain(ollama.stream_complete(HELLO))
    assert chunks[:3] == [ThinkingPiece("Let me "), ThinkingPiece("think."), TextPiece("Done.")]
    assert isinstance(chunks[-1], FinalChunk)


async def test_one_tool_call_with_the_servers_id(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    call = FakeToolCall(id="call_abc", name="get_weather", arguments={"city": "Paris"})
    fake.script(Reply(thinking=["I should look."], tool_calls=[call]))
    chunks = await drain(ollama.stream_complete(HELLO, [WEATHER]))
    assert chunks[1] == ToolCallsChunk(
        (ToolCall(id="call_abc", name="get_weather", arguments={"city": "Paris"}),)
    )
    assert chunks[-1] == FinalChunk(
        finish_reason="tool_calls", prompt_tokens=10, completion_tokens=2
    )


async def test_several_tool_calls_each_complete(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(
        Reply(
            tool_calls=[
                FakeToolCall(name="get_weather", arguments={"city": "Paris"}),
                FakeToolCall(name="get_time"),
            ]
        )
    )
    result = await ollama.complete(HELLO, [WEATHER, CLOCK])
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {}),
    ]
    assert all(c.id for c in result.tool_calls)
    assert result.finish_reason == "tool_calls"


async def test_an_old_server_without_ids_gets_stable_ids(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    old = Reply(
        tool_call_ids="none",
        tool_calls=[
            FakeToolCall(name="get_weather", arguments={"city": "Paris"}),
            FakeToolCall(name="get_weather", arguments={"city": "Oslo"}),
        ],
    )
    fake.script(old, old)
    first = await ollama.complete(HELLO, [WEATHER])
    second = await ollama.complete(HELLO, [WEATHER])
    ids = [c.id for c in first.tool_calls]
    assert ids == [c.id for c in second.tool_calls]  # deterministic given the response
    assert len(set(ids)) == 2
    assert ids[0].startswith("call_0_") and ids[1].startswith("call_1_")


async def test_what_navi_sends(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(Reply(text="ok"))
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Look", images=("data:image/png;base64,iVBORw0KGgo=",)),
        ChatMessage(
            role="assistant",
            tool_calls=(ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),),
        ),
        ChatMessage(role="tool", content="sunny", tool_call_id="c1", tool_name="get_weather"),
    ]
    options = LLMOptions(
        model="llama3.2",
        temperature=0.3,
        num_ctx=4096,
        think="high",
        keep_alive="5m",
        max_tokens=99,
    )
    await ollama.complete(messages, [WEATHER], options)
    body = fake.requests[0]
    assert body["model"] == "llama3.2"
    assert body["stream"] is True
    assert body["think"] == "high"
    assert body["keep_alive"] == "5m"
    assert body["options"] == {"num_ctx": 4096, "temperature": 0.3, "num_predict": 99}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Look", "images": ["iVBORw0KGgo="]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]


async def test_defaults_come_from_the_settings(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(Reply(text="ok"))
    await ollama.complete(HELLO)
    body = fake.requests[0]
    assert body["model"] == "qwen3:4b"
    assert body["options"] == {"num_ctx": TEST_SETTINGS.num_ctx}
    assert body["think"] is True  # OLLAMA_THINK's default
    assert "tools" not in body and "keep_alive" not in body


async def test_tool_choice_narrows_the_offered_tools(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    fake.script(Reply(text="a"), Reply(text="b"))
    await ollama.complete(HELLO, [WEATHER, CLOCK], LLMOptions(tool_choice="none"))
    await ollama.complete(HELLO, [WEATHER, CLOCK], LLMOptions(tool_choice="get_time"))
    assert "tools" not in fake.requests[0]
    assert [t["function"]["name"] for t in fake.requests[1]["tools"]] == ["get_time"]


async def test_model_not_found_names_the_model_and_how_to_get_it(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    fake.script(Reply.model_not_found())
    with pytest.raises(ModelNotFound) as caught:
        await ollama.complete(HELLO, options=LLMOptions(model="gemma9:1b"))
    assert "'gemma9:1b'" in str(caught.value)
    assert "ollama pull gemma9:1b" in str(caught.value)
    assert not caught.value.retryable


async def test_model_without_tool_support(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(Reply.no_tools())
    with pytest.raises(ToolsNotSupported) as caught:
        await ollama.complete(HELLO, [WEATHER])
    assert "'qwen3:4b' does not support tool calling" in str(caught.value)


async def test_explicit_thinking_on_a_model_without_it_is_an_error(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    fake.script(Reply.no_thinking())
    with pytest.raises(ThinkingNotSupported) as caught:
        await ollama.complete(HELLO, options=LLMOptions(think=True))
    assert "OLLAMA_THINK" in str(caught.value)


async def test_default_thinking_falls_back_once_and_is_remembered(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    fake.script(Reply.no_thinking(), Reply(text="fine"), Reply(text="again"))
    assert (await ollama.complete(HELLO)).content == "fine"
    assert (await ollama.complete(HELLO)).content == "again"
    assert [("think" in body) for body in fake.requests] == [True, False, False]


async def test_error_in_the_middle_of_the_stream(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    fake.script(Reply(text="a b c", error_during="model runner crashed", error_after=2))
    received: list[StreamChunk] = []
    with pytest.raises(StreamError) as caught:
        async for chunk in ollama.stream_complete(HELLO):
            received.append(chunk)
    assert received == [TextPiece("a "), TextPiece("b ")]
    assert "model runner crashed" in str(caught.value)


async def test_dropped_connection_is_incomplete_and_retryable(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    fake.script(Reply(text="a b c d", drop_after=2))
    with pytest.raises(IncompleteStream) as caught:
        await drain(ollama.stream_complete(HELLO))
    assert caught.value.retryable
    assert "dropped" in str(caught.value)


async def test_stream_ending_without_done_line(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(Reply(text="a b c", end_after=3))
    with pytest.raises(IncompleteStream, match="done line"):
        await drain(ollama.stream_complete(HELLO))


async def test_a_line_that_is_not_json(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(
        Reply(raw_body='{"message":{"role":"assistant","content":"a"},"done":false}\n<html>')
    )
    with pytest.raises(StreamError, match="not valid"):
        await drain(ollama.stream_complete(HELLO))


async def test_any_other_server_error(fake: FakeLLMServer, ollama: OllamaBackend) -> None:
    fake.script(Reply(error_before="out of memory", error_status=500))
    with pytest.raises(LLMServerError) as caught:
        await ollama.complete(HELLO)
    assert caught.value.status == 500 and caught.value.retryable
    assert "out of memory" in str(caught.value)


async def test_server_unreachable_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    backend = OllamaBackend(TEST_SETTINGS, url=url)
    with pytest.raises(ServerUnreachable) as caught:
        await backend.complete(HELLO)
    assert url in str(caught.value) and caught.value.retryable
    with pytest.raises(ServerUnreachable):
        await backend.list_models()
    await backend.aclose()


async def test_list_models(fake: FakeLLMServer) -> None:
    fake.models = ["llama3.2:latest", "qwen3:4b"]
    backend = OllamaBackend(TEST_SETTINGS, url=fake.url)
    models = await backend.list_models()
    assert [m.name for m in models] == ["llama3.2:latest", "qwen3:4b"]
    assert models[0].size_bytes == 1_000_000
    assert await backend.version(1.0) == "0.12.6"
    await backend.aclose()


async def test_settings_pick_the_host_and_model(fake: FakeLLMServer) -> None:
    settings = LLMSettings.from_env({"OLLAMA_HOST": fake.url, "OLLAMA_DEFAULT_MODEL": "phi4"})
    backend = OllamaBackend(settings)
    fake.script(Reply(text="hi"))
    result = await backend.complete(HELLO)
    assert result.content == "hi" and result.model == "phi4"
    assert fake.requests[0]["model"] == "phi4"
    await backend.aclose()


async def test_concurrent_streams_share_one_client(
    fake: FakeLLMServer, ollama: OllamaBackend
) -> None:
    fake.script(*[Reply(text=f"answer {n}", delay=0.01) for n in range(5)])
    results: list[str] = []

    async def one() -> None:
        results.append((await ollama.complete(HELLO)).content)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    assert sorted(results) == [f"answer {n}" for n in range(5)]
