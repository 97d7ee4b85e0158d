"""The SSE parser and request builder, byte by byte, for quirks no fake reply covers."""

from __future__ import annotations

import msgspec
import pytest

from navi.llm.errors import (
    IncompleteStream,
    LLMServerError,
    MalformedToolCall,
    ModelNotFound,
    StreamError,
    ThinkingNotSupported,
    ToolsNotSupported,
)
from navi.llm.openai_wire import (
    OpenAIStreamParser,
    build_chat_request,
    image_data_url,
    openai_error,
)
from navi.llm.types import (
    ChatMessage,
    FinalChunk,
    StreamChunk,
    TextPiece,
    ThinkingPiece,
    ToolCall,
    ToolCallsChunk,
    ToolSpec,
)


def sse(*events: object, end: str = "\n\n") -> bytes:
    return b"".join(
        b"data: " + (e.encode() if isinstance(e, str) else msgspec.json.encode(e)) + end.encode()
        for e in events
    )


def delta(**fields: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason: str = "stop", **extra: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}], **extra}


def parse(*blocks: bytes) -> list[StreamChunk]:
    parser = OpenAIStreamParser()
    out: list[StreamChunk] = []
    for block in blocks:
        out += parser.feed(block)
        parser.raise_pending()
    return out + parser.finish()


def test_crlf_comments_and_event_lines_are_tolerated() -> None:
    body = b": keep-alive\r\n\r\nevent: message\r\n" + sse(
        delta(role="assistant"), delta(content="Hi"), finish(), "[DONE]", end="\r\n\r\n"
    )
    assert parse(body) == [TextPiece("Hi"), FinalChunk()]


def test_name_is_set_once_and_arguments_are_concatenated() -> None:
    def part(args: str) -> dict[str, object]:
        # A server that repeats id and name on every delta (llama-cpp-python does).
        call = {"index": 0, "id": "call_1", "type": "function"}
        return delta(tool_calls=[call | {"function": {"name": "f", "arguments": args}}])

    chunks = parse(sse(part('{"a"'), part(": 1,"), part(' "b": [2]}'), finish("tool_calls")))
    assert chunks[0] == ToolCallsChunk(
        (ToolCall(id="call_1", name="f", arguments={"a": 1, "b": [2]}),)
    )


def test_interleaved_calls_are_kept_apart_by_index() -> None:
    def part(index: int, **function: str) -> dict[str, object]:
        return delta(tool_calls=[{"index": index, "function": function}])

    first = delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}])
    second = delta(tool_calls=[{"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}])
    body = sse(
        first, second, part(1, arguments='{"y":'), part(0, arguments='{"x":1}'),
        part(1, arguments="2}"), finish("tool_calls"),
    )  # fmt: skip
    [calls, final] = parse(body)
    assert calls == ToolCallsChunk(
        (
            ToolCall(id="a", name="f", arguments={"x": 1}),
            ToolCall(id="b", name="g", arguments={"y": 2}),
        )
    )
    assert final == FinalChunk(finish_reason="tool_calls")


def test_calls_without_index_are_told_apart_by_id() -> None:
    def call(call_id: str | None, **function: str) -> dict[str, object]:
        entry: dict[str, object] = {"function": function}
        if call_id:
            entry["id"] = call_id
        return delta(tool_calls=[entry])

    body = sse(
        call("a", name="f", arguments="{}"),
        call("b", name="g", arguments='{"k":'),
        call(None, arguments='"v"}'),
        finish("tool_calls"),
    )
    [calls, _] = parse(body)
    assert isinstance(calls, ToolCallsChunk)
    assert [(c.id, c.name, c.arguments) for c in calls.calls] == [
        ("a", "f", {}),
        ("b", "g", {"k": "v"}),
    ]


def test_arguments_as_an_object_and_empty_arguments() -> None:
    first = delta(
        tool_calls=[{"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": 1}}}]
    )
    second = delta(tool_calls=[{"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}])
    [calls, _] = parse(sse(first, second, finish("tool_calls")))
    assert isinstance(calls, ToolCallsChunk)
    assert [c.arguments for c in calls.calls] == [{"x": 1}, {}]


@pytest.mark.parametrize("arguments", ['{"city": "Par', "[1, 2]"])
def test_arguments_that_are_not_an_object(arguments: str) -> None:
    body = sse(
        delta(
            tool_calls=[{"index": 0, "id": "a", "function": {"name": "f", "arguments": arguments}}]
        ),
        finish("tool_calls"),
    )
    with pytest.raises(MalformedToolCall) as caught:
        parse(body)
    assert caught.value.raw_arguments == arguments and "'f'" in str(caught.value)


def test_both_reasoning_fields_with_the_same_text_count_once() -> None:
    # Some vLLM versions send both names during their rename.
    body = sse(delta(reasoning_content="think", reasoning="think"), finish())
    assert parse(body) == [ThinkingPiece("think"), FinalChunk()]


def test_a_stream_split_anywhere_across_reads() -> None:
    body = sse(delta(content="Hello"), delta(content=" world"), finish(), "[DONE]")
    parser = OpenAIStreamParser()
    out: list[StreamChunk] = []
    # Feed whole lines only, as line_blocks does, but at every possible line boundary.
    lines = body.split(b"\n")
    for index in range(len(lines)):
        out += parser.feed(lines[index] + b"\n")
    assert out + parser.finish() == [TextPiece("Hello"), TextPiece(" world"), FinalChunk()]


def test_done_without_finish_reason_still_ends_normally() -> None:
    assert parse(sse(delta(content="a"), "[DONE]")) == [TextPiece("a"), FinalChunk()]


def test_finish_reason_without_done_ends_normally() -> None:
    assert parse(sse(delta(content="a"), finish("length"))) == [
        TextPiece("a"),
        FinalChunk(finish_reason="length"),
    ]


def test_neither_finish_reason_nor_done_is_incomplete() -> None:
    with pytest.raises(IncompleteStream):
        parse(sse(delta(content="a")))


def test_an_error_object_mid_stream_keeps_what_came_before() -> None:
    parser = OpenAIStreamParser()
    chunks = parser.feed(
        sse(delta(content="a"), {"error": {"message": "boom"}}, delta(content="b"))
    )
    assert chunks == [TextPiece("a")]
    with pytest.raises(StreamError, match="boom"):
        parser.raise_pending()


def test_an_event_that_is_not_json() -> None:
    with pytest.raises(StreamError, match="not valid"):
        parse(b"data: {oops\n\n")


def test_other_choices_are_ignored() -> None:
    other = {"choices": [{"index": 1, "delta": {"content": "no"}, "finish_reason": None}]}
    assert parse(sse(other, delta(content="yes"), finish())) == [TextPiece("yes"), FinalChunk()]


def test_a_whole_non_streaming_answer() -> None:
    body = msgspec.json.encode(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "x",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4},
        }
    )
    assert OpenAIStreamParser().feed_completion(body) == [
        ToolCallsChunk((ToolCall(id="x", name="f", arguments={}),)),
        FinalChunk(finish_reason="tool_calls", prompt_tokens=3, completion_tokens=4),
    ]
    with pytest.raises(IncompleteStream):
        OpenAIStreamParser().feed_completion(b"")


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (
            404,
            b'{"error":{"message":"model \\"x\\" not found, try pulling it first"}}',
            ModelNotFound,
        ),
        # older vLLM: the message at the top level
        (
            404,
            b'{"object":"error","message":"The model `x` does not exist.","code":404}',
            ModelNotFound,
        ),
        (400, b'{"error":{"message":"x does not support tools"}}', ToolsNotSupported),
        (
            400,
            b'{"object":"error","message":"\\"auto\\" tool choice requires '
            b'--enable-auto-tool-choice and --tool-call-parser to be set"}',
            ToolsNotSupported,
        ),
        (500, b'{"error":{"message":"tools param requires --jinja flag"}}', ToolsNotSupported),
        (400, b'{"error":"\\"x\\" does not support thinking"}', ThinkingNotSupported),
        (404, b"Not Found", LLMServerError),
        (503, b"", LLMServerError),
    ],
)
def test_error_answers(status: int, body: bytes, error: type[Exception]) -> None:
    found = openai_error(status, body, model="x", url="http://h/v1")
    assert type(found) is error


def test_a_404_without_model_hints_at_the_base_url() -> None:
    found = openai_error(404, b'{"detail":"Not Found"}', model="x", url="http://h")
    assert "OPENAI_BASE_URL" in str(found)


# ---------------------------------------------------------------- requests


def test_image_data_urls() -> None:
    assert image_data_url("iVBORw0KGgoAAA") == "data:image/png;base64,iVBORw0KGgoAAA"
    assert image_data_url("R0lGODlh") == "data:image/gif;base64,R0lGODlh"
    assert image_data_url("UklGRg==") == "data:image/webp;base64,UklGRg=="
    assert image_data_url("data:image/jpeg;base64,/9j/") == "data:image/jpeg;base64,/9j/"


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        (None, None),
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("f", {"type": "function", "function": {"name": "f"}}),
    ],
)
def test_tool_choice(choice: str | None, sent: object) -> None:
    body = build_chat_request(
        [ChatMessage(role="user", content="x")], [ToolSpec(name="f")], model="m", tool_choice=choice
    )
    assert body.get("tool_choice") == sent


def test_no_tools_no_tool_choice_and_booleans_for_think_are_not_sent() -> None:
    body = build_chat_request(
        [ChatMessage(role="user", content="x")], [], model="m", tool_choice="auto", think=True
    )
    assert "tools" not in body and "tool_choice" not in body and "reasoning_effort" not in body
