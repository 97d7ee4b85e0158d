"""The NDJSON parser and request builder for cases no fake reply covers."""

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
from navi.llm.ollama_wire import (
    OllamaStreamParser,
    build_chat_request,
    ollama_error,
    parse_tags,
    strip_data_url,
)
from navi.llm.tool_calls import stable_tool_call_id
from navi.llm.types import ChatMessage, FinalChunk, TextPiece, ToolCall, ToolCallsChunk


def lines(*objects: object) -> bytes:
    return b"".join(msgspec.json.encode(o) + b"\n" for o in objects)


def message(**fields: object) -> dict[str, object]:
    return {"message": {"role": "assistant", "content": "", **fields}, "done": False}


DONE = {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
        "prompt_eval_count": 5, "eval_count": 6}  # fmt: skip


def test_arguments_as_a_json_string_are_decoded() -> None:
    parser = OllamaStreamParser()
    chunks = parser.feed(
        lines(message(tool_calls=[{"function": {"name": "f", "arguments": '{"a": 1}'}}]))
    )
    assert chunks == [
        ToolCallsChunk(
            (ToolCall(id=stable_tool_call_id(0, "f", {"a": 1}), name="f", arguments={"a": 1}),)
        )
    ]


def test_arguments_that_are_not_an_object() -> None:
    parser = OllamaStreamParser()
    with pytest.raises(MalformedToolCall):
        parser.feed(lines(message(tool_calls=[{"function": {"name": "f", "arguments": "[1]"}}])))


def test_stable_ids_depend_on_position_and_content_only() -> None:
    assert stable_tool_call_id(0, "f", {"a": 1, "b": 2}) == stable_tool_call_id(
        0, "f", {"b": 2, "a": 1}
    )
    assert stable_tool_call_id(0, "f", {"a": 1}) != stable_tool_call_id(1, "f", {"a": 1})
    assert stable_tool_call_id(0, "f", {"a": 1}) != stable_tool_call_id(0, "g", {"a": 1})


def test_tokens_and_reason_come_from_the_done_line() -> None:
    parser = OllamaStreamParser()
    assert parser.feed(lines(message(content="x"), DONE | {"done_reason": "length"})) == [
        TextPiece("x")
    ]
    assert parser.finish() == [
        FinalChunk(finish_reason="length", prompt_tokens=5, completion_tokens=6)
    ]


def test_blank_lines_and_crlf_are_tolerated() -> None:
    parser = OllamaStreamParser()
    assert parser.feed(b"\n" + lines(message(content="x")).replace(b"\n", b"\r\n") + b"\n") == [
        TextPiece("x")
    ]


def test_a_bad_line_keeps_the_good_lines_before_it() -> None:
    parser = OllamaStreamParser()
    assert parser.feed(lines(message(content="x")) + b"<html>\n") == [TextPiece("x")]
    with pytest.raises(StreamError, match="<html>"):
        parser.raise_pending()


def test_no_done_line_is_incomplete() -> None:
    parser = OllamaStreamParser()
    parser.feed(lines(message(content="x")))
    with pytest.raises(IncompleteStream):
        parser.finish()


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (404, b'{"error":"model \\"m\\" not found, try pulling it first"}', ModelNotFound),
        (
            400,
            b'{"error":"registry.ollama.ai/library/m does not support tools"}',
            ToolsNotSupported,
        ),
        (400, b'{"error":"\\"m\\" does not support thinking"}', ThinkingNotSupported),
        (400, b'{"error":"invalid options"}', LLMServerError),
        (502, b"<html>Bad gateway</html>", LLMServerError),
    ],
)
def test_error_answers(status: int, body: bytes, error: type[Exception]) -> None:
    assert type(ollama_error(status, body, model="m", url="http://h")) is error


def test_strip_data_url() -> None:
    assert strip_data_url("data:image/png;base64,AAAA") == "AAAA"
    assert strip_data_url("AAAA") == "AAAA"


def test_request_without_think_or_optional_options() -> None:
    body = build_chat_request(
        [ChatMessage(role="user", content="x")], [], model="m", num_ctx=2048, think=None
    )
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "options": {"num_ctx": 2048},
    }


def test_parse_tags_of_a_foreign_server() -> None:
    with pytest.raises(msgspec.DecodeError):
        parse_tags(b"<html>")
    assert parse_tags(b'{"models":[{"model":"a:1"}]}')[0].name == "a:1"
