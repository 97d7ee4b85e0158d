"""OpenAICompatibleBackend against the fake server over real HTTP: every quirk and error."""

from __future__ import annotations

import pytest

from navi.llm.errors import (
    IncompleteStream,
    LLMServerError,
    ModelNotFound,
    StreamError,
    ToolsNotSupported,
)
from navi.llm.openai_compat import OpenAICompatibleBackend
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
from tests.support.helpers import drain

pytestmark = pytest.mark.anyio

HELLO = [ChatMessage(role="user", content="hello")]
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CLOCK = ToolSpec(name="get_time", description="The time")
CALLS = [
    FakeToolCall(name="get_weather", arguments={"city": "Paris", "units": "metric"}),
    FakeToolCall(name="get_time", arguments={"zone": "Europe/Oslo"}),
]


async def test_text_streams_with_usage_in_the_finish_chunk(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend
) -> None:
    fake.script(Reply(text=["Hel", "lo"], prompt_tokens=7))
    chunks = await drain(openai.stream_complete(HELLO))
    assert chunks == [
        TextPiece("Hel"),
        TextPiece("lo"),
        FinalChunk(finish_reason="stop", prompt_tokens=7, completion_tokens=2),
    ]


@pytest.mark.parametrize("where", ["separate", "none"])
async def test_usage_in_a_separate_chunk_or_absent(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend, where: str
) -> None:
    fake.script(Reply(text="a b", prompt_tokens=7, usage=where))  # type: ignore[arg-type]
    final = (await drain(openai.stream_complete(HELLO)))[-1]
    expected = (7, 2) if where == "separate" else (0, 0)
    assert final == FinalChunk(
        finish_reason="stop", prompt_tokens=expected[0], completion_tokens=expected[1]
    )


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_under_either_name(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend, field: str
) -> None:
    fake.script(Reply(thinking=["Hmm, ", "yes."], text="Yes.", reasoning_field=field))  # type: ignore[arg-type]
    chunks = await drain(openai.stream_complete(HELLO))
    assert chunks[:3] == [ThinkingPiece("Hmm, "), ThinkingPiece("yes."), TextPiece("Yes.")]


@pytest.mark.parametrize("ids", ["first", "every"])
async def test_tool_call_deltas_are_joined_by_index(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend, ids: str
) -> None:
    fake.script(Reply(tool_calls=CALLS, tool_call_ids=ids, argument_pieces=4))  # type: ignore[arg-type]
    chunks = await drain(openai.stream_complete(HELLO, [WEATHER, CLOCK]))
    assert chunks == [
        ToolCallsChunk(
            (
                ToolCall(id="call_1_0", name="get_weather", arguments=CALLS[0].arguments),
                ToolCall(id="call_1_1", name="get_time", arguments=CALLS[1].arguments),
            )
        ),
        FinalChunk(finish_reason="tool_calls", prompt_tokens=10, completion_tokens=2),
    ]


async def test_tool_calls_without_ids_get_stable_ids(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend
) -> None:
    reply = Reply(tool_calls=CALLS, tool_call_ids="none")
    fake.script(reply, reply)
    first = await openai.complete(HELLO, [WEATHER, CLOCK])
    second = await openai.complete(HELLO, [WEATHER, CLOCK])
    assert [c.id for c in first.tool_calls] == [c.id for c in second.tool_calls]
    assert first.tool_calls[0].id.startswith("call_0_")
    assert first.tool_calls[1].name == "get_time"


async def test_what_navi_sends(fake: FakeLLMServer, openai: OpenAICompatibleBackend) -> None:
    fake.script(Reply(text="ok"))
    messages = [
        ChatMessage(role="user", content="Look", images=("/9j/4AAQ",)),
        ChatMessage(
            role="assistant",
            tool_calls=(ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),),
        ),
        ChatMessage(role="tool", content="sunny", tool_call_id="c1", tool_name="get_weather"),
    ]
    options = LLMOptions(temperature=0.2, max_tokens=50, tool_choice="get_weather", think="low")
    await openai.complete(messages, [WEATHER], options)
    body = fake.requests[0]
    assert body["model"] == "qwen3:4b"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2 and body["max_tokens"] == 50
    assert body["reasoning_effort"] == "low"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            ],
        },
        {
            "role": "assistant",
            "content": "",  # never None: some chat templates fail on it
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather"},
    ]
    assert body["tools"][0]["function"]["name"] == "get_weather"


async def test_api_key_is_sent_as_bearer_token(fake: FakeLLMServer) -> None:
    settings = LLMSettings.from_env(
        {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "sk-local", "OPENAI_MODEL": "mistral"}
    )
    backend = OpenAICompatibleBackend(settings)
    fake.script(Reply(text="ok"))
    assert (await backend.complete(HELLO)).content == "ok"
    chat = next(r for r in fake.received if r.path == "/v1/chat/completions")
    assert chat.headers["authorization"] == "Bearer sk-local"
    assert chat.body["model"] == "mistral"
    await backend.aclose()


async def test_model_not_found(fake: FakeLLMServer, openai: OpenAICompatibleBackend) -> None:
    fake.script(Reply.model_not_found())
    with pytest.raises(ModelNotFound) as caught:
        await openai.complete(HELLO, options=LLMOptions(model="nope"))
    assert "'nope'" in str(caught.value) and "/v1/models" in str(caught.value)


async def test_model_without_tools(fake: FakeLLMServer, openai: OpenAICompatibleBackend) -> None:
    fake.script(Reply.no_tools())
    with pytest.raises(ToolsNotSupported):
        await openai.complete(HELLO, [WEATHER])


async def test_server_error_before_streaming(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend
) -> None:
    fake.script(Reply(error_before="invalid api key", error_status=401))
    with pytest.raises(LLMServerError) as caught:
        await openai.complete(HELLO)
    assert caught.value.status == 401 and not caught.value.retryable
    assert "OPENAI_API_KEY" in str(caught.value)


async def test_error_object_mid_stream(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend
) -> None:
    fake.script(Reply(text="a b c", error_during="CUDA out of memory", error_after=2))
    received: list[StreamChunk] = []
    with pytest.raises(StreamError, match="CUDA out of memory"):
        async for chunk in openai.stream_complete(HELLO):
            received.append(chunk)
    assert received == [TextPiece("a ")]  # chunk 0 is the role-only delta


async def test_llama_cpp_error_line_mid_stream(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend
) -> None:
    body = (
        'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
        'error: {"code":500,"message":"slot unavailable","type":"server_error"}\n\n'
    )
    fake.script(Reply(raw_body=body))
    received: list[StreamChunk] = []
    with pytest.raises(StreamError, match="slot unavailable"):
        async for chunk in openai.stream_complete(HELLO):
            received.append(chunk)
    assert received == [TextPiece("a")]


async def test_empty_body_is_an_incomplete_stream(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend
) -> None:
    # llama-cpp-python answers 200 with an empty body when the context overflows.
    fake.script(Reply(empty_body=True))
    with pytest.raises(IncompleteStream, match="context window") as caught:
        await drain(openai.stream_complete(HELLO))
    assert caught.value.retryable


async def test_stream_ending_without_finish_or_done(
    fake: FakeLLMServer, openai: OpenAICompatibleBackend
) -> None:
    fake.script(Reply(text="a b c", end_after=3))
    with pytest.raises(IncompleteStream):
        await drain(openai.stream_complete(HELLO))


async def test_dropped_connection(fake: FakeLLMServer, openai: OpenAICompatibleBackend) -> None:
    fake.script(Reply(text="a b c d", drop_after=2))
    with pytest.raises(IncompleteStream, match="dropped"):
        await drain(openai.stream_complete(HELLO))


async def test_list_models(fake: FakeLLMServer, openai: OpenAICompatibleBackend) -> None:
    fake.models = ["Qwen/Qwen3-8B"]
    assert [m.name for m in await openai.list_models()] == ["Qwen/Qwen3-8B"]


async def test_base_url_without_v1_gets_it(fake: FakeLLMServer) -> None:
    backend = OpenAICompatibleBackend(LLMSettings.from_env({"OPENAI_BASE_URL": fake.url}))
    assert backend.url == fake.url + "/v1"
    fake.script(Reply(text="ok"))
    assert (await backend.complete(HELLO)).content == "ok"
    await backend.aclose()


def test_default_model_falls_back_to_the_ollama_default() -> None:
    assert OpenAICompatibleBackend(TEST_SETTINGS).model == TEST_SETTINGS.default_model
